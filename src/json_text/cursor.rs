//! A cursor over JSON text: whitespace, brackets, strings, numbers and literals read in place,
//! each with the value serde_json reads; shared by the reader that builds values
//! ([`super::read`]) and by walks that build nothing (`translate::doc_schema`'s check of an
//! answer's text). It never builds a container, never reads past its text, and never accepts
//! text serde_json refuses: whatever it does not read itself it refuses (`None`), and the
//! caller hands the document to serde_json.

use super::scan::first_escape;
use serde_json::{Number, Value};
use std::borrow::Cow;

/// Deepest nesting the cursor takes; deeper documents go to serde_json (its own limit is 127
/// levels, so this never decides an answer).
pub(super) const READ_DEPTH: usize = 100;

/// A position in valid UTF-8 JSON text, and what was learnt of the text read so far.
pub struct Cursor<'t> {
    text: &'t str,
    at: usize,
    depth: usize,
    pub(super) deepest: usize,
    /// An integer past `i64` was read.
    pub(super) wide: bool,
    /// A number's text is not the one the writer writes for its value (looked for only when
    /// `numbers` is set).
    pub(super) reshaped: bool,
    /// An object skipped by [`Cursor::skip_value`] repeated a key.
    pub(super) repeated: bool,
    numbers: bool,
    /// The keys of the objects [`Cursor::skip_value`] is in, innermost last.
    keys: Vec<Cow<'t, str>>,
}

/// What a value starts with: the kind of JSON value at the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl<'t> Cursor<'t> {
    /// A cursor at the start of `bytes` (its leading whitespace skipped); `None` when the text
    /// is not UTF-8. `numbers`: hold each number read by serde_json against the writer's form.
    /// The UTF-8 check is `simdutf8`'s (the same answer as `std::str::from_utf8`, checked with
    /// the CPU's widest vectors): every request body and answer read is checked here whole.
    pub fn new(bytes: &'t [u8], numbers: bool) -> Option<Cursor<'t>> {
        let text = simdutf8::basic::from_utf8(bytes).ok()?;
        let mut c = Cursor {
            text,
            at: 0,
            depth: 0,
            deepest: 0,
            wide: false,
            reshaped: false,
            repeated: false,
            numbers,
            keys: Vec::new(),
        };
        c.ws();
        Some(c)
    }

    /// The byte offset of the cursor in the text.
    pub fn at(&self) -> usize {
        self.at
    }

    /// The text from `from` to the cursor.
    pub fn since(&self, from: usize) -> Option<&'t [u8]> {
        self.text.as_bytes().get(from..self.at)
    }

    /// True when only whitespace is left.
    pub fn finish(&mut self) -> bool {
        self.ws();
        self.at == self.text.len()
    }

    /// What the text says so far: no integer past `i64`, no repeated key in a skipped
    /// object, every number in the writer's form.
    pub fn narrow_and_faithful(&self) -> (bool, bool) {
        (!self.wide, !self.repeated && !self.reshaped)
    }

    #[inline]
    pub(super) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    #[inline]
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// The kind of the value at the cursor; `None` for a byte no value starts with.
    #[inline(always)]
    pub fn next(&self) -> Option<Next> {
        Some(match self.peek()? {
            b'"' => Next::String,
            b'{' => Next::Object,
            b'[' => Next::Array,
            b't' | b'f' => Next::Bool,
            b'n' => Next::Null,
            b'-' | b'0'..=b'9' => Next::Number,
            _ => return None,
        })
    }

    /// `true`, `false` or `null` (the cursor at its first letter): the value read.
    pub fn literal(&mut self) -> Option<Value> {
        // Any other first letter: `skip_literal` refuses it, and the value is dropped.
        let value = match self.peek()? {
            b't' => Value::Bool(true),
            b'f' => Value::Bool(false),
            _ => Value::Null,
        };
        self.skip_literal().map(|()| value)
    }

    /// Reads past `true`, `false` or `null` (the cursor at its first letter), building no
    /// value: a walk's check of a boolean member, where [`Cursor::literal`]'s `Value` would be
    /// made and dropped again.
    #[inline]
    pub fn skip_literal(&mut self) -> Option<()> {
        let word: &[u8] = match self.peek()? {
            b't' => b"true",
            b'f' => b"false",
            b'n' => b"null",
            _ => return None,
        };
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word).then(|| self.at += word.len())
    }

    /// Opens a container (the cursor is at its bracket); true when it is empty (and closed).
    #[inline]
    pub fn open(&mut self, close: u8) -> Option<bool> {
        self.at += 1;
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        self.ws();
        if self.depth > READ_DEPTH {
            return None;
        }
        if self.peek()? == close {
            self.at += 1;
            self.depth -= 1;
            return Some(true);
        }
        Some(false)
    }

    /// After an item: `,` (and more) or the closing bracket; true when closed.
    #[inline]
    pub fn next_or_close(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let b = self.peek()?;
        self.at += 1;
        if b == close {
            self.depth -= 1;
            Some(true)
        } else if b == b',' {
            self.ws();
            Some(false)
        } else {
            None
        }
    }

    /// An object's key and its colon (the cursor at the key's quote), the cursor left at the
    /// member's value. Inlined: a call and its `Cow` passed through memory cost about a
    /// third of reading a short key.
    #[inline(always)]
    pub fn key(&mut self) -> Option<Cow<'t, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        // Most keys hold no escape: found here, without the call `string` costs.
        let key = match self.plain()? {
            Ok(key) => Cow::Borrowed(key),
            Err(_) => self.string()?,
        };
        self.ws();
        if self.peek()? != b':' {
            return None;
        }
        self.at += 1;
        self.ws();
        Some(key)
    }

    /// Reads past `key`, a key's whole text with its colon (`"name":`, the name holding no
    /// `"` or `\`), when the text at the cursor starts with it, and the whitespace after it;
    /// false (the cursor left where it was) otherwise. A walk that expects a member takes its
    /// key this way, with no scan of the key.
    #[inline(always)]
    pub fn eat_key(&mut self, key: &[u8]) -> bool {
        let rest = self.text.as_bytes().get(self.at..self.at + key.len());
        if !rest.is_some_and(|r| crate::json_doc::same_bytes(r, key)) {
            return false;
        }
        self.at += key.len();
        self.ws();
        true
    }

    /// A string's contents (the cursor is at its opening quote). Runs between escapes are
    /// found eight bytes at a time; all of them start and end at ASCII bytes, so they are
    /// whole characters of the (already checked) text. A string without escapes is a slice
    /// of the text.
    pub fn string(&mut self) -> Option<Cow<'t, str>> {
        let (start, mut at) = match self.plain()? {
            Ok(s) => return Some(Cow::Borrowed(s)),
            Err(first) => first,
        };
        let bytes = self.text.as_bytes();
        let mut s = String::with_capacity(at - start + 16);
        let mut from = start;
        loop {
            s.push_str(self.text.get(from..at)?);
            match bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(Cow::Owned(s));
                }
                b'\\' => {
                    let esc = *bytes.get(at + 1)?;
                    at += 2;
                    match esc {
                        b'"' => s.push('"'),
                        b'\\' => s.push('\\'),
                        b'/' => s.push('/'),
                        b'b' => s.push('\u{8}'),
                        b'f' => s.push('\u{c}'),
                        b'n' => s.push('\n'),
                        b'r' => s.push('\r'),
                        b't' => s.push('\t'),
                        b'u' => {
                            let (c, len) = unicode_escape(bytes.get(at..)?)?;
                            s.push(c);
                            at += len;
                        }
                        _ => return None,
                    }
                }
                // A control character: serde_json refuses it, with its own message.
                _ => return None,
            }
            from = at;
            at = from + first_escape(bytes.get(from..)?)?;
        }
    }

    /// Reads past a string (the cursor at its quote), decoding it only when it holds escapes
    /// (which must be checked as [`Cursor::string`] checks them). Inlined, the decoding out of
    /// line: a walk skips most of its strings, and the call cost a fifth of skipping one.
    #[inline(always)]
    pub fn skip_string(&mut self) -> Option<()> {
        match self.plain()? {
            Ok(_) => Some(()),
            Err(_) => self.skip_escaped(),
        }
    }

    /// [`Cursor::skip_string`] for a string that holds escapes.
    #[cold]
    #[inline(never)]
    fn skip_escaped(&mut self) -> Option<()> {
        self.string().map(drop)
    }

    /// The string at the cursor (at its quote) when it holds no escape: its contents, a slice
    /// of the text, the cursor moved past it. Otherwise `Err` of where its contents start and
    /// where the first byte to decode is, the cursor left where it was. Inlined where it is
    /// called: most strings and keys take only this path, and a call costs as much as it.
    #[inline(always)]
    fn plain(&mut self) -> Option<Result<&'t str, (usize, usize)>> {
        let bytes = self.text.as_bytes();
        if bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        let start = self.at + 1;
        let at = start + first_escape(bytes.get(start..)?)?;
        if bytes.get(at) != Some(&b'"') {
            return Some(Err((start, at)));
        }
        debug_assert!(self.text.get(start..at).is_some());
        // SAFETY: `start - 1` and `at` are the indices of `"` bytes (both checked above) in
        // `text`, which is valid UTF-8, and `start <= at`; an ASCII byte is a whole character,
        // so `start` (just past one) and `at` (at one) are character boundaries within the
        // text. `str::get` checks the same, but in a call the compiler leaves out of line,
        // at some twenty instructions per string of a walk.
        let s = unsafe { self.text.get_unchecked(start..at) };
        self.at = at + 1;
        Some(Ok(s))
    }

    /// A number. Integers of up to 18 digits are read here; fractions, exponents, longer
    /// integers and `-0` (a float to serde_json) are read by serde_json from their own text.
    pub fn number(&mut self) -> Option<Number> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let neg = bytes.get(start) == Some(&b'-');
        let digits = start + usize::from(neg);
        let mut at = skip_digits(bytes, digits);
        let n = at - digits;
        // JSON allows no leading zero.
        if n == 0 || (n > 1 && bytes.get(digits) == Some(&b'0')) {
            return None;
        }
        let plain = !matches!(bytes.get(at), Some(b'.' | b'e' | b'E'));
        if plain && n <= 18 {
            let m = bytes
                .get(digits..at)?
                .iter()
                .fold(0u64, |m, d| m * 10 + u64::from(d - b'0'));
            if !neg {
                self.at = at;
                return Some(Number::from(m));
            }
            if m != 0 {
                self.at = at;
                // 18 digits stay below 2^63.
                return Some(Number::from(-i64::try_from(m).ok()?));
            }
        }
        if bytes.get(at) == Some(&b'.') {
            let from = at + 1;
            at = skip_digits(bytes, from);
            if at == from {
                return None;
            }
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            let from = at;
            at = skip_digits(bytes, from);
            if at == from {
                return None;
            }
        }
        let text = self.text.get(start..at)?;
        let Ok(Value::Number(n)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        self.wide |= n.as_i64().is_none() && !n.is_f64();
        if self.numbers && !self.reshaped {
            self.reshaped = !written_as(&n, text);
        }
        self.at = at;
        Some(n)
    }

    /// Reads past the value at the cursor, building nothing: what [`super::read`] would
    /// accept, with its numbers and its objects' keys looked at (`wide`, `reshaped`,
    /// `repeated`).
    pub fn skip_value(&mut self) -> Option<()> {
        match self.next()? {
            Next::String => self.skip_string(),
            Next::Number => self.number().map(drop),
            Next::Null | Next::Bool => self.skip_literal(),
            Next::Array => {
                if self.open(b']')? {
                    return Some(());
                }
                loop {
                    self.skip_value()?;
                    if self.next_or_close(b']')? {
                        return Some(());
                    }
                }
            }
            Next::Object => {
                let start = self.keys.len();
                if !self.open(b'}')? {
                    loop {
                        let key = self.key()?;
                        self.keys.push(key);
                        self.skip_value()?;
                        if self.next_or_close(b'}')? {
                            break;
                        }
                    }
                }
                let keys = self.keys.get_mut(start..)?;
                self.repeated |= repeats(keys);
                self.keys.truncate(start);
                Some(())
            }
        }
    }
}

/// Whether two of `keys` are equal (the slice is reordered).
pub fn repeats<K: Ord>(keys: &mut [K]) -> bool {
    // A few keys are compared pairwise; more are sorted first.
    if keys.len() <= 8 {
        return keys
            .iter()
            .enumerate()
            .any(|(i, k)| keys.get(i + 1..).is_some_and(|rest| rest.contains(k)));
    }
    keys.sort_unstable();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// True when `n` is written as `text` (serde_json's shortest form; the text of at most 32
/// bytes, more than any number serde_json writes).
fn written_as(n: &Number, text: &str) -> bool {
    let mut buf = [0u8; 32];
    let mut w = std::io::Cursor::new(&mut buf[..]);
    if serde_json::to_writer(&mut w, n).is_err() {
        return false;
    }
    let len = usize::try_from(w.position()).unwrap_or(usize::MAX);
    buf.get(..len) == Some(text.as_bytes())
}

fn skip_digits(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(at) {
        at += 1;
    }
    at
}

fn hex4(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.get(..4)?;
    digits.iter().try_fold(0u32, |n, &b| {
        let d = (b as char).to_digit(16)?;
        Some(n * 16 + d)
    })
}

/// The character of a `\u` escape (the bytes after `\u`) and how many bytes it took: a
/// surrogate pair is one character; a lone surrogate goes to serde_json.
fn unicode_escape(bytes: &[u8]) -> Option<(char, usize)> {
    let first = hex4(bytes)?;
    if let Some(c) = char::from_u32(first) {
        return Some((c, 4));
    }
    if !(0xD800..0xDC00).contains(&first) || bytes.get(4..6)? != b"\\u" {
        return None;
    }
    let second = hex4(bytes.get(6..)?)?;
    if !(0xDC00..0xE000).contains(&second) {
        return None;
    }
    let c = char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))?;
    Some((c, 10))
}
