//! VRP receipt v1 conformance vectors (`examples/conformance/receipt/01…06`), read in place from
//! `../shared/upstream/vrp`: each verifies to its expected per-layer result at the vector's `now`.

use portico::vrp;
use serde_json::Value;
use std::path::PathBuf;

#[test]
fn every_receipt_vector_gives_its_expected_result() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/upstream/vrp/examples/conformance/receipt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "VRP vectors missing at {} ({e}): /work/shared/upstream must sit next to the crate",
                dir.display()
            )
        })
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "01…06");
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let now = vrp::parse_time(v["now"].as_str().unwrap()).unwrap();
        let got = vrp::verify_receipt(&v["receipt"], &v["jwks"], now);
        assert_eq!(got, v["expected"], "{}", f.display());
    }
}

mod common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn vrp_tools_carry_a_signed_transport_attestation_that_verifies() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let key = portico::webhook::keys::SigningKey::generate(
        portico::webhook::keys::Alg::Ed25519,
        "node-2026-01",
    )
    .unwrap();
    std::fs::write(
        dir.join("node.jwk.json"),
        key.private_jwk().unwrap().to_string(),
    )
    .unwrap();
    let file = dir.join("plain.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\nvrp:\n  issuer: villa.example\n  key: node.jwk.json\n  source: https://villa.example/.well-known/jwks.json\n  valid_for: 1h\n  tools:\n    echo_get: { offer_ref: /path }\n");
    std::fs::write(&file, text).unwrap();
    let g = gateway(&[file]).await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());
    let args = json!({"id": "A-7", "tag": "sea"});
    let a = call(&c, &url, "echo_get", args.clone()).await;
    let att = &a.result()["_meta"]["vrp"]["attestations"][0];
    assert_eq!(att["layer"], "transport", "{}", a.text);
    assert_eq!(
        att["ref"], "/t/echo/items/A-7",
        "offer_ref from structuredContent"
    );
    // The assertion: type, tool, issuer and the hash of the call's arguments.
    let payload = att["signature"]
        .as_str()
        .unwrap()
        .split('.')
        .nth(1)
        .unwrap();
    use base64::Engine;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["type"], "vrp.mcp.transport.1");
    assert_eq!(claims["tool"], "echo_get");
    assert_eq!(claims["issuer"], "villa.example");
    assert_eq!(
        claims["arguments_sha256"],
        vrp::arguments_sha256(&args).unwrap()
    );
    // A receipt holding it verifies with the node's public key, now; an hour later it is expired.
    let receipt = json!({"vrp_receipt_version": "1.0", "subject": {"stay": "x"}, "issuer": {"node": "villa.example"}, "attestations": [att]});
    let jwks = json!({"keys": [key.verifying_key().jwk()]});
    let served = vrp::parse_time(claims["served_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        vrp::verify_receipt(&receipt, &jwks, served + 60)["fully_verified"],
        true
    );
    assert_eq!(
        vrp::verify_receipt(&receipt, &jwks, served + 7200)["attestations"][0]["error"],
        "sig_expired"
    );
    // Another tool of the file carries none.
    let other = call(&c, &url, "echo_post", json!({"name": "n"})).await;
    assert!(
        other
            .result()
            .get("_meta")
            .is_none_or(|m| m.get("vrp").is_none()),
        "{}",
        other.text
    );
    g.stop().await.unwrap();
}
