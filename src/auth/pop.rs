//! USP `platform_key_pop` proofs on MCP (§9.2.2, §10.1.6): `usp-pop+jwt` compact JWS, EdDSA,
//! `usp_p` over JCS params, thumbprint (`jkt`), `aud`, `ath`, `iat` window, nonce. It must never
//! resolve a `kid`, accept a header JWK with private members, or ignore an unknown member.

use super::jcs;
use super::jws::{Jws, JwsAlg, JwsError, sha256_b64};
use aws_lc_rs::signature::ED25519;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

/// The proof `typ` of the MCP binding (REST uses `dpop+jwt`; one is never accepted as the other).
pub const TYP: &str = "usp-pop+jwt";
/// Accepted distance between `iat` and now, in seconds (USP §10.1.6: ±60 s).
pub const IAT_WINDOW: i64 = 60;
/// Longest `jti` kept.
const MAX_JTI: usize = 256;

/// Why a proof (or its absence) is refused; each maps to a USP §10.1.1 code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopError {
    #[error("a proof of possession is required")]
    Missing,
    #[error("the proof of possession is invalid: {0}")]
    Invalid(&'static str),
    #[error("the proof is signed by a key other than the one the credential is bound to")]
    KeyMismatch,
    #[error("this proof was already presented")]
    Replayed,
    #[error("a fresh proof carrying the nonce in `data.nonce` is required")]
    NonceRequired,
}

impl PopError {
    /// The USP error code (`data.code`).
    pub fn code(&self) -> &'static str {
        match self {
            PopError::Missing => "pop_proof_missing",
            PopError::Invalid(_) => "pop_proof_invalid",
            PopError::KeyMismatch => "pop_key_mismatch",
            PopError::Replayed => "pop_proof_replayed",
            PopError::NonceRequired => "proof_nonce_required",
        }
    }
}

/// What a proof must match.
pub struct Expect<'a> {
    /// The invoked tool (`usp_m`).
    pub method: &'a str,
    /// `usp_p` recomputed from the call's params.
    pub usp_p: &'a str,
    /// Profile URIs the business publishes (`aud`).
    pub audiences: &'a [String],
    /// The bound key's thumbprint when a credential is presented (compared); `None` at issuance.
    pub jkt: Option<&'a str>,
    /// The presented credential value (`ath`); `None` at issuance (then `ath` must be absent).
    pub credential: Option<&'a str>,
    /// Unix seconds.
    pub now: i64,
}

/// A proof that passed steps 4–11; the caller records `jti` (step 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub jkt: String,
    pub jti: String,
    pub nonce: Option<String>,
}

/// `usp_p`: base64url(SHA-256(JCS(params without `_meta.usp.authorization`))). Only that member
/// is removed; an emptied `_meta.usp` stays `{}`.
pub fn usp_p(params: &Value) -> Result<String, PopError> {
    let mut p = params.clone();
    if let Some(usp) = p
        .get_mut("_meta")
        .and_then(|m| m.get_mut("usp"))
        .and_then(Value::as_object_mut)
    {
        usp.remove("authorization");
    }
    let text =
        jcs::canonical(&p).map_err(|_| PopError::Invalid("params cannot be canonicalized"))?;
    Ok(sha256_b64(text.as_bytes()))
}

/// RFC 7638 thumbprint of an Ed25519 public JWK.
pub fn thumbprint(x: &str) -> String {
    sha256_b64(format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}").as_bytes())
}

const HEADER_MEMBERS: &[&str] = &["typ", "alg", "jwk", "kid"];
const JWK_MEMBERS: &[&str] = &["kty", "crv", "x", "kid", "alg", "use", "key_ops"];
const CLAIMS: &[&str] = &["usp_m", "aud", "usp_p", "iat", "jti", "ath", "nonce"];
const PRIVATE: &[&str] = &["d", "p", "q", "dp", "dq", "qi", "k", "oth"];

fn closed(m: &Map<String, Value>, allowed: &[&str]) -> bool {
    m.keys().all(|k| allowed.contains(&k.as_str()))
}

/// Steps 4–11 of USP §10.1.6 in order: parse and `typ`, `alg`, thumbprint, signature, `aud`,
/// `usp_m` and `usp_p`, `ath`, `iat` (the nonce is checked by the caller, which knows whether
/// one was required).
pub fn verify(proof: &str, e: &Expect<'_>) -> Result<Verified, PopError> {
    let jws = Jws::parse(proof).map_err(|err| match err {
        JwsError::TooLarge => PopError::Invalid("the proof is too large"),
        _ => PopError::Invalid("the proof is not a compact JWS"),
    })?;
    // 4. typ, and a closed header.
    if jws.header.get("typ").and_then(Value::as_str) != Some(TYP) {
        return Err(PopError::Invalid("`typ` must be usp-pop+jwt"));
    }
    if !closed(&jws.header, HEADER_MEMBERS) {
        return Err(PopError::Invalid("the proof header has an unknown member"));
    }
    // 5. alg: EdDSA only; `none` refused before any signature check.
    jws.alg(&[JwsAlg::EdDsa])
        .map_err(|_| PopError::Invalid("`alg` must be EdDSA"))?;
    // 6. the header JWK (never a kid) and its thumbprint.
    let Some(Value::Object(jwk)) = jws.header.get("jwk") else {
        return Err(PopError::Invalid("the proof header has no `jwk`"));
    };
    if PRIVATE.iter().any(|m| jwk.contains_key(*m)) {
        return Err(PopError::Invalid(
            "the header JWK carries private key members",
        ));
    }
    if !closed(jwk, JWK_MEMBERS) {
        return Err(PopError::Invalid("the header JWK has an unknown member"));
    }
    if jwk.get("kty").and_then(Value::as_str) != Some("OKP")
        || jwk.get("crv").and_then(Value::as_str) != Some("Ed25519")
    {
        return Err(PopError::Invalid(
            "the header JWK must be an OKP Ed25519 key",
        ));
    }
    let x = jwk.get("x").and_then(Value::as_str).unwrap_or("");
    let public = URL_SAFE_NO_PAD
        .decode(x)
        .ok()
        .filter(|b| b.len() == 32)
        .ok_or(PopError::Invalid("the header JWK `x` is not a 32-byte key"))?;
    let jkt = thumbprint(x);
    if let Some(bound) = e.jkt
        && bound != jkt
    {
        return Err(PopError::KeyMismatch);
    }
    // 7. signature over the header key.
    if !jws.verify_raw(&ED25519, &public) {
        return Err(PopError::Invalid("the signature does not verify"));
    }
    let c = &jws.claims;
    if !closed(c, CLAIMS) {
        return Err(PopError::Invalid("the proof has an unknown claim"));
    }
    let text = |k: &str| c.get(k).and_then(Value::as_str);
    // 8. aud: one of the business's profile URIs.
    let aud_ok = match c.get("aud") {
        Some(Value::String(a)) => e.audiences.iter().any(|x| x == a),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .any(|a| e.audiences.iter().any(|x| x == a)),
        _ => false,
    };
    if !aud_ok {
        return Err(PopError::Invalid(
            "`aud` is not a profile URI of this business",
        ));
    }
    // 9. usp_m and usp_p.
    if text("usp_m") != Some(e.method) {
        return Err(PopError::Invalid("`usp_m` is not the invoked method"));
    }
    if text("usp_p") != Some(e.usp_p) {
        return Err(PopError::Invalid(
            "`usp_p` does not match the call's params",
        ));
    }
    // 10. ath: present and matching with a credential, absent at issuance.
    match (e.credential, c.get("ath")) {
        (Some(cred), Some(Value::String(ath))) if *ath == sha256_b64(cred.as_bytes()) => {}
        (Some(_), _) => return Err(PopError::Invalid("`ath` does not match the credential")),
        (None, None) => {}
        (None, Some(_)) => return Err(PopError::Invalid("`ath` without a credential")),
    }
    // 11. iat within the window.
    let iat = c
        .get("iat")
        .and_then(Value::as_i64)
        .ok_or(PopError::Invalid("`iat` must be an integer"))?;
    // `abs_diff`: a signed proof may carry any i64 (`iat - now` overflowed for i64::MIN).
    if iat.abs_diff(e.now) > IAT_WINDOW.unsigned_abs() {
        return Err(PopError::Invalid("`iat` is outside the accepted window"));
    }
    let jti = text("jti")
        .filter(|j| !j.is_empty() && j.len() <= MAX_JTI)
        .ok_or(PopError::Invalid("`jti` is missing or too long"))?;
    let nonce = match c.get("nonce") {
        None => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => return Err(PopError::Invalid("`nonce` must be a string")),
    };
    Ok(Verified {
        jkt,
        jti: jti.to_string(),
        nonce,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::keys::{Alg, SigningKey};
    use serde_json::json;

    /// A proof signed with a fresh key whose claims are `claims`.
    fn proof(claims: Value) -> String {
        let key = SigningKey::generate(Alg::Ed25519, "t").expect("key");
        let jwk = key.verifying_key().jwk();
        let header = json!({"typ": TYP, "alg": "EdDSA", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": jwk["x"]}});
        super::super::jws::sign(&header, &claims, &key).expect("sign")
    }

    /// Regression (found while writing the `jws` fuzz target): `iat - now` overflowed, a panic
    /// in debug builds, for a validly signed proof with `iat` near i64::MIN or i64::MAX.
    #[test]
    fn an_extreme_iat_is_refused_not_a_panic() {
        let aud = vec!["https://b.example/.well-known/usp".to_string()];
        let at_now = |audiences| Expect {
            method: "m",
            usp_p: "p",
            audiences,
            jkt: None,
            credential: None,
            now: 1_789_200_000,
        };
        for iat in [i64::MIN, i64::MIN + 1, i64::MAX] {
            let p =
                proof(json!({"usp_m": "m", "usp_p": "p", "aud": aud[0], "iat": iat, "jti": "j"}));
            let e = at_now(&aud);
            assert_eq!(
                verify(&p, &e),
                Err(PopError::Invalid("`iat` is outside the accepted window"))
            );
            // And with the clock itself at an extreme.
            let e = Expect {
                now: -iat.saturating_add(1),
                ..e
            };
            assert!(verify(&p, &e).is_err());
        }
        // The window itself still accepts.
        let p = proof(
            json!({"usp_m": "m", "usp_p": "p", "aud": aud[0], "iat": 1_789_200_030, "jti": "j"}),
        );
        assert!(verify(&p, &at_now(&aud)).is_ok());
    }
}
