//! One trusted authorization server: its metadata (RFC 8414, else OpenID discovery) fetched
//! through `auth::fetch`, checked to name the configured issuer, and its JWK Set; both cached.
//! It must never fetch from a URL other than the configured issuer's well-known locations and
//! the `jwks_uri` they name, or keep metadata past `METADATA_TTL`.

use crate::auth::fetch::{self, Limits};
use crate::auth::policy::Jwks;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long fetched metadata (and the key source it names) is used before a refetch.
pub const METADATA_TTL: Duration = Duration::from_secs(3600);
/// Least time between two attempts after a failed discovery.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// What portico uses of an authorization server's metadata.
pub struct Discovered {
    /// The keys at its `jwks_uri` (fetched, cached and refetched on an unknown `kid`).
    pub jwks: Jwks,
    /// Its RFC 7662 `introspection_endpoint`, checked like `jwks_uri`.
    pub introspection: Option<String>,
}

/// A trusted issuer and what was learned of it.
pub struct Issuer {
    pub url: String,
    limits: Limits,
    state: Mutex<State>,
    refresh: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    found: Option<(Instant, Arc<Discovered>)>,
    failed: Option<(Instant, String)>,
}

/// The metadata locations of `issuer`, in the order the MCP specification tries them: RFC 8414
/// path insertion, OpenID Connect path insertion, OpenID Connect path appending (the last two
/// are one when the issuer has no path).
pub fn metadata_urls(issuer: &str) -> Result<Vec<String>, String> {
    let u = url::Url::parse(issuer).map_err(|e| format!("issuer `{issuer}`: {e}"))?;
    let origin = u.origin().ascii_serialization();
    let path = u.path().trim_end_matches('/');
    let mut urls = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    Ok(urls)
}

impl Issuer {
    pub fn new(url: &str, allow_hosts: &[String]) -> Issuer {
        Issuer {
            url: url.to_string(),
            limits: Limits {
                allow_hosts: allow_hosts.to_vec(),
                ..Limits::default()
            },
            state: Mutex::new(State::default()),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// The fetch limits for this issuer's URLs.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn cached(&self) -> Option<Result<Arc<Discovered>, String>> {
        let s = self.state.lock().ok()?;
        if let Some((at, d)) = &s.found
            && at.elapsed() < METADATA_TTL
        {
            return Some(Ok(d.clone()));
        }
        match &s.failed {
            Some((at, e)) if at.elapsed() < RETRY_AFTER_FAILURE => Some(Err(e.clone())),
            _ => None,
        }
    }

    /// The issuer's metadata and keys: cached, or discovered now (one discovery at a time).
    pub async fn discovered(&self) -> Result<Arc<Discovered>, String> {
        if let Some(c) = self.cached() {
            return c;
        }
        let _one = self.refresh.lock().await;
        if let Some(c) = self.cached() {
            return c;
        }
        let result = self.discover().await.map(Arc::new);
        if let Ok(mut s) = self.state.lock() {
            match &result {
                Ok(d) => {
                    s.found = Some((Instant::now(), d.clone()));
                    s.failed = None;
                }
                Err(e) => s.failed = Some((Instant::now(), e.clone())),
            }
        }
        result
    }

    async fn discover(&self) -> Result<Discovered, String> {
        let mut last = String::from("no metadata location");
        for url in metadata_urls(&self.url)? {
            let body = match fetch::get(&url, &self.limits).await {
                Ok(b) => b,
                Err(e) => {
                    last = format!("{url}: {e}");
                    continue;
                }
            };
            let doc: Value = serde_json::from_slice(&body)
                .map_err(|_| format!("{url}: the metadata is not JSON"))?;
            // RFC 8414 §3.3: the metadata must name the issuer it was fetched for.
            if doc.get("issuer").and_then(Value::as_str) != Some(self.url.as_str()) {
                return Err(format!("{url}: the metadata names another issuer"));
            }
            let jwks_uri = doc
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{url}: the metadata has no `jwks_uri`"))?;
            fetch::check_target(jwks_uri, &self.limits)
                .await
                .map_err(|e| format!("jwks_uri: {e}"))?;
            let introspection = match doc.get("introspection_endpoint").and_then(Value::as_str) {
                Some(u) => {
                    fetch::check_target(u, &self.limits)
                        .await
                        .map_err(|e| format!("introspection_endpoint: {e}"))?;
                    Some(u.to_string())
                }
                None => None,
            };
            return Ok(Discovered {
                introspection,
                jwks: Jwks::Url {
                    url: jwks_uri.to_string(),
                    limits: self.limits.clone(),
                    cache: Mutex::new(None),
                    refresh: tokio::sync::Mutex::new(()),
                },
            });
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_locations_follow_the_mcp_order() {
        assert_eq!(
            metadata_urls("https://as.example").unwrap(),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example/tenant1/").unwrap(),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
    }
}
