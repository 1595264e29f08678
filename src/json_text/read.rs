//! Reads JSON text into a `serde_json::Value` or a borrowed [`Doc`]: exactly the value (or
//! error) `serde_json::from_slice` gives, handing anything it does not read itself to serde_json.

use super::cursor::{Cursor, Next};
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

#[cfg(test)]
pub(super) use super::cursor::READ_DEPTH;

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
    let mut r = Reader::<B> {
        c: Cursor::new(bytes, numbers)?,
        repeated: false,
        items: Vec::new(),
        members: Vec::new(),
    };
    let value = r.value()?;
    r.c.finish().then_some(Read {
        value,
        deepest: r.c.deepest,
        wide: r.c.wide,
        repeated: r.repeated,
        reshaped: r.c.reshaped,
    })
}

/// A [`Cursor`] over the text and the containers being read: they keep their items on shared
/// stacks, innermost last, so each array is allocated once, at its final size.
struct Reader<'t, B: Build<'t>> {
    c: Cursor<'t>,
    /// An object repeated a key.
    repeated: bool,
    items: Vec<B>,
    members: Vec<(B::Text, B)>,
}

impl<'t, B: Build<'t>> Reader<'t, B> {
    fn value(&mut self) -> Option<B> {
        match self.c.next()? {
            Next::String => self.string().map(B::string),
            Next::Object => self.object(),
            Next::Array => self.array(),
            Next::Bool | Next::Null => match self.c.literal()? {
                Value::Bool(b) => Some(B::bool(b)),
                _ => Some(B::null()),
            },
            Next::Number => self.c.number().map(B::number),
        }
    }

    fn string(&mut self) -> Option<B::Text> {
        self.c.string().map(text::<B>)
    }

    fn array(&mut self) -> Option<B> {
        if self.c.open(b']')? {
            return Some(B::array(Vec::new()));
        }
        let start = self.items.len();
        loop {
            let item = self.value()?;
            self.items.push(item);
            if self.c.next_or_close(b']')? {
                return Some(B::array(self.items.split_off(start)));
            }
        }
    }

    fn object(&mut self) -> Option<B> {
        let start = self.members.len();
        if self.c.open(b'}')? {
            return Some(B::object(self.members.drain(start..), &mut self.repeated));
        }
        loop {
            let key = text::<B>(self.c.key()?);
            let value = self.value()?;
            self.members.push((key, value));
            if self.c.next_or_close(b'}')? {
                return Some(B::object(self.members.drain(start..), &mut self.repeated));
            }
        }
    }
}

/// A string or key the cursor read, as `B` holds it.
#[inline]
fn text<'t, B: Build<'t>>(s: Cow<'t, str>) -> B::Text {
    match s {
        Cow::Borrowed(s) => B::borrowed(s),
        Cow::Owned(s) => B::owned(s),
    }
}
