//! The HTTP-layer credentials of the request a tool call arrived on (`Authorization`,
//! `X-API-Key`, RFC 9421 signature headers with the body they cover, the verified TLS client
//! certificate), carried to `forward` in a task-local so no transport type reaches it. It must
//! never log a credential or keep one beyond the request.

use bytes::Bytes;
use http::HeaderMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};

/// The TLS client certificate the listener verified against `--tls-client-ca` (set by the accept
/// loop as a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Lower-case hex SHA-256 of the leaf certificate's DER bytes.
    pub sha256: String,
}

impl ClientCert {
    /// The fingerprint of a DER certificate.
    pub fn from_der(der: &[u8]) -> ClientCert {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
        ClientCert {
            sha256: d.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// The MCP request as received: what an RFC 9421 signature covers and what the backend header
/// allowlist forwards.
#[derive(Debug)]
pub struct RequestInfo {
    pub method: String,
    /// `host[:port]`: the URI authority (HTTP/2) or the `Host` header.
    pub authority: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    /// The raw body bytes, set once the body is read.
    pub body: OnceLock<Bytes>,
}

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
    /// The request itself (signature verification, forwarded headers).
    pub request: Option<Arc<RequestInfo>>,
    /// The verified TLS client certificate of the connection.
    pub client_cert: Option<ClientCert>,
    /// The key backend requests are signed with (the serving listener's webhook key).
    pub backend_key: Option<Arc<crate::webhook::keys::SigningKey>>,
    /// The principal of the request's MCP access token, when MCP authorization checked one
    /// (the `Authorization` header was that token: it is not a business credential, and is
    /// never forwarded).
    pub mcp: Option<Arc<super::resource::principal::McpPrincipal>>,
    /// The `Mcp-Session-Id` the request names (2025 era; the transport answers an unknown one
    /// before any method runs).
    pub session: Option<String>,
}

impl fmt::Debug for HttpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpCredentials")
            .field("authorization", &self.authorization.is_some())
            .field("api_key", &self.api_key.is_some())
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

fn one(headers: &HeaderMap, name: &http::HeaderName) -> Option<Result<String, ()>> {
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
            authorization: one(headers, &http::header::AUTHORIZATION),
            api_key: one(headers, &crate::util::names::X_API_KEY),
            sign_with: Default::default(),
            request: None,
            client_cert: None,
            backend_key: None,
            mcp: None,
            session: one(headers, &crate::util::names::MCP_SESSION_ID).and_then(Result::ok),
        }
    }

    /// The credentials of `req`, the connection's client certificate (a `ClientCert`
    /// extension) and the principal of its checked MCP access token (an `McpPrincipal`
    /// extension). With `keep_request`, the request is kept too (method, target, every
    /// header): what signature checks and forwarded headers read, and a copy of the headers
    /// that a configuration with neither does not pay for.
    pub fn from_request<B>(req: &http::Request<B>, keep_request: bool) -> HttpCredentials {
        let headers = req.headers();
        let request = keep_request.then(|| {
            let authority = req
                .uri()
                .authority()
                .map(|a| a.as_str().to_string())
                .or_else(|| {
                    headers
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            Arc::new(RequestInfo {
                method: req.method().as_str().to_string(),
                authority,
                path: req.uri().path().to_string(),
                query: req.uri().query().map(str::to_string),
                headers: headers.clone(),
                body: OnceLock::new(),
            })
        });
        HttpCredentials {
            request,
            client_cert: req.extensions().get::<ClientCert>().cloned(),
            mcp: req
                .extensions()
                .get::<Arc<super::resource::principal::McpPrincipal>>()
                .cloned(),
            ..HttpCredentials::from_headers(headers)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.authorization.is_none() && self.api_key.is_none()
    }
}

tokio::task_local! {
    static HTTP: HttpCredentials;
}

/// Runs `f` with `creds` as the current request's HTTP credentials. A plain function returning
/// the wrapper, not an `async fn`: that would hold `f` twice and double the request's state.
pub fn scope<F: Future>(creds: HttpCredentials, f: F) -> impl Future<Output = F::Output> {
    HTTP.scope(creds, f)
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

/// Records the current request's raw body (for `Content-Digest` checks); no-op over stdio.
pub fn record_body(body: &Bytes) {
    let _ = HTTP.try_with(|c| {
        if let Some(r) = &c.request {
            let _ = r.body.set(body.clone());
        }
    });
}

/// The key the current request's backend calls are signed with (`None` over stdio).
pub fn backend_key() -> Option<Arc<crate::webhook::keys::SigningKey>> {
    HTTP.try_with(|c| c.backend_key.clone()).ok().flatten()
}

/// The current MCP HTTP request (`None` over stdio).
pub fn request() -> Option<Arc<RequestInfo>> {
    HTTP.try_with(|c| c.request.clone()).ok().flatten()
}

/// The principal of the current request's MCP access token (`None`: MCP authorization is off,
/// or stdio).
pub fn mcp_principal() -> Option<Arc<super::resource::principal::McpPrincipal>> {
    HTTP.try_with(|c| c.mcp.clone()).ok().flatten()
}

/// The session the current request names (`None`: stateless, or stdio).
pub fn session() -> Option<String> {
    HTTP.try_with(|c| c.session.clone()).ok().flatten()
}

/// The current request's HTTP credentials (`None` over stdio).
pub fn current() -> Option<HttpCredentials> {
    HTTP.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both request wrappers (these credentials, and `ops::otel::scope`'s trace context) hold
    /// the wrapped future once: an `async fn` would hold it twice, and the request future is
    /// moved several times per call.
    #[test]
    fn the_request_scopes_add_little_to_the_future_they_wrap() {
        let work = || async {
            let buf = [7u8; 8192];
            tokio::task::yield_now().await;
            buf.iter().map(|b| u64::from(*b)).sum::<u64>()
        };
        let inner = std::mem::size_of_val(&work());
        let wrapped = std::mem::size_of_val(&scope(HttpCredentials::default(), work()));
        assert!(
            inner >= 8192 && wrapped < inner + 512,
            "{inner} -> {wrapped}"
        );
        let traced = std::mem::size_of_val(&crate::ops::otel::scope(None, work()));
        assert!(traced < inner + 512, "{inner} -> {traced}");
    }
}
