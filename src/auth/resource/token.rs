//! Checking one JWT access token (RFC 9068) for this resource: a trusted issuer, a signature
//! by one of its keys with an accepted algorithm, this resource as audience (RFC 8707), and
//! `exp`/`nbf`/`iat` within a bounded leeway. It must never accept `alg: none`, a symmetric
//! algorithm, an issuer it was not told to trust, or fetch anything for an untrusted issuer.

use super::issuer::Issuer;
use super::principal::TokenPrincipal;
use crate::auth::jws::{Jws, JwsAlg};
use serde_json::Value;

/// Algorithms an access token may be signed with (asymmetric only).
pub const ALGORITHMS: [JwsAlg; 3] = [JwsAlg::Es256, JwsAlg::EdDsa, JwsAlg::Rs256];

/// Largest leeway accepted for clock skew, whatever is configured.
pub const MAX_LEEWAY: i64 = 300;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is not valid here (RFC 6750 `invalid_token`); the text never quotes it.
    #[error("{0}")]
    Invalid(String),
    /// The issuer's metadata or keys cannot be had now.
    #[error("the authorization server is unavailable: {0}")]
    Unavailable(String),
}

fn invalid(m: impl Into<String>) -> TokenError {
    TokenError::Invalid(m.into())
}

/// The scopes a token grants: `scope` (space-separated, RFC 9068) or `scp` (an array).
fn scopes(claims: &serde_json::Map<String, Value>) -> Vec<String> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s
            .split(' ')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect(),
        (_, Some(Value::Array(a))) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Checks `token` for `resource` against the trusted `issuers` (found through `find`).
pub async fn validate(
    token: &str,
    resource: &str,
    leeway: i64,
    now: i64,
    find: impl FnOnce(&str) -> Option<std::sync::Arc<Issuer>>,
) -> Result<TokenPrincipal, TokenError> {
    let jws = Jws::parse(token).map_err(|e| invalid(e.to_string()))?;
    // RFC 9068 §4: `at+jwt`; a token without `typ` (or a generic `JWT`) is taken too, since
    // many authorization servers send one; another type (an ID token, a proof) is not.
    if let Some(typ) = jws.header.get("typ") {
        let t = typ.as_str().unwrap_or("").to_ascii_lowercase();
        if !matches!(t.as_str(), "at+jwt" | "application/at+jwt" | "jwt") {
            return Err(invalid("the token's `typ` is not an access token's"));
        }
    }
    if jws.header.get("crit").is_some() {
        return Err(invalid("the token has critical header parameters"));
    }
    let alg = jws.alg(&ALGORITHMS).map_err(|e| invalid(e.to_string()))?;
    let c = &jws.claims;
    let iss = c
        .get("iss")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("the token has no `iss`"))?;
    let issuer = find(iss).ok_or_else(|| invalid("the token's issuer is not trusted here"))?;
    let found = issuer.discovered().await.map_err(TokenError::Unavailable)?;
    found
        .jwks
        .verify(&jws, alg)
        .await
        .map_err(TokenError::Unavailable)?
        .map_err(|e| invalid(e.to_string()))?;
    let aud_ok = match c.get("aud") {
        Some(Value::String(a)) => a == resource,
        Some(Value::Array(a)) => a.iter().any(|x| x.as_str() == Some(resource)),
        _ => false,
    };
    if !aud_ok {
        return Err(invalid("the token is not for this resource (audience)"));
    }
    let leeway = leeway.clamp(0, MAX_LEEWAY);
    let num = |k: &str| c.get(k).and_then(Value::as_i64);
    let expires_at = match num("exp") {
        Some(exp) if exp.saturating_add(leeway) > now => exp,
        Some(_) => return Err(invalid("the token has expired")),
        None => return Err(invalid("the token has no `exp`")),
    };
    if num("nbf").is_some_and(|nbf| nbf.saturating_sub(leeway) > now)
        || num("iat").is_some_and(|iat| iat.saturating_sub(leeway) > now)
    {
        return Err(invalid("the token is not valid yet"));
    }
    let client_id = c
        .get("client_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let subject = c
        .get("sub")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| client_id.clone())
        .ok_or_else(|| invalid("the token has neither `sub` nor `client_id`"))?;
    Ok(TokenPrincipal {
        issuer: issuer.url.clone(),
        subject,
        client_id,
        scopes: scopes(c),
        expires_at,
    })
}
