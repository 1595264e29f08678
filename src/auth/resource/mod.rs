//! MCP authorization: portico as an OAuth 2.1 resource server. Protected resource metadata
//! (RFC 9728), the `Bearer` challenges (RFC 6750, with `resource_metadata` and `scope`), the
//! check of each MCP request's access token, and the scopes each tool needs.
//! It must never log, echo or forward an access token, or fetch from an issuer not configured.

pub mod introspect;
pub mod issuer;
pub mod principal;
pub mod spec;
pub mod token;

use principal::quoted;
pub use principal::{McpPrincipal, TokenPrincipal};
use serde_json::{Value, json};
use spec::McpAuthorization;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use token::TokenError;

/// The well-known path of protected resource metadata (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The resource server's settings from the command line (`--oauth-issuer`, `--oauth-resource`),
/// merged with every mapping file's `mcp_authorization`.
#[derive(Debug, Clone)]
pub struct Options {
    pub issuers: Vec<String>,
    pub resource: Option<String>,
    /// Hosts metadata and keys may be fetched from over plain http (`portico demo` with a
    /// loopback issuer).
    pub allow_hosts: Vec<String>,
    /// Clock skew allowed for `exp`/`nbf`/`iat`, seconds (at most `token::MAX_LEEWAY`).
    pub leeway: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            issuers: Vec::new(),
            resource: None,
            allow_hosts: Vec::new(),
            leeway: 60,
        }
    }
}

/// The settings in force for one request (command line and the loaded mappings).
#[derive(Debug, Clone, Default)]
pub struct Effective {
    /// Introspection client credentials (opaque tokens), from the mappings.
    pub introspection: Option<spec::Introspection>,
    pub issuers: Vec<String>,
    pub resource: Option<String>,
    pub allow_hosts: Vec<String>,
    pub scopes: Vec<String>,
}

/// A refused request: the HTTP status, the `WWW-Authenticate` value and a message for the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub status: u16,
    pub challenge: Option<String>,
    pub message: String,
}

/// The resource server: trusted issuers' metadata and keys, cached across requests and reloads.
pub struct ResourceServer {
    pub options: Options,
    issuers: Mutex<HashMap<String, Arc<issuer::Issuer>>>,
}

impl ResourceServer {
    pub fn new(options: Options) -> ResourceServer {
        ResourceServer {
            options,
            issuers: Mutex::new(HashMap::new()),
        }
    }

    /// The settings in force with the loaded mappings' `mcp_authorization`; `None` when no
    /// issuer is trusted (MCP authorization is off).
    pub fn effective(&self, mapped: &McpAuthorization) -> Option<Effective> {
        let mut issuers = self.options.issuers.clone();
        issuers.extend(
            mapped
                .issuers
                .iter()
                .filter(|i| !self.options.issuers.contains(i))
                .cloned(),
        );
        if issuers.is_empty() {
            return None;
        }
        let mut allow_hosts = self.options.allow_hosts.clone();
        allow_hosts.extend(mapped.allow_hosts.iter().cloned());
        Some(Effective {
            introspection: mapped.introspection.clone(),
            issuers,
            resource: self
                .options
                .resource
                .clone()
                .or_else(|| mapped.resource.clone()),
            allow_hosts,
            scopes: mapped.scopes.clone(),
        })
    }

    fn issuer(&self, url: &str, allow_hosts: &[String]) -> Option<Arc<issuer::Issuer>> {
        let key = format!("{url}\n{}", allow_hosts.join(","));
        let mut m = self.issuers.lock().ok()?;
        Some(
            m.entry(key)
                .or_insert_with(|| Arc::new(issuer::Issuer::new(url, allow_hosts)))
                .clone(),
        )
    }

    /// Checks the access token of a request to the MCP endpoint (`authorization`: every
    /// `Authorization` value it carries; `query`: its query string) for `resource`.
    pub async fn check(
        &self,
        eff: &Effective,
        authorization: &[&[u8]],
        query: Option<&str>,
        resource: &str,
    ) -> Result<McpPrincipal, Denied> {
        let prm = metadata_url(resource);
        let base = format!("resource_metadata=\"{}\"", quoted(&prm));
        let missing = || Denied {
            status: 401,
            challenge: Some(match eff.scopes.is_empty() {
                true => format!("Bearer {base}"),
                false => format!("Bearer {base}, scope=\"{}\"", quoted(&eff.scopes.join(" "))),
            }),
            message: "Unauthorized: this endpoint needs an OAuth access token".into(),
        };
        let bad_request = |why: &str| Denied {
            status: 400,
            challenge: Some(format!(
                "Bearer error=\"invalid_request\", error_description=\"{why}\", {base}"
            )),
            message: format!("Bad request: {why}"),
        };
        let in_query = query.is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "access_token")
        });
        if in_query {
            return Err(bad_request(
                "access tokens are accepted in the Authorization header only",
            ));
        }
        let value = match authorization {
            [] => return Err(missing()),
            [one] => *one,
            _ => return Err(bad_request("more than one Authorization header")),
        };
        let Ok(value) = std::str::from_utf8(value) else {
            return Err(bad_request("the Authorization header is not ASCII"));
        };
        let Some((scheme, token)) = value.trim().split_once(' ') else {
            return Err(missing());
        };
        // The scheme is case-insensitive (RFC 9110 §11.1); another scheme is no token here.
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(missing());
        }
        let token = token.trim_start_matches(' ');
        if !token68(token) {
            return Err(bad_request("the bearer token is not a token68 value"));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let leeway = self.options.leeway;
        // Not a compact JWS: an opaque token, for the issuers' introspection endpoints.
        let opaque = token.split('.').count() != 3;
        let found = match &eff.introspection {
            Some(client) if opaque => {
                let issuers: Vec<_> = eff
                    .issuers
                    .iter()
                    .filter_map(|i| self.issuer(i, &eff.allow_hosts))
                    .collect();
                introspect::introspect(token, resource, leeway, now, client, &issuers).await
            }
            _ => {
                token::validate(token, resource, leeway, now, |iss| {
                    eff.issuers
                        .iter()
                        .find(|i| i.as_str() == iss)
                        .and_then(|i| self.issuer(i, &eff.allow_hosts))
                })
                .await
            }
        };
        match found {
            Ok(p) => Ok(McpPrincipal {
                token: p,
                resource: resource.to_string(),
                resource_metadata: prm,
            }),
            Err(TokenError::Invalid(why)) => Err(Denied {
                status: 401,
                challenge: Some(format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\", {base}",
                    quoted(&why)
                )),
                message: format!("Unauthorized: {why}"),
            }),
            Err(TokenError::Unavailable(why)) => {
                tracing::warn!(reason = %why, "an authorization server's metadata or keys are unavailable");
                Err(Denied {
                    status: 503,
                    challenge: None,
                    message: "the authorization server's keys are unavailable; retry later".into(),
                })
            }
        }
    }
}

/// RFC 7235's token68: the form of a bearer token (RFC 6750 §2.1).
fn token68(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

/// The metadata URL of `resource`: the well-known path inserted between its host and path
/// (RFC 9728 §3.1).
pub fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(u) => {
            let path = u.path().trim_end_matches('/');
            format!("{}{METADATA_PATH}{path}", u.origin().ascii_serialization())
        }
        Err(_) => METADATA_PATH.to_string(),
    }
}

/// The protected resource metadata document (RFC 9728 §2) of `resource`.
pub fn metadata(eff: &Effective, resource: &str) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": eff.issuers,
        "scopes_supported": eff.scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "portico MCP gateway",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_well_known_path() {
        assert_eq!(
            metadata_url("https://mcp.example/mcp"),
            "https://mcp.example/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080/"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn challenge_values_cannot_break_out_of_their_quotes() {
        assert_eq!(quoted("a\"b\\c\r\nd"), "abcd");
    }
}
