//! Outcome rules that read the backend body (`when`, `code_from`, `severity_from`,
//! `with_result`), against a real HTTP backend on 127.0.0.1 that answers business failures as
//! 4xx `{detail, code}` the way real shops do: one status, several kinds.

mod common;

use bytes::Bytes;
use common::{call, gateway, serve_with};
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const OPENRPC: &str = r#"{
  "openrpc": "1.3.2",
  "info": {"title": "checkouts", "version": "1.0.0"},
  "methods": [
    {"name": "update_checkout", "paramStructure": "by-name",
     "params": [{"name": "case", "required": true, "schema": {"type": "string"}},
                {"name": "_meta", "required": false, "schema": {"type": "object"}}],
     "result": {"name": "checkout", "schema": {"type": "object"}}}
  ]
}"#;

const RULES: &str = r#"    outcomes:
      409:
        - when: '.code == "IDEMPOTENCY_CONFLICT"'
          error: idempotency_conflict
        - business: checkout_not_modifiable
          code_from: .code | ascii_downcase
          content_from: .detail
          with_result: true
      400:
        - when: '.code == "OUT_OF_STOCK"'
          business: out_of_stock
          severity_from: .severity
          content_from: .detail
        - error: invalid_request
      4xx:
        - when: '.code == "GONE_FOR_GOOD"'
          business: gone
"#;

/// The answer for each case: status and JSON body.
fn answer_for(case: &str) -> (u16, Value) {
    match case {
        "locked" => (
            409,
            json!({"code": "CHECKOUT_NOT_MODIFIABLE", "detail": "The checkout is completed.",
                   "checkout": {"id": "c-1", "status": "completed", "note": null}}),
        ),
        "conflict" => (
            409,
            json!({"code": "IDEMPOTENCY_CONFLICT", "detail": "The key was used with other arguments."}),
        ),
        "stock" => (
            400,
            json!({"code": "OUT_OF_STOCK", "detail": "Sold out.", "severity": "requires_buyer_input"}),
        ),
        "bad" => (
            400,
            json!({"code": "FIELD_INVALID", "detail": "quantity must be positive"}),
        ),
        "gone" => (410, json!({"code": "GONE_FOR_GOOD", "detail": "Expired."})),
        "teapot" => (418, json!({"code": "SHORT_AND_STOUT"})),
        "garbage" => (409, Value::String("<html>".into())),
        _ => (
            200,
            json!({"checkout": {"id": "c-1", "status": "open", "note": null}}),
        ),
    }
}

async fn backend() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    serve_with(
        listener,
        |req: hyper::Request<hyper::body::Incoming>| async move {
            let case = req
                .uri()
                .path()
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string();
            let (status, body) = answer_for(&case);
            let text = match &body {
                Value::String(s) => s.clone(), // not JSON at all
                v => v.to_string(),
            };
            Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(text)))
                .unwrap()
        },
    );
    addr
}

fn files(addr: &str, tool_extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "portico-outcomes-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shop.openrpc.json"), OPENRPC).unwrap();
    let mapping = format!(
        "business: shop\nbinding: usp\nopenrpc: shop.openrpc.json\nprotocol:\n  version: \"2026-08-20\"\nbackend:\n  url: http://{addr}/api\n  timeout: 2s\ntools:\n  update_checkout:\n    http: POST /checkouts/{{case}}\n    body: '{{}}'\n    result: '{{ checkout: .checkout }}'\n    drop_nulls: true\n{tool_extra}"
    );
    std::fs::write(dir.join("shop.yaml"), mapping).unwrap();
    dir
}

fn message(sc: &Value) -> &Value {
    &sc["messages"][0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_status_holds_several_kinds_decided_by_the_body() {
    let addr = backend().await;
    let dir = files(&addr, RULES);
    let g = gateway(&[dir.join("shop.yaml")]).await;
    let c = reqwest::Client::new();
    let url = g.mcp_url();
    let run = |case: &'static str| {
        let (c, url) = (c.clone(), url.clone());
        async move { call(&c, &url, "update_checkout", json!({ "case": case })).await }
    };

    // 409 + CHECKOUT_NOT_MODIFIABLE: a business outcome that carries the checkout.
    let a = run("locked").await;
    let sc = a.sc();
    assert_eq!(message(sc)["code"], "checkout_not_modifiable", "{}", a.text);
    assert_eq!(message(sc)["content"], "The checkout is completed.");
    assert_eq!(message(sc)["severity"], "recoverable");
    assert_eq!(
        sc["checkout"],
        json!({"id": "c-1", "status": "completed"}),
        "the resource, through `result` and `drop_nulls`: {}",
        a.text
    );
    assert_eq!(sc["usp"]["version"], "2026-08-20", "{}", a.text);

    // 409 + IDEMPOTENCY_CONFLICT: a protocol error.
    let a = run("conflict").await;
    assert_eq!(
        a.body["error"]["data"]["code"], "idempotency_conflict",
        "{}",
        a.text
    );
    assert_eq!(
        a.body["error"]["data"]["content"], "The key was used with other arguments.",
        "{}",
        a.text
    );

    // 400 + OUT_OF_STOCK: business, severity from the body; any other 400: invalid_request.
    let a = run("stock").await;
    assert_eq!(message(a.sc())["code"], "out_of_stock", "{}", a.text);
    assert_eq!(message(a.sc())["severity"], "requires_buyer_input");
    assert_eq!(message(a.sc())["content"], "Sold out.");
    assert!(
        a.sc().get("checkout").is_none(),
        "no with_result, no resource: {}",
        a.text
    );
    let a = run("bad").await;
    assert_eq!(
        a.body["error"]["data"]["code"], "invalid_request",
        "{}",
        a.text
    );
    assert_eq!(
        a.body["error"]["data"]["content"],
        "quantity must be positive"
    );

    // A status with no exact rules falls to its class's list; no match there: the binding's
    // default for the status.
    let a = run("gone").await;
    assert_eq!(message(a.sc())["code"], "gone", "{}", a.text);
    let a = run("teapot").await;
    assert!(a.body.get("error").is_some(), "{}", a.text);
    assert_ne!(a.body["error"]["data"]["code"], "gone", "{}", a.text);

    // A body that is not JSON: no predicate holds, the fallback rule of the list applies.
    let a = run("garbage").await;
    assert_eq!(
        message(a.sc())["code"],
        "checkout_not_modifiable",
        "{}",
        a.text
    );

    // Success still goes through `result` and `drop_nulls` (the hot path).
    let a = run("ok").await;
    assert_eq!(
        a.sc()["checkout"],
        json!({"id": "c-1", "status": "open"}),
        "{}",
        a.text
    );
    g.stop().await.unwrap();
}

fn check(file: &Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .arg(file)
        .output()
        .unwrap();
    assert!(!out.status.success(), "check passed a broken mapping");
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn rule_mistakes_are_diagnosed_with_lines_and_fixes() {
    // A rule without `when` before the end of the list.
    let dir = files(
        "127.0.0.1:9",
        "    outcomes:\n      409:\n        - business: locked\n        - when: '.code == \"X\"'\n          error: invalid_request\n",
    );
    let text = check(&dir.join("shop.yaml"));
    assert!(
        text.contains("shop.yaml:17")
            && text
                .contains("outcome 0 of `409` has no `when`, so the rule after it can never apply")
            && text.contains("hint: give it a `when:` predicate"),
        "{text}"
    );
    // `with_result` on a protocol error.
    let dir = files(
        "127.0.0.1:9",
        "    outcomes:\n      409: { error: invalid_request, with_result: true }\n",
    );
    let text = check(&dir.join("shop.yaml"));
    assert!(
        text.contains("`with_result` only applies to `business` outcomes")
            && text.contains("tools.update_checkout.outcomes.409.with_result"),
        "{text}"
    );
    // A jq syntax error in `when`.
    let dir = files(
        "127.0.0.1:9",
        "    outcomes:\n      409:\n        - when: '.code =='\n          business: locked\n",
    );
    let text = check(&dir.join("shop.yaml"));
    assert!(
        text.contains("when:") && text.contains("shop.yaml:"),
        "{text}"
    );
    // An unknown field keeps serde's own message, in a list as in a single rule.
    let dir = files(
        "127.0.0.1:9",
        "    outcomes:\n      409:\n        - business: locked\n          wen: '.code'\n",
    );
    let text = check(&dir.join("shop.yaml"));
    assert!(text.contains("unknown field `wen`"), "{text}");
}
