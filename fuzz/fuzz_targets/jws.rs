//! Compact JWS parsing and `usp-pop+jwt` proofs (`portico::auth::jws`, `portico::auth::pop`)
//! with their embedded JWKs. Input: one mode byte, then
//!   * even: a token as text, parsed by `Jws::parse` and checked by `pop::verify` against what
//!     its own claims say (so the checks past the signature are reached with real vectors);
//!   * odd: header JSON, NUL, claims JSON, signed here with a key generated at start-up (the
//!     header JWK's `x` is set to that key when bit 1 of the mode byte is set), so claims
//!     checks past the signature see arbitrary values.
//! It never panics; `alg: none` never passes; an accepted proof's thumbprint is its header
//! key's, its `iat` is within the window of the fixed clock and its `jti` is 1..=256 bytes; a
//! header JWK read as a verification key verifies the token only when it is the signing key.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use portico::auth::jws::{self, Jws, JwsAlg, JwtKey};
use portico::auth::pop::{self, Expect};
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::{Value, json};

/// The fixed clock (the USP proof vectors' `iat`).
const NOW: i64 = 1_789_200_000;

static KEY: LazyLock<(SigningKey, String)> = LazyLock::new(|| {
    let key = SigningKey::generate(Alg::Ed25519, "fuzz").expect("an Ed25519 key");
    let x = key.verifying_key().jwk()["x"]
        .as_str()
        .expect("an OKP JWK has x")
        .to_string();
    (key, x)
});

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Expectations for a token that does not even parse.
fn fixed() -> Expect<'static> {
    Expect {
        method: "m",
        usp_p: "p",
        audiences: &[],
        jkt: None,
        credential: None,
        now: NOW,
    }
}

fn check(token: &str) {
    let Ok(jws) = Jws::parse(token) else {
        assert!(
            pop::verify(token, &fixed()).is_err(),
            "an unparsable proof passed"
        );
        return;
    };
    let alg = text(&Value::Object(jws.header.clone()), "alg").to_string();
    if let Ok(a) = jws.alg(&[JwsAlg::EdDsa, JwsAlg::Es256, JwsAlg::Rs256]) {
        assert_eq!(
            a.name(),
            alg,
            "an algorithm other than the header's was chosen"
        );
    }
    let claims = Value::Object(jws.claims.clone());
    let aud: Vec<String> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => vec!["https://business.example.com/.well-known/usp".into()],
    };
    let ath_cred = "bsc_fuzz";
    let expect = Expect {
        method: text(&claims, "usp_m"),
        usp_p: text(&claims, "usp_p"),
        audiences: &aud,
        jkt: None,
        credential: claims.get("ath").map(|_| ath_cred),
        now: NOW,
    };
    let verdict = pop::verify(token, &expect);
    let header_jwk = jws.header.get("jwk").cloned().unwrap_or(Value::Null);
    if let Ok(v) = &verdict {
        assert_eq!(jws.header.get("typ"), Some(&json!(pop::TYP)));
        assert!(alg == "EdDSA", "a proof passed with alg {alg:?}");
        assert_eq!(v.jkt, pop::thumbprint(text(&header_jwk, "x")));
        let iat = claims["iat"]
            .as_i64()
            .expect("an accepted iat is an integer");
        assert!(
            iat.abs_diff(NOW) <= pop::IAT_WINDOW as u64,
            "iat {iat} outside the window"
        );
        assert!(!v.jti.is_empty() && v.jti.len() <= 256);
    }
    // The same proof bound to another key is refused as a key mismatch or earlier.
    let other = Expect {
        jkt: Some("not-this-key"),
        ..expect
    };
    assert!(pop::verify(token, &other).is_err());
    // The header JWK as a JWT verification key.
    if let Ok(Some(k)) = JwtKey::from_jwk(&header_jwk) {
        let _ = k.fits(JwsAlg::Es256);
        if jws.verify(JwsAlg::EdDsa, &k).is_ok() {
            assert!(k.fits(JwsAlg::EdDsa));
        }
    }
    // A JWK Set in the claims (the OAuth issuer's keys have the same reader).
    if claims.get("keys").is_some() {
        if let Ok(keys) = JwtKey::from_jwks(&claims) {
            for k in &keys {
                for a in [JwsAlg::EdDsa, JwsAlg::Es256, JwsAlg::Rs256] {
                    if jws.verify(a, k).is_ok() {
                        assert!(k.fits(a));
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        if let Ok(token) = std::str::from_utf8(rest) {
            check(token);
        }
        return;
    }
    let mut parts = rest.splitn(2, |&b| b == 0);
    let (Some(h), Some(c)) = (parts.next(), parts.next()) else {
        return;
    };
    let (Ok(mut header), Ok(claims)) = (
        serde_json::from_slice::<Value>(h),
        serde_json::from_slice::<Value>(c),
    ) else {
        return;
    };
    let (key, x) = &*KEY;
    if mode & 2 != 0
        && let Some(Value::Object(jwk)) = header.get_mut("jwk")
    {
        jwk.insert("x".into(), Value::from(x.as_str()));
    }
    let Ok(token) = jws::sign(&header, &claims, key) else {
        return;
    };
    check(&token);
    if let Ok(Some(k)) = JwtKey::from_jwk(&header["jwk"])
        && let Ok(jws) = Jws::parse(&token)
        && jws.verify(JwsAlg::EdDsa, &k).is_ok()
    {
        assert_eq!(
            text(&header["jwk"], "x"),
            x,
            "a key other than the signer's verified"
        );
    }
});
