//! Backend credentials by OAuth 2.0 token exchange (RFC 8693, `backend.oauth.grant:
//! token_exchange`): the caller's validated MCP access token is exchanged at the backend's
//! authorization server for a token of the same subject, cached per subject until shortly
//! before it (or the caller's token) expires. It must never send the caller's token anywhere
//! but that token endpoint, log or echo a token, or exchange a token MCP authorization did not
//! accept.

use super::oauth::{TokenEndpoint, TokenFailure, refresh_at};
use crate::auth::resource::McpPrincipal;
use crate::model::{Failure, FailureKind};
use http::HeaderValue;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// RFC 8693 §2.1's grant type.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: the subject token is an OAuth access token (JWT or opaque alike).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Most subjects whose backend tokens are kept.
const CACHE_CAPACITY: u64 = 10_000;
/// Longest a backend token is kept, whatever its lifetime.
const CACHE_CEILING: Duration = Duration::from_secs(3600);

/// sha256(issuer, subject, client id, scopes) -> (refresh at, `Authorization` value).
type Cache = moka::sync::Cache<[u8; 32], (Instant, HeaderValue)>;

/// A backend's token-exchange grant and the tokens it obtained, per subject.
pub struct TokenExchange {
    pub endpoint: TokenEndpoint,
    /// RFC 8693 `audience` of the backend token.
    pub audience: Option<String>,
    cache: Cache,
}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchange")
            .field("endpoint", &self.endpoint)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// The cache key of `p`: who the token speaks for and what it grants.
fn key(p: &McpPrincipal) -> [u8; 32] {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    for part in [
        p.token.issuer.as_str(),
        p.token.subject.as_str(),
        p.token.client_id.as_deref().unwrap_or(""),
    ] {
        ctx.update(part.as_bytes());
        ctx.update(&[0]);
    }
    let mut scopes = p.token.scopes.clone();
    scopes.sort();
    ctx.update(scopes.join(" ").as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The bearer token of an `Authorization` value (`Bearer <token>`, scheme in any case).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// When a backend token fetched now with `lifetime` is fetched again: a fifth of its life
/// early, and never after the caller's token expires (`subject_exp`, epoch seconds).
pub fn valid_until(now: Instant, lifetime: Duration, subject_exp: i64) -> Instant {
    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let left = Duration::from_secs(subject_exp.saturating_sub(epoch).max(0) as u64);
    refresh_at(now, lifetime).min(now + left)
}

fn failure(kind: FailureKind, why: &str) -> Failure {
    Failure::new(
        kind,
        format!("the backend needs the caller's identity, and {why}"),
    )
}

impl TokenExchange {
    pub fn new(endpoint: TokenEndpoint, audience: Option<String>) -> TokenExchange {
        TokenExchange {
            endpoint,
            audience,
            cache: moka::sync::Cache::builder()
                .max_capacity(CACHE_CAPACITY)
                .time_to_live(CACHE_CEILING)
                .build(),
        }
    }

    /// The `Authorization` value for the current call's backend request: the backend token of
    /// the call's subject, cached or exchanged now.
    pub async fn authorization(&self) -> Result<HeaderValue, Failure> {
        let creds = crate::auth::transport::current();
        let (Some(principal), Some(Ok(header))) = (
            creds.as_ref().and_then(|c| c.mcp.clone()),
            creds.as_ref().and_then(|c| c.authorization.clone()),
        ) else {
            return Err(failure(
                FailureKind::Unauthenticated,
                "this call carries no MCP access token to exchange (MCP authorization is off, or the call came over stdio)",
            ));
        };
        let Some(subject_token) = bearer(&header) else {
            return Err(failure(
                FailureKind::Unauthenticated,
                "this call's Authorization header is not a bearer token",
            ));
        };
        let k = key(&principal);
        if let Some((until, value)) = self.cache.get(&k)
            && Instant::now() < until
        {
            return Ok(value);
        }
        match self.exchange(subject_token).await {
            Ok((value, lifetime)) => {
                let until = valid_until(Instant::now(), lifetime, principal.token.expires_at);
                self.cache.insert(k, (until, value.clone()));
                Ok(value)
            }
            Err(e) => {
                tracing::warn!(token_url = %self.endpoint.url, client_id = %self.endpoint.client_id, principal = %principal.id(), reason = %e, "backend token exchange failed");
                Err(match e {
                    TokenFailure::Refused { .. } => failure(
                        FailureKind::Forbidden,
                        &format!(
                            "its authorization server would not exchange the caller's token: {e}"
                        ),
                    ),
                    TokenFailure::Unavailable(why) => failure(
                        FailureKind::Unavailable,
                        &format!("its authorization server is unavailable: {why}"),
                    ),
                })
            }
        }
    }

    /// The exchange request of RFC 8693 §2.1, authenticated as portico's client.
    async fn exchange(&self, subject_token: &str) -> Result<(HeaderValue, Duration), TokenFailure> {
        let mut form = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(a) = &self.audience {
            form.push(("audience", a));
        }
        self.endpoint.token(&form).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values_give_their_token_only() {
        assert_eq!(bearer("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer("bearer  abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn a_backend_token_is_not_kept_past_the_callers_token() {
        let now = Instant::now();
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        // The backend token lives an hour, the caller's token 30 s more.
        let until = valid_until(now, Duration::from_secs(3600), epoch + 30);
        assert!(until <= now + Duration::from_secs(30));
        // The caller's token outlives the backend token: refreshed a fifth early (at most 60 s).
        let until = valid_until(now, Duration::from_secs(100), epoch + 3600);
        assert_eq!(until, now + Duration::from_secs(80));
        // An expired caller's token: nothing is kept.
        assert_eq!(valid_until(now, Duration::from_secs(100), epoch - 5), now);
    }
}
