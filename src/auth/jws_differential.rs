//! Differential tests of the compact JWS code against the `jsonwebtoken` crate: tokens minted by
//! each side verify on the other, and both refuse `alg: none` and a key of the wrong algorithm.

use super::*;
use crate::webhook::keys::SigningKey;
use aws_lc_rs::encoding::{AsBigEndian, EcPrivateKeyBin};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::json;

/// One key pair, as each side holds it: our signing key, the crate's encoding and decoding keys.
struct Pair {
    ours: SigningKey,
    enc: EncodingKey,
    dec: DecodingKey,
    alg: JwsAlg,
    crate_alg: Algorithm,
}

fn b64u(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A fresh key; ours is read from the private JWK built from the same key material.
fn pair(alg: JwsAlg) -> Pair {
    let rng = SystemRandom::new();
    let (jwk, enc, crate_alg) = match alg {
        JwsAlg::Es256 => {
            let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            let kp =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref()).unwrap();
            let public = kp.public_key().as_ref(); // 0x04 || x || y
            let d: EcPrivateKeyBin<'_> = kp.private_key().as_be_bytes().unwrap();
            let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k-es",
                "x": b64u(&public[1..33]), "y": b64u(&public[33..65]), "d": b64u(d.as_ref())});
            let enc = EncodingKey::from_ec_der(doc.as_ref());
            (jwk, enc, Algorithm::ES256)
        }
        JwsAlg::EdDsa => {
            let doc = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
            let kp = Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap();
            let seed = kp.seed().unwrap().as_be_bytes().unwrap();
            let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": "k-ed",
                "x": b64u(kp.public_key().as_ref()), "d": b64u(seed.as_ref())});
            let enc = EncodingKey::from_ed_der(doc.as_ref());
            (jwk, enc, Algorithm::EdDSA)
        }
        JwsAlg::Rs256 => unreachable!("RS256 tokens are covered by tests/pop_vectors.rs"),
    };
    let ours = SigningKey::from_jwk(&jwk).unwrap();
    // The crate reads our public JWK, so the JWK form is part of what is compared.
    let public: jsonwebtoken::jwk::Jwk =
        serde_json::from_value(ours.verifying_key().jwk()).unwrap();
    let dec = DecodingKey::from_jwk(&public).unwrap();
    Pair {
        ours,
        enc,
        dec,
        alg,
        crate_alg,
    }
}

fn our_key(p: &Pair) -> JwtKey {
    JwtKey::Sig {
        key: p.ours.verifying_key(),
        alg: None,
    }
}

fn validation(alg: Algorithm) -> Validation {
    let mut v = Validation::new(alg);
    v.required_spec_claims.clear();
    v.validate_exp = false;
    v
}

fn claims() -> Value {
    json!({"sub": "client-1", "aud": "portico", "n": [1, 2, 3]})
}

fn our_verdict(token: &str, key: &JwtKey) -> Result<Map<String, Value>, JwsError> {
    let jws = Jws::parse(token)?;
    let alg = jws.alg(&[JwsAlg::Es256, JwsAlg::EdDsa])?;
    jws.verify(alg, key)?;
    Ok(jws.claims)
}

fn crate_verdict(token: &str, key: &DecodingKey, alg: Algorithm) -> Result<Value, String> {
    let mut v = validation(alg);
    v.validate_aud = false;
    jsonwebtoken::decode::<Value>(token, key, &v)
        .map(|d| d.claims)
        .map_err(|e| e.to_string())
}

#[test]
fn tokens_verify_across_implementations() {
    for alg in [JwsAlg::Es256, JwsAlg::EdDsa] {
        let p = pair(alg);
        // Ours signs, the crate verifies.
        let header = json!({"alg": p.alg.name(), "typ": "JWT", "kid": p.ours.kid});
        let ours = sign(&header, &claims(), &p.ours).unwrap();
        assert_eq!(crate_verdict(&ours, &p.dec, p.crate_alg).unwrap(), claims());
        // The crate signs, ours verifies.
        let theirs = jsonwebtoken::encode(&Header::new(p.crate_alg), &claims(), &p.enc).unwrap();
        let got = our_verdict(&theirs, &our_key(&p)).unwrap();
        assert_eq!(Value::Object(got), claims());
        // A changed payload fails on both sides.
        for token in [&ours, &theirs] {
            let mut parts: Vec<&str> = token.split('.').collect();
            let forged = b64u(br#"{"sub":"admin"}"#);
            parts[1] = &forged;
            let forged = parts.join(".");
            assert_eq!(
                our_verdict(&forged, &our_key(&p)).unwrap_err(),
                JwsError::Signature
            );
            assert!(crate_verdict(&forged, &p.dec, p.crate_alg).is_err());
        }
    }
}

#[test]
fn both_refuse_alg_none() {
    let p = pair(JwsAlg::Es256);
    for alg in ["none", "None", "NONE"] {
        let token = format!(
            "{}.{}.",
            b64u(json!({"alg": alg, "typ": "JWT"}).to_string().as_bytes()),
            b64u(claims().to_string().as_bytes())
        );
        assert_eq!(
            our_verdict(&token, &our_key(&p)).unwrap_err(),
            JwsError::AlgNone
        );
        assert!(crate_verdict(&token, &p.dec, Algorithm::ES256).is_err());
    }
}

#[test]
fn both_refuse_a_key_of_another_algorithm() {
    let es = pair(JwsAlg::Es256);
    let ed = pair(JwsAlg::EdDsa);
    for (signer, other) in [(&es, &ed), (&ed, &es)] {
        // A genuine token checked with the other algorithm's key.
        let token =
            jsonwebtoken::encode(&Header::new(signer.crate_alg), &claims(), &signer.enc).unwrap();
        assert_eq!(
            our_verdict(&token, &our_key(other)).unwrap_err(),
            JwsError::KeyMismatch
        );
        assert!(crate_verdict(&token, &other.dec, signer.crate_alg).is_err());
        // A token whose header names the other algorithm than the one that signed it.
        let header = json!({"alg": other.alg.name(), "typ": "JWT"});
        let relabelled = sign(&header, &claims(), &signer.ours).unwrap();
        assert_eq!(
            our_verdict(&relabelled, &our_key(signer)).unwrap_err(),
            JwsError::KeyMismatch
        );
        assert!(crate_verdict(&relabelled, &signer.dec, other.crate_alg).is_err());
    }
}
