//! Verifies each accepted mechanism's credentials (api keys, OAuth JWTs, USP proofs of possession,
//! booking-scoped credentials, request signatures, client certificates) into a `Principal`. It
//! never logs or echoes a credential, and never accepts an unknown mechanism or a `cnf`-bound
//! credential without its proof.

use super::jws::Jws;
use super::policy::{Mechanism, Policy};
use super::store::stores;
use super::types::{Asked, Principal, Refusal, now};
use super::{httpsig, pop, transport};
use crate::model::{Call, FailureKind};
use serde_json::Value;

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
    let result = o.jwks.verify(&jws, alg).await.map_err(|e| {
        tracing::warn!(error = %e, "the OAuth JWKS is unavailable");
        Refusal::new(
            FailureKind::Unavailable,
            "service_unavailable",
            "the token issuer's keys are unavailable",
        )
    })?;
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

/// The principal of an access token MCP authorization accepted: the same id an `oauth2_bearer`
/// token of that issuer and subject gets, a business principal when it holds the policy's
/// `business_scope`.
fn mcp_principal(policy: &Policy, m: &super::resource::McpPrincipal) -> Principal {
    let business = policy
        .oauth
        .as_ref()
        .and_then(|o| o.business_scope.as_deref())
        .is_some_and(|want| m.token.scopes.iter().any(|s| s == want));
    Principal {
        id: m.id(),
        mechanism: Mechanism::OAuth2Bearer,
        business,
        jkt: None,
        only: None,
    }
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
pub(super) async fn authenticate(
    policy: &Policy,
    asked: &Asked<'_>,
    http: &transport::HttpCredentials,
) -> Result<Option<Principal>, Refusal> {
    let meta = meta_auth(asked.authorization)?;
    // A token MCP authorization checked is the endpoint's, not one of this business's.
    let http_bearer = match http.mcp {
        Some(_) => None,
        None => bearer_token(http)?,
    };
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
        // The MCP access token's principal, for a business that takes OAuth principals.
        None if http.mcp.is_some() && policy.accepts(Mechanism::OAuth2Bearer) => {
            Ok(http.mcp.as_deref().map(|m| mcp_principal(policy, m)))
        }
        // The connection's certificate, when nothing in the request authenticates.
        None if http.client_cert.is_some() && policy.accepts(Mechanism::Mtls) => {
            mtls(policy, http.client_cert.as_ref()).map(Some)
        }
        None => Ok(None),
    }
}
