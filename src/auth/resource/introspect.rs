//! Opaque access tokens through token introspection (RFC 7662) at the introspection endpoints
//! the trusted issuers' metadata names, with a short cache of active answers. It must never
//! send a token anywhere else, log one, or cache an answer past its `exp` or `CACHE_TTL`.

use super::issuer::Issuer;
use super::principal::TokenPrincipal;
use super::spec::Introspection;
use super::token::TokenError;
use crate::auth::fetch::{self, Form};
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long an active answer is reused (never past the token's `exp`).
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// sha256(resource, token) -> (principal, exp).
type Cache = moka::sync::Cache<[u8; 32], (TokenPrincipal, i64)>;

fn cache() -> &'static Cache {
    static C: OnceLock<Cache> = OnceLock::new();
    C.get_or_init(|| {
        moka::sync::Cache::builder()
            .max_capacity(10_000)
            .time_to_live(CACHE_TTL)
            .build()
    })
}

fn key(resource: &str, token: &str) -> [u8; 32] {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(resource.as_bytes());
    ctx.update(&[0]);
    ctx.update(token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn invalid(m: &str) -> TokenError {
    TokenError::Invalid(m.to_string())
}

/// The principal of an active answer `doc` of `issuer` for `resource`.
fn judge(
    doc: &Value,
    issuer: &str,
    resource: &str,
    leeway: i64,
    now: i64,
) -> Result<(TokenPrincipal, i64), TokenError> {
    if let Some(iss) = doc.get("iss")
        && iss.as_str() != Some(issuer)
    {
        return Err(invalid("the introspected token names another issuer"));
    }
    let aud_ok = match doc.get("aud") {
        Some(Value::String(a)) => a == resource,
        Some(Value::Array(a)) => a.iter().any(|x| x.as_str() == Some(resource)),
        _ => false,
    };
    if !aud_ok {
        return Err(invalid("the token is not for this resource (audience)"));
    }
    let num = |k: &str| doc.get(k).and_then(Value::as_i64);
    let exp = num("exp").unwrap_or(now + CACHE_TTL.as_secs() as i64);
    if exp.saturating_add(leeway) <= now {
        return Err(invalid("the token has expired"));
    }
    if num("nbf").is_some_and(|nbf| nbf.saturating_sub(leeway) > now) {
        return Err(invalid("the token is not valid yet"));
    }
    let client_id = doc
        .get("client_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let subject = doc
        .get("sub")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| client_id.clone())
        .ok_or_else(|| invalid("the token has neither `sub` nor `client_id`"))?;
    let scopes = doc
        .get("scope")
        .and_then(Value::as_str)
        .map(|s| {
            s.split(' ')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok((
        TokenPrincipal {
            issuer: issuer.to_string(),
            subject,
            client_id,
            scopes,
            expires_at: exp,
        },
        exp,
    ))
}

/// Introspects the opaque `token` at each trusted issuer's endpoint in turn (authenticated as
/// `client`) until one says it is active.
pub async fn introspect(
    token: &str,
    resource: &str,
    leeway: i64,
    now: i64,
    client: &Introspection,
    issuers: &[Arc<Issuer>],
) -> Result<TokenPrincipal, TokenError> {
    let k = key(resource, token);
    if let Some((p, exp)) = cache().get(&k)
        && exp.saturating_add(leeway) > now
    {
        return Ok(p);
    }
    let mut unavailable = None;
    let mut asked = false;
    for issuer in issuers {
        let found = match issuer.discovered().await {
            Ok(f) => f,
            Err(e) => {
                unavailable = Some(e);
                continue;
            }
        };
        let Some(endpoint) = &found.introspection else {
            continue;
        };
        asked = true;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let form = Form {
            user: &client.client_id,
            password: &client.client_secret,
            body,
        };
        let answer = match fetch::post_form(endpoint, issuer.limits(), form).await {
            Ok(a) => a,
            Err(e) => {
                unavailable = Some(format!("introspection at {}: {e}", issuer.url));
                continue;
            }
        };
        let Ok(doc) = serde_json::from_slice::<Value>(&answer) else {
            unavailable = Some(format!("introspection at {}: not JSON", issuer.url));
            continue;
        };
        if doc.get("active") != Some(&Value::Bool(true)) {
            continue;
        }
        let (p, exp) = judge(&doc, &issuer.url, resource, leeway, now)?;
        cache().insert(k, (p.clone(), exp));
        return Ok(p);
    }
    match unavailable {
        Some(e) => Err(TokenError::Unavailable(e)),
        None if !asked => Err(invalid(
            "opaque tokens cannot be checked here (no introspection endpoint)",
        )),
        None => Err(invalid("the token is not active")),
    }
}
