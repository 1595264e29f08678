//! JSON text to and from `serde_json::Value`s: byte for byte what `serde_json::to_vec` writes,
//! and exactly the value (or error) `serde_json::from_slice` reads. It never changes a value.
//!
//! Every answer portico sends is written here, so the string escaper is the hot loop: it checks
//! eight bytes at a time for the three kinds of byte JSON must escape (`"`, `\` and controls)
//! and copies the runs between them whole, where serde_json looks up a table for each byte.
//!
//! Every request body and backend answer is read here too ([`from_slice`]). The same eight-byte
//! scan finds the end of each string; the input's UTF-8 is checked once, not string by string;
//! arrays are built at their final size. serde_json stays the reference for every
//! answer: a number with a fraction or exponent, an integer of 19 digits or more and `-0` are
//! read by serde_json from their own text; any error, a lone surrogate escape or nesting past
//! 100 levels hands the whole document to serde_json, which reads it again from the start.
//! The same reader builds a borrowed [`Doc`] ([`read_borrowed`]) whose escape-free strings and
//! keys are slices of the input, with the value and errors it would give as a `Value`.

use crate::json_doc::{self, Doc};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// The JSON text of `value`.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    out
}

/// The JSON text of `value`, as a `String`.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out);
    // Only valid UTF-8 is written: the strings' own bytes and ASCII around them.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the JSON text of `value` to `out`.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            let mut first = true;
            for item in items {
                if !first {
                    out.push(b',');
                }
                first = false;
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(map, out),
    }
}

/// Appends the JSON text of the object `map` to `out`.
pub fn write_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    write_object(map.iter(), |_, v, out| write(v, out), out);
}

/// Appends an object of `members` (in the order given), each value written by `value`, which
/// is given the member's key too.
pub fn write_object<'m, K: AsRef<str> + 'm, V: 'm>(
    members: impl Iterator<Item = (&'m K, &'m V)>,
    mut value: impl FnMut(&K, &V, &mut Vec<u8>),
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    for (i, (key, item)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(key.as_ref(), out);
        out.push(b':');
        value(key, item, out);
    }
    out.push(b'}');
}

/// Appends the JSON text of `doc` to `out`: the text [`write`] gives for its value (members
/// are already in key order, each key once).
pub fn write_doc(doc: &Doc<'_>, out: &mut Vec<u8>) {
    match doc {
        Doc::Null => out.extend_from_slice(b"null"),
        Doc::Bool(true) => out.extend_from_slice(b"true"),
        Doc::Bool(false) => out.extend_from_slice(b"false"),
        Doc::Num(n) => write_number(n, out),
        Doc::Str(s) => write_str(s, out),
        Doc::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_doc(item, out);
            }
            out.push(b']');
        }
        Doc::Obj(members) => write_object(
            members.iter().map(|(k, v)| (k, v)),
            |_, v, out| write_doc(v, out),
            out,
        ),
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    } else {
        // Floats: serde_json's own shortest round-trip form (a `Number` is always finite).
        let _ = serde_json::to_writer(&mut *out, n);
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each of the eight bytes of `w` (little-endian) that is `"`, `\` or below
/// 0x20. The lowest set bit is exact: the borrow of a subtraction can mark a later byte only
/// after an earlier one already matched.
#[inline]
fn escape_mask(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = w.wrapping_sub(0x20 * ONES) & !w & HIGHS;
    control | zero(w ^ (b'"' as u64 * ONES)) | zero(w ^ (b'\\' as u64 * ONES))
}

/// The first of sixteen bytes that needs an escape, if any: `"`, `\\` or below 0x20, found
/// by SSE2 byte compares, the same bytes [`escape_mask`] marks.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn first_in_block(b: [u8; 16]) -> Option<usize> {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8,
    };
    let v = u128::from_le_bytes(b);
    // SAFETY: these intrinsics need SSE2, which this build targets (the `cfg` above; every
    // x86-64 CPU has it); they compute on registers and read no memory.
    let mask = unsafe {
        let v = _mm_set_epi64x((v >> 64) as i64, v as i64);
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `b <= 0x1f`: the larger of `b` and 0x1f is 0x1f.
        let ceiling = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, ceiling), ceiling);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
    };
    (mask != 0).then(|| mask.trailing_zeros() as usize)
}

/// The first byte that needs an escape in `w`, if any.
#[inline]
fn first_in_word(w: [u8; 8]) -> Option<usize> {
    let mask = escape_mask(u64::from_le_bytes(w));
    (mask != 0).then(|| (mask.trailing_zeros() / 8) as usize)
}

/// The escape serde_json writes for a byte: 0 for none, `u` for `\u00XX`, else the letter.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Where the first byte that needs an escape is. Text of sixteen bytes or more is read sixteen
/// at a time where the machine compares sixteen at once ([`first_in_block`]), shorter text
/// eight at a time ([`first_in_word`]), text shorter than a word byte by byte. The last few
/// bytes are read as the text's last block (or word), overlapping bytes already checked: they
/// need no escape, so any found is past them. Inlined: most strings are short, and a call
/// costs as much as reading one.
#[inline(always)]
fn first_escape(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len();
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if n >= 16 {
        let mut at = 0;
        while let Some(block) = bytes.get(at..at + 16) {
            if let Some(i) = <[u8; 16]>::try_from(block).ok().and_then(first_in_block) {
                return Some(at + i);
            }
            at += 16;
        }
        if at == n {
            return None;
        }
        let last = <[u8; 16]>::try_from(bytes.get(n - 16..)?).ok()?;
        return first_in_block(last).map(|i| n - 16 + i);
    }
    if n < 8 {
        return bytes.iter().position(|&b| ESCAPE[b as usize] != 0);
    }
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        if let Ok(w) = <[u8; 8]>::try_from(word)
            && let Some(i) = first_in_word(w)
        {
            return Some(at + i);
        }
        at += 8;
    }
    if words.remainder().is_empty() {
        return None;
    }
    let last = <[u8; 8]>::try_from(bytes.get(n - 8..)?).ok()?;
    first_in_word(last).map(|i| n - 8 + i)
}

/// Appends `s` as a JSON string.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    let mut rest = s.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    // Each escape-free run is copied whole; most strings are one run.
    while let Some(at) = first_escape(rest) {
        out.extend_from_slice(&rest[..at]);
        let b = rest[at];
        match ESCAPE[b as usize] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            }
            esc => out.extend_from_slice(&[b'\\', esc]),
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

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
    read_narrow(bytes)
}

/// [`from_slice_narrow`], read into a [`Doc`] that borrows from `bytes`: a string or key
/// without escapes is a slice of the input, one with escapes is owned; objects are key-sorted
/// (a repeated key keeps its last value). A document left to serde_json is owned whole.
pub fn read_borrowed(bytes: &[u8]) -> Result<(Doc<'_>, bool), serde_json::Error> {
    read_narrow(bytes)
}

/// The document as `B` and whether it is known to hold no integer past `i64`, with the
/// answer (or error) of `serde_json::from_slice`.
fn read_narrow<'t, B: Build<'t>>(bytes: &'t [u8]) -> Result<(B, bool), serde_json::Error> {
    match read_doc::<B>(bytes) {
        Some(read) => Ok((read.value, !read.wide)),
        None => serde_json::from_slice(bytes).map(|value| (B::from_serde(value), false)),
    }
}

/// Deepest nesting the fast reader takes; deeper documents go to serde_json (its own limit is
/// 127 levels, so this never decides an answer).
const READ_DEPTH: usize = 100;

/// The document, when the fast reader reads it all; `None` hands it to serde_json.
fn read(bytes: &[u8]) -> Option<Value> {
    read_doc::<Value>(bytes).map(|read| read.value)
}

/// The document and its deepest nesting of arrays and objects (0 for a scalar), when the fast
/// reader reads it all: then `from_slice` gives the same value. `None` says nothing about it.
pub fn read_nested(bytes: &[u8]) -> Option<(Value, usize)> {
    read_doc::<Value>(bytes).map(|read| (read.value, read.deepest))
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
    /// An object of the members read, in document order (a key may repeat).
    fn object(members: std::vec::Drain<'_, (Self::Text, Self)>) -> Self;
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
    fn object(members: std::vec::Drain<'_, (String, Self)>) -> Self {
        // Inserted in order, as serde_json does: a repeated key keeps its last value.
        let mut map = Map::with_capacity(members.len());
        for (k, v) in members {
            map.insert(k, v);
        }
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
    fn object(members: std::vec::Drain<'_, (Self::Text, Self)>) -> Self {
        // Collected at its final size; members most often come in key order already.
        let mut m: json_doc::Members<'t> = members.collect();
        json_doc::sort_members(&mut m);
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
}

fn read_doc<'t, B: Build<'t>>(bytes: &'t [u8]) -> Option<Read<B>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut r = Reader::<B> {
        text,
        at: 0,
        depth: 0,
        deepest: 0,
        wide: false,
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
            return Some(B::object(self.members.drain(start..)));
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
                return Some(B::object(self.members.drain(start..)));
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
        let Ok(Value::Number(n)) = serde_json::from_str::<Value>(self.text.get(start..at)?) else {
            return None;
        };
        self.wide |= n.as_i64().is_none() && !n.is_f64();
        self.at = at;
        Some(B::number(n))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn same(v: &Value) {
        let ours = to_vec(v);
        let theirs = serde_json::to_vec(v).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
        assert_eq!(to_string(v).as_bytes(), &theirs[..]);
    }

    /// Objects are key-ordered (`serde_json` without `preserve_order`, docs/mapping.md "Object
    /// member order"): read in any order, written in key order. Fails if a dependency turns
    /// `preserve_order` on again, which would bring back a SipHash per stored key.
    #[test]
    fn objects_are_written_in_key_order() {
        let v = from_slice(br#"{"b":1,"a":{"z":true,"c":null},"aa":[]}"#).expect("valid JSON");
        assert_eq!(to_string(&v), r#"{"a":{"c":null,"z":true},"aa":[],"b":1}"#);
    }

    /// `from_slice_narrow` vouches for a document only when the fast reader read it whole and
    /// met no integer past `i64`; the transform skips its check of the answer on that word.
    #[test]
    fn narrow_is_said_only_of_documents_read_whole_without_a_wide_integer() {
        let narrow = |t: &str| from_slice_narrow(t.as_bytes()).map(|(_, n)| n).ok();
        assert_eq!(
            narrow(r#"{"a":[1,-2,9223372036854775807,1.5e300,"x"]}"#),
            Some(true)
        );
        assert_eq!(
            narrow(r#"{"a":[1,{"b":10000000000854346115}]}"#),
            Some(false)
        );
        assert_eq!(narrow("18446744073709551615"), Some(false));
        // Nesting past the fast reader's depth goes to serde_json: not looked at, so not
        // vouched for.
        let deep = format!(
            "{}1{}",
            "[".repeat(READ_DEPTH + 1),
            "]".repeat(READ_DEPTH + 1)
        );
        assert_eq!(narrow(&deep), Some(false));
        assert_eq!(narrow("{"), None);
        for t in [r#"{"a":[1,{"b":10000000000854346115}]}"#, &deep, "[1,2.5]"] {
            let (value, _) = from_slice_narrow(t.as_bytes()).expect("valid JSON");
            assert_eq!(Some(value), serde_json::from_str::<Value>(t).ok(), "{t}");
        }
    }

    #[test]
    fn every_byte_escapes_as_serde_json_does() {
        // Each ASCII byte alone, at every offset within a word, and beside multi-byte text.
        for b in 0u8..0x80 {
            let c = b as char;
            for pad in 0..10 {
                let s = format!("{}{c}{}é€😀", "a".repeat(pad), "z".repeat(9 - pad));
                same(&Value::String(s));
            }
        }
        same(&json!("\"\\\u{0}\u{1f}\u{7f}\u{80}\u{ff}\u{2028}"));
    }

    /// Every byte value at every position of texts up to three blocks long, the other bytes
    /// high (0xe9, never an escape): the sixteen-byte blocks, the eight-byte words after them,
    /// the overlapping last word and the byte-by-byte short text all find the first escape.
    #[test]
    fn the_block_and_word_scans_find_the_first_escape() {
        for len in 0..=48usize {
            assert_eq!(first_escape(&vec![0xe9; len]), None, "len {len}");
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut t = vec![0xe9u8; len];
                    t[at] = b;
                    let want = (ESCAPE[b as usize] != 0).then_some(at);
                    assert_eq!(first_escape(&t), want, "len {len}, byte {b:#x} at {at}");
                }
            }
        }
    }

    /// Every length up to five words, with an escape at every position: the block and word
    /// scans, the overlapping last word and the byte-by-byte short text, written and read back.
    #[test]
    fn escapes_at_every_position_of_every_short_length() {
        for len in 0..=40 {
            same(&Value::String("a".repeat(len)));
            for at in 0..len {
                for c in ['"', '\\', '\n', '\u{1f}', '\u{0}'] {
                    let s: String = (0..len).map(|i| if i == at { c } else { 'a' }).collect();
                    let v = Value::String(s);
                    same(&v);
                    let text = to_vec(&json!({ "k": v, "l": [v] }));
                    assert!(read(&text).is_some());
                    reads_alike(&text);
                }
            }
        }
    }

    #[test]
    fn structures_and_numbers_match_serde_json() {
        same(&json!({
            "b": [1, -1, 0, u64::MAX, i64::MIN, 1.5, -0.0, 1e300, 2.5e-8, 100.0],
            "a": {"": null, "t": true, "f": false, "nested": [[], {}, [{}]]},
            "k\"ey\n": "v"
        }));
        same(&json!([]));
        same(&json!({}));
        same(&json!(null));
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
            "[\"\\\\\\x00-\\x1f a-z]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// `from_slice` gives serde_json's answer: the same value with its members in the same
    /// order (`Map` equality ignores order, so the written text is compared too), or an error
    /// with the same message.
    fn reads_alike(bytes: &[u8]) {
        let ours = from_slice(bytes);
        let theirs = serde_json::from_slice::<Value>(bytes);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{}", String::from_utf8_lossy(bytes));
                assert_eq!(to_vec(a), to_vec(b), "{}", String::from_utf8_lossy(bytes));
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => panic!(
                "{}: ours {ours:?}, serde_json {theirs:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }

    #[test]
    fn reads_every_edge_case_as_serde_json_does() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let cases = [
            "0",
            "-0",
            "-0.0",
            "7",
            "-7",
            "01",
            "-01",
            "1.",
            ".5",
            "1.5",
            "-",
            "-a",
            "1e5",
            "1E+5",
            "1e-5",
            "-1.25e-3",
            "1e",
            "1e+",
            "1e400",
            "123456789012345678",
            "-123456789012345678",
            "1234567890123456789",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
            r#""""#,
            r#""a""#,
            r#""\"\\\/\b\f\n\r\t""#,
            r#""\u0000\u001f\u00e9\u20ac""#,
            r#""\ud83d\ude00""#,
            r#""\uD83D\uDE00x""#,
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\ud83d\u0041""#,
            r#""\ud83dx""#,
            r#""\u12""#,
            r#""\u12g4""#,
            r#""\x""#,
            "\"tab\there\"",
            "\"nl\nhere\"",
            r#""unterminated"#,
            r#""ends in \"#,
            "\"é€😀\"",
            "true",
            "false",
            "null",
            "truex",
            "nul",
            "tru",
            " \t\r\n1 \n",
            "1 2",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{}",
            "[]",
            "{ }",
            "[ ]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"a":1,"a":2,"b":3}"#,
            r#"{"b":1,"a":2,"b":3,"a":4,"c":5,"a":6}"#,
            r#"{"b":1,"a":{"d":[],"c":{}}}"#,
            r#"{"k\u00e9y":"v"}"#,
            "\u{feff}1",
            "",
            " ",
            "[",
            "{",
            r#"{"a""#,
            r#"{"a":"#,
        ];
        for case in cases {
            reads_alike(case.as_bytes());
        }
        for n in [1, 99, 100, 101, 126, 127, 128, 129, 200] {
            reads_alike(deep(n).as_bytes());
        }
        reads_alike(b"\"\xff\"");
        reads_alike(b"[\"ok\", \"\xc3\"]");
        reads_alike(b"{\"\xe2\x82\xac\": 1}");
    }

    #[test]
    fn ordinary_documents_are_read_without_serde_json() {
        // A reader that handed everything to serde_json would still read alike: this checks
        // that the fast path is the one taken for the documents portico sees every call.
        for doc in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,-2,true,null,"x\ny"]}}}"#,
            r#"{"treatment":"MASSAGE-60","openings":[{"ref":"M@2026-12-01T09:00","free":true}],"tz":"Europe/Lisbon"}"#,
            r#"{"price":12.5,"ratio":-1e-3,"big":18446744073709551615,"neg":-0,"s":"\u00e9\ud83d\ude00"}"#,
            " [ {} , [ ] , \"\" ] ",
        ] {
            assert!(read(doc.as_bytes()).is_some(), "{doc}");
            reads_alike(doc.as_bytes());
        }
    }

    /// `read_borrowed` gives `from_slice_narrow`'s answer once its `Doc` is a `Value`: the
    /// same value (members in the same order), the same flag, an error together.
    fn borrows_alike(bytes: &[u8]) {
        let ours = read_borrowed(bytes).map(|(d, n)| (d.into_value(), n));
        let theirs = from_slice_narrow(bytes);
        let text = String::from_utf8_lossy(bytes);
        match (&ours, &theirs) {
            (Ok((a, an)), Ok((b, bn))) => {
                assert_eq!(a, b, "{text}");
                assert_eq!(to_vec(a), to_vec(b), "{text}");
                assert_eq!(an, bn, "{text}");
            }
            (Err(_), Err(_)) => {}
            _ => panic!("{text}: borrowed {ours:?}, narrow {theirs:?}"),
        }
    }

    fn borrowed(t: &str) -> (Doc<'_>, bool) {
        read_borrowed(t.as_bytes()).expect("valid JSON")
    }

    #[test]
    fn plain_strings_and_keys_are_borrowed_and_escaped_ones_owned() {
        let t = r#"{"plain":"text é","esc\u00e9":"a\nb","l":["x","\"y"]}"#;
        let (doc, narrow) = borrowed(t);
        assert!(narrow);
        let Doc::Obj(m) = &doc else { panic!("{doc:?}") };
        let keys: Vec<(&str, bool)> = m
            .iter()
            .map(|(k, _)| (k.as_ref(), matches!(k, Cow::Borrowed(_))))
            .collect();
        assert_eq!(keys, [("escé", false), ("l", true), ("plain", true)]);
        assert!(matches!(
            doc.get("plain"),
            Some(Doc::Str(Cow::Borrowed("text é")))
        ));
        assert!(matches!(doc.get("escé"), Some(Doc::Str(Cow::Owned(s))) if s == "a\nb"));
        let Some(Doc::Arr(l)) = doc.get("l") else {
            panic!("{doc:?}")
        };
        assert!(
            matches!(&l[..], [Doc::Str(Cow::Borrowed("x")), Doc::Str(Cow::Owned(y))] if y == "\"y")
        );
        borrows_alike(t.as_bytes());
    }

    #[test]
    fn borrowed_objects_are_key_sorted_and_keep_the_last_repeated_key() {
        for t in [
            r#"{"b":1,"a":2,"b":3}"#,
            r#"{"b":1,"a":2,"b":3,"a":4,"c":5,"a":6}"#,
            r#"{"z":{"y":[],"x":{}},"\u0061":1,"a":2,"":0}"#,
            r#"{"a":1,"a":2}"#,
        ] {
            let (doc, _) = borrowed(t);
            let Doc::Obj(m) = &doc else { panic!("{doc:?}") };
            assert!(m.windows(2).all(|w| w[0].0 < w[1].0), "{t}: {m:?}");
            borrows_alike(t.as_bytes());
        }
        let (doc, _) = borrowed(r#"{"b":1,"a":2,"b":3,"\u0061":4}"#);
        assert_eq!(doc.get("a"), Some(&Doc::from(4i64)));
        assert_eq!(doc.get("b"), Some(&Doc::from(3i64)));
    }

    #[test]
    fn borrowed_numbers_and_the_wide_flag_match_from_slice_narrow() {
        let (doc, narrow) =
            borrowed("[1,-2,9223372036854775807,-9223372036854775808,1.5e300,-0,0.25]");
        assert!(narrow);
        assert_eq!(
            doc.into_value(),
            json!([1, -2, i64::MAX, i64::MIN, 1.5e300, -0.0, 0.25])
        );
        // `-0` is a float to serde_json, read from its own text: not wide.
        let (doc, narrow) = borrowed("-0");
        assert!(narrow);
        assert!(matches!(&doc, Doc::Num(n) if n.as_f64() == Some(0.0) && n.is_f64()));
        let (doc, narrow) = borrowed(r#"{"a":[1,{"b":10000000000854346115}]}"#);
        assert!(!narrow);
        let wide = doc
            .get("a")
            .and_then(|a| match a {
                Doc::Arr(items) => items.get(1),
                _ => None,
            })
            .and_then(|o| o.get("b"));
        assert!(matches!(wide, Some(Doc::Num(n)) if n.as_i64().is_none() && !n.is_f64()));
        for t in [
            "18446744073709551615",
            "18446744073709551616",
            "-0",
            "-0.0",
            "1e5",
            "1e400",
            "123456789012345678",
            "1234567890123456789",
            "-9223372036854775809",
            "01",
        ] {
            borrows_alike(t.as_bytes());
        }
    }

    #[test]
    fn borrowed_edge_cases_fall_back_or_fail_as_from_slice_narrow_does() {
        let nest = |n: usize| format!(r#"{}"s"{}"#, "[".repeat(n), "]".repeat(n));
        // The innermost string is borrowed, and whether the document is vouched for.
        let innermost = |n: usize| {
            let text = nest(n);
            let (doc, narrow) = borrowed(&text);
            let mut inner = &doc;
            while let Doc::Arr(a) = inner {
                inner = &a[0];
            }
            assert_eq!(inner.as_str(), Some("s"));
            (matches!(inner, Doc::Str(Cow::Borrowed(_))), narrow)
        };
        assert_eq!(innermost(READ_DEPTH), (true, true));
        // Past the fast reader's depth serde_json reads it: owned, and not vouched for.
        assert_eq!(innermost(READ_DEPTH + 1), (false, false));
        for n in [99, 100, 101, 127, 128, 129, 200] {
            borrows_alike(nest(n).as_bytes());
        }
        for t in [
            "",
            " ",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{a:1}"#,
            "1 2",
            "nul",
            r#""\x""#,
            r#""\ud83d""#,
            r#""\ud83d\ude00""#,
            "\"tab\there\"",
            "\u{feff}1",
            "[\"ok\", \"é\"]",
        ] {
            borrows_alike(t.as_bytes());
        }
        assert!(read_borrowed(b"{").is_err());
        assert!(read_borrowed(b"\"\xff\"").is_err());
        borrows_alike(b"[\"ok\", \"\xc3\"]");
    }

    /// A JSON text with what `value()` does not write: repeated keys, keys and strings
    /// spelt with `\u` escapes, and whitespace between tokens.
    fn varied_text() -> impl Strategy<Value = String> {
        let ws = "[ \t\n\r]{0,2}";
        let key = (r#"[ab"\\é😀]{0,2}"#, any::<bool>()).prop_map(|(k, esc)| spell(&k, esc));
        let leaf = prop_oneof![
            value().prop_map(|v| to_string(&v)),
            (r#"[a"\\\n😀]{0,4}"#, any::<bool>()).prop_map(|(s, esc)| spell(&s, esc)),
        ];
        leaf.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), ws)
                    .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!("{w},")))),
                (prop::collection::vec((key.clone(), inner), 0..6), ws).prop_map(|(m, w)| {
                    let m: Vec<String> = m.iter().map(|(k, v)| format!("{k}{w}:{v}")).collect();
                    format!("{{{w}{}}}", m.join(&format!(",{w}")))
                }),
            ]
        })
    }

    /// `s` as a JSON string: as serde_json writes it, or every character as a `\u` escape
    /// (a surrogate pair past the BMP).
    fn spell(s: &str, escaped: bool) -> String {
        if !escaped {
            return to_string(&Value::String(s.to_owned()));
        }
        let mut out = String::from("\"");
        for c in s.chars() {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
        out.push('"');
        out
    }

    proptest! {
        #[test]
        fn any_value_is_read_borrowed_as_from_slice_narrow_reads_it(v in value()) {
            for text in [to_vec(&v), serde_json::to_vec_pretty(&v).unwrap_or_default()] {
                prop_assert!(read_borrowed(&text).is_ok());
                borrows_alike(&text);
            }
        }

        #[test]
        fn any_varied_text_is_read_borrowed_as_from_slice_narrow_reads_it(text in varied_text()) {
            prop_assert!(read_borrowed(text.as_bytes()).is_ok(), "{}", text);
            borrows_alike(text.as_bytes());
        }

        #[test]
        fn any_text_is_read_borrowed_as_from_slice_narrow_reads_it(
            text in r#"[\[\]{}",:0-9a-z.eE+\- \t\n\\/éu]{0,48}"#,
        ) {
            borrows_alike(text.as_bytes());
        }

        #[test]
        fn any_value_is_written_as_serde_json_writes_it(v in value()) {
            prop_assert_eq!(to_vec(&v), serde_json::to_vec(&v).unwrap_or_default());
        }

        #[test]
        fn any_doc_is_written_as_its_value_is(text in varied_text()) {
            if let Ok((doc, _)) = read_borrowed(text.as_bytes()) {
                let mut out = Vec::new();
                write_doc(&doc, &mut out);
                prop_assert_eq!(out, to_vec(&doc.to_value()));
            }
        }

        #[test]
        fn any_written_value_is_read_back_without_serde_json(v in value()) {
            for text in [to_vec(&v), serde_json::to_vec_pretty(&v).unwrap_or_default()] {
                prop_assert!(read(&text).is_some());
                reads_alike(&text);
            }
        }

        #[test]
        fn any_text_is_read_as_serde_json_reads_it(
            text in r#"[\[\]{}",:0-9a-z.eE+\- \t\n\\/éu]{0,48}"#,
        ) {
            reads_alike(text.as_bytes());
        }

        #[test]
        fn any_bytes_are_read_as_serde_json_reads_them(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
            reads_alike(&bytes);
        }
    }
}
