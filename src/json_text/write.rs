//! Writes `serde_json::Value`s and [`Doc`]s as JSON text, byte for byte what
//! `serde_json::to_vec` writes. It never reads JSON text.

use super::scan::{ESCAPE, first_escape};
use crate::json_doc::Doc;
use serde_json::{Map, Value};

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
