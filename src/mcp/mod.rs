//! MCP edges: JSON-RPC envelopes, both protocol eras, Streamable HTTP.
//! Transport and protocol rules only; tool semantics belong to `forward` and the bindings.

pub mod answer;
pub mod client;
pub mod handler;
pub mod http;
pub mod input;
pub mod jsonrpc;
pub mod notify;
pub mod session;
pub mod stdio;
pub mod tasks;

/// Revisions served with the `initialize` handshake and sessions, newest first.
pub const LEGACY_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Stateless revisions (per-request `_meta`, `server/discover`).
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];
/// Version assumed for a session-era request that names none (per the 2025 transport rules).
pub const DEFAULT_LEGACY_VERSION: &str = "2025-03-26";

/// Every revision portico speaks, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(LEGACY_VERSIONS.iter())
        .copied()
        .collect()
}
