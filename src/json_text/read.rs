//! Reads JSON text into a `serde_json::Value` or a borrowed [`Doc`]: exactly the value (or
//! error) `serde_json::from_slice` gives, handing anything it does not read itself to serde_json.

use super::scan::first_escape;
use crate::json_doc::{self, Doc};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// Reads one JSON document: the value `serde_json::from_slice` reads, or its error.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match read(bytes) {
        Some(value) => Ok(value),
        None => serde_json::from_slice(bytes),
    }
}

/// [`from_slice`], and whether the document is known to hold no integer past `i64` (a
/// `u64` above `i64::MAX`, which jaq reads as a float): `true` only when the fast reader read
/// it all and met none; a document left to serde_json answers `false` (not looked at).
pub fn from_slice_narrow(bytes: &[u8]) -> Result<(Value, bool), serde_json::Error> {
    read_shape::<Value>(bytes, false).map(|(v, shape)| (v, shape.narrow))
}

/// [`from_slice_narrow`], read into a [`Doc`] that borrows from `bytes`: a string or key
/// without escapes is a slice of the input, one with escapes is owned; objects are key-sorted
/// (a repeated key keeps its last value). A document left to serde_json is owned whole.
pub fn read_borrowed(bytes: &[u8]) -> Result<(Doc<'_>, bool), serde_json::Error> {
    read_shape::<Doc<'_>>(bytes, false).map(|(d, shape)| (d, shape.narrow))
}

/// What [`read_shaped`] learnt of a document besides its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// No integer past `i64` (as [`from_slice_narrow`] says).
    pub narrow: bool,
    /// The text stands for the value read: `true` only when the fast reader read it all, every
    /// object's keys are distinct (a reader keeping the first of two repeated keys would read
    /// another value than this one) and every number is written as the writer writes the
    /// number read (no digits past a float's precision, no integer past `u64` read as a
    /// float, no `1E2` for `100.0`): any JSON reader reads the same value from it.
    pub faithful: bool,
}

/// [`read_borrowed`], with the [`Shape`] of the text.
pub fn read_shaped(bytes: &[u8]) -> Result<(Doc<'_>, Shape), serde_json::Error> {
    read_shape(bytes, true)
}

/// The document as `B` and its [`Shape`], with the answer (or error) of
/// `serde_json::from_slice`. Numbers are held against the writer's form only when `numbers`
/// is set (`faithful` is meaningless otherwise): the other readers never look at it.
fn read_shape<'t, B: Build<'t>>(
    bytes: &'t [u8],
    numbers: bool,
) -> Result<(B, Shape), serde_json::Error> {
    match read_doc::<B>(bytes, numbers) {
        Some(read) => {
            let shape = Shape {
                narrow: !read.wide,
                faithful: !read.repeated && !read.reshaped,
            };
            Ok((read.value, shape))
        }
        None => serde_json::from_slice(bytes).map(|value| {
            let shape = Shape {
                narrow: false,
                faithful: false,
            };
            (B::from_serde(value), shape)
        }),
    }
}

/// Deepest nesting the fast reader takes; deeper documents go to serde_json (its own limit is
/// 127 levels, so this never decides an answer).
pub(super) const READ_DEPTH: usize = 100;

/// The document, when the fast reader reads it all; `None` hands it to serde_json.
pub(super) fn read(bytes: &[u8]) -> Option<Value> {
    read_doc::<Value>(bytes, false).map(|read| read.value)
}

/// The document and its deepest nesting of arrays and objects (0 for a scalar), when the fast
/// reader reads it all: then `from_slice` gives the same value. `None` says nothing about it.
pub fn read_nested(bytes: &[u8]) -> Option<(Value, usize)> {
    read_doc::<Value>(bytes, false).map(|read| (read.value, read.deepest))
}

/// What the reader builds: a `serde_json::Value`, or a [`Doc`] borrowing from the text `'t`.
/// Implemented for the built type itself; each reader is compiled for one of them.
trait Build<'t>: Sized {
    /// A string or key as held in the built value.
    type Text;
    /// A string or key that is a slice of the text (it had no escapes).
    fn borrowed(s: &'t str) -> Self::Text;
    /// A string or key with its escapes decoded.
    fn owned(s: String) -> Self::Text;
    fn null() -> Self;
    fn bool(b: bool) -> Self;
    fn number(n: Number) -> Self;
    fn string(s: Self::Text) -> Self;
    fn array(items: Vec<Self>) -> Self;
    /// An object of the members read, in document order (a key may repeat: then `repeated`
    /// is set).
    fn object(members: std::vec::Drain<'_, (Self::Text, Self)>, repeated: &mut bool) -> Self;
    /// What serde_json read, for a document the reader handed to it.
    fn from_serde(value: Value) -> Self;
}

impl<'t> Build<'t> for Value {
    type Text = String;
    #[inline]
    fn borrowed(s: &'t str) -> String {
        s.to_owned()
    }
    #[inline]
    fn owned(s: String) -> String {
        s
    }
    #[inline]
    fn null() -> Self {
        Value::Null
    }
    #[inline]
    fn bool(b: bool) -> Self {
        Value::Bool(b)
    }
    #[inline]
    fn number(n: Number) -> Self {
        Value::Number(n)
    }
    #[inline]
    fn string(s: String) -> Self {
        Value::String(s)
    }
    #[inline]
    fn array(items: Vec<Self>) -> Self {
        Value::Array(items)
    }
    #[inline]
    fn object(members: std::vec::Drain<'_, (String, Self)>, repeated: &mut bool) -> Self {
        // Inserted in order, as serde_json does: a repeated key keeps its last value.
        let read = members.len();
        let mut map = Map::with_capacity(read);
        for (k, v) in members {
            map.insert(k, v);
        }
        *repeated |= map.len() < read;
        Value::Object(map)
    }
    #[inline]
    fn from_serde(value: Value) -> Self {
        value
    }
}

impl<'t> Build<'t> for Doc<'t> {
    type Text = Cow<'t, str>;
    #[inline]
    fn borrowed(s: &'t str) -> Self::Text {
        Cow::Borrowed(s)
    }
    #[inline]
    fn owned(s: String) -> Self::Text {
        Cow::Owned(s)
    }
    #[inline]
    fn null() -> Self {
        Doc::Null
    }
    #[inline]
    fn bool(b: bool) -> Self {
        Doc::Bool(b)
    }
    #[inline]
    fn number(n: Number) -> Self {
        Doc::Num(n)
    }
    #[inline]
    fn string(s: Self::Text) -> Self {
        Doc::Str(s)
    }
    #[inline]
    fn array(items: Vec<Self>) -> Self {
        Doc::Arr(items)
    }
    #[inline]
    fn object(members: std::vec::Drain<'_, (Self::Text, Self)>, repeated: &mut bool) -> Self {
        // Collected at its final size; members most often come in key order already.
        let mut m: json_doc::Members<'t> = members.collect();
        let read = m.len();
        json_doc::sort_members(&mut m);
        *repeated |= m.len() < read;
        Doc::Obj(m)
    }
    #[inline]
    fn from_serde(value: Value) -> Self {
        Doc::from_owned(value)
    }
}

/// What the fast reader learnt of a document it read whole.
struct Read<B> {
    value: B,
    deepest: usize,
    /// An integer past `i64` was read (by serde_json, from its own text).
    wide: bool,
    /// An object repeated a key.
    repeated: bool,
    /// A number's text is not the one the writer writes for its value.
    reshaped: bool,
}

/// `numbers`: hold each number read by serde_json against the writer's form (`reshaped`).
fn read_doc<'t, B: Build<'t>>(bytes: &'t [u8], numbers: bool) -> Option<Read<B>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut r = Reader::<B> {
        text,
        at: 0,
        depth: 0,
        deepest: 0,
        wide: false,
        repeated: false,
        reshaped: false,
        numbers,
        items: Vec::new(),
        members: Vec::new(),
    };
    r.ws();
    let value = r.value()?;
    r.ws();
    (r.at == bytes.len()).then_some(Read {
        value,
        deepest: r.deepest,
        wide: r.wide,
        repeated: r.repeated,
        reshaped: r.reshaped,
    })
}

/// A cursor over valid UTF-8 JSON text. Containers being read keep their items on shared
/// stacks, innermost last, so each array is allocated once, at its final size.
struct Reader<'t, B: Build<'t>> {
    text: &'t str,
    at: usize,
    depth: usize,
    deepest: usize,
    /// An integer past `i64` was read.
    wide: bool,
    /// An object repeated a key.
    repeated: bool,
    /// A number's text is not the one the writer writes for its value.
    reshaped: bool,
    /// Whether `reshaped` is looked for.
    numbers: bool,
    items: Vec<B>,
    members: Vec<(B::Text, B)>,
}

impl<'t, B: Build<'t>> Reader<'t, B> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Option<B> {
        match self.peek()? {
            b'"' => self.string().map(B::string),
            b'{' => self.object(),
            b'[' => self.array(),
            b't' => self.word("true", B::bool(true)),
            b'f' => self.word("false", B::bool(false)),
            b'n' => self.word("null", B::null()),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, word: &str, value: B) -> Option<B> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word.as_bytes()).then(|| {
            self.at += word.len();
            value
        })
    }

    /// Opens a container (the reader is at its bracket); true when it is empty (and closed).
    fn open(&mut self, close: u8) -> Option<bool> {
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
    fn next_or_close(&mut self, close: u8) -> Option<bool> {
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

    fn array(&mut self) -> Option<B> {
        if self.open(b']')? {
            return Some(B::array(Vec::new()));
        }
        let start = self.items.len();
        loop {
            let item = self.value()?;
            self.items.push(item);
            if self.next_or_close(b']')? {
                return Some(B::array(self.items.split_off(start)));
            }
        }
    }

    fn object(&mut self) -> Option<B> {
        let start = self.members.len();
        if self.open(b'}')? {
            return Some(B::object(self.members.drain(start..), &mut self.repeated));
        }
        loop {
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.at += 1;
            self.ws();
            let value = self.value()?;
            self.members.push((key, value));
            if self.next_or_close(b'}')? {
                return Some(B::object(self.members.drain(start..), &mut self.repeated));
            }
        }
    }

    /// A string's contents (the reader is at its opening quote). Runs between escapes are
    /// found eight bytes at a time; all of them start and end at ASCII bytes, so they are
    /// whole characters of the (already checked) text. A string without escapes is taken as
    /// a slice of the text ([`Build::borrowed`]).
    fn string(&mut self) -> Option<B::Text> {
        let bytes = self.text.as_bytes();
        let start = self.at + 1;
        let mut at = start + first_escape(bytes.get(start..)?)?;
        if bytes.get(at) == Some(&b'"') {
            self.at = at + 1;
            return self.text.get(start..at).map(B::borrowed);
        }
        let mut s = String::with_capacity(at - start + 16);
        let mut from = start;
        loop {
            s.push_str(self.text.get(from..at)?);
            match bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(B::owned(s));
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

    /// A number. Integers of up to 18 digits are read here; fractions, exponents, longer
    /// integers and `-0` (a float to serde_json) are read by serde_json from their own text.
    fn number(&mut self) -> Option<B> {
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
                return Some(B::number(Number::from(m)));
            }
            if m != 0 {
                self.at = at;
                // 18 digits stay below 2^63.
                return Some(B::number(Number::from(-i64::try_from(m).ok()?)));
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
        Some(B::number(n))
    }
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
