//! Backend credentials from `backend.oauth`: a token from the backend's own authorization
//! server (client credentials here, token exchange in `exchange`), cached and fetched again
//! before it expires, sent as `Authorization: Bearer` on every backend request, and the token
//! endpoint request both grants share. It must never log a secret or a token, or send a
//! client's own token in place of this one.

use crate::model::{Failure, FailureKind};
use http::HeaderValue;
use serde_json::Value;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lifetime assumed when the token endpoint does not say (`expires_in`).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Least time between two token requests after a failure.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(2);

/// A backend's client-credentials grant and its cached token.
pub struct ClientCredentials {
    pub endpoint: TokenEndpoint,
    cached: Mutex<Option<(Instant, HeaderValue)>>,
    failed: Mutex<Option<Instant>>,
    refresh: tokio::sync::Mutex<()>,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// When a token of `lifetime` is fetched again: a fifth of its life (at most a minute) before
/// it expires, so no request goes out with a token about to lapse.
pub fn refresh_at(fetched: Instant, lifetime: Duration) -> Instant {
    let margin = (lifetime / 5).min(Duration::from_secs(60));
    fetched + lifetime.saturating_sub(margin)
}

/// The HTTP client of a token endpoint: no redirects, `timeout` per request.
pub(super) fn token_client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())
}

fn unavailable(why: &str) -> Failure {
    Failure::new(
        FailureKind::Unavailable,
        format!("the backend's credentials are unavailable: {why}"),
    )
}

impl ClientCredentials {
    pub fn new(endpoint: TokenEndpoint) -> ClientCredentials {
        ClientCredentials {
            endpoint,
            cached: Mutex::new(None),
            failed: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    fn fresh(&self) -> Option<HeaderValue> {
        let c = self.cached.lock().ok()?;
        c.as_ref()
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, v)| v.clone())
    }

    /// The `Authorization` value for a backend request: the cached token, or a new one.
    pub async fn authorization(&self) -> Result<HeaderValue, Failure> {
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        let _one = self.refresh.lock().await;
        if let Some(v) = self.fresh() {
            return Ok(v);
        }
        let recent_failure = self
            .failed
            .lock()
            .ok()
            .and_then(|f| *f)
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE);
        if recent_failure {
            return Err(unavailable("the token endpoint failed just now"));
        }
        match self.fetch().await {
            Ok((value, lifetime)) => {
                if let Ok(mut c) = self.cached.lock() {
                    *c = Some((refresh_at(Instant::now(), lifetime), value.clone()));
                }
                Ok(value)
            }
            Err(why) => {
                tracing::warn!(token_url = %self.endpoint.url, client_id = %self.endpoint.client_id, reason = %why, "backend token request failed");
                if let Ok(mut f) = self.failed.lock() {
                    *f = Some(Instant::now());
                }
                Err(unavailable(&why))
            }
        }
    }

    async fn fetch(&self) -> Result<(HeaderValue, Duration), String> {
        let form = [("grant_type", "client_credentials")];
        self.endpoint.token(&form).await.map_err(|e| e.to_string())
    }
}

/// Why a token endpoint gave no token. Its text never holds a token or a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenFailure {
    /// The endpoint answered 4xx: the request was refused (`error` is RFC 6749's code).
    #[error("the token endpoint refused the request (HTTP {status}{})", .error.as_deref().map(|e| format!(", {e}")).unwrap_or_default())]
    Refused { status: u16, error: Option<String> },
    /// Unreachable, 5xx, or an answer that is not a usable token response.
    #[error("{0}")]
    Unavailable(String),
}

/// A backend's token endpoint and portico's client there (HTTP Basic, RFC 6749 §2.3.1), with
/// the `scope` and RFC 8707 `resource` every grant of that backend asks for: what the
/// client-credentials and token-exchange grants share.
pub struct TokenEndpoint {
    pub url: String,
    pub client_id: String,
    client_secret: String,
    pub scope: Option<String>,
    pub resource: Option<String>,
    client: reqwest::Client,
}

impl fmt::Debug for TokenEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// An RFC 6749 error code as it may be shown: its own characters only, at most 64.
fn error_code(body: &Value) -> Option<String> {
    let e = body.get("error")?.as_str()?;
    let ok =
        !e.is_empty() && e.len() <= 64 && e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| e.to_string())
}

impl TokenEndpoint {
    pub fn new(
        url: String,
        client_id: String,
        client_secret: String,
        scope: Option<String>,
        resource: Option<String>,
        timeout: Duration,
    ) -> Result<TokenEndpoint, String> {
        Ok(TokenEndpoint {
            client: token_client(timeout)?,
            url,
            client_id,
            client_secret,
            scope,
            resource,
        })
    }

    /// Posts `form`, with the endpoint's `scope` and `resource` when set, and reads the
    /// Bearer token of the answer and its lifetime.
    pub async fn token(
        &self,
        form: &[(&str, &str)],
    ) -> Result<(HeaderValue, Duration), TokenFailure> {
        let extra = [("scope", &self.scope), ("resource", &self.resource)];
        let extra = extra
            .iter()
            .filter_map(|(k, v)| v.as_deref().map(|v| (*k, v)));
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().copied().chain(extra))
            .finish();
        let resp = self
            .client
            .post(&self.url)
            .basic_auth(&self.client_id, Some(&self.client_secret))
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| TokenFailure::Unavailable(e.without_url().to_string()))?;
        let status = resp.status();
        if status.is_client_error() {
            let error = resp
                .json::<Value>()
                .await
                .ok()
                .as_ref()
                .and_then(error_code);
            return Err(TokenFailure::Refused {
                status: status.as_u16(),
                error,
            });
        }
        if !status.is_success() {
            return Err(TokenFailure::Unavailable(format!(
                "the token endpoint answered HTTP {}",
                status.as_u16()
            )));
        }
        let unusable = |m: &str| TokenFailure::Unavailable(m.to_string());
        let body: Value = resp
            .json()
            .await
            .map_err(|_| unusable("the token response is not JSON"))?;
        let token = body
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| unusable("the token response has no `access_token`"))?;
        let kind = body
            .get("token_type")
            .and_then(Value::as_str)
            .unwrap_or("Bearer");
        // RFC 8693 §2.2.1: `N_A` is the type of a token that is not an access token.
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(TokenFailure::Unavailable(format!(
                "token type `{}` is not Bearer",
                kind.chars().take(32).collect::<String>()
            )));
        }
        let lifetime = body
            .get("expires_in")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| unusable("the access token is not a header value"))?;
        value.set_sensitive(true);
        Ok((value, lifetime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_refreshed_a_fifth_of_their_life_early_at_most_a_minute() {
        let t = Instant::now();
        assert_eq!(
            refresh_at(t, Duration::from_secs(10)),
            t + Duration::from_secs(8)
        );
        assert_eq!(
            refresh_at(t, Duration::from_secs(3600)),
            t + Duration::from_secs(3540)
        );
        assert_eq!(refresh_at(t, Duration::ZERO), t);
    }
}
