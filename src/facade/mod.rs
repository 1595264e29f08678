//! The reverse path: a REST facade in front of an upstream MCP server. A REST request becomes a
//! `Call` (binding metadata from headers), the upstream's answer an `Outcome`, and the binding's
//! tables turn that into an HTTP answer; it must never hold protocol tables of its own.
//!
//! - [`config`]: facade mapping files, compiled into a [`Facade`];
//! - [`derive`]: routes paired from an OpenRPC and an OpenAPI document;
//! - [`route`]: path templates and matching;
//! - [`openapi`]: the OpenAPI 3.1 document of the facade;
//! - [`http`]: the listener;
//! - [`notify`]: upstream notifications relayed as signed webhooks.

pub mod config;
pub mod derive;
pub mod http;
pub mod notify;
pub mod openapi;
pub mod route;

use crate::binding::Binding;
use crate::model::{Call, Failure, FailureKind, Outcome};
use crate::upstream::mcp::{McpError, McpUpstream};
pub use route::Body;
use route::Route;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// A compiled facade: routes, the binding of the upstream tools, the upstream client.
#[derive(Debug)]
pub struct Facade {
    pub name: String,
    pub binding: Binding,
    pub upstream: Arc<McpUpstream>,
    pub routes: Vec<Route>,
    /// Status of a tool result with `isError: true`.
    pub tool_error_status: u16,
    pub max_body_bytes: usize,
    /// The files the facade was compiled from.
    pub sources: Vec<PathBuf>,
    /// The generated OpenAPI 3.1 document (`GET /openapi.json`).
    pub openapi: Arc<Value>,
    /// Request headers passed on to the upstream `tools/call`.
    pub forward_headers: Vec<::http::HeaderName>,
    /// Upstream notifications sent on as signed webhooks (`notifications:`).
    pub notifications: Option<notify::Notifications>,
    /// The signer and delivery queue of those webhooks (its JWK Set is served at
    /// `/.well-known/jwks.json`).
    pub egress: Option<Arc<crate::webhook::egress::Egress>>,
}

/// What the facade answers: status, extra headers, JSON body (problem+json for failures).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub problem: bool,
    pub retry_after: Option<u64>,
    pub body: Option<Value>,
    /// `WWW-Authenticate`: the upstream MCP server's challenge, passed on with its 401 or 403.
    pub challenge: Option<String>,
}

/// The failure an upstream transport or protocol error stands for.
pub fn failure_of(binding: &Binding, e: McpError) -> Failure {
    match e {
        McpError::Rpc {
            code,
            message,
            data,
            retry_after,
            ..
        } => binding.failure_of_rpc(code, &message, data.as_ref(), retry_after),
        McpError::Unreachable(m) => Failure {
            status: Some(502),
            ..Failure::new(FailureKind::UpstreamError, m)
        },
        McpError::Timeout(_) => Failure::new(FailureKind::Timeout, e.to_string()),
        // The MCP server refused the forwarded credentials: the REST client's to fix.
        McpError::Refused { status, .. } => {
            let (kind, why) = match status {
                403 => (
                    FailureKind::Forbidden,
                    "the MCP server refused the request: its credentials lack a permission the tool needs",
                ),
                _ => (
                    FailureKind::Unauthenticated,
                    "the MCP server needs credentials this request did not carry or that it refused (see WWW-Authenticate)",
                ),
            };
            Failure::new(kind, why)
        }
        McpError::Status {
            status,
            retry_after,
        } => {
            let kind = if status == 503 || status == 429 {
                FailureKind::Unavailable
            } else {
                FailureKind::UpstreamError
            };
            Failure {
                status: Some(status),
                retry_after,
                ..Failure::new(kind, e.to_string())
            }
        }
        McpError::BadResponse(_) => Failure::new(FailureKind::BadUpstreamResponse, e.to_string()),
    }
}

impl Facade {
    /// The request headers this facade passes on upstream.
    pub fn forwarded(&self, from: &::http::HeaderMap) -> ::http::HeaderMap {
        let mut out = ::http::HeaderMap::new();
        for name in &self.forward_headers {
            for v in from.get_all(name) {
                out.append(name.clone(), v.clone());
            }
        }
        out
    }

    /// Calls the route's tool upstream with the call's arguments and metadata, and the
    /// forwarded request headers; with the upstream's `WWW-Authenticate` challenge when it
    /// refused the credentials.
    pub async fn call(&self, call: Call, headers: &::http::HeaderMap) -> (Outcome, Option<String>) {
        let mut args = match call.args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.binding.meta_into_args(&call.meta, &mut args);
        let outcome = match self
            .upstream
            .call_tool_with(&call.tool, Value::Object(args), headers)
            .await
        {
            Ok(result) => (self.binding.outcome_of_result(result), None),
            Err(e) => {
                let challenge = match &e {
                    McpError::Refused { challenge, .. } => challenge.clone(),
                    _ => None,
                };
                (Outcome::Failure(failure_of(&self.binding, e)), challenge)
            }
        };
        let (outcome, challenge) = outcome;
        if let (Some(profile), Some(platforms)) = (
            &call.meta.profile,
            self.notifications
                .as_ref()
                .and_then(|n| n.platforms.as_ref()),
        ) {
            platforms.learn(profile, &outcome);
        }
        (outcome, challenge)
    }

    /// The HTTP answer for an outcome of `route`.
    pub fn answer(&self, route: &Route, outcome: Outcome) -> Answer {
        match outcome {
            Outcome::Success { body } => Answer {
                status: route.status,
                problem: false,
                retry_after: None,
                body: (route.status != 204).then_some(body),
                challenge: None,
            },
            // Business outcomes are processed requests: 200 with `messages[]`.
            Outcome::Business { mut body, messages } => {
                body.insert("messages".into(), Value::Array(messages));
                Answer {
                    status: 200,
                    problem: false,
                    retry_after: None,
                    body: Some(Value::Object(body)),
                    challenge: None,
                }
            }
            Outcome::Failure(f) => self.failure(f),
        }
    }

    /// A problem+json answer for a failure.
    pub fn failure(&self, f: Failure) -> Answer {
        let status = if f.as_tool_error {
            self.tool_error_status
        } else {
            match (f.kind, f.status) {
                (FailureKind::UpstreamError, Some(_)) => 502,
                (FailureKind::Unavailable, Some(_)) => 503,
                _ => self.binding.failure_status(&f),
            }
        };
        Answer {
            status,
            problem: true,
            retry_after: f.retry_after,
            body: Some(self.binding.problem(&f, status)),
            challenge: None,
        }
    }
}
