//! VRP receipt v1 conformance vectors (`examples/conformance/receipt/01…06`), read from the
//! fetched upstream folder (`vrp/`, pinned by `upstream.lock`): each verifies to its expected per-layer result at the vector's `now`.

use portico::vrp;
use serde_json::Value;
use std::path::PathBuf;

#[test]
fn every_receipt_vector_gives_its_expected_result() {
    let dir = common::upstream("vrp/examples/conformance/receipt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("VRP vectors unreadable at {}: {e}", dir.display()))
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

/// The plain test gateway with a fresh `alg` key written as `key.jwk.json` and `extra` YAML.
async fn plain_with_key(
    alg: portico::webhook::keys::Alg,
    kid: &str,
    extra: &str,
) -> (portico::app::Running, portico::webhook::keys::SigningKey) {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let key = portico::webhook::keys::SigningKey::generate(alg, kid).unwrap();
    let jwk = key.private_jwk().unwrap().to_string();
    std::fs::write(dir.join("key.jwk.json"), jwk).unwrap();
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file).unwrap() + extra;
    std::fs::write(&file, text).unwrap();
    (gateway(&[file]).await, key)
}

#[tokio::test]
async fn vrp_tools_carry_a_signed_transport_attestation_that_verifies() {
    let extra = "\nvrp:\n  issuer: villa.example\n  key: key.jwk.json\n  source: https://villa.example/.well-known/jwks.json\n  valid_for: 1h\n  tools:\n    echo_get: { offer_ref: /path }\n";
    let (g, key) =
        plain_with_key(portico::webhook::keys::Alg::Ed25519, "node-2026-01", extra).await;
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

#[tokio::test]
async fn configured_tools_get_rfc_9421_signed_responses() {
    use base64::Engine;
    let extra = "\nresponse_signing:\n  key: key.jwk.json\n  tools: [echo_get]\n";
    let (g, key) = plain_with_key(
        portico::webhook::keys::Alg::EcdsaP256Sha256,
        "portico-resp-1",
        extra,
    )
    .await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());
    let resp = modern(
        &c,
        &url,
        1,
        "tools/call",
        json!({"name": "echo_get", "arguments": {"id": "1"}}),
    )
    .header("accept", "application/json")
    .send()
    .await
    .unwrap();
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let body = resp.bytes().await.unwrap();
    let get = |n: &str| {
        h.get(n)
            .unwrap_or_else(|| panic!("no {n}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    // Content-Digest is over the bytes received.
    let digest = portico::webhook::sig::content_digest(&body);
    assert_eq!(get("content-digest"), digest);
    let input = get("signature-input");
    let params = input.strip_prefix("sig1=").unwrap();
    assert!(
        params.starts_with("(\"@status\" \"content-digest\" \"content-type\")"),
        "{input}"
    );
    assert!(params.contains("keyid=\"portico-resp-1\""), "{input}");
    let sig = get("signature");
    let sig = base64::engine::general_purpose::STANDARD
        .decode(
            sig.strip_prefix("sig1=:")
                .unwrap()
                .strip_suffix(':')
                .unwrap(),
        )
        .unwrap();
    let base = portico::auth::respsig::base(status, &digest, &get("content-type"), params);
    assert!(
        key.verifying_key().verify(base.as_bytes(), &sig),
        "the signature verifies"
    );
    assert!(
        !key.verifying_key()
            .verify(base.replace("200", "201").as_bytes(), &sig),
        "and covers @status"
    );
    // A tool not listed is not signed.
    let other = call(&c, &url, "echo_post", json!({"name": "n"})).await;
    assert!(other.headers.get("signature").is_none());
    g.stop().await.unwrap();
}
