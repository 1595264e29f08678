//! The two HTTP messages exchanged with a REST backend, as plain data: the request portico sends
//! and the answer it receives. A leaf: it must never build, send or interpret them.

use bytes::Bytes;
use http::{HeaderMap, Method};

/// A request ready for the REST client (the default, a `GET` of no URL, is a placeholder).
#[derive(Debug, Clone, Default)]
pub struct RestRequest {
    pub method: Method,
    pub url: String,
    pub headers: HeaderMap,
    /// A lent body is a slice of the MCP request's own buffer (`translate::lent`).
    pub body: Option<Bytes>,
}

/// The backend's answer as received.
#[derive(Debug, Clone)]
pub struct RestResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}
