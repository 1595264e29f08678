//! SEP-2243 `Mcp-Param-*` headers of a 2026-07-28 `tools/call`: every argument the tool's
//! inputSchema annotates with `x-mcp-header` must arrive in its header too, with the same value.
//! It must never look at arguments the schema does not annotate, nor put a value into an error.

use super::respond::decode_header_value;
use http::HeaderMap;
use serde_json::Value;

/// Checks the `Mcp-Param-<name>` header of each annotated argument against the body: a header
/// without its argument, an argument without its header, a value that is not a valid field
/// value (or `=?base64?…?=` that is not Base64 with padding), and different values are refused.
pub(super) fn check(
    annotated: &[(String, String)],
    arguments: Option<&Value>,
    headers: &HeaderMap,
) -> Result<(), String> {
    for (param, name) in annotated {
        let header = headers
            .get(format!("mcp-param-{name}").as_str())
            .map(|v| v.to_str().map(str::trim));
        let body = arguments
            .and_then(|a| a.get(param))
            .filter(|v| !v.is_null());
        let decoded = match header {
            None if body.is_none() => continue,
            None => {
                return Err(format!(
                    "missing Mcp-Param-{name} header for argument `{param}`"
                ));
            }
            Some(v) => v
                .ok()
                .and_then(decode_header_value)
                .ok_or_else(|| format!("Mcp-Param-{name} header is not a valid value"))?,
        };
        let expected = match body {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        };
        if expected.as_deref() != Some(decoded.as_str()) {
            return Err(format!(
                "Mcp-Param-{name} header does not match argument `{param}`"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn base64_literal_missing_and_mismatched_values() {
        let a = [("region".to_string(), "Region".to_string())];
        let args = json!({"region": "Hello"});
        let ok = |h: &[(&'static str, &'static str)], v: &Value| check(&a, Some(v), &headers(h));
        assert!(ok(&[("mcp-param-region", "=?base64?SGVsbG8=?=")], &args).is_ok());
        assert!(ok(&[("Mcp-Param-Region", " Hello ")], &args).is_ok());
        assert!(ok(&[("mcp-param-region", "=?base64?SGVsbG8?=")], &args).is_err());
        assert!(ok(&[("mcp-param-region", "=?base64?SGVs!!!bG8=?=")], &args).is_err());
        let literal = json!({"region": "=?base64?SGVsbG8="});
        assert!(ok(&[("mcp-param-region", "=?base64?SGVsbG8=")], &literal).is_ok());
        assert!(ok(&[], &args).is_err(), "an argument without its header");
        assert!(ok(&[("mcp-param-region", "Bye")], &args).is_err());
        assert!(ok(&[("mcp-param-region", "Hello")], &json!({})).is_err());
        assert!(ok(&[], &json!({})).is_ok());
        let n = [("n".to_string(), "N".to_string())];
        assert!(
            check(
                &n,
                Some(&json!({"n": 42})),
                &headers(&[("mcp-param-n", "42")])
            )
            .is_ok()
        );
    }
}
