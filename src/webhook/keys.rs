//! Signature keys: public JWKs (JWKS file or a profile's `keys[]`) that verify, private JWKs that sign.
//! It never logs private key material (only `SigningKey::private_jwk`, for the key's owner, serialises it).

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    self, ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, ED25519, EcdsaKeyPair,
    Ed25519KeyPair, KeyPair, UnparsedPublicKey,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use std::fmt;

/// A signature algorithm portico implements (RFC 9421 §3.3 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alg {
    EcdsaP256Sha256,
    Ed25519,
}

impl Alg {
    pub const ALL: [Alg; 2] = [Alg::EcdsaP256Sha256, Alg::Ed25519];

    /// The RFC 9421 algorithm name.
    pub fn name(self) -> &'static str {
        match self {
            Alg::EcdsaP256Sha256 => "ecdsa-p256-sha256",
            Alg::Ed25519 => "ed25519",
        }
    }

    pub fn parse(name: &str) -> Option<Alg> {
        Alg::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// Why a key could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("JWKS is not valid JSON with a `keys` array: {0}")]
    NotJwks(String),
    #[error("key `{kid}`: {what}")]
    Bad { kid: String, what: String },
    #[error("cannot create a key: {0}")]
    Crypto(String),
}

/// A public key that verifies signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    pub kid: String,
    pub alg: Alg,
    /// Uncompressed SEC1 point (P-256) or the raw 32 bytes (Ed25519).
    public: Vec<u8>,
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish()
    }
}

fn b64(kid: &str, jwk: &Value, field: &str, len: usize) -> Result<Vec<u8>, KeyError> {
    let bad = |what: String| KeyError::Bad {
        kid: kid.to_string(),
        what,
    };
    let text = jwk
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("missing `{field}`")))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| bad(format!("`{field}` is not base64url")))?;
    if bytes.len() != len {
        return Err(bad(format!("`{field}` must be {len} bytes")));
    }
    Ok(bytes)
}

impl VerifyingKey {
    /// Reads one public JWK; `Ok(None)` for a key type or curve portico does not implement (a
    /// verifier skips those, USP §10.1.1).
    pub fn from_jwk(jwk: &Value) -> Result<Option<VerifyingKey>, KeyError> {
        let kid = jwk
            .get("kid")
            .and_then(Value::as_str)
            .ok_or_else(|| KeyError::Bad {
                kid: "?".into(),
                what: "missing `kid`".into(),
            })?
            .to_string();
        let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or("");
        let crv = jwk.get("crv").and_then(Value::as_str).unwrap_or("");
        let (alg, public) = match (kty, crv) {
            ("EC", "P-256") => {
                let mut point = vec![4u8];
                point.extend(b64(&kid, jwk, "x", 32)?);
                point.extend(b64(&kid, jwk, "y", 32)?);
                (Alg::EcdsaP256Sha256, point)
            }
            ("OKP", "Ed25519") => (Alg::Ed25519, b64(&kid, jwk, "x", 32)?),
            _ => return Ok(None),
        };
        Ok(Some(VerifyingKey { kid, alg, public }))
    }

    /// Reads a JWK Set (`{"keys": [...]}`, or a profile with `keys` / `signing_keys`).
    pub fn from_jwks(text: &str) -> Result<Vec<VerifyingKey>, KeyError> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| KeyError::NotJwks(e.to_string()))?;
        let keys = doc
            .get("keys")
            .or_else(|| doc.get("signing_keys"))
            .and_then(Value::as_array)
            .ok_or_else(|| KeyError::NotJwks("no `keys` array".into()))?;
        let mut out = Vec::new();
        for k in keys {
            if let Some(v) = Self::from_jwk(k)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// True when `sig` is this key's signature of `msg`.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let alg: &dyn signature::VerificationAlgorithm = match self.alg {
            Alg::EcdsaP256Sha256 => &ECDSA_P256_SHA256_FIXED,
            Alg::Ed25519 => &ED25519,
        };
        UnparsedPublicKey::new(alg, &self.public)
            .verify(msg, sig)
            .is_ok()
    }

    /// The public key bytes: the uncompressed SEC1 point (P-256) or the raw 32 bytes (Ed25519).
    pub fn public_bytes(&self) -> &[u8] {
        &self.public
    }

    /// The RFC 7638 JWK thumbprint (base64url SHA-256 of the required members, sorted).
    pub fn thumbprint(&self) -> String {
        let canonical = match self.alg {
            Alg::EcdsaP256Sha256 => format!(
                "{{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"{}\",\"y\":\"{}\"}}",
                URL_SAFE_NO_PAD.encode(&self.public[1..33]),
                URL_SAFE_NO_PAD.encode(&self.public[33..65]),
            ),
            Alg::Ed25519 => format!(
                "{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{}\"}}",
                URL_SAFE_NO_PAD.encode(&self.public)
            ),
        };
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
        URL_SAFE_NO_PAD.encode(d.as_ref())
    }

    /// The public JWK.
    pub fn jwk(&self) -> Value {
        match self.alg {
            Alg::EcdsaP256Sha256 => json!({
                "kid": self.kid, "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
                "x": URL_SAFE_NO_PAD.encode(&self.public[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&self.public[33..65]),
            }),
            Alg::Ed25519 => json!({
                "kid": self.kid, "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
                "x": URL_SAFE_NO_PAD.encode(&self.public),
            }),
        }
    }
}

enum Pair {
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A private key that signs.
pub struct SigningKey {
    pub kid: String,
    pub alg: Alg,
    pair: Pair,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh random key.
    pub fn generate(alg: Alg, kid: &str) -> Result<SigningKey, KeyError> {
        let pair = match alg {
            Alg::EcdsaP256Sha256 => Pair::Ec(
                EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
                    .map_err(|e| KeyError::Crypto(e.to_string()))?,
            ),
            Alg::Ed25519 => {
                Pair::Ed(Ed25519KeyPair::generate().map_err(|e| KeyError::Crypto(e.to_string()))?)
            }
        };
        Ok(SigningKey {
            kid: kid.to_string(),
            alg,
            pair,
        })
    }

    /// Reads a private JWK file; the error names the file, never key material.
    pub fn read(path: &std::path::Path) -> Result<SigningKey, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let jwk: Value = serde_json::from_str(&text)
            .map_err(|e| format!("`{}` is not a JSON JWK: {e}", path.display()))?;
        SigningKey::from_jwk(&jwk).map_err(|e| e.to_string())
    }

    /// Reads a private JWK (`d` plus the public members).
    pub fn from_jwk(jwk: &Value) -> Result<SigningKey, KeyError> {
        let public = VerifyingKey::from_jwk(jwk)?.ok_or_else(|| KeyError::Bad {
            kid: jwk.get("kid").and_then(Value::as_str).unwrap_or("?").into(),
            what: "only EC P-256 and OKP Ed25519 keys can sign".into(),
        })?;
        let kid = public.kid.clone();
        let d = b64(&kid, jwk, "d", 32)?;
        let rejected = |e: aws_lc_rs::error::KeyRejected| KeyError::Bad {
            kid: kid.clone(),
            what: format!("private key rejected: {e}"),
        };
        let pair = match public.alg {
            Alg::EcdsaP256Sha256 => Pair::Ec(
                EcdsaKeyPair::from_private_key_and_public_key(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    &d,
                    &public.public,
                )
                .map_err(rejected)?,
            ),
            Alg::Ed25519 => Pair::Ed(
                Ed25519KeyPair::from_seed_and_public_key(&d, &public.public).map_err(rejected)?,
            ),
        };
        Ok(SigningKey {
            kid: kid.clone(),
            alg: public.alg,
            pair,
        })
    }

    /// Signs `msg` (ECDSA: fixed-width `r||s`, 64 bytes).
    pub fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, KeyError> {
        match &self.pair {
            Pair::Ec(k) => k
                .sign(&SystemRandom::new(), msg)
                .map(|s| s.as_ref().to_vec())
                .map_err(|e| KeyError::Crypto(e.to_string())),
            Pair::Ed(k) => Ok(k.sign(msg).as_ref().to_vec()),
        }
    }

    /// The matching public key.
    pub fn verifying_key(&self) -> VerifyingKey {
        let public = match &self.pair {
            Pair::Ec(k) => k.public_key().as_ref().to_vec(),
            Pair::Ed(k) => k.public_key().as_ref().to_vec(),
        };
        VerifyingKey {
            kid: self.kid.clone(),
            alg: self.alg,
            public,
        }
    }

    /// The private JWK (public members plus `d`), for the key's owner to store.
    pub fn private_jwk(&self) -> Result<Value, KeyError> {
        use aws_lc_rs::encoding::{AsBigEndian, EcPrivateKeyBin};
        let d = match &self.pair {
            Pair::Ec(k) => {
                let bin: EcPrivateKeyBin<'_> = k
                    .private_key()
                    .as_be_bytes()
                    .map_err(|e| KeyError::Crypto(e.to_string()))?;
                bin.as_ref().to_vec()
            }
            Pair::Ed(k) => k
                .seed()
                .map_err(|e| KeyError::Crypto(e.to_string()))?
                .as_be_bytes()
                .map_err(|e| KeyError::Crypto(e.to_string()))?
                .as_ref()
                .to_vec(),
        };
        let mut jwk = self.verifying_key().jwk();
        jwk["d"] = json!(URL_SAFE_NO_PAD.encode(d));
        Ok(jwk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_sign_verify_and_round_trip_as_jwk() {
        for alg in Alg::ALL {
            let k = SigningKey::generate(alg, "k1").unwrap();
            let sig = k.sign(b"hello").unwrap();
            assert_eq!(sig.len(), 64);
            let v = k.verifying_key();
            assert!(v.verify(b"hello", &sig));
            assert!(!v.verify(b"hellO", &sig));
            let again = SigningKey::from_jwk(&k.private_jwk().unwrap()).unwrap();
            assert_eq!(again.verifying_key(), v);
            let from_public = VerifyingKey::from_jwk(&v.jwk()).unwrap().unwrap();
            assert_eq!(from_public.thumbprint(), v.thumbprint());
            assert!(from_public.verify(b"hello", &again.sign(b"hello").unwrap()));
        }
    }

    #[test]
    fn jwks_skips_unknown_key_types_and_refuses_broken_keys() {
        let set = r#"{"keys":[{"kid":"r","kty":"RSA","n":"AQAB","e":"AQAB"},
            {"kid":"e","kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}]}"#;
        let keys = VerifyingKey::from_jwks(set).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].alg, Alg::Ed25519);
        // RFC 8037 Appendix A.3: the thumbprint of the RFC's Ed25519 example key.
        let rfc8037 = VerifyingKey::from_jwk(&serde_json::json!({"kid": "a", "kty": "OKP",
            "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}))
        .unwrap()
        .unwrap();
        assert_eq!(
            rfc8037.thumbprint(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
        assert!(
            VerifyingKey::from_jwks(
                r#"{"keys":[{"kid":"e","kty":"OKP","crv":"Ed25519","x":"AA"}]}"#
            )
            .is_err()
        );
        assert!(VerifyingKey::from_jwks("[]").is_err());
    }
}
