//! Follow-up reads of outcome rules (`follow_up:`): a business outcome whose backend error body
//! lacks the resource carries it through one configured read on the same backend, mapped by the
//! tool's `result`; a failed read leaves the outcome as it is, without the resource. Against a
//! real HTTP backend on 127.0.0.1 that answers a locked checkout as 409 `{detail, code}` only.

mod common;

use bytes::Bytes;
use common::{call, gateway, serve_with};
use http_body_util::Full;
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const OPENRPC: &str = r#"{
  "openrpc": "1.3.2",
  "info": {"title": "checkouts", "version": "1.0.0"},
  "methods": [
    {"name": "update_checkout", "paramStructure": "by-name",
     "params": [{"name": "id", "required": true, "schema": {"type": "string"}},
                {"name": "_meta", "required": false, "schema": {"type": "object"}}],
     "result": {"name": "checkout", "schema": {"type": "object"}}}
  ]
}"#;

/// `PUT /checkouts/{id}`: 409 without the checkout. `GET /checkouts/{id}`: the checkout, except
/// `broken` (500) and `missing` (404). Counts the reads.
async fn backend(reads: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    serve_with(
        listener,
        move |req: hyper::Request<hyper::body::Incoming>| {
            let reads = reads.clone();
            async move {
                let id = req
                    .uri()
                    .path()
                    .rsplit('/')
                    .next()
                    .unwrap_or("")
                    .to_string();
                let (status, body) = if req.method() == Method::GET {
                    reads.fetch_add(1, Ordering::SeqCst);
                    match id.as_str() {
                        "broken" => (500, json!({"detail": "down"})),
                        "missing" => (404, json!({"code": "NOT_FOUND", "detail": "gone"})),
                        _ => (200, json!({"checkout": {"id": id, "status": "completed"}})),
                    }
                } else {
                    (
                        409,
                        json!({"code": "CHECKOUT_NOT_MODIFIABLE", "detail": format!("checkout {id} is completed")}),
                    )
                };
                Response::builder()
                    .status(StatusCode::from_u16(status).unwrap())
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap()
            }
        },
    );
    addr
}

fn mapping(addr: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "portico-follow-up-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shop.openrpc.json"), OPENRPC).unwrap();
    let yaml = format!(
        "business: shop\nbinding: usp\nopenrpc: shop.openrpc.json\nprotocol:\n  version: \"2026-08-20\"\nbackend:\n  url: http://{addr}/api\n  timeout: 2s\ntools:\n  update_checkout:\n    http: PUT /checkouts/{{id}}\n    body: '{{}}'\n    result: '{{ checkout: .checkout }}'\n    outcomes:\n      409:\n        - business: checkout_not_modifiable\n          content_from: .detail\n          follow_up: {{method: GET, path: '/checkouts/{{id}}'}}\n"
    );
    std::fs::write(dir.join("shop.yaml"), yaml).unwrap();
    dir.join("shop.yaml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_business_outcome_carries_the_resource_a_follow_up_read_found() {
    let reads = Arc::new(AtomicUsize::new(0));
    let addr = backend(reads.clone()).await;
    let g = gateway(&[mapping(&addr)]).await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());

    let a = call(&c, &url, "update_checkout", json!({"id": "c-7"})).await;
    let sc = a.sc();
    assert_eq!(
        sc["messages"][0]["code"], "checkout_not_modifiable",
        "{}",
        a.text
    );
    assert_eq!(sc["messages"][0]["content"], "checkout c-7 is completed");
    assert_eq!(
        sc["checkout"],
        json!({"id": "c-7", "status": "completed"}),
        "the read's answer through `result`: {}",
        a.text
    );
    assert_eq!(reads.load(Ordering::SeqCst), 1, "one read per outcome");

    // A failed read (500, 404): the same business outcome, without the resource.
    for id in ["broken", "missing"] {
        let a = call(&c, &url, "update_checkout", json!({"id": id})).await;
        let sc = a.sc();
        assert_eq!(
            sc["messages"][0]["code"], "checkout_not_modifiable",
            "{}",
            a.text
        );
        assert_eq!(
            sc["messages"][0]["content"],
            format!("checkout {id} is completed")
        );
        assert!(sc.get("checkout").is_none(), "{}", a.text);
        assert_ne!(a.result()["isError"], Value::Bool(true), "{}", a.text);
    }
    assert_eq!(reads.load(Ordering::SeqCst), 3);
    drop(g);
}
