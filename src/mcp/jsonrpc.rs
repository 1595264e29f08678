//! JSON-RPC 2.0 envelopes: bounded parsing (size and nesting checked before serde), request /
//! notification / response classification, error objects. It never interprets MCP methods.

use serde_json::{Map, Value};

/// Standard JSON-RPC codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28 codes.
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// A classified message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response sent by the client; `body` holds its `result` or `error` member.
    Response { id: Value, body: Value },
}

/// Why a body is not one acceptable JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub code: i64,
    pub message: String,
    /// The request id when one could be read.
    pub id: Value,
}

/// Maximum nesting of arrays/objects, checked over raw bytes (strings skipped) so that serde
/// never recurses deeper than this.
pub fn depth_exceeds(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    for &b in bytes {
        if in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_)) || id.as_i64().is_some() || id.as_u64().is_some()
}

/// Parses one message (an array is refused here; see `parse_value` for batches).
pub fn parse(bytes: &[u8], max_depth: usize) -> Result<Message, Rejection> {
    classify(parse_value(bytes, max_depth)?)
}

/// Parses a body into JSON within the nesting limit: checked while reading by the one-pass
/// reader (itself bounded), else over the raw bytes before serde_json reads them.
pub fn parse_value(bytes: &[u8], max_depth: usize) -> Result<Value, Rejection> {
    let too_deep = || Rejection {
        code: INVALID_REQUEST,
        message: format!("JSON nesting deeper than {max_depth} levels"),
        id: Value::Null,
    };
    // Well-formed JSON read in one pass: its nesting is the byte scan's depth.
    if let Some((value, deepest)) = crate::json_text::read_nested(bytes) {
        return if deepest > max_depth {
            Err(too_deep())
        } else {
            Ok(value)
        };
    }
    if depth_exceeds(bytes, max_depth) {
        return Err(too_deep());
    }
    // The one-pass reader already declined this body: serde_json reads it (and words the error).
    serde_json::from_slice(bytes).map_err(|e| Rejection {
        code: PARSE_ERROR,
        message: format!("Parse error: {e}"),
        id: Value::Null,
    })
}

/// Classifies a parsed JSON value. The members are moved out in one pass over the object,
/// each matched by its key, instead of removed one by one by lookups in its map.
pub fn classify(value: Value) -> Result<Message, Rejection> {
    let Value::Object(obj) = value else {
        let message = if value.is_array() {
            "JSON-RPC batches are not supported: send one message per request"
        } else {
            "a JSON-RPC message must be an object"
        };
        return Err(Rejection {
            code: INVALID_REQUEST,
            message: message.into(),
            id: Value::Null,
        });
    };
    let (mut id, mut version, mut params, mut method) = (None, false, None, None);
    let mut others = Map::new();
    for (key, v) in obj {
        match key.as_str() {
            "id" => id = Some(v),
            "jsonrpc" => version = v.as_str() == Some("2.0"),
            "params" => params = Some(v),
            "method" => method = Some(v),
            _ => {
                others.insert(key, v);
            }
        }
    }
    let reject = |message: &str, id: &Option<Value>| Rejection {
        code: INVALID_REQUEST,
        message: message.into(),
        id: id.clone().filter(valid_id).unwrap_or(Value::Null),
    };
    if !version {
        return Err(reject("`jsonrpc` must be \"2.0\"", &id));
    }
    if let Some(i) = &id
        && !valid_id(i)
    {
        return Err(reject("`id` must be a string or an integer", &id));
    }
    if let Some(p) = &params
        && !p.is_object()
        && !p.is_array()
    {
        return Err(reject("`params` must be an object", &id));
    }
    match (method, id) {
        (Some(Value::String(method)), Some(id)) => Ok(Message::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
        (Some(_), id) => Err(reject("`method` must be a string", &id)),
        (None, Some(id)) if others.contains_key("result") || others.contains_key("error") => {
            // The message less `id` and `method` (and `params`), as sent: `jsonrpc` was "2.0".
            others.insert("jsonrpc".into(), Value::String("2.0".into()));
            Ok(Message::Response {
                id,
                body: Value::Object(others),
            })
        }
        (None, id) => Err(reject("a request needs `method`", &id)),
    }
}

/// The response envelope around `member` (`result` or `error`). `member` is moved in: the
/// `json!` macro would copy it through `to_value`, a deep copy of every answer.
fn envelope(id: &Value, key: &str, member: Value) -> Value {
    let mut m = Map::with_capacity(3);
    m.insert("jsonrpc".into(), Value::String("2.0".into()));
    m.insert("id".into(), id.clone());
    m.insert(key.into(), member);
    Value::Object(m)
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    envelope(id, "result", result)
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), Value::from(code));
    err.insert("message".into(), Value::String(message.into()));
    if let Some(d) = data {
        err.insert("data".into(), d);
    }
    envelope(id, "error", Value::Object(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The classification of an object as it was written first: members removed from the map
    /// by key.
    fn classify_by_removal(mut obj: Map<String, Value>) -> Result<Message, Rejection> {
        let id = obj.remove("id");
        let reject = |message: &str, id: &Option<Value>| Rejection {
            code: INVALID_REQUEST,
            message: message.into(),
            id: id.clone().filter(valid_id).unwrap_or(Value::Null),
        };
        if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
            return Err(reject("`jsonrpc` must be \"2.0\"", &id));
        }
        if let Some(i) = &id
            && !valid_id(i)
        {
            return Err(reject("`id` must be a string or an integer", &id));
        }
        let params = obj.remove("params");
        if let Some(p) = &params
            && !p.is_object()
            && !p.is_array()
        {
            return Err(reject("`params` must be an object", &id));
        }
        match (obj.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => Ok(Message::Request { id, method, params }),
            (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
            (Some(_), id) => Err(reject("`method` must be a string", &id)),
            (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
                Ok(Message::Response {
                    id,
                    body: Value::Object(obj),
                })
            }
            (None, id) => Err(reject("a request needs `method`", &id)),
        }
    }

    /// The nesting limit as it was checked before the one-pass reader: the byte scan first,
    /// then serde_json.
    fn two_pass(bytes: &[u8], max: usize) -> Result<Value, String> {
        if depth_exceeds(bytes, max) {
            return Err(format!("JSON nesting deeper than {max} levels"));
        }
        serde_json::from_slice(bytes).map_err(|e| format!("Parse error: {e}"))
    }

    #[test]
    fn the_nesting_limit_is_the_byte_scans_at_every_depth() {
        // Brackets inside strings (escaped quotes too) do not count; both container kinds do.
        for n in 0..80 {
            let open: String = (0..n)
                .map(|i| if i % 2 == 0 { "[" } else { "{\"k\":" })
                .collect();
            let close: String = (0..n)
                .rev()
                .map(|i| if i % 2 == 0 { "]" } else { "}" })
                .collect();
            for inner in [r#""[{\"[""#, "1", "[]", "{}"] {
                for tail in ["", " ", "x", "]"] {
                    let doc = format!("{open}{inner}{close}{tail}");
                    for max in [0, 1, 2, 40, 64, 79, 100] {
                        let ours = parse_value(doc.as_bytes(), max).map_err(|r| r.message);
                        assert_eq!(ours, two_pass(doc.as_bytes(), max), "{doc} at {max}");
                    }
                }
            }
        }
    }

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 64),
            Ok(Message::Request { .. })
        ));
        assert!(matches!(
            parse(
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                64
            ),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#, 64),
            Ok(Message::Response { .. })
        ));
    }

    #[test]
    fn one_pass_classifies_as_removal_by_key_did() {
        let ids = [
            json!(1),
            json!("a"),
            json!(-3),
            json!(1.5),
            json!(null),
            json!([1]),
        ];
        let mut bodies = vec![Map::new()];
        for id in ids.iter().map(Some).chain([None]) {
            for version in [Some(json!("2.0")), Some(json!("1.0")), Some(json!(2)), None] {
                for method in [Some(json!("ping")), Some(json!(7)), None] {
                    for params in [
                        Some(json!({"a": 1})),
                        Some(json!([1])),
                        Some(json!(3)),
                        None,
                    ] {
                        for extra in [
                            None,
                            Some(("result", json!({}))),
                            Some(("error", json!({"code": 1}))),
                            Some(("x", json!(true))),
                        ] {
                            let mut m = Map::new();
                            let members = [
                                ("id", id.cloned()),
                                ("jsonrpc", version.clone()),
                                ("method", method.clone()),
                                ("params", params.clone()),
                            ];
                            for (k, v) in members {
                                if let Some(v) = v {
                                    m.insert(k.into(), v);
                                }
                            }
                            if let Some((k, v)) = &extra {
                                m.insert((*k).into(), v.clone());
                            }
                            bodies.push(m);
                        }
                    }
                }
            }
        }
        for body in bodies {
            let one_pass = classify(Value::Object(body.clone()));
            assert_eq!(one_pass, classify_by_removal(body.clone()), "{body:?}");
        }
    }

    #[test]
    fn rejects_bad_envelopes() {
        let cases: [(&[u8], i64); 8] = [
            (b"{not json", PARSE_ERROR),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                INVALID_REQUEST,
            ),
            (br#"{"id":1,"method":"ping"}"#, INVALID_REQUEST),
            (
                br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                INVALID_REQUEST,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"method":5}"#, INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                INVALID_REQUEST,
            ),
        ];
        for (body, code) in cases {
            let err = parse(body, 64).expect_err(std::str::from_utf8(body).unwrap());
            assert_eq!(err.code, code, "{}", std::str::from_utf8(body).unwrap());
        }
        let err = parse(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#, 64).unwrap_err();
        assert_eq!(err.id, json!(7));
    }

    #[test]
    fn depth_limit_ignores_brackets_in_strings() {
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(depth_exceeds(deep.as_bytes(), 64));
        assert!(!depth_exceeds(
            br#"{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"["}"#,
            4
        ));
        assert_eq!(
            parse(deep.as_bytes(), 64).unwrap_err().code,
            INVALID_REQUEST
        );
    }
}
