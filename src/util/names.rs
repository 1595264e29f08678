//! The names of the HTTP headers portico looks up on every request, made once as `HeaderName`s.
//! A leaf of `util`: it must never hold a header's value or a rule about it, only its name.
//!
//! `HeaderMap::get("mcp-session-id")` parses and hashes the name from its text at each lookup
//! (about 300 instructions); a `HeaderName` made by `from_static` is parsed when compiled.

use http::HeaderName;

/// `Mcp-Session-Id` (MCP Streamable HTTP, 2025 era).
pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method` (2026-07-28).
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name` (2026-07-28).
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// `X-Api-Key`, the API key credential.
pub const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");
/// `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// `X-Idempotency-Key`, its older spelling.
pub const X_IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("x-idempotency-key");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_the_one_parsed_from_its_text() {
        for (name, text) in [
            (MCP_SESSION_ID, "Mcp-Session-Id"),
            (MCP_PROTOCOL_VERSION, "MCP-Protocol-Version"),
            (MCP_METHOD, "Mcp-Method"),
            (MCP_NAME, "Mcp-Name"),
            (X_API_KEY, "X-Api-Key"),
            (IDEMPOTENCY_KEY, "Idempotency-Key"),
            (X_IDEMPOTENCY_KEY, "X-Idempotency-Key"),
        ] {
            let parsed = HeaderName::from_bytes(text.as_bytes()).unwrap();
            assert_eq!(parsed, name, "{text}");
            // A map filled from the text a client sends answers a lookup by the constant.
            let mut map = http::HeaderMap::new();
            map.insert(parsed, http::HeaderValue::from_static("v"));
            assert!(map.contains_key(&name), "{text}");
        }
    }
}
