//! Compact JSON text of `serde_json::Value`s: byte for byte what `serde_json::to_vec` writes
//! (key order, number format, escapes), only faster. It never changes a value, nor reorders it.
//!
//! Every answer portico sends is written here, so the string escaper is the hot loop: it checks
//! eight bytes at a time for the three kinds of byte JSON must escape (`"`, `\` and controls)
//! and copies the runs between them whole, where serde_json looks up a table for each byte.

use serde_json::Value;

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
        Value::Object(map) => {
            out.push(b'{');
            let mut first = true;
            for (key, item) in map {
                if !first {
                    out.push(b',');
                }
                first = false;
                write_str(key, out);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
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

/// True when one of the eight bytes of `w` is `"`, `\` or below 0x20. Exact for "any byte": the
/// borrow of a subtraction can mark a later byte only after an earlier one already matched.
#[inline]
fn needs_escape(w: u64) -> bool {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = w.wrapping_sub(0x20 * ONES) & !w & HIGHS;
    (control | zero(w ^ (b'"' as u64 * ONES)) | zero(w ^ (b'\\' as u64 * ONES))) != 0
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

/// Where the first byte that needs an escape is, eight bytes at a time.
fn first_escape(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        if let Ok(w) = <[u8; 8]>::try_from(word)
            && needs_escape(u64::from_le_bytes(w))
        {
            break;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| ESCAPE[b as usize] != 0)
        .map(|p| at + p)
}

fn write_str(s: &str, out: &mut Vec<u8>) {
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

    proptest! {
        #[test]
        fn any_value_is_written_as_serde_json_writes_it(v in value()) {
            prop_assert_eq!(to_vec(&v), serde_json::to_vec(&v).unwrap_or_default());
        }
    }
}
