//! Inbound authentication of tool calls and reads, and authorization of tool calls: a business's
//! AuthorizationPolicy (api keys, OAuth JWTs, USP proofs of possession, booking-scoped
//! credentials, RFC 9421 request signatures, TLS client certificates), access tiers, identity
//! binding, and failures in each binding's form. It must never log or echo a credential, and
//! never treat an unknown mechanism, or a `cnf`-bound credential without its proof, as accepted.

pub mod access;
pub mod fetch;
pub mod httpsig;
pub mod jcs;
pub mod jws;
pub mod limit;
pub mod policy;
pub mod pop;
pub mod respsig;
pub mod store;
pub mod transport;

use crate::binding::{HTTP_PROBLEM, Kind, Reply, RpcError, ToolCtx};
use crate::config::Tool;
use crate::model::{Call, Failure, FailureKind};
use jws::{Jws, JwsError};
use policy::{Mechanism, Policy, Tier};
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};
use store::{Bound, Issued, stores};

/// Who a call was authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Stable id: `api_key:<name>`, `oauth:<iss>|<sub>`, `jkt:<thumbprint>`.
    pub id: String,
    pub mechanism: Mechanism,
    /// May call business-only tools.
    pub business: bool,
    /// The proven key's thumbprint (platform_key_pop).
    pub jkt: Option<String>,
    /// A booking-scoped credential: the one resource it reaches.
    pub only: Option<String>,
}

/// What authorization decided for a call that may proceed.
#[derive(Debug, Default)]
pub struct Grant {
    pub principal: Option<Principal>,
}

/// Inputs taken from the raw arguments before the binding strips `_meta`.
#[derive(Debug, Default)]
pub struct Presented {
    /// `usp_p` of the params, when a proof is presented.
    usp_p: Option<Result<String, pop::PopError>>,
}

/// Why a call is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: FailureKind,
    /// USP code slug (`authentication_required`, `pop_proof_invalid`, ...).
    pub code: &'static str,
    pub message: String,
    /// A credential was presented and failed (RFC 6750 `invalid_token`).
    pub invalid_token: bool,
    /// A nonce to retry with (`proof_nonce_required`).
    pub nonce: Option<String>,
    /// The mechanism the failure relates to (`data.mechanism`, USP's RECOMMENDED discriminator).
    pub mechanism: Option<&'static str>,
}

impl Refusal {
    fn new(kind: FailureKind, code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            code,
            message: message.into(),
            invalid_token: false,
            nonce: None,
            mechanism: None,
        }
    }

    fn missing(message: impl Into<String>) -> Refusal {
        Refusal::new(
            FailureKind::Unauthenticated,
            "authentication_required",
            message,
        )
    }

    fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            invalid_token: true,
            ..Refusal::missing(message)
        }
    }

    fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::new(FailureKind::Forbidden, "profile_not_trusted", message)
    }

    /// A refused RFC 9421 request signature, with USP §10.1.1's code.
    fn sig(e: httpsig::HttpSigError) -> Refusal {
        use crate::webhook::sig::SigError as S;
        use FailureKind::{InvalidRequest, Unauthenticated, Unavailable};
        use httpsig::HttpSigError as H;
        let (kind, code) = match &e {
            H::Sig(S::Unsigned) => (Unauthenticated, "signature_missing"),
            H::Sig(S::DigestMismatch | S::DigestMalformed(_)) => {
                (InvalidRequest, "digest_mismatch")
            }
            H::Sig(S::UnknownKey(_)) | H::NoProfile => (Unauthenticated, "key_not_found"),
            H::Sig(S::WrongAlgorithm(_)) => (InvalidRequest, "algorithm_unsupported"),
            H::Sig(S::Stale(_) | S::Expired) => (Unauthenticated, "signature_expired"),
            H::Sig(S::Key(_)) => (FailureKind::Internal, "server_error"),
            H::Sig(_) => (Unauthenticated, "signature_invalid"),
            H::Unreachable(_) => (Unavailable, "profile_unreachable"),
            H::Malformed => (InvalidRequest, "profile_malformed"),
        };
        Refusal {
            invalid_token: kind == Unauthenticated,
            mechanism: Some(Mechanism::HttpMessageSignature.name()),
            ..Refusal::new(kind, code, e.to_string())
        }
    }

    fn pop(e: pop::PopError) -> Refusal {
        Refusal {
            invalid_token: true,
            ..Refusal::new(FailureKind::Unauthenticated, e.code(), e.to_string())
        }
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

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

/// What presented credentials are judged for: a tool call, or a read (any other MCP request:
/// resources, prompts, completions, `subscriptions/listen`; a GET stream has no params).
pub struct Asked<'a> {
    /// The business whose policy judges.
    pub business: &'a str,
    /// The method a proof names (`usp_m`): the tool, or the JSON-RPC method of a read.
    pub method: &'a str,
    /// `_meta.usp.authorization` as presented.
    pub authorization: Option<&'a Value>,
    /// The profile URI the caller asserts (`_meta.usp.profile`; signatures look keys up there).
    pub profile: Option<&'a str>,
    /// The proof's inputs from the raw params.
    pub presented: &'a Presented,
    /// The tool call, when it is one: a booking-scoped credential's scope is checked against it.
    pub call: Option<(&'a Tool, &'a Call)>,
}

/// `McpAuthorization` as presented in `_meta.usp.authorization`.
struct MetaAuth<'a> {
    mechanism: &'a str,
    credential: Option<&'a str>,
    proof: Option<&'a str>,
}

fn meta_auth(v: Option<&Value>) -> Result<Option<MetaAuth<'_>>, Refusal> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || {
        Refusal::new(
            FailureKind::InvalidRequest,
            "invalid_request",
            "`_meta.usp.authorization` must be an object with a string `mechanism` and optional string `credential` and `proof`",
        )
    };
    let obj = v.as_object().ok_or_else(bad)?;
    let s = |k: &str| match obj.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(bad()),
    };
    Ok(Some(MetaAuth {
        mechanism: s("mechanism")?.ok_or_else(bad)?,
        credential: s("credential")?,
        proof: s("proof")?,
    }))
}

/// Constant-time equality (the time taken does not depend on where the bytes differ).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn api_key(policy: &Policy, value: &str) -> Option<Principal> {
    if !policy.accepts(Mechanism::ApiKey) {
        return None;
    }
    // Every key is compared, so the time does not tell which one matched.
    let mut found = None;
    for k in &policy.api_keys {
        if same(&k.value, value.as_bytes()) && found.is_none() {
            found = Some(Principal {
                id: format!("api_key:{}", k.name),
                mechanism: Mechanism::ApiKey,
                business: k.business,
                jkt: None,
                only: None,
            });
        }
    }
    found
}

async fn oauth(policy: &Policy, token: &str) -> Result<Principal, Refusal> {
    let Some(o) = policy
        .oauth
        .as_ref()
        .filter(|_| policy.accepts(Mechanism::OAuth2Bearer))
    else {
        return Err(Refusal::invalid("the credential is not accepted"));
    };
    let jws = Jws::parse(token).map_err(|e| Refusal::invalid(format!("bearer token: {e}")))?;
    let alg = jws
        .alg(&o.algorithms)
        .map_err(|e| Refusal::invalid(format!("bearer token: {e}")))?;
    let kid = jws.kid();
    let mut result = Err(JwsError::NoKey);
    for force in [false, true] {
        let keys = o.jwks.keys(force).await.map_err(|e| {
            tracing::warn!(error = %e, "the OAuth JWKS is unavailable");
            Refusal::new(
                FailureKind::Unavailable,
                "service_unavailable",
                "the token issuer's keys are unavailable",
            )
        })?;
        let candidates: Vec<_> = keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| k.kid() == kid))
            .collect();
        if candidates.is_empty() {
            continue;
        }
        result = Err(JwsError::KeyMismatch);
        for k in candidates {
            match jws.verify(alg, k) {
                Ok(()) => {
                    result = Ok(());
                    break;
                }
                Err(JwsError::KeyMismatch) => {}
                Err(e) => result = Err(e),
            }
        }
        break;
    }
    result.map_err(|e| Refusal::invalid(format!("bearer token: {e}")))?;
    let c = &jws.claims;
    let t = now();
    let num = |k: &str| c.get(k).and_then(Value::as_i64);
    if c.get("iss").and_then(Value::as_str) != Some(o.issuer.as_str()) {
        return Err(Refusal::invalid("bearer token: wrong issuer"));
    }
    let aud_ok = match c.get("aud") {
        Some(Value::String(a)) => *a == o.audience,
        Some(Value::Array(a)) => a.iter().any(|x| x.as_str() == Some(o.audience.as_str())),
        _ => false,
    };
    if !aud_ok {
        return Err(Refusal::invalid("bearer token: wrong audience"));
    }
    match num("exp") {
        Some(exp) if exp.saturating_add(o.leeway) > t => {}
        Some(_) => return Err(Refusal::invalid("bearer token: expired")),
        None => return Err(Refusal::invalid("bearer token: no `exp`")),
    }
    // Saturating: a signed token may carry any i64 (no overflow panic on extreme values).
    if num("nbf").is_some_and(|nbf| nbf.saturating_sub(o.leeway) > t)
        || num("iat").is_some_and(|iat| iat.saturating_sub(o.leeway) > t)
    {
        return Err(Refusal::invalid("bearer token: not valid yet"));
    }
    let sub = c
        .get("sub")
        .or_else(|| c.get("client_id"))
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::invalid("bearer token: no `sub`"))?;
    let business = o.business_scope.as_deref().is_some_and(|want| {
        c.get("scope")
            .and_then(Value::as_str)
            .is_some_and(|s| s.split(' ').any(|x| x == want))
    });
    Ok(Principal {
        id: format!("oauth:{}|{sub}", o.issuer),
        mechanism: Mechanism::OAuth2Bearer,
        business,
        jkt: None,
        only: None,
    })
}

/// The connection's verified client certificate as a principal (`mtls`).
fn mtls(policy: &Policy, cert: Option<&transport::ClientCert>) -> Result<Principal, Refusal> {
    let Some(c) = cert else {
        return Err(Refusal {
            mechanism: Some(Mechanism::Mtls.name()),
            ..Refusal::missing("the connection presented no verified TLS client certificate")
        });
    };
    let principal = |id: String, business: bool| Principal {
        id,
        mechanism: Mechanism::Mtls,
        business,
        jkt: None,
        only: None,
    };
    if policy.mtls_clients.is_empty() {
        return Ok(principal(format!("mtls:sha256:{}", c.sha256), false));
    }
    policy
        .mtls_clients
        .iter()
        .find(|k| k.sha256 == c.sha256)
        .map(|k| principal(format!("mtls:{}", k.name), k.business))
        .ok_or_else(|| Refusal {
            mechanism: Some(Mechanism::Mtls.name()),
            ..Refusal::invalid("the client certificate is not one this business knows")
        })
}

/// A signed HTTP request (`http_message_signature`): the principal is the profile key that
/// verified it; a signature is accepted once per business within the replay window.
async fn signed(
    asked: &Asked<'_>,
    sigs: &httpsig::Signatures,
    info: &transport::RequestInfo,
) -> Result<Principal, Refusal> {
    let (v, key) = sigs
        .verify(info, asked.profile, now())
        .await
        .map_err(Refusal::sig)?;
    // Keyed on what was signed (key, base, `created`), not on the signature bytes, which an
    // ECDSA signature has two valid forms of; kept for as long as `created` lets it verify.
    use base64::Engine;
    let mark = format!(
        "rfc9421:{}",
        base64::engine::general_purpose::STANDARD.encode(v.replay_key)
    );
    let keep = crate::webhook::sig::replay_window(sigs.max_age);
    if !stores()
        .replay
        .first_use_for(asked.business, &mark, keep)
        .await
    {
        return Err(Refusal {
            invalid_token: true,
            mechanism: Some(Mechanism::HttpMessageSignature.name()),
            ..Refusal::new(
                FailureKind::Unauthenticated,
                "signature_invalid",
                "this signature was already used (a replayed request)",
            )
        });
    }
    Ok(Principal {
        id: format!("jkt:{}", key.thumbprint()),
        mechanism: Mechanism::HttpMessageSignature,
        business: false,
        jkt: None,
        only: None,
    })
}

/// A bearer-style credential (HTTP or `_meta`): an API key or an OAuth JWT.
async fn bearer(policy: &Policy, value: &str) -> Result<Principal, Refusal> {
    if let Some(p) = api_key(policy, value) {
        return Ok(p);
    }
    if value.split('.').count() == 3 && policy.accepts(Mechanism::OAuth2Bearer) {
        return oauth(policy, value).await;
    }
    Err(Refusal::invalid("the credential is not valid"))
}

/// Checks a proof (steps 4–12 of USP §10.1.6) for what is `asked`.
async fn proof(
    asked: &Asked<'_>,
    policy: &Policy,
    proof: &str,
    bound: Option<&str>,
    credential: Option<&str>,
) -> Result<pop::Verified, Refusal> {
    let Some(cfg) = &policy.pop else {
        return Err(Refusal::pop(pop::PopError::Invalid(
            "proofs are not accepted here",
        )));
    };
    let usp_p = match &asked.presented.usp_p {
        Some(Ok(p)) => p.as_str(),
        Some(Err(e)) => return Err(Refusal::pop(e.clone())),
        None => return Err(Refusal::pop(pop::PopError::Missing)),
    };
    let expect = pop::Expect {
        method: asked.method,
        usp_p,
        audiences: &cfg.audiences,
        jkt: bound,
        credential,
        now: now(),
    };
    let v = pop::verify(proof, &expect).map_err(Refusal::pop)?;
    let business = asked.business;
    if cfg.require_nonce {
        let ok = match &v.nonce {
            Some(n) => stores().nonces.valid(business, n).await,
            None => false,
        };
        if !ok {
            let mut r = Refusal::pop(pop::PopError::NonceRequired);
            r.nonce = Some(stores().nonces.issue(business).await);
            return Err(r);
        }
    }
    if !stores().replay.first_use(business, &v.jti).await {
        return Err(Refusal::pop(pop::PopError::Replayed));
    }
    Ok(v)
}

/// The id of the resource a call addresses.
fn resource<'a>(call: &'a Call, names: &[String]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| call.args.get(n.as_str()).and_then(Value::as_str))
}

/// A presented booking-scoped credential (steps 1–12; step 3 for tool calls).
async fn scoped(
    asked: &Asked<'_>,
    policy: &Policy,
    value: &str,
    proof_jws: Option<&str>,
) -> Result<Principal, Refusal> {
    let business = asked.business;
    // 1. known and unexpired (another business's credential is unknown here).
    let issued = stores()
        .credentials
        .get(value)
        .await
        .filter(|i| i.business == business && i.expires_at > now())
        .ok_or_else(|| Refusal::invalid("the credential is unknown or expired"))?;
    // 2. cnf => a proof is mandatory, whatever mechanism is declared; no fallback.
    if issued.jkt.is_some() && proof_jws.is_none() {
        return Err(Refusal::pop(pop::PopError::Missing));
    }
    if !policy.accepts(Mechanism::BookingScopedCredential) {
        return Err(Refusal::invalid(
            "booking-scoped credentials are not accepted",
        ));
    }
    // 3. scope: this tool, this resource; never a business-only tool. (A read is limited to
    // the credential's resource by `access::decide`.)
    if let Some((tool, call)) = asked.call {
        let names = policy
            .credentials
            .as_ref()
            .map(|c| c.resource_args.clone())
            .unwrap_or_default();
        if !issued.scope.iter().any(|t| t == &tool.name)
            || policy.business_only.contains(&tool.name)
            || resource(call, &names) != Some(issued.resource.as_str())
        {
            return Err(Refusal::forbidden(
                "the credential does not authorize this operation on this resource",
            ));
        }
    }
    let jkt = match proof_jws {
        Some(p) => Some(
            proof(asked, policy, p, issued.jkt.as_deref(), Some(value))
                .await?
                .jkt,
        ),
        None => None,
    };
    Ok(Principal {
        id: issued.principal,
        mechanism: Mechanism::BookingScopedCredential,
        business: false,
        jkt,
        only: Some(issued.resource),
    })
}

/// The token of the request's `Authorization: Bearer` header (`Ok(None)`: no header); any
/// other scheme, or a malformed header, is refused.
fn bearer_token(http: &transport::HttpCredentials) -> Result<Option<&str>, Refusal> {
    match &http.authorization {
        None => Ok(None),
        Some(Err(())) => Err(Refusal::invalid("the Authorization header is malformed")),
        Some(Ok(v)) => match v.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                Ok(Some(token.trim()))
            }
            _ => Err(Refusal::invalid("the Authorization scheme must be Bearer")),
        },
    }
}

/// Who is calling, from the credentials presented with what is `asked` and its HTTP request
/// (`http`); `Ok(None)` when nothing was presented. The one authentication of tool calls and
/// reads alike.
async fn authenticate(
    policy: &Policy,
    asked: &Asked<'_>,
    http: &transport::HttpCredentials,
) -> Result<Option<Principal>, Refusal> {
    let meta = meta_auth(asked.authorization)?;
    let http_bearer = bearer_token(http)?;
    // A booking-scoped credential, wherever it rides, is judged first and alone.
    let meta_cred = meta.as_ref().and_then(|m| m.credential);
    let meta_proof = meta.as_ref().and_then(|m| m.proof);
    if let Some(value) = meta_cred
        .filter(|c| c.starts_with("bsc_"))
        .or(http_bearer.filter(|c| c.starts_with("bsc_")))
    {
        return scoped(asked, policy, value, meta_proof).await.map(Some);
    }
    if let Some(m) = &meta
        && Mechanism::parse(m.mechanism).is_none_or(|x| !policy.accepts(x))
    {
        return Err(Refusal::invalid(
            "`_meta.usp.authorization.mechanism` is not one this business accepts",
        ));
    }
    if meta
        .as_ref()
        .is_some_and(|m| m.mechanism == "platform_key_pop")
        || meta_proof.is_some()
    {
        if meta_cred.is_some() {
            return Err(Refusal::invalid(
                "a proof accompanies only a booking-scoped credential",
            ));
        }
        let Some(p) = meta_proof else {
            return Err(Refusal::pop(pop::PopError::Missing));
        };
        let v = proof(asked, policy, p, None, None).await?;
        return Ok(Some(Principal {
            id: format!("jkt:{}", v.jkt),
            mechanism: Mechanism::PlatformKeyPop,
            business: false,
            jkt: Some(v.jkt),
            only: None,
        }));
    }
    // HTTP-layer credentials are preferred over `_meta` ones; a signature first.
    if let Some(sigs) = &policy.signatures {
        let declared = meta
            .as_ref()
            .is_some_and(|m| m.mechanism == Mechanism::HttpMessageSignature.name());
        match http.request.as_deref() {
            Some(info) if httpsig::is_signed(info) => {
                return signed(asked, sigs, info).await.map(Some);
            }
            _ if declared => {
                return Err(Refusal::sig(crate::webhook::sig::SigError::Unsigned.into()));
            }
            _ => {}
        }
    }
    if let Some(k) = &http.api_key {
        let Ok(k) = k else {
            return Err(Refusal::invalid("the X-API-Key header is malformed"));
        };
        return api_key(policy, k)
            .map(Some)
            .ok_or_else(|| Refusal::invalid("the API key is not valid"));
    }
    if let Some(b) = http_bearer {
        return bearer(policy, b).await.map(Some);
    }
    match meta {
        // The declared mechanism must be the credential's: a key is not a booking credential.
        Some(m) if m.mechanism == Mechanism::BookingScopedCredential.name() => Err(
            Refusal::invalid("a booking-scoped credential starts with `bsc_`"),
        ),
        Some(m) if m.mechanism == Mechanism::Mtls.name() => {
            mtls(policy, http.client_cert.as_ref()).map(Some)
        }
        Some(m) => match m.credential {
            Some(c) => bearer(policy, c).await.map(Some),
            None => Err(Refusal::missing(
                "`_meta.usp.authorization` carries no credential",
            )),
        },
        // The connection's certificate, when nothing in the request authenticates.
        None if http.client_cert.is_some() && policy.accepts(Mechanism::Mtls) => {
            mtls(policy, http.client_cert.as_ref()).map(Some)
        }
        None => Ok(None),
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
            return Err(Refusal::new(
                FailureKind::InvalidRequest,
                "invalid_request",
                "privileged methods need `_meta.usp.profile`",
            ));
        }
        None => {}
    }
    Ok(Grant { principal: Some(p) })
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
    let f = Failure::new(r.kind, r.message).with_code(r.code);
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
