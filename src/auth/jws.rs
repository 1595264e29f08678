//! Compact JWS: parsing with a size cap, algorithm/key matching (no `alg: none`, no key-type or
//! curve substitution) and signature checks for JWTs and proofs. It must never accept a token
//! whose algorithm it does not implement or whose key does not fit that algorithm.
//!
//! Why hand-written rather than `jsonwebtoken`: the cryptography is aws-lc-rs's either way
//! (`jsonwebtoken` 12 calls the same library); what is written here is splitting the token under
//! a size cap, the `alg`/key matching rules and the JWKS reading. The USP proof rules
//! (`auth::pop`, §10.1.6 steps 4–11) need the decoded header as a plain JSON object (a closed
//! member set, the key taken from the header's own `jwk`) and one typed error per step in the
//! spec's order, while `jsonwebtoken::decode` checks the signature and its own registered-claim
//! rules (`exp`, `nbf`, `aud`, `iss`) in one call into a fixed `Header` type; using it would mean
//! rebuilding those steps around it. `jws_differential.rs` checks that ES256 and EdDSA tokens
//! made by either side verify on the other, and that both refuse `alg: none`, a forged payload
//! and a key of another algorithm; `tests/pop_vectors.rs` checks proofs against published vectors.

use crate::webhook::keys::{Alg, VerifyingKey};
use aws_lc_rs::signature::{self, RsaPublicKeyComponents};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use std::fmt;

/// Largest compact JWS accepted (bytes); a larger one is refused before decoding.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// JWS algorithms portico verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwsAlg {
    EdDsa,
    Es256,
    Rs256,
}

impl JwsAlg {
    pub fn parse(s: &str) -> Option<JwsAlg> {
        match s {
            "EdDSA" => Some(JwsAlg::EdDsa),
            "ES256" => Some(JwsAlg::Es256),
            "RS256" => Some(JwsAlg::Rs256),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            JwsAlg::EdDsa => "EdDSA",
            JwsAlg::Es256 => "ES256",
            JwsAlg::Rs256 => "RS256",
        }
    }
}

/// Why a token was refused. The texts never carry token content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    #[error("the token is larger than {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    #[error("the token is not a compact JWS (three base64url parts, JSON header and payload)")]
    Malformed,
    #[error("`alg: none` is refused")]
    AlgNone,
    #[error("algorithm `{0}` is not accepted")]
    Alg(String),
    #[error("no key matches the token (kid and algorithm)")]
    NoKey,
    #[error("the key's type or curve does not fit the token's algorithm")]
    KeyMismatch,
    #[error("the signature does not verify")]
    Signature,
}

/// A parsed, not yet verified, compact JWS.
pub struct Jws {
    pub header: Map<String, Value>,
    pub claims: Map<String, Value>,
    signing_input: Vec<u8>,
    signature: Vec<u8>,
}

impl fmt::Debug for Jws {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jws")
            .field("alg", &self.header.get("alg"))
            .finish_non_exhaustive()
    }
}

fn b64(part: &str) -> Result<Vec<u8>, JwsError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwsError::Malformed)
}

fn object(bytes: &[u8]) -> Result<Map<String, Value>, JwsError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(JwsError::Malformed),
    }
}

impl Jws {
    /// Splits and decodes `token`; checks nothing cryptographic yet.
    pub fn parse(token: &str) -> Result<Jws, JwsError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwsError::TooLarge);
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwsError::Malformed);
        };
        let header = object(&b64(h)?)?;
        let claims = object(&b64(p)?)?;
        let signature = b64(s)?;
        Ok(Jws {
            header,
            claims,
            signing_input: format!("{h}.{p}").into_bytes(),
            signature,
        })
    }

    /// The header's algorithm, refusing `none` and anything outside `accepted`.
    pub fn alg(&self, accepted: &[JwsAlg]) -> Result<JwsAlg, JwsError> {
        let name = self.header.get("alg").and_then(Value::as_str).unwrap_or("");
        if name.eq_ignore_ascii_case("none") || name.is_empty() {
            return Err(JwsError::AlgNone);
        }
        JwsAlg::parse(name)
            .filter(|a| accepted.contains(a))
            .ok_or_else(|| JwsError::Alg(name.chars().take(16).collect()))
    }

    pub fn kid(&self) -> Option<&str> {
        self.header.get("kid").and_then(Value::as_str)
    }

    /// Verifies the signature with a raw public key for a fixed algorithm.
    pub fn verify_raw(
        &self,
        alg: &'static dyn signature::VerificationAlgorithm,
        public: &[u8],
    ) -> bool {
        signature::UnparsedPublicKey::new(alg, public)
            .verify(&self.signing_input, &self.signature)
            .is_ok()
    }

    /// Verifies the signature with `key` for `alg` (the key must fit the algorithm).
    pub fn verify(&self, alg: JwsAlg, key: &JwtKey) -> Result<(), JwsError> {
        if !key.fits(alg) {
            return Err(JwsError::KeyMismatch);
        }
        let ok = match key {
            JwtKey::Sig { key, .. } => key.verify(&self.signing_input, &self.signature),
            JwtKey::Rsa { n, e, .. } => RsaPublicKeyComponents { n, e }
                .verify(
                    &signature::RSA_PKCS1_2048_8192_SHA256,
                    &self.signing_input,
                    &self.signature,
                )
                .is_ok(),
        };
        if ok { Ok(()) } else { Err(JwsError::Signature) }
    }
}

/// A public key from a JWK Set that verifies JWTs.
#[derive(Clone)]
pub enum JwtKey {
    /// EC P-256 or Ed25519 (the signature module's key), with the JWK's own `alg`, if any.
    Sig {
        key: VerifyingKey,
        alg: Option<String>,
    },
    /// RSA (RS256), modulus and exponent big-endian.
    Rsa {
        kid: String,
        n: Vec<u8>,
        e: Vec<u8>,
        alg: Option<String>,
    },
}

impl fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtKey").field("kid", &self.kid()).finish()
    }
}

impl JwtKey {
    pub fn kid(&self) -> &str {
        match self {
            JwtKey::Sig { key, .. } => &key.kid,
            JwtKey::Rsa { kid, .. } => kid,
        }
    }

    /// True when this key may verify `alg`: the key type and curve are the algorithm's, and
    /// a JWK `alg` member, when present, names the same algorithm.
    pub fn fits(&self, alg: JwsAlg) -> bool {
        let (kind_ok, declared) = match self {
            JwtKey::Sig { key, alg: a } => (
                matches!(
                    (key.alg, alg),
                    (Alg::Ed25519, JwsAlg::EdDsa) | (Alg::EcdsaP256Sha256, JwsAlg::Es256)
                ),
                a,
            ),
            JwtKey::Rsa { n, alg: a, .. } => (alg == JwsAlg::Rs256 && n.len() >= 256, a),
        };
        kind_ok && declared.as_deref().is_none_or(|d| d == alg.name())
    }

    /// Reads one JWK; `Ok(None)` for a key type portico does not implement or a key meant for
    /// encryption (skipped, as JWKS consumers do).
    pub fn from_jwk(jwk: &Value) -> Result<Option<JwtKey>, String> {
        if jwk.get("use").and_then(Value::as_str) == Some("enc") {
            return Ok(None);
        }
        if ["d", "p", "q", "dp", "dq", "qi"]
            .iter()
            .any(|m| jwk.get(m).is_some())
        {
            return Err("a JWKS must not hold private key members".into());
        }
        let alg = jwk.get("alg").and_then(Value::as_str).map(str::to_string);
        if jwk.get("kty").and_then(Value::as_str) == Some("RSA") {
            let kid = jwk
                .get("kid")
                .and_then(Value::as_str)
                .ok_or("an RSA key has no `kid`")?
                .to_string();
            let field = |f: &str| {
                jwk.get(f)
                    .and_then(Value::as_str)
                    .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
                    .ok_or_else(|| format!("RSA key `{kid}`: `{f}` is missing or not base64url"))
            };
            return Ok(Some(JwtKey::Rsa {
                n: field("n")?,
                e: field("e")?,
                kid,
                alg,
            }));
        }
        match VerifyingKey::from_jwk(jwk) {
            Ok(Some(key)) => Ok(Some(JwtKey::Sig { key, alg })),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Reads a JWK Set document.
    pub fn from_jwks(doc: &Value) -> Result<Vec<JwtKey>, String> {
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("not a JWK Set: no `keys` array")?;
        let mut out = Vec::new();
        for k in keys {
            if let Some(key) = JwtKey::from_jwk(k)? {
                out.push(key);
            }
        }
        Ok(out)
    }
}

/// base64url (no padding) of SHA-256 of `bytes`.
pub fn sha256_b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes))
}

/// Builds a compact JWS (tests and tools that mint proofs with their own keys).
pub fn sign(
    header: &Value,
    claims: &Value,
    key: &crate::webhook::keys::SigningKey,
) -> Result<String, crate::webhook::keys::KeyError> {
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let sig = key.sign(input.as_bytes())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig)))
}

#[cfg(test)]
#[path = "jws_differential.rs"]
mod differential;
