//! The `http_message_signature` mechanism: RFC 9421 signatures on the MCP HTTP request (checked
//! with `webhook::sig`, the one RFC 9421 implementation), the key found by `keyid` in the caller's
//! profile `keys[]` (else `signing_keys`), fetched through `auth::fetch` and cached. It never
//! fetches a profile before the local checks pass, and never accepts a signature that leaves out a
//! component USP §9.1.4 / UCP require for the request it is on.
//!
//! Hand-written policy, not a format: the RFC 9421 signature base and the signature check are
//! `webhook::sig`'s (see its header for why that is not a crate); this module adds only which key
//! (`keyid` in the caller's profile) and which covered components the request must have.
//! `tests/e2e/test_request_signature_interop.py` checks that requests signed by the independent
//! Python `http-message-signatures` implementation pass here, and that portico's signed backend
//! requests verify there.

use super::fetch::{self, Limits};
use super::transport::RequestInfo;
use crate::webhook::keys::{Alg, VerifyingKey};
use crate::webhook::sfv::{self, Bare, Item, Member};
use crate::webhook::sig::{self, RequestParts, SigError};
use moka::sync::Cache;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a fetched profile's keys are used (USP §10.1.6: at least 60 s).
pub const PROFILE_TTL: Duration = Duration::from_secs(300);
/// Least time between two refetches of one profile caused by an unknown `keyid`.
pub const PROFILE_MIN_REFRESH: Duration = Duration::from_secs(10);

/// A business's compiled `http_message_signature` settings and its profile-key cache.
pub struct Signatures {
    /// Largest distance between a signature's `created` and now.
    pub max_age: Duration,
    /// Refuse signatures without `created` (USP makes it optional on requests).
    pub require_created: bool,
    pub algorithms: Vec<Alg>,
    /// How profiles are fetched (https only, size and time caps, allowed private hosts).
    pub limits: Limits,
    /// Profile URL -> (fetched at, keys).
    cache: Cache<String, (Instant, Arc<Vec<VerifyingKey>>)>,
}

impl Signatures {
    pub fn new(
        max_age: Duration,
        require_created: bool,
        algorithms: Vec<Alg>,
        limits: Limits,
    ) -> Signatures {
        Signatures {
            max_age,
            require_created,
            algorithms,
            limits,
            cache: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(PROFILE_TTL)
                .build(),
        }
    }
}

/// Why a signed request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpSigError {
    #[error(transparent)]
    Sig(#[from] SigError),
    #[error(
        "no profile names the signing keys (send `_meta.usp.profile`, `ucp-agent` or a USP-Agent header)"
    )]
    NoProfile,
    #[error("the caller's profile cannot be fetched: {0}")]
    Unreachable(String),
    #[error("the caller's profile is not a JSON object with a `keys` array")]
    Malformed,
}

/// True when the request carries RFC 9421 signature headers.
pub fn is_signed(info: &RequestInfo) -> bool {
    info.headers.contains_key("signature-input") || info.headers.contains_key("signature")
}

/// The components a request signature must cover (USP §9.1.4, UCP signatures.md): `@method`,
/// `@authority`, `@path` always; `@query`, `usp-agent`, `ucp-agent`, `signature-agent` and
/// `idempotency-key` when present; `content-digest` and `content-type` with a body.
pub fn required(info: &RequestInfo) -> Vec<&'static str> {
    let mut r = vec!["@method", "@authority", "@path"];
    if info.query.is_some() {
        r.push("@query");
    }
    for h in [
        "usp-agent",
        "ucp-agent",
        "signature-agent",
        "idempotency-key",
    ] {
        if info.headers.contains_key(h) {
            r.push(h);
        }
    }
    if info.body.get().is_some_and(|b| !b.is_empty()) {
        r.extend(["content-digest", "content-type"]);
    }
    r
}

/// The `profile` parameter of a `USP-Agent` / `UCP-Agent` header (RFC 8941 dictionary).
fn agent_profile(info: &RequestInfo) -> Option<String> {
    ["usp-agent", "ucp-agent"].iter().find_map(|h| {
        let v = info.headers.get(*h)?.to_str().ok()?;
        sfv::dictionary(v)
            .ok()?
            .into_iter()
            .find_map(|(k, m)| match (k.as_str(), m) {
                (
                    "profile",
                    Member::Item(Item {
                        bare: Bare::String(s),
                        ..
                    }),
                ) => Some(s),
                _ => None,
            })
    })
}

/// The keys a profile document publishes: `keys`, else `signing_keys`; keys that are for
/// encryption, not for verifying, of an unknown type, or broken are skipped (USP §10.1.1).
pub fn profile_keys(doc: &Value) -> Result<Vec<VerifyingKey>, HttpSigError> {
    let list = doc
        .get("keys")
        .or_else(|| doc.get("signing_keys"))
        .and_then(Value::as_array)
        .ok_or(HttpSigError::Malformed)?;
    Ok(list
        .iter()
        .filter(|k| k.get("use").and_then(Value::as_str) != Some("enc"))
        .filter(|k| {
            k.get("key_ops")
                .and_then(Value::as_array)
                .is_none_or(|ops| ops.iter().any(|o| o == "verify"))
        })
        .filter_map(|k| VerifyingKey::from_jwk(k).ok().flatten())
        .collect())
}

impl Signatures {
    /// The keys of the profile at `url`; `force` refetches unless the last fetch is very recent.
    async fn keys(&self, url: &str, force: bool) -> Result<Arc<Vec<VerifyingKey>>, HttpSigError> {
        let min_age = if force {
            PROFILE_MIN_REFRESH
        } else {
            PROFILE_TTL
        };
        if let Some((at, keys)) = self.cache.get(url)
            && at.elapsed() < min_age
        {
            return Ok(keys);
        }
        let body = fetch::get(url, &self.limits).await.map_err(|e| {
            tracing::warn!(error = %e, "a signer's profile is unavailable");
            HttpSigError::Unreachable(e.to_string())
        })?;
        let doc: Value = serde_json::from_slice(&body).map_err(|_| HttpSigError::Malformed)?;
        let keys = Arc::new(profile_keys(&doc)?);
        self.cache
            .insert(url.to_string(), (Instant::now(), keys.clone()));
        Ok(keys)
    }

    /// Verifies the request's signature: the body's `Content-Digest` first (local and cheap), then
    /// the signer's profile keys (`profile`, else the agent header's) and the signature. The
    /// verified signature and the key that made it.
    pub async fn verify(
        &self,
        info: &RequestInfo,
        profile: Option<&str>,
        now: i64,
    ) -> Result<(sig::Verified, VerifyingKey), HttpSigError> {
        if !info.headers.contains_key("signature-input") || !info.headers.contains_key("signature")
        {
            return Err(SigError::Unsigned.into());
        }
        let body = info.body.get().map(|b| b.as_ref()).unwrap_or_default();
        if !body.is_empty() {
            sig::verify_content_digest(&info.headers, body)?;
        }
        let required = required(info);
        let parts = RequestParts {
            method: &info.method,
            authority: &info.authority,
            path: &info.path,
            query: info.query.as_deref(),
            headers: &info.headers,
        };
        let policy = sig::Policy {
            required: &required,
            algorithms: &self.algorithms,
            max_age: self.max_age,
            require_created: self.require_created,
        };
        // Everything that needs no key (covered components, `keyid`, the Signature value) is
        // checked before a profile is fetched: a malformed request costs no outbound call.
        match sig::verify(&parts, &[], &policy, now) {
            Err(SigError::UnknownKey(_)) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => return Err(SigError::UnknownKey(String::new()).into()),
        }
        let url = match profile {
            Some(p) => p.to_string(),
            None => agent_profile(info).ok_or(HttpSigError::NoProfile)?,
        };
        let keys = self.keys(&url, false).await?;
        let first = sig::verify(&parts, &keys, &policy, now);
        let v = match first {
            // A rotated key: look again (rate-limited per profile).
            Err(SigError::UnknownKey(_)) => {
                let keys = self.keys(&url, true).await?;
                sig::verify(&parts, &keys, &policy, now).map(|v| (v, keys))
            }
            other => other.map(|v| (v, keys)),
        };
        let (v, keys) = v?;
        let key = keys
            .iter()
            .find(|k| k.kid == v.keyid)
            .cloned()
            .ok_or_else(|| SigError::UnknownKey(v.keyid.clone()))?;
        Ok((v, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use serde_json::json;
    use std::sync::OnceLock;

    fn info(headers: &[(&'static str, &str)], query: Option<&str>, body: &[u8]) -> RequestInfo {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(*k, v.parse().unwrap());
        }
        let b = OnceLock::new();
        b.set(bytes::Bytes::copy_from_slice(body)).unwrap();
        RequestInfo {
            method: "POST".into(),
            authority: "gw.example".into(),
            path: "/mcp".into(),
            query: query.map(str::to_string),
            headers: h,
            body: b,
        }
    }

    #[test]
    fn required_components_follow_the_request() {
        let bare = info(&[], None, b"");
        assert_eq!(required(&bare), ["@method", "@authority", "@path"]);
        let full = info(
            &[
                ("idempotency-key", "k"),
                ("ucp-agent", "profile=\"https://p\""),
            ],
            Some("a=1"),
            b"{}",
        );
        assert_eq!(
            required(&full),
            [
                "@method",
                "@authority",
                "@path",
                "@query",
                "ucp-agent",
                "idempotency-key",
                "content-digest",
                "content-type"
            ]
        );
        assert_eq!(agent_profile(&full).as_deref(), Some("https://p"));
    }

    #[test]
    fn profile_keys_prefer_keys_and_skip_unusable_ones() {
        let a = crate::webhook::keys::SigningKey::generate(Alg::Ed25519, "a")
            .unwrap()
            .verifying_key()
            .jwk();
        let mut enc = a.clone();
        enc["use"] = json!("enc");
        enc["kid"] = json!("enc");
        let mut sign_only = a.clone();
        sign_only["key_ops"] = json!(["sign"]);
        sign_only["kid"] = json!("sign-only");
        let doc = json!({"keys": [a, enc, sign_only, {"kid": "r", "kty": "RSA"},
            {"kid": "broken", "kty": "OKP", "crv": "Ed25519", "x": "AA"}],
            "signing_keys": []});
        let keys = profile_keys(&doc).unwrap();
        assert_eq!(
            keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        let legacy = json!({"signing_keys": [doc["keys"][0].clone()]});
        assert_eq!(profile_keys(&legacy).unwrap().len(), 1);
        assert_eq!(
            profile_keys(&json!({"name": "x"})),
            Err(HttpSigError::Malformed)
        );
    }
}
