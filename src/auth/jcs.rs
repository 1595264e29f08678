//! RFC 8785 JSON Canonicalization Scheme: object members sorted by UTF-16 code units, strings
//! escaped minimally, numbers in ECMAScript form. It must never reorder arrays or drop members.
//!
//! Why kept rather than `serde_json_canonicalizer`: that crate turns on serde_json's
//! `float_roundtrip` feature, which Cargo would unify into the gateway's own serde_json and so
//! change how every request body's numbers are parsed; this module is some sixty lines over
//! `serde_json::Value`, with number text from `ryu-js` (the part that is easy to get wrong). Its
//! speed has not been compared. The tests below hold it to `serde_json_canonicalizer`: the
//! RFC 8785 Appendix B number vectors, the §3.2.2 sample object, UTF-16 key order, every ASCII
//! control character, and a property test over random JSON values.

use serde_json::{Number, Value};

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    #[error("a number is not finite or not representable as an IEEE 754 double")]
    Number,
}

/// The JCS bytes of `v`.
pub fn canonical(v: &Value) -> Result<String, JcsError> {
    let mut out = String::new();
    write(v, &mut out)?;
    Ok(out)
}

fn write(v: &Value, out: &mut String) -> Result<(), JcsError> {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)?),
        Value::String(s) => string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out)?;
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<(&String, Vec<u16>)> =
                m.keys().map(|k| (k, k.encode_utf16().collect())).collect();
            keys.sort_by(|a, b| a.1.cmp(&b.1));
            out.push('{');
            for (i, (k, _)) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                write(&m[k.as_str()], out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// RFC 8785 §3.2.2.2: `"`, `\` and controls escaped; `\b \t \n \f \r` short forms; other
/// controls `\u00xx` in lowercase hex; everything else verbatim.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript `Number.prototype.toString` of the double the number denotes (RFC 8785 §3.2.2.3),
/// by `ryu-js`: shortest round-trip digits, a tie between two shortest candidates going to the
/// even one as ECMAScript requires (0x43143ff3c1cb0959 is `1424953923781206.2`, not `.3`).
fn number(n: &Number) -> Result<String, JcsError> {
    let f = n.as_f64().ok_or(JcsError::Number)?;
    if !f.is_finite() {
        return Err(JcsError::Number);
    }
    if f == 0.0 {
        return Ok("0".into());
    }
    Ok(ryu_js::Buffer::new().format_finite(f).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_follow_ecmascript() {
        for (v, want) in [
            (json!(1), "1"),
            (json!(-0.0), "0"),
            (json!(1e21), "1e+21"),
            (json!(1e20), "100000000000000000000"),
            (json!(0.000001), "0.000001"),
            (json!(1e-7), "1e-7"),
            (json!(123.456), "123.456"),
            (json!(-1.5e-10), "-1.5e-10"),
            (json!(9007199254740993u64), "9007199254740992"),
            (json!(4.5), "4.5"),
            (
                serde_json::from_str("333333333.33333329").unwrap(),
                "333333333.3333333",
            ),
        ] {
            assert_eq!(canonical(&v).unwrap(), want, "{v}");
        }
    }

    #[test]
    fn members_sort_by_utf16_and_strings_escape_minimally() {
        // RFC 8785 §3.2.3's sorting example: U+20AC, U+1F600 (surrogates D83D DE00) and U+FB33.
        let v = json!({"\u{20ac}": 1, "\u{1f600}": 2, "\u{fb33}": 3, "a\u{1}\n": "\u{7f}\"\\é"});
        assert_eq!(
            canonical(&v).unwrap(),
            "{\"a\\u0001\\n\":\"\u{7f}\\\"\\\\é\",\"\u{20ac}\":1,\"\u{1f600}\":2,\"\u{fb33}\":3}"
        );
    }

    /// Ours and the `serde_json_canonicalizer` crate give the same bytes for `v`.
    fn same_as_crate(v: &Value) -> String {
        let ours = canonical(v).unwrap();
        let theirs = serde_json_canonicalizer::to_string(v).unwrap();
        assert_eq!(ours, theirs, "canonical forms differ for {v:?}");
        ours
    }

    #[test]
    fn rfc8785_number_vectors_agree_with_the_crate() {
        // RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
        for (bits, want) in [
            (0x0000000000000000u64, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ] {
            let v = json!(f64::from_bits(bits));
            assert_eq!(same_as_crate(&v), want, "{bits:#x}");
        }
        // Integers beyond 2^53 and sums that are not exact in binary.
        for v in [
            json!(u64::MAX),
            json!(i64::MIN),
            json!(9007199254740993u64),
            json!(0.1 + 0.2),
            json!(1e21),
            json!(1e-7),
            json!(-1e-7),
            json!(123e-20),
        ] {
            same_as_crate(&v);
        }
    }

    #[test]
    fn rfc8785_sample_object_agrees_with_the_crate() {
        // RFC 8785 §3.2.2 input and §3.2.3 output.
        let v: Value = serde_json::from_str(
            r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals": [null, true, false]}"#,
        )
        .unwrap();
        assert_eq!(
            same_as_crate(&v),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        // Sorting by UTF-16 code units, not by code points or UTF-8 bytes.
        let v = json!({"\u{ffff}": 1, "\u{10000}": 2, "\u{e000}": 3, "a": 4, "\u{7f}": 5});
        same_as_crate(&v);
        // Every control character and the characters next to the escaped ones.
        let s: String = (0u32..0x80).filter_map(char::from_u32).collect();
        same_as_crate(&json!({ s.clone(): s }));
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<u64>().prop_filter_map("finite", |b| {
                Number::from_f64(f64::from_bits(b)).map(Value::Number)
            }),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn random_values_agree_with_the_crate(v in json_value()) {
            let ours = canonical(&v).unwrap();
            let theirs = serde_json_canonicalizer::to_string(&v).unwrap();
            proptest::prop_assert_eq!(ours, theirs);
        }
    }
}
