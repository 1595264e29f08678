//! The `mcp_authorization:` section of a mapping file (MCP authorization: which authorization
//! servers are trusted, and the OAuth scopes each tool needs) and its compiled form. It never
//! fetches anything and never panics on user input (every problem becomes a `Diagnostic`).

use crate::auth::policy::Tier;
use crate::config::diag::{Diagnostic, locate_yaml};
use indexmap::IndexMap;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The mapping file's `mcp_authorization:` section.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpAuthorizationSpec {
    /// Issuer URLs of trusted authorization servers (https; merged with `--oauth-issuer`).
    #[serde(default)]
    pub issuers: Vec<String>,
    /// The canonical URI of the MCP endpoint (the tokens' audience); default: derived from
    /// the request (`--oauth-resource` wins).
    #[serde(default)]
    pub resource: Option<String>,
    /// Hosts the authorization server's metadata and keys may be fetched from over plain http
    /// or at a private address (tests: 127.0.0.1).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Scopes every tool of this business needs unless `tiers` or `tools` says otherwise.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Access tier (`public`, `privileged_platform`, `privileged_scoped`; the OpenRPC's
    /// `x-usp-access` or the `authorization.tools` override) -> scopes.
    #[serde(default)]
    pub tiers: IndexMap<String, Vec<String>>,
    /// Tool -> scopes, over everything else.
    #[serde(default)]
    pub tools: IndexMap<String, Vec<String>>,
    /// Opaque access tokens: portico's client at the issuers' introspection endpoints
    /// (RFC 7662).
    #[serde(default)]
    pub introspection: Option<IntrospectionSpec>,
}

/// `mcp_authorization.introspection`: how portico authenticates to introspection endpoints.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionSpec {
    pub client_id: String,
    /// Use `${ENV_VAR}`.
    pub client_secret: String,
}

/// Introspection client credentials, compiled (the secret never in `Debug`).
#[derive(Clone, PartialEq, Eq)]
pub struct Introspection {
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// The scopes each tool of one business needs (compiled `mcp_authorization`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolScopes {
    pub tools: HashMap<String, Vec<String>>,
    /// The file's introspection credentials, `${ENV}` resolved.
    pub introspection: Option<Introspection>,
}

impl ToolScopes {
    /// The scopes `tool` needs (empty: any valid token).
    pub fn of(&self, tool: &str) -> &[String] {
        self.tools.get(tool).map_or(&[], Vec::as_slice)
    }
}

/// What the gateway as a whole gets from every file's `mcp_authorization`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpAuthorization {
    pub issuers: Vec<String>,
    pub resource: Option<String>,
    pub allow_hosts: Vec<String>,
    /// Every scope any tool needs, sorted (`scopes_supported`).
    pub scopes: Vec<String>,
    /// Introspection client credentials (the first file's).
    pub introspection: Option<Introspection>,
}

impl McpAuthorization {
    /// Adds one file's section (issuers and hosts are merged; the first `resource` wins).
    pub fn merge(&mut self, spec: &McpAuthorizationSpec, scopes: &ToolScopes) {
        if self.introspection.is_none() {
            self.introspection = scopes.introspection.clone();
        }
        for i in &spec.issuers {
            if !self.issuers.contains(i) {
                self.issuers.push(i.clone());
            }
        }
        for h in &spec.allow_hosts {
            if !self.allow_hosts.contains(h) {
                self.allow_hosts.push(h.clone());
            }
        }
        if self.resource.is_none() {
            self.resource = spec.resource.clone();
        }
        self.scopes.extend(scopes.tools.values().flatten().cloned());
        self.scopes.extend(spec.scopes.iter().cloned());
        self.scopes.sort();
        self.scopes.dedup();
    }
}

/// A scope token as RFC 6749 §3.3 allows it (visible ASCII but space, `"` and `\`).
pub fn scope_token_ok(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// An issuer URL as trusted: https (or plain http for an allowed host), no query or fragment.
pub fn issuer_ok(url: &str, allow_hosts: &[String]) -> Result<(), String> {
    let u = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if u.query().is_some() || u.fragment().is_some() {
        return Err(format!("issuer `{url}` has a query or fragment"));
    }
    let host = u.host_str().unwrap_or_default().trim_matches(['[', ']']);
    match u.scheme() {
        "https" => Ok(()),
        "http"
            if allow_hosts
                .iter()
                .any(|h| h.trim_matches(['[', ']']) == host) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "issuer `{url}` must be https (plain http only for a host in `allow_hosts`)"
        )),
    }
}

/// Compiles one file's section: each tool's scopes (`tools` (name, tier) of the mapping).
pub fn compile(
    spec: &McpAuthorizationSpec,
    file: &Path,
    text: &str,
    tools: &[(String, Tier)],
) -> Result<ToolScopes, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let err = |path: &[&str], msg: String, hint: &str| {
        let mut full = vec!["mcp_authorization"];
        full.extend_from_slice(path);
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &full))
            .at(full.join("."))
            .hint(hint.to_string())
    };
    for i in &spec.issuers {
        if let Err(e) = issuer_ok(i, &spec.allow_hosts) {
            diags.push(err(
                &["issuers"],
                e,
                "write the authorization server's issuer identifier, e.g. https://login.example.com",
            ));
        }
    }
    if let Some(r) = &spec.resource
        && url::Url::parse(r).map_or(true, |u| {
            !matches!(u.scheme(), "http" | "https") || u.fragment().is_some()
        })
    {
        diags.push(err(
            &["resource"],
            format!("resource `{r}` is not an absolute http(s) URI without a fragment"),
            "write the public URL of the MCP endpoint, e.g. https://mcp.example.com/mcp",
        ));
    }
    let all = spec
        .scopes
        .iter()
        .chain(spec.tiers.values().flatten())
        .chain(spec.tools.values().flatten());
    for s in all {
        if !scope_token_ok(s) {
            diags.push(err(
                &[],
                format!("`{s}` is not a scope token"),
                "a scope is visible ASCII without spaces, quotes or backslashes",
            ));
        }
    }
    let mut tiers = HashMap::new();
    for (name, scopes) in &spec.tiers {
        match Tier::parse(name) {
            Some(t) => {
                tiers.insert(t, scopes.clone());
            }
            None => diags.push(err(
                &["tiers"],
                format!("`{name}` is not an access tier"),
                "use public, privileged_platform or privileged_scoped",
            )),
        }
    }
    for name in spec.tools.keys() {
        if !tools.iter().any(|(t, _)| t == name) {
            diags.push(err(
                &["tools", name],
                format!("`{name}` is not a tool of this mapping"),
                "name a tool under `tools:`",
            ));
        }
    }
    let introspection = match &spec.introspection {
        None => None,
        Some(i) => match crate::util::env::substitute_env(&i.client_secret) {
            Ok(secret) => Some(Introspection {
                client_id: i.client_id.clone(),
                client_secret: secret,
            }),
            Err(e) => {
                diags.push(err(
                    &["introspection", "client_secret"],
                    format!("introspection client secret: {e}"),
                    "set the variable, or write the value with ${NAME}",
                ));
                None
            }
        },
    };
    if !diags.is_empty() {
        return Err(diags);
    }
    let tools = tools
        .iter()
        .map(|(name, tier)| {
            let scopes = spec
                .tools
                .get(name)
                .or_else(|| tiers.get(tier))
                .unwrap_or(&spec.scopes)
                .clone();
            (name.clone(), scopes)
        })
        .collect();
    Ok(ToolScopes {
        tools,
        introspection,
    })
}
