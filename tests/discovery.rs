//! `/.well-known/ucp` and `/.well-known/usp` served by `portico demo`, validated against the
//! protocols' own profile schemas, read from the fetched upstream folder (`upstream.lock`).

mod common;

use common::schemas::{ucp_files, usp_files, validate};
use portico::demo;
use serde_json::Value;
use std::path::{Path, PathBuf};

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = reqwest::get(url).await.expect("GET sent");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn usp_profile_advertises_the_mcp_endpoint_and_validates() {
    let d = demo::start(0).await.expect("demo starts");
    let base = d.mcp_url().trim_end_matches("/mcp").to_string();
    let (status, headers, doc) = get(&format!("{base}/.well-known/usp")).await;
    assert_eq!(status, 200);
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("public, max-age=")
    );
    let missing = validate(&usp_files(), "profile.json#/$defs/BusinessProfile", &doc);
    assert!(
        missing.is_empty(),
        "USP's schemas are complete: {missing:?}"
    );
    let svc = &doc["usp"]["services"]["dev.usp-protocol.services"][0];
    assert_eq!(svc["transport"], "mcp");
    assert_eq!(svc["endpoint"], d.mcp_url());
    assert_eq!(doc["usp"]["version"], "2026-08-20");
    let caps = doc["usp"]["capabilities"].as_object().unwrap();
    assert_eq!(caps.len(), 3);
    assert!(caps.values().all(|c| c[0]["schema"].is_string()));
    assert_eq!(doc["usp"]["business"]["currency"], "EUR");
    // The per-business path serves the same document.
    let (_, _, named) = get(&format!("{base}/.well-known/usp/seaside-spa")).await;
    assert_eq!(named, doc);
    d.stop().await;
}

#[tokio::test]
async fn ucp_profiles_per_business_validate() {
    let d = demo::start(0).await.expect("demo starts");
    let base = d.mcp_url().trim_end_matches("/mcp").to_string();
    let cases = [
        // The bare path: the first UCP business in mapping order (the demo loads the concierge
        // desk before the hotel).
        ("", "dev.ucp.common", "dev.ucp.common.ask"),
        (
            "/harbour-hotel",
            "dev.ucp.lodging",
            "dev.ucp.lodging.booking",
        ),
        (
            "/harbour-hotel-concierge",
            "dev.ucp.common",
            "dev.ucp.common.ask",
        ),
    ];
    for (suffix, service, capability) in cases {
        let (status, _, doc) = get(&format!("{base}/.well-known/ucp{suffix}")).await;
        assert_eq!(status, 200, "{suffix}");
        let missing = validate(&ucp_files(), "profile.json#/$defs/business_schema", &doc);
        // The pinned UCP tree publishes every file ucp.json references (service.json,
        // capability.json, payment_handler.json included): the whole profile is validated.
        assert!(
            missing.is_empty(),
            "{suffix}: UCP's schemas are complete: {missing:?}"
        );
        let svc = &doc["ucp"]["services"][service][0];
        assert_eq!(svc["transport"], "mcp");
        assert_eq!(svc["endpoint"], d.mcp_url());
        assert!(
            svc["schema"]
                .as_str()
                .unwrap()
                .ends_with("/mcp.openrpc.json")
        );
        assert_eq!(svc["version"], "2026-01-11");
        let cap = &doc["ucp"]["capabilities"][capability][0];
        assert_eq!(cap["version"], "2026-01-11");
        assert!(cap["schema"].is_string() && cap["spec"].is_string());
        assert_eq!(doc["ucp"]["services"].as_object().unwrap().len(), 1);
    }
    d.stop().await;
}

#[tokio::test]
async fn unknown_businesses_methods_and_hosts_are_refused() {
    let d = demo::start(0).await.expect("demo starts");
    let base = d.mcp_url().trim_end_matches("/mcp").to_string();
    let c = reqwest::Client::new();
    let (status, _, body) = get(&format!("{base}/.well-known/usp/nobody")).await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("nobody"));
    assert_eq!(
        get(&format!("{base}/.well-known/a2a")).await.0,
        404,
        "other well-known names are not served"
    );
    let r = c
        .post(format!("{base}/.well-known/usp"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = c
        .get(format!("{base}/.well-known/usp"))
        .header("host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a foreign Host never reaches the profile");
    d.stop().await;
}

/// The spa mapping with `discovery` replaced, written next to a copy of its OpenRPC path.
fn spa_with_discovery(discovery: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("mappings/demo-spa.yaml")).unwrap();
    let openrpc = root.join("openrpc/usp.openrpc.json");
    // The demo's webhook keys sit next to the mapping; the copy points at them in place.
    let keys = root.join("mappings/demo-webhook-keys.json");
    let text = text
        .replace(
            "openrpc: ../openrpc/usp.openrpc.json",
            &format!("openrpc: {}", openrpc.display()),
        )
        .replace("jwks: demo-webhook-keys.json", &format!("jwks: {}", keys.display()))
        .replace(
            "discovery:\n  business: { name: Seaside Spa, timezone: Europe/Lisbon, currency: EUR }\n",
            discovery,
        );
    let dir = std::env::temp_dir().join(format!("portico-discovery-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("spa.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn keys_are_published_and_private_members_refused() {
    let ok = spa_with_discovery(
        "discovery:\n  endpoint: https://spa.example.com/mcp\n  business: { name: Spa, timezone: UTC, currency: EUR }\n  keys:\n    - { kid: k1, kty: EC, crv: P-256, x: AAAA, y: BBBB, use: sig, alg: ES256 }\n",
    );
    let g = portico::config::load(&[ok]).expect("loads");
    let doc = match portico::discovery::serve(&g, "/.well-known/usp", "http://unused/mcp") {
        portico::discovery::Served::Profile(d) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(doc["keys"][0]["kid"], "k1");
    assert_eq!(
        doc["usp"]["services"]["dev.usp-protocol.services"][0]["endpoint"],
        "https://spa.example.com/mcp"
    );
    validate(&usp_files(), "profile.json#/$defs/BusinessProfile", &doc);

    let bad = spa_with_discovery(
        "discovery:\n  version: draft\n  endpoint: ftp://x\n  business: { name: Spa, timezone: UTC, currency: EUR }\n  keys:\n    - { kid: k1, kty: OKP, crv: Ed25519, x: AAAA, d: SECRET }\n",
    );
    let diags = portico::config::load(&[bad]).expect_err("refused");
    let text: Vec<String> = diags.iter().map(ToString::to_string).collect();
    let text = text.join("\n");
    assert!(text.contains("private member `d`"), "{text}");
    assert!(text.contains("not YYYY-MM-DD"), "{text}");
    assert!(text.contains("not an http(s) URL"), "{text}");
    assert!(
        !text.contains("SECRET"),
        "diagnostics never echo key material"
    );
}

#[test]
fn a_usp_business_without_identity_has_no_profile() {
    let p = spa_with_discovery("");
    let g = portico::config::load(&[p]).expect("loads");
    match portico::discovery::serve(&g, "/.well-known/usp", "http://h/mcp") {
        portico::discovery::Served::NotFound(why) => assert!(why.contains("discovery.business")),
        other => panic!("{other:?}"),
    }
}
