//! The outcome of one MCP request before transport framing, and its JSON-RPC message.
//! A leaf of `mcp`: it must never know about sessions, streams or the configuration.

use super::jsonrpc::INTERNAL_ERROR;
use serde_json::Value;

/// The outcome of one request, before transport framing.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Result(Value),
    /// A tool result written as text on the hot path (`crate::binding::Written`).
    Written(crate::binding::Written),
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
        http_status: Option<u16>,
    },
}

/// JSON-RPC code of a call refused for a missing scope where HTTP 403 can no longer be sent:
/// the server-error range's "Forbidden", as the plain binding's 403 uses it.
pub const FORBIDDEN: i64 = -32003;

/// The JSON-RPC message and `data` of an `insufficient_scope` problem (RFC 6750 §3.1 in
/// JSON-RPC form): `data.error`, `data.scope` (what to ask for: the token's scopes and the
/// missing ones, as the `WWW-Authenticate` challenge says), `data.required`,
/// `data.resource_metadata` and the challenge itself as `data.www_authenticate`.
fn scope_error(problem: Value) -> (String, Value) {
    let text = |k: &str| problem.get(k).and_then(Value::as_str).unwrap_or_default();
    let message = format!("Forbidden: insufficient_scope: {}", text("detail"));
    let data = serde_json::json!({
        "error": "insufficient_scope",
        "scope": text("scope"),
        "required": problem.get("required").cloned().unwrap_or(Value::Null),
        "resource_metadata": text("resource_metadata"),
        "www_authenticate": text("challenge"),
    });
    (message, data)
}

impl Answer {
    /// The JSON-RPC response for request `id`.
    pub fn into_message(self, id: &Value) -> Value {
        match self {
            Answer::Result(r) => super::jsonrpc::result(id, r),
            Answer::Written(w) => super::jsonrpc::result(id, w.to_value()),
            // MCP authorization's `insufficient_scope` where the HTTP status is already sent:
            // a JSON-RPC error naming the scope to step up to (see `scope_error`).
            Answer::Error {
                code: crate::binding::HTTP_PROBLEM,
                data: Some(problem),
                ..
            } if problem.get("code").and_then(Value::as_str) == Some("insufficient_scope") => {
                let (message, data) = scope_error(problem);
                super::jsonrpc::error(id, FORBIDDEN, &message, Some(data))
            }
            // Another HTTP-only answer framed as JSON-RPC (an SSE reply already started): -32603.
            Answer::Error {
                code: crate::binding::HTTP_PROBLEM,
                message,
                data,
                ..
            } => super::jsonrpc::error(id, INTERNAL_ERROR, &message, data),
            Answer::Error {
                code,
                message,
                data,
                ..
            } => super::jsonrpc::error(id, code, &message, data),
        }
    }

    /// An error answer without data or HTTP status.
    pub(super) fn error(code: i64, message: impl Into<String>) -> Self {
        Answer::Error {
            code,
            message: message.into(),
            data: None,
            http_status: None,
        }
    }
}

impl From<crate::binding::Reply> for Answer {
    fn from(r: crate::binding::Reply) -> Answer {
        use crate::binding::Reply;
        match r {
            Reply::Result(v) => Answer::Result(v),
            Reply::Written(w) => Answer::Written(w),
            Reply::Error(e) => Answer::Error {
                code: e.code,
                message: e.message,
                data: e.data,
                http_status: e.http_status,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Where HTTP 403 can no longer be sent, `insufficient_scope` is a JSON-RPC error naming
    /// the scope to step up to, not an internal error.
    #[test]
    fn insufficient_scope_framed_as_json_rpc_names_the_scope() {
        let answer = Answer::Error {
            code: crate::binding::HTTP_PROBLEM,
            message: "Forbidden".into(),
            data: Some(json!({"code": "insufficient_scope", "status": 403,
                "detail": "this tool needs the scope `b`", "scope": "a b", "required": ["b"],
                "resource_metadata": "https://m/.well-known/oauth-protected-resource/mcp",
                "challenge": "Bearer error=\"insufficient_scope\", scope=\"a b\""})),
            http_status: Some(403),
        };
        assert_eq!(
            answer.into_message(&json!(7)),
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": FORBIDDEN,
                "message": "Forbidden: insufficient_scope: this tool needs the scope `b`",
                "data": {"error": "insufficient_scope", "scope": "a b", "required": ["b"],
                    "resource_metadata": "https://m/.well-known/oauth-protected-resource/mcp",
                    "www_authenticate": "Bearer error=\"insufficient_scope\", scope=\"a b\""}}})
        );
        // Another HTTP-only problem stays an internal error.
        let other = Answer::Error {
            code: crate::binding::HTTP_PROBLEM,
            message: "Unauthorized".into(),
            data: Some(json!({"code": "unauthorized"})),
            http_status: Some(401),
        };
        assert_eq!(
            other.into_message(&json!(1))["error"]["code"],
            INTERNAL_ERROR
        );
    }
}
