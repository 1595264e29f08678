//! The compiled business: one mapping file's backend and its business-wide settings (webhooks,
//! authorization, limits, VRP, response signing). Data only: it must never compile or call anything.

use crate::binding::Binding;
use http::{HeaderName, HeaderValue};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A business's backend: where it is and how to call it.
pub struct Backend {
    /// Base URL without a trailing `/`.
    pub base: String,
    pub client: reqwest::Client,
    /// Inline-driven keep-alive connections for plain-`http` backends (the sidecar case);
    /// `https` backends go through `client`.
    pub pool: Option<Arc<crate::upstream::pool::Pool>>,
    pub timeout: Duration,
    /// Static headers (secrets included: never logged, see `Debug`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub max_response_bytes: usize,
    /// Concurrency limit, circuit breaker and retries (`upstream::resilience`).
    pub resilience: crate::upstream::resilience::Resilience,
    /// Client request headers passed on (`backend.forward_headers`).
    pub forward_headers: Vec<HeaderName>,
    /// Sign each request with portico's key (`backend.sign_requests`).
    pub sign_requests: bool,
    /// The token from the backend's own authorization server (`backend.oauth`).
    pub oauth: Option<Arc<crate::upstream::credential::BackendCredential>>,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("base", &self.base)
            .field("timeout", &self.timeout)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("forward_headers", &self.forward_headers)
            .field("sign_requests", &self.sign_requests)
            .finish()
    }
}

/// One business (one mapping file).
#[derive(Debug)]
pub struct Business {
    pub name: String,
    pub file: PathBuf,
    pub binding: Binding,
    pub backend: Backend,
    /// Values for the discovery profile (`/.well-known/...`).
    pub discovery: super::mapping::DiscoverySpec,
    /// Incoming webhook settings, when the mapping declares `webhooks`.
    pub webhooks: Option<Arc<crate::webhook::config::WebhookConfig>>,
    /// Inbound authentication, when the mapping declares `authorization`.
    pub auth: Option<Arc<crate::auth::policy::Policy>>,
    /// The OAuth scopes each tool needs under MCP authorization (`mcp_authorization`).
    pub scopes: crate::auth::resource::spec::ToolScopes,
    /// Rate limits (`rate_limits`); none by default.
    pub limits: crate::auth::limit::Limits,
    /// VRP transport attestations (`vrp`).
    pub vrp: Option<Arc<crate::vrp::VrpConfig>>,
    /// RFC 9421 response signatures (`response_signing`).
    pub response_signing: Option<crate::auth::respsig::ResponseSigning>,
}
