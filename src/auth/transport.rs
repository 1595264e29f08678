//! The HTTP-layer credentials of the request a tool call arrived on (`Authorization`,
//! `X-API-Key`), carried to `forward` in a task-local so no transport type reaches it. It must
//! never log a credential or keep one beyond the request.

use http::HeaderMap;
use std::fmt;
use std::future::Future;

/// Credentials from the MCP request's HTTP headers, and the response-signing request of the
/// call it carries (shared by clones, so `forward` can set what the edge reads).
#[derive(Clone, Default)]
pub struct HttpCredentials {
    /// The key to sign the response with, when the called tool asks for it.
    pub sign_with:
        std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<crate::webhook::keys::SigningKey>>>>,
    /// `Authorization` value; `Err` when the header is not visible ASCII or is repeated.
    pub authorization: Option<Result<String, ()>>,
    /// `X-API-Key` value, same rules.
    pub api_key: Option<Result<String, ()>>,
}

impl fmt::Debug for HttpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpCredentials")
            .field("authorization", &self.authorization.is_some())
            .field("api_key", &self.api_key.is_some())
            .finish()
    }
}

fn one(headers: &HeaderMap, name: &str) -> Option<Result<String, ()>> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return Some(Err(()));
    }
    Some(
        first
            .to_str()
            .ok()
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().to_string())
            .ok_or(()),
    )
}

impl HttpCredentials {
    pub fn from_headers(headers: &HeaderMap) -> HttpCredentials {
        HttpCredentials {
            authorization: one(headers, "authorization"),
            api_key: one(headers, "x-api-key"),
            sign_with: Default::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.authorization.is_none() && self.api_key.is_none()
    }
}

tokio::task_local! {
    static HTTP: HttpCredentials;
}

/// Runs `f` with `creds` as the current request's HTTP credentials.
pub async fn scope<F: Future>(creds: HttpCredentials, f: F) -> F::Output {
    HTTP.scope(creds, f).await
}

/// Wraps `f` so it sees the current credentials even when polled later, outside the request's
/// scope (a streamed response body).
pub fn carry<F: Future>(f: F) -> impl Future<Output = F::Output> {
    HTTP.scope(current().unwrap_or_default(), f)
}

/// Marks the current HTTP response for signing with `key` (no-op over stdio).
pub fn sign_response_with(key: std::sync::Arc<crate::webhook::keys::SigningKey>) {
    let _ = HTTP.try_with(|c| {
        if let Ok(mut s) = c.sign_with.lock() {
            *s = Some(key);
        }
    });
}

/// The key the current response must be signed with, if a tool asked for it.
pub fn response_signer() -> Option<std::sync::Arc<crate::webhook::keys::SigningKey>> {
    HTTP.try_with(|c| c.sign_with.lock().ok().and_then(|s| s.clone()))
        .ok()
        .flatten()
}

/// The current request's HTTP credentials (`None` over stdio).
pub fn current() -> Option<HttpCredentials> {
    HTTP.try_with(Clone::clone).ok()
}
