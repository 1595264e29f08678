//! The whole `ucp` envelope of UCP's published shopping service: results carry the business's
//! declared registries in their response form (payment handlers included, as a checkout response
//! must), `/.well-known/ucp` lists them in their profile form, and both validate against the
//! published schemas. Without the declaration the unchanged file is refused at load.
//!
//! A real REST backend on 127.0.0.1 answers the checkout of the spec text's own example.

mod common;

use bytes::Bytes;
use common::schemas::{ucp_files, validate};
use common::{call, gateway, serve_with, upstream};
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value, json};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/ucp-shopping.yaml")
}

/// The fixture rewritten by `edit`, beside it (so its relative paths reach `.upstream/`).
fn variant(edit: impl Fn(&str) -> String) -> PathBuf {
    let text = edit(&std::fs::read_to_string(fixture()).unwrap());
    let file = fixture().with_file_name(format!(
        "ucp-shopping-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&file, text).unwrap();
    file
}

/// The spec text's first complete checkout response example: its `structuredContent` without
/// the `ucp` envelope (what a shop's REST API answers).
fn spec_checkout() -> Value {
    let text = std::fs::read_to_string(upstream("ucp/docs/specification/shopping/checkout/mcp.md"))
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if !(line.contains("<!-- ucp:example schema=shopping/checkout")
            && line.contains("direction=response"))
        {
            continue;
        }
        let open = (i + 1..lines.len())
            .find(|&j| lines[j].trim_start().starts_with("```"))
            .unwrap();
        let close = (open + 1..lines.len())
            .find(|&j| lines[j].trim_start().starts_with("```"))
            .unwrap();
        let json = lines[open + 1..close]
            .join("\n")
            .replace("{{ ucp_version }}", "2026-01-11");
        if let Ok(v) = serde_json::from_str::<Value>(&json) {
            let mut sc = v["result"]["structuredContent"].clone();
            if let Some(m) = sc.as_object_mut() {
                m.remove("ucp");
                return sc;
            }
        }
    }
    panic!("no complete checkout response example in the spec text")
}

#[test]
fn the_published_checkout_is_refused_without_its_payment_handlers() {
    // The fixture without its `protocol.ucp` block (which ends where `tools:` begins).
    let file = variant(|t| {
        let (head, tail) = t.split_at(t.find("  ucp:\n").unwrap());
        format!("{head}{}", &tail[tail.find("\ntools:").unwrap()..])
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("the `ucp` envelope of `create_checkout` results does not satisfy the tool's output schema")
            && text.contains("\"payment_handlers\" is a required property")
            && text.contains("hint: declare the business's registries under `protocol.ucp`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_and_the_profile_carry_the_declared_envelope_and_validate() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let checkout = spec_checkout();
    let answer = checkout.to_string();
    serve_with(
        listener,
        move |_req: hyper::Request<hyper::body::Incoming>| {
            let answer = answer.clone();
            async move {
                Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(answer)))
                    .unwrap()
            }
        },
    );
    let file = variant(|t| t.replace("http://127.0.0.1:9/shop", &format!("http://{addr}/shop")));
    let g = gateway(std::slice::from_ref(&file)).await;
    std::fs::remove_file(&file).unwrap();
    let c = reqwest::Client::new();
    let args = json!({
        "meta": {"ucp-agent": {"profile": "https://platform.example/profiles/shopping-agent.json"},
                 "idempotency-key": "550e8400-e29b-41d4-a716-446655440000"},
        "checkout": {"line_items": [{"item": {"id": "item_123"}, "quantity": 1}]}
    });
    let a = call(&c, &g.mcp_url(), "create_checkout", args).await;
    let sc = a.sc();
    assert!(
        sc.is_object() && a.result()["isError"] != true,
        "{}",
        a.text
    );
    let ucp = &sc["ucp"];
    assert_eq!(ucp["version"], "2026-01-11");
    assert_eq!(
        ucp["payment_handlers"]["com.example.vendor.delegate_payment"][0],
        json!({"id": "handler_1", "version": "2026-01-11",
               "available_instruments": [{"type": "card"}], "config": {}}),
        "the response form: no discovery-only spec or schema: {}",
        a.text
    );
    assert_eq!(
        ucp["capabilities"]["dev.ucp.shopping.fulfillment"][0],
        json!({"version": "2026-01-11", "extends": "dev.ucp.shopping.checkout"})
    );
    assert_eq!(sc["id"], checkout["id"], "the shop's checkout, unchanged");
    // The whole result against the published checkout schema (with its envelope schema).
    let missing = validate(&ucp_files(), "shopping/checkout.json", sc);
    assert!(missing.is_empty(), "{missing:?}");

    // The profile: the declared registries, validated against the published profile schema.
    let base = g.mcp_url().trim_end_matches("/mcp").to_string();
    let doc: Value = reqwest::get(format!("{base}/.well-known/ucp"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let missing = validate(&ucp_files(), "profile.json#/$defs/business_schema", &doc);
    assert!(missing.is_empty(), "{missing:?}");
    let handler = &doc["ucp"]["payment_handlers"]["com.example.vendor.delegate_payment"][0];
    assert_eq!(handler["id"], "handler_1", "{doc:#}");
    assert!(handler["spec"].is_string() && handler["schema"].is_string());
    assert_eq!(
        doc["ucp"]["services"]["dev.ucp.shopping"][0]["endpoint"],
        g.mcp_url(),
        "{doc:#}"
    );
    g.stop().await.unwrap();
}
