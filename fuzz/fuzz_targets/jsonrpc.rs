//! The JSON-RPC/MCP message decoder: `parse` (nesting limit, then serde, then classification)
//! on arbitrary bytes. It must never panic, a value it accepts is never nested deeper than the
//! limit, an id it echoes in a rejection is always a valid JSON-RPC id (or null), the reader
//! (`json_text::from_slice`) reads every input exactly as serde_json does, and the answer
//! writer (`json_text`) writes every accepted value exactly as serde_json does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portico::mcp::jsonrpc::{self, Message};
use serde_json::Value;

const MAX_DEPTH: usize = 64;

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn valid_id(id: &Value) -> bool {
    id.is_null() || id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()
}

fuzz_target!(|data: &[u8]| {
    match (
        portico::json_text::from_slice(data),
        serde_json::from_slice::<Value>(data),
    ) {
        (Ok(ours), Ok(theirs)) => {
            assert_eq!(ours, theirs, "json_text read another value");
            // `Map` equality ignores member order; the text does not.
            assert_eq!(
                portico::json_text::to_vec(&ours),
                portico::json_text::to_vec(&theirs),
                "json_text read the members in another order"
            );
        }
        (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string()),
        (ours, theirs) => panic!("json_text read {ours:?}, serde_json {theirs:?}"),
    }
    match jsonrpc::parse_value(data, MAX_DEPTH) {
        Ok(value) => {
            assert_eq!(
                portico::json_text::to_vec(&value),
                serde_json::to_vec(&value).unwrap_or_default(),
                "json_text differs from serde_json"
            );
            assert!(
                depth(&value) <= MAX_DEPTH,
                "accepted a value nested deeper than the limit"
            );
            match jsonrpc::classify(value) {
                Ok(Message::Request { id, params, .. }) => {
                    assert!(valid_id(&id) && !id.is_null());
                    assert!(params.is_none_or(|p| p.is_object() || p.is_array()));
                }
                Ok(Message::Notification { params, .. }) => {
                    assert!(params.is_none_or(|p| p.is_object() || p.is_array()));
                }
                Ok(Message::Response { id, body }) => {
                    assert!(valid_id(&id));
                    assert!(body.get("result").is_some() || body.get("error").is_some());
                }
                Err(r) => {
                    assert!(valid_id(&r.id));
                    let e = jsonrpc::error(&r.id, r.code, &r.message, None);
                    assert!(serde_json::to_vec(&e).is_ok());
                }
            }
        }
        Err(r) => assert!(r.id.is_null()),
    }
    // The one-call entry point agrees with the two steps.
    let _ = jsonrpc::parse(data, MAX_DEPTH);
});
