//! RFC 8785 JSON Canonicalization Scheme: object members sorted by UTF-16 code units, strings
//! escaped minimally, numbers in ECMAScript form. It must never reorder arrays or drop members.

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

/// ECMAScript `Number.prototype.toString` of the double the number denotes (RFC 8785 §3.2.2.3).
fn number(n: &Number) -> Result<String, JcsError> {
    let f = n.as_f64().ok_or(JcsError::Number)?;
    if !f.is_finite() {
        return Err(JcsError::Number);
    }
    if f == 0.0 {
        return Ok("0".into());
    }
    // Shortest round-trip digits and the decimal exponent, from Rust's `{:e}` form.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').ok_or(JcsError::Number)?;
    let exp: i32 = exp.parse().map_err(|_| JcsError::Number)?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point relative to the digits
    let mut s = String::new();
    if f < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        let e = n - 1;
        let sign = if e < 0 { '-' } else { '+' };
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(sign);
        s.push_str(&e.abs().to_string());
    }
    Ok(s)
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
}
