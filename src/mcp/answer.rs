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

impl Answer {
    /// The JSON-RPC response for request `id`.
    pub fn into_message(self, id: &Value) -> Value {
        match self {
            Answer::Result(r) => super::jsonrpc::result(id, r),
            Answer::Written(w) => super::jsonrpc::result(id, w.to_value()),
            // An HTTP-only answer framed as JSON-RPC (an SSE reply already started): -32603.
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
