//! Inbound authentication of tool calls and reads, and authorization of tool calls: a business's
//! AuthorizationPolicy (api keys, OAuth JWTs, USP proofs of possession, booking-scoped
//! credentials, RFC 9421 request signatures, TLS client certificates), access tiers, identity
//! binding, and failures in each binding's form. It must never log or echo a credential, and
//! never treat an unknown mechanism, or a `cnf`-bound credential without its proof, as accepted.

pub mod access;
mod authenticate;
pub mod fetch;
pub mod httpsig;
pub mod jcs;
pub mod jws;
pub mod limit;
pub mod policy;
pub mod pop;
pub mod resource;
pub mod respsig;
pub mod store;
pub mod transport;
mod types;

use crate::binding::{HTTP_PROBLEM, Kind, Reply, RpcError, ToolCtx};
use crate::config::Tool;
use crate::model::{Call, Failure, FailureKind};
use policy::{Mechanism, Policy, Tier};
use serde_json::{Value, json};
use store::{Bound, Issued, stores};

use authenticate::authenticate;
use types::now;
pub use types::{Asked, Grant, Presented, Principal, Refusal};

/// Reads what a proof needs from the raw arguments (only when one is presented).
pub fn presented(tool: &Tool, args: &Value) -> Presented {
    presented_in(tool.business.auth.as_deref(), args)
}

/// [`presented`] for the params of any request judged by `policy` (a tool's arguments, a read's
/// params).
pub fn presented_in(policy: Option<&Policy>, params: &Value) -> Presented {
    let has_proof = policy.is_some_and(|p| p.pop.is_some())
        && params
            .pointer("/_meta/usp/authorization/proof")
            .is_some_and(|p| !p.is_null());
    Presented {
        usp_p: has_proof.then(|| pop::usp_p(params)),
    }
}

/// Decides whether `call` of `tool` may proceed; the refusal rendered in the binding's form.
pub async fn authorize(tool: &Tool, call: &Call, presented: Presented) -> Result<Grant, Reply> {
    let Some(policy) = tool.business.auth.as_deref() else {
        return Ok(Grant::default());
    };
    decide(tool, policy, call, &presented)
        .await
        .map_err(|r| render(tool, r))
}

async fn decide(
    tool: &Tool,
    policy: &Policy,
    call: &Call,
    presented: &Presented,
) -> Result<Grant, Refusal> {
    let tier = policy.tier(&tool.name, tool.access.as_deref());
    let asked = Asked {
        business: &tool.business.name,
        method: &tool.name,
        authorization: call.meta.authorization.as_ref(),
        profile: call.meta.profile.as_deref(),
        presented,
        call: Some((tool, call)),
    };
    let http = transport::current().unwrap_or_default();
    let principal = authenticate(policy, &asked, &http).await?;
    if tier == Tier::Public {
        return Ok(Grant { principal });
    }
    let Some(p) = principal else {
        if policy.require {
            return Err(Refusal::missing(format!(
                "`{}` requires authentication (accepted: {})",
                tool.name,
                policy
                    .mechanisms
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        return Ok(Grant::default());
    };
    if policy.business_only.contains(&tool.name) && !p.business {
        return Err(Refusal::forbidden(format!(
            "`{}` may only be called by the business",
            tool.name
        )));
    }
    let binding = &tool.business.binding;
    match call.meta.profile.as_deref() {
        Some(profile) => {
            let bound = stores()
                .identities
                .bind(&tool.business.name, &p.id, profile)
                .await;
            if bound == Bound::Conflict {
                tracing::warn!(business = %tool.business.name, tool = %tool.name, principal = %p.id, "a principal presented a second profile URI");
                return Err(Refusal::forbidden(
                    "this credential is bound to another profile URI",
                ));
            }
        }
        None if binding.kind == Kind::Usp => {
            return Err(Refusal {
                explain: true,
                ..Refusal::new(
                    FailureKind::InvalidRequest,
                    "invalid_request",
                    format!(
                        "`_meta.usp.profile` is required for `{}` (a privileged method); expected at params.arguments._meta.usp.profile",
                        tool.name
                    ),
                )
            });
        }
        None => {}
    }
    Ok(Grant { principal: Some(p) })
}

/// MCP authorization's scope check of a call of `tool`: the request's access token must hold
/// every scope the tool needs. Runs first, before the arguments are read, so a client without
/// the scope is told to step up whatever it sent. Passes when MCP authorization is off.
pub fn scoped(tool: &Tool) -> Result<(), Reply> {
    let Some(m) = transport::mcp_principal() else {
        return Ok(());
    };
    let need = tool.business.scopes.of(&tool.name);
    let Some(lacking) = m.lacks(need) else {
        return Ok(());
    };
    tracing::info!(business = %tool.business.name, tool = %tool.name, principal = %m.id(), client_id = m.token.client_id.as_deref().unwrap_or(""), scope = lacking, "call refused: insufficient scope");
    Err(insufficient_scope(&m, need, lacking))
}

/// The `403 insufficient_scope` answer of MCP authorization (an HTTP answer before JSON-RPC,
/// whatever the binding: the token is the MCP endpoint's, not the business's).
fn insufficient_scope(m: &resource::McpPrincipal, need: &[String], lacking: &str) -> Reply {
    Reply::Error(RpcError {
        code: HTTP_PROBLEM,
        message: "Forbidden".into(),
        data: Some(json!({
            "type": "about:blank",
            "title": "Insufficient scope",
            "status": 403,
            "code": "insufficient_scope",
            "detail": format!("this tool needs the scope `{lacking}`"),
            "scope": m.step_up_scope(need),
            "required": need,
            "resource_metadata": m.resource_metadata,
            "challenge": m.insufficient_scope(need),
        })),
        http_status: Some(403),
    })
}

/// Applies the business's rate limits to a call that passed authorization.
pub fn admit(tool: &Tool, grant: &Grant) -> Result<(), Reply> {
    let limits = &tool.business.limits;
    if limits.business.is_none() && limits.principal.is_none() {
        return Ok(());
    }
    let principal = grant.principal.as_ref().map(|p| p.id.as_str());
    let Err(wait) = limit::admit(limits, &tool.business.name, principal) else {
        return Ok(());
    };
    let binding = &tool.business.binding;
    if binding.kind == Kind::Plain {
        return Err(Reply::Error(RpcError {
            code: -32000,
            message: "Rate limited".into(),
            data: Some(
                json!({"code": "rate_limited", "content": "too many calls; retry later", "retry_after": wait}),
            ),
            http_status: Some(429),
        }));
    }
    let f = Failure {
        retry_after: Some(wait),
        ..Failure::new(FailureKind::RateLimited, "too many calls; retry later")
            .with_code("rate_limited")
    };
    Err(binding.render_failure(f, &ToolCtx::default()))
}

/// Logs why a call was refused, never the credential: a presented credential that failed at
/// WARN (a probe, or a client misconfigured), a missing or insufficient one at INFO.
fn log_refusal(business: &str, subject: &str, r: &Refusal) {
    let mechanism = r.mechanism.unwrap_or("none");
    if r.invalid_token {
        tracing::warn!(business, subject, code = r.code, mechanism, reason = %r.message, "call refused");
    } else {
        tracing::info!(business, subject, code = r.code, mechanism, reason = %r.message, "call refused");
    }
}

/// Renders a refusal the way the business's binding answers authentication failures (and
/// logs it).
pub fn render(tool: &Tool, r: Refusal) -> Reply {
    log_refusal(&tool.business.name, &tool.name, &r);
    shape(&tool.business, r)
}

/// [`render`] for a refusal about anything of `business` other than a tool call (a resource,
/// a stream, a prompt); logged with the subject `read`.
pub fn render_for(business: &crate::config::Business, r: Refusal) -> Reply {
    log_refusal(&business.name, "read", &r);
    shape(business, r)
}

/// The binding's form of a refusal.
fn shape(business: &crate::config::Business, r: Refusal) -> Reply {
    let binding = &business.binding;
    let status = match r.kind {
        FailureKind::Unauthenticated => 401,
        FailureKind::Forbidden => 403,
        _ => 0,
    };
    match binding.kind {
        Kind::Autonym if status == 401 => {
            let mut p = json!({"type": "about:blank", "title": "Unauthorized", "status": 401});
            if r.invalid_token {
                p["title"] = json!("Invalid token");
                p["code"] = json!("invalid_token");
            }
            return Reply::Error(RpcError {
                code: HTTP_PROBLEM,
                message: "Unauthorized".into(),
                data: Some(p),
                http_status: Some(401),
            });
        }
        Kind::Autonym if status == 403 => {
            let f = Failure::new(r.kind, r.message).with_code("invalid_scope");
            return binding.render_failure(f, &ToolCtx::default());
        }
        Kind::Plain if status != 0 => {
            let (code, message) = if status == 401 {
                (-32001, "Unauthorized")
            } else {
                (-32003, "Forbidden")
            };
            return Reply::Error(RpcError {
                code,
                message: message.into(),
                data: Some(
                    json!({"code": if status == 401 {"unauthorized"} else {"forbidden"}, "content": r.message}),
                ),
                http_status: Some(status),
            });
        }
        _ => {}
    }
    let mut f = Failure::new(r.kind, r.message).with_code(r.code);
    f.explain = r.explain;
    let mut reply = binding.render_failure(f, &ToolCtx::default());
    if let (
        Some(n),
        Reply::Error(RpcError {
            data: Some(Value::Object(d)),
            ..
        }),
    ) = (r.nonce, &mut reply)
    {
        d.insert("nonce".into(), Value::String(n));
    }
    if let (
        Some(m),
        Reply::Error(RpcError {
            data: Some(Value::Object(d)),
            ..
        }),
    ) = (r.mechanism, &mut reply)
    {
        d.insert("mechanism".into(), Value::String(m.into()));
    }
    reply
}

/// `WWW-Authenticate` for a 401 answer: RFC 6750's `Bearer`, with `error="invalid_token"` when a
/// presented token failed; DPoP and Bearer for autonym's DPoP codes.
pub fn challenge(code: Option<&str>) -> String {
    match code {
        Some(c @ ("dpop_required" | "dpop_invalid")) => {
            format!("DPoP error=\"{c}\", Bearer error=\"{c}\"")
        }
        Some("invalid_token") => "Bearer error=\"invalid_token\"".into(),
        _ => "Bearer".into(),
    }
}

pub use crate::clock::rfc3339;

/// After a successful call of a creating tool (`creates`): records the caller as the owner of
/// the created resource. After a successful issuing call: mints a booking-scoped credential for
/// the created resource (bound to the caller's key when it proved one) and returns it next to
/// the resource.
pub async fn issue(tool: &Tool, grant: &Grant, reply: &mut Reply) {
    let Some(policy) = tool.business.auth.as_deref() else {
        return;
    };
    let Some(p) = &grant.principal else {
        return;
    };
    let owned = policy.creates.get(&tool.name);
    let credential = policy
        .credentials
        .as_ref()
        .filter(|_| policy.accepts(Mechanism::BookingScopedCredential))
        .and_then(|c| c.issue.get(&tool.name).map(|pointer| (c, pointer)));
    if owned.is_none() && credential.is_none() {
        return;
    }
    reply.materialize();
    let Reply::Result(result) = reply else {
        return;
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        return;
    }
    let Some(sc @ Value::Object(_)) = result.get("structuredContent") else {
        return;
    };
    let failed = sc
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|m| {
            m.iter()
                .any(|m| m.get("type").and_then(Value::as_str) == Some("error"))
        });
    if failed {
        return;
    }
    let id_at = |pointer: &str| {
        sc.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(id) = owned.and_then(|pointer| id_at(pointer)) {
        stores()
            .owners
            .record(&tool.business.name, &id, &p.id)
            .await;
    }
    let Some((cfg, pointer)) = credential else {
        return;
    };
    let Some(id) = id_at(pointer) else {
        return;
    };
    let mut random = [0u8; 16];
    if aws_lc_rs::rand::fill(&mut random).is_err() {
        tracing::error!("no randomness for a booking-scoped credential; none issued");
        return;
    }
    let value = format!(
        "bsc_{}",
        random
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let expires_at = now() + cfg.ttl.as_secs() as i64;
    let scope: Vec<String> = cfg
        .scope
        .iter()
        .filter(|t| !policy.business_only.contains(t))
        .cloned()
        .collect();
    let issued = Issued {
        business: tool.business.name.clone(),
        resource: id,
        scope: scope.clone(),
        jkt: p.jkt.clone(),
        expires_at,
        principal: p.id.clone(),
    };
    stores().credentials.put(&value, issued).await;
    let mut cred = json!({"value": value, "expires_at": rfc3339(expires_at), "scope": scope});
    if let Some(jkt) = &p.jkt {
        cred["cnf"] = json!({ "jkt": jkt });
    }
    if let Some(Value::Object(sc)) = result.get_mut("structuredContent") {
        sc.insert("booking_scoped_credential".into(), cred);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_789_203_600), "2026-09-12T09:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
