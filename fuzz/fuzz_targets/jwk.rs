//! JWK / JWK Set parsing (webhook verifying keys, private signing keys). Input: JSON text.
//! It never panics; a public key it reads survives `jwk()` -> `from_jwk`; a private key it
//! reads signs a message its own public half verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portico::webhook::keys::{SigningKey, VerifyingKey};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(keys) = VerifyingKey::from_jwks(text) {
        for k in keys {
            let again = VerifyingKey::from_jwk(&k.jwk());
            assert!(
                matches!(&again, Ok(Some(a)) if a.jwk() == k.jwk()),
                "a read key does not round-trip"
            );
        }
    }
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let _ = VerifyingKey::from_jwk(&value);
    if let Ok(key) = SigningKey::from_jwk(&value) {
        let msg = b"portico fuzz";
        if let Ok(sig) = key.sign(msg) {
            assert!(
                key.verifying_key().verify(msg, &sig),
                "a private JWK signs what its public half refuses"
            );
        }
    }
});
