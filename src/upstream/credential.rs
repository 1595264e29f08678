//! The backend credential a mapping's `backend.oauth` compiles to: one of the two grants
//! (`oauth`'s client credentials, `exchange`'s token exchange). It must never hold or choose a
//! client's own token itself; each grant does its own caching.

use crate::model::Failure;
use http::HeaderValue;

/// The backend's credential from `backend.oauth`: portico's own token (client credentials) or
/// the caller's token exchanged for one (RFC 8693).
#[derive(Debug)]
pub enum BackendCredential {
    ClientCredentials(super::oauth::ClientCredentials),
    TokenExchange(super::exchange::TokenExchange),
}

impl BackendCredential {
    /// The `Authorization` value for the current call's backend request.
    pub async fn authorization(&self) -> Result<HeaderValue, Failure> {
        match self {
            BackendCredential::ClientCredentials(c) => c.authorization().await,
            BackendCredential::TokenExchange(x) => x.authorization().await,
        }
    }
}
