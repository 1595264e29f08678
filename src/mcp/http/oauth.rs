//! MCP authorization at the HTTP edge: the access-token check of every request to the MCP
//! endpoint, its refusals (status, `WWW-Authenticate`, JSON-RPC body) and the protected
//! resource metadata documents. It never logs or echoes a token; checking is `auth::resource`'s.

use super::Server;
use super::respond::{Body, json_response, request_host, rpc_error};
use crate::auth::resource::{self, Denied, Effective, McpPrincipal};
use crate::mcp::handler::Answer;
use crate::mcp::jsonrpc::{INTERNAL_ERROR, INVALID_REQUEST};
use http::{HeaderValue, Request, Response, StatusCode, header};
use serde_json::Value;
use std::sync::Arc;

impl Server {
    /// The settings of MCP authorization in force; `None` when it is off.
    fn oauth_in_force(&self) -> Option<Effective> {
        let gateway = self.core.gateway.load();
        self.resource_server.effective(&gateway.mcp_authorization)
    }

    /// The canonical URI of the MCP endpoint: configured, else this request's scheme, `Host`
    /// (checked against the allowed hosts before this runs) and endpoint path.
    fn resource_uri<B>(&self, eff: &Effective, req: &Request<B>) -> String {
        if let Some(r) = &eff.resource {
            return r.clone();
        }
        let scheme = if self.opts.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let host = request_host(req).unwrap_or_else(|| "localhost".into());
        format!("{scheme}://{host}{}", self.opts.path)
    }

    /// Checks the access token of a request to the MCP endpoint: `Ok(None)` when MCP
    /// authorization is off, the token's principal when it passes, else the refusal.
    pub(super) async fn check_token<B>(
        &self,
        req: &Request<B>,
    ) -> Result<Option<Arc<McpPrincipal>>, Response<Body>> {
        let Some(eff) = self.oauth_in_force() else {
            return Ok(None);
        };
        let resource = self.resource_uri(&eff, req);
        let values: Vec<&[u8]> = req
            .headers()
            .get_all(header::AUTHORIZATION)
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        let checked = self
            .resource_server
            .check(&eff, &values, req.uri().query(), &resource)
            .await;
        match checked {
            Ok(p) => {
                tracing::debug!(principal = %p.id(), client_id = p.token.client_id.as_deref().unwrap_or(""), scopes = %p.token.scopes.join(" "), "MCP access token accepted");
                Ok(Some(Arc::new(p)))
            }
            Err(d) => {
                tracing::info!(status = d.status, reason = %d.message, "MCP request refused by MCP authorization");
                Err(denied(d))
            }
        }
    }

    /// MCP authorization's scope check of a `tools/call` (`params`) made before anything is
    /// answered, so a missing scope is still HTTP 403 with its challenge where the reply
    /// would otherwise start an SSE stream or hold a batch: `Some` refusal when the token
    /// lacks a scope the named tool needs.
    pub(super) fn scope_refused(&self, params: Option<&Value>) -> Option<Answer> {
        let name = params?.get("name")?.as_str()?;
        let gateway = self.core.gateway.load();
        let tool = gateway.tools.get(name)?;
        crate::auth::scoped(tool).err().map(Answer::from)
    }

    /// `GET /.well-known/oauth-protected-resource[/path]`: the protected resource metadata;
    /// `None` when MCP authorization is off (the path is then unknown).
    pub(super) fn resource_metadata<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        let rest = req.uri().path().strip_prefix(resource::METADATA_PATH)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let eff = self.oauth_in_force()?;
        let uri = self.resource_uri(&eff, req);
        let mut r = json_response(StatusCode::OK, &resource::metadata(&eff, &uri));
        let h = r.headers_mut();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        Some(r)
    }
}

/// A refusal as the HTTP answer MCP clients read: the status, the challenge, and a JSON-RPC
/// error without an id (no message was read).
fn denied(d: Denied) -> Response<Body> {
    let status = StatusCode::from_u16(d.status).unwrap_or(StatusCode::UNAUTHORIZED);
    let code = match d.status {
        400 => INVALID_REQUEST,
        401 => -32001,
        _ => INTERNAL_ERROR,
    };
    let mut r = rpc_error(status, &Value::Null, code, &d.message, None);
    let h = r.headers_mut();
    if let Some(c) = d.challenge
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        h.insert(header::WWW_AUTHENTICATE, v);
    }
    if d.status == 503 {
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    r
}
