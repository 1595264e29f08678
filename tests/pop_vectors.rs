//! USP's proof-of-possession vectors (`tests/vectors/pop/001…010`), read from the fetched
//! upstream folder (`usp/`, pinned by `upstream.lock`): JCS bytes and `usp_p` digests recomputed, real
//! EdDSA proofs verified, and every reject case refused with its named code.

mod common;

use portico::auth::{jcs, pop, store::Stores};
use serde_json::Value;

fn vector(id: &str) -> Value {
    let dir = common::upstream("usp/tests/vectors/pop");
    let file = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("USP vectors unreadable at {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(id))
        })
        .unwrap_or_else(|| panic!("vector {id} not found in {}", dir.display()));
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

const AUD: &str = "https://business.example.com/.well-known/usp";

/// The params a proof vector signs: 004 (issuance) signs 001's, the presentations sign 002's.
fn params_of(id: &str) -> Value {
    let src = if id.starts_with("004") { "001" } else { "002" };
    vector(src)["canonicalization"]["params"].clone()
}

fn expect_for<'a>(v: &'a Value, usp_p: &'a str, audiences: &'a [String]) -> pop::Expect<'a> {
    let claims = &v["expected_claims"];
    let cred = v.get("credential").filter(|c| !c.is_null());
    pop::Expect {
        method: claims["usp_m"].as_str().unwrap(),
        usp_p,
        audiences,
        jkt: cred.and_then(|c| c["cnf"]["jkt"].as_str()),
        credential: cred.and_then(|c| c["value"].as_str()),
        now: claims["iat"].as_i64().unwrap(),
    }
}

#[test]
fn canonicalization_vectors_001_to_003() {
    for id in ["001", "002", "003"] {
        let v = vector(id);
        let c = &v["canonicalization"];
        assert_eq!(
            jcs::canonical(&c["params"]).unwrap(),
            c["jcs"].as_str().unwrap(),
            "{id} JCS bytes"
        );
        assert_eq!(
            pop::usp_p(&c["params"]).unwrap(),
            c["usp_p"].as_str().unwrap(),
            "{id} usp_p"
        );
    }
    // Only `_meta.usp.authorization` leaves the digest: adding one changes nothing.
    let mut with_auth = vector("001")["canonicalization"]["params"].clone();
    with_auth["_meta"]["usp"]["authorization"] =
        serde_json::json!({"mechanism": "platform_key_pop", "proof": "x.y.z"});
    assert_eq!(
        pop::usp_p(&with_auth).unwrap(),
        vector("001")["canonicalization"]["usp_p"].as_str().unwrap()
    );
}

#[test]
fn accept_vectors_004_and_005_verify() {
    let audiences = vec![AUD.to_string()];
    for id in ["004", "005"] {
        let v = vector(id);
        assert_eq!(v["expect"], "accept");
        let usp_p = pop::usp_p(&params_of(id)).unwrap();
        assert_eq!(
            usp_p,
            v["expected_claims"]["usp_p"].as_str().unwrap(),
            "{id}: digest of its params"
        );
        let got = pop::verify(
            v["proof"].as_str().unwrap(),
            &expect_for(&v, &usp_p, &audiences),
        )
        .unwrap_or_else(|e| panic!("{id} must be accepted: {e}"));
        assert_eq!(
            got.jkt,
            v["key"]["jkt"].as_str().unwrap(),
            "{id}: thumbprint"
        );
        assert_eq!(got.jti, v["expected_claims"]["jti"].as_str().unwrap());
        assert_eq!(got.nonce.as_deref(), v["expected_claims"]["nonce"].as_str());
    }
}

#[test]
fn reject_vectors_006_009_010_name_their_codes() {
    let audiences = vec![AUD.to_string()];
    for id in ["006", "009", "010"] {
        let v = vector(id);
        assert_eq!(v["expect"], "reject");
        let usp_p = pop::usp_p(&params_of(id)).unwrap();
        let err = pop::verify(
            v["proof"].as_str().unwrap(),
            &expect_for(&v, &usp_p, &audiences),
        )
        .expect_err(id);
        assert_eq!(
            err.code(),
            v["reject_code"].as_str().unwrap(),
            "{id}: {err}"
        );
    }
}

#[tokio::test]
async fn vector_008_a_replayed_jti_is_refused() {
    let audiences = vec![AUD.to_string()];
    let v = vector("008");
    let original = vector(v["replay_of"].as_str().unwrap());
    assert_eq!(
        v["proof"], original["proof"],
        "008 is a byte-identical resend"
    );
    let usp_p = pop::usp_p(&params_of("008")).unwrap();
    let replay = Stores::memory().replay;
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let got = pop::verify(
            v["proof"].as_str().unwrap(),
            &expect_for(&v, &usp_p, &audiences),
        )
        .unwrap();
        outcomes.push(replay.first_use("business", &got.jti).await);
    }
    assert_eq!(outcomes, [true, false]);
    assert_eq!(
        pop::PopError::Replayed.code(),
        v["reject_code"].as_str().unwrap()
    );
}

#[test]
fn vector_007_names_the_downgrade_code() {
    // Served end to end in tests/security.rs; here the code the gate uses.
    let v = vector("007");
    assert!(v["proof"].is_null() && v["credential"]["cnf"]["jkt"].is_string());
    assert_eq!(
        pop::PopError::Missing.code(),
        v["reject_code"].as_str().unwrap()
    );
}
