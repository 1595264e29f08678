//! Writes `serde_json::Value`s and [`Doc`]s as JSON text, byte for byte what
//! `serde_json::to_vec` writes. It never reads JSON text.

use super::scan::{ESCAPE, block_mask, first_escape};
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
    write_str_bytes(s.as_bytes(), out);
}

/// Appends UTF-8 text as a JSON string: [`write_str`] for text already known to be UTF-8,
/// such as JSON text this module wrote, so that it is not checked again. Bytes from 0x80 up
/// are copied as they are, so text that is not UTF-8 gives a string that is not either.
pub fn write_str_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    // Room for the text, its quotes, and the escapes of JSON text (about one byte in eight).
    out.reserve(bytes.len() + bytes.len() / 8 + 2);
    out.push(b'"');
    write_str_contents(bytes, out);
    out.push(b'"');
}

/// Appends UTF-8 text escaped as the inside of a JSON string, without its quotes: a string
/// written in pieces (text formatted as it is written) is its quotes around these.
pub fn write_str_contents(bytes: &[u8], out: &mut Vec<u8>) {
    let done = if bytes.len() >= 32 {
        escape_blocks(bytes, out)
    } else {
        0
    };
    let mut rest = &bytes[done..];
    // Each escape-free run is copied whole; most strings are one run.
    while let Some(at) = first_escape(rest) {
        out.extend_from_slice(&rest[..at]);
        push_escape(rest[at], out);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// Writes the escapes of `bytes` sixteen bytes at a time, and the runs between them, up to
/// the last whole block; returns how many bytes of `bytes` are written. Text where escapes
/// are dense (JSON text as a string, every key and string value quoted) pays a fixed-size
/// copy per escape instead of a call to `memcpy` and a scan restarted after it.
fn escape_blocks(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    let mut done = 0;
    let mut at = 0;
    while let Some(block) = bytes.get(at..at + 16) {
        let Ok(block) = <[u8; 16]>::try_from(block) else {
            break;
        };
        let mut mask = block_mask(block);
        while mask != 0 {
            let escape = at + mask.trailing_zeros() as usize;
            copy_run(bytes, done, escape, out);
            push_escape(bytes[escape], out);
            done = escape + 1;
            mask &= mask - 1;
        }
        at += 16;
    }
    // The escape-free run since the last escape is left to the caller's scan.
    done
}

/// Appends `bytes[from..to]`. A run of at most sixteen bytes with sixteen bytes to read is
/// copied as a fixed sixteen (a register move, not a call) and the surplus cut off again.
#[inline(always)]
fn copy_run(bytes: &[u8], from: usize, to: usize, out: &mut Vec<u8>) {
    let len = to - from;
    if len <= 16
        && let Some(chunk) = bytes.get(from..from + 16)
        && let Ok(chunk) = <[u8; 16]>::try_from(chunk)
    {
        let before = out.len();
        out.extend_from_slice(&chunk);
        out.truncate(before + len);
    } else {
        out.extend_from_slice(&bytes[from..to]);
    }
}

/// Appends the escape of one byte that needs one.
#[inline(always)]
fn push_escape(b: u8, out: &mut Vec<u8>) {
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
}
