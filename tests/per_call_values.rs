//! Per-call values and null-free answers (`$meta.request_id`, `$meta.uuid`, `$meta.now`,
//! `drop_nulls`), against a real HTTP backend on 127.0.0.1: what reaches the backend, what the
//! client gets on the hot path and the tree path, and what `check` says of a key derived from
//! the arguments only.

mod common;

use bytes::Bytes;
use common::{call, gateway, serve_with};
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use portico::binding::Reply;
use portico::forward;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const OPENRPC: &str = r#"{
  "openrpc": "1.3.2",
  "info": {"title": "per-call values", "version": "1.0.0"},
  "methods": [
    {"name": "create_order", "paramStructure": "by-name",
     "params": [{"name": "name", "required": true, "schema": {"type": "string"}},
                {"name": "meta", "required": false, "schema": {"type": "object"}}],
     "result": {"name": "order", "schema": {"type": "object"}}},
    {"name": "get_order", "paramStructure": "by-name", "params": [],
     "result": {"name": "order", "schema": {"type": "object"}}},
    {"name": "get_order_raw", "paramStructure": "by-name", "params": [],
     "result": {"name": "order", "schema": {"type": "object"}}}
  ]
}"#;

/// The backend's answer to every request: nulls at several depths, in objects and arrays.
fn order() -> Value {
    json!({
        "id": "o-1",
        "note": null,
        "lines": [null, {"sku": "a", "gift": null, "qty": 2}],
        "customer": {"email": null, "name": "Ada", "address": {"line2": null, "city": "Paris"}}
    })
}

/// What the backend saw: for each request, its headers (lower-case names) and JSON body.
type Log = Arc<Mutex<Vec<(Vec<(String, String)>, Value)>>>;

async fn backend() -> (String, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let log: Log = Arc::default();
    let seen = log.clone();
    serve_with(
        listener,
        move |req: hyper::Request<hyper::body::Incoming>| {
            let seen = seen.clone();
            async move {
                let headers = req
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                    .collect();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push((headers, body));
                Response::builder()
                    .status(StatusCode::OK)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(order().to_string())))
                    .unwrap()
            }
        },
    );
    (addr, log)
}

/// A folder with the OpenRPC document and a mapping (`extra` appended to `tools.create_order`).
fn files(addr: &str, binding: &str, create_extra: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("portico-minted-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("orders.openrpc.json"), OPENRPC).unwrap();
    let version = if binding == "ucp" {
        "protocol:\n  version: \"2026-01-11\"\n  capability: dev.ucp.shopping.checkout\n"
    } else {
        ""
    };
    let mapping = format!(
        "business: orders\nbinding: {binding}\nopenrpc: orders.openrpc.json\n{version}backend:\n  url: http://{addr}/api\n  timeout: 2s\ntools:\n  create_order:\n    http: POST /orders\n{create_extra}  get_order:\n    http: GET /orders/o-1\n    result: .\n    drop_nulls: true\n  get_order_raw:\n    http: GET /orders/o-1\n    result: .\n"
    );
    std::fs::write(dir.join("orders.yaml"), mapping).unwrap();
    dir
}

const MINTING: &str = "    headers:\n      Idempotency-Key: $meta.uuid\n      X-Request-Id: $meta.request_id\n    body: '{ name: .name, at: $meta.now, request_id: $meta.request_id }'\n";

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn is_uuid_v4(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.get_version_num() == 4) && s.len() == 36
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_mints_its_own_request_id_uuid_and_time() {
    let (addr, log) = backend().await;
    let dir = files(&addr, "plain", MINTING);
    let g = gateway(&[dir.join("orders.yaml")]).await;
    let c = reqwest::Client::new();
    let url = g.mcp_url();
    let before = std::time::SystemTime::now();
    for _ in 0..2 {
        let a = call(&c, &url, "create_order", json!({"name": "same"})).await;
        assert!(
            a.sc().is_object() && a.result()["isError"] != true,
            "{}",
            a.text
        );
    }
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let mut keys = Vec::new();
    for (headers, body) in &seen {
        let key = header(headers, "idempotency-key").expect("the minted key is sent");
        let rid = header(headers, "x-request-id").expect("the request id is sent");
        assert!(is_uuid_v4(key) && is_uuid_v4(rid), "{key} {rid}");
        assert_ne!(key, rid, "the request id and the fresh UUID are two values");
        assert_eq!(
            body["request_id"], rid,
            "one request id per call, in every program"
        );
        assert_eq!(body["name"], "same");
        let at = body["at"].as_str().expect("$meta.now is a string");
        let at = chrono_free_secs(at);
        let now = before
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(
            (at - now).abs() <= 60,
            "$meta.now {at} is the current time ({now})"
        );
        keys.push(key.to_string());
    }
    assert_ne!(
        keys[0], keys[1],
        "two identical calls send two different keys"
    );
    g.stop().await.unwrap();
}

/// Unix seconds of `YYYY-MM-DDTHH:MM:SSZ`, through the project's own calendar code's inverse:
/// the days are counted by trying the dates around the expected one.
fn chrono_free_secs(text: &str) -> i64 {
    assert_eq!(text.len(), 20, "{text}");
    assert!(text.ends_with('Z') && &text[10..11] == "T", "{text}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // The text of every second in the last and next two minutes; the one that matches.
    (now - 120..now + 120)
        .find(|s| portico::auth::rfc3339(*s) == text)
        .unwrap_or_else(|| panic!("{text} is not within two minutes of now"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ucp_sends_the_same_request_id_that_transforms_read() {
    let (addr, log) = backend().await;
    let dir = files(
        &addr,
        "ucp",
        "    body: '{ name: .name, request_id: $meta.request_id }'\n",
    );
    let g = gateway(&[dir.join("orders.yaml")]).await;
    let c = reqwest::Client::new();
    let url = g.mcp_url();
    let meta = |key: &str| json!({"ucp-agent": {"profile": "https://platform.example/p.json"}, "idempotency-key": key});
    let a = call(
        &c,
        &url,
        "create_order",
        json!({"name": "n", "meta": meta("k-1")}),
    )
    .await;
    assert!(a.body.get("result").is_some(), "{}", a.text);
    let seen = log.lock().unwrap().clone();
    let (headers, body) = &seen[0];
    let sent = header(headers, "request-id").expect("UCP sends request-id");
    assert!(is_uuid_v4(sent), "{sent}");
    assert_eq!(body["request_id"], sent);
    // The key again with another payload: UCP's "idempotency key reused with different payload",
    // -32000 (HTTP 409), and no backend call.
    let a = call(
        &c,
        &url,
        "create_order",
        json!({"name": "m", "meta": meta("k-1")}),
    )
    .await;
    assert_eq!(a.error_code(), Some(-32000), "{}", a.text);
    assert_eq!(
        a.body["error"]["data"]["code"], "idempotency_conflict",
        "{}",
        a.text
    );
    assert_eq!(log.lock().unwrap().len(), 1);
    g.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_makes_the_values_repeatable() {
    let (addr, log) = backend().await;
    let dir = files(&addr, "plain", MINTING);
    let g = portico::config::load(&[dir.join("orders.yaml")]).unwrap();
    let tool = g.tools.get("create_order").unwrap();
    let mut runs = Vec::new();
    for _ in 0..2 {
        portico::translate::minted::seed(42);
        for _ in 0..2 {
            let call = forward::prepare(tool, json!({"name": "x"})).unwrap();
            forward::exchange(tool, &call).await.unwrap();
        }
        let seen = std::mem::take(&mut *log.lock().unwrap());
        runs.push(seen);
    }
    assert_eq!(runs[0], runs[1], "the same seed mints the same values");
    let (headers, body) = &runs[0][0];
    assert!(is_uuid_v4(header(headers, "idempotency-key").unwrap()));
    assert_ne!(
        runs[0][0], runs[0][1],
        "each call still gets its own values"
    );
    assert_eq!(body["at"], "2026-01-01T00:00:00Z");
    portico::translate::minted::seed(43);
    let call = forward::prepare(tool, json!({"name": "x"})).unwrap();
    forward::exchange(tool, &call).await.unwrap();
    let other = std::mem::take(&mut *log.lock().unwrap());
    assert_ne!(
        header(&other[0].0, "idempotency-key"),
        header(&runs[0][0].0, "idempotency-key"),
        "another seed, other values"
    );
}

/// Translates one backend answer both ways (hot path and tree path) and checks they agree.
async fn both_paths(g: &portico::config::Gateway, name: &str) -> (Value, bool) {
    let tool = g.tools.get(name).unwrap();
    let call = forward::prepare(tool, json!({})).unwrap();
    let resp = forward::exchange(tool, &call).await.unwrap();
    let fast = forward::translate_response(tool, &call, resp.clone());
    let tree = forward::translate_response_tree(tool, &call, resp);
    let hot = matches!(fast, Reply::Written(_));
    let mut fast = fast;
    fast.materialize();
    assert_eq!(fast, tree, "{name}: the hot path's answer differs");
    let Reply::Result(v) = tree else {
        panic!("{name}: {tree:?}")
    };
    (v["structuredContent"].clone(), hot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_nulls_removes_null_members_at_every_depth_on_both_paths() {
    let (addr, _log) = backend().await;
    let dir = files(&addr, "plain", "");
    let g = portico::config::load(&[dir.join("orders.yaml")]).unwrap();
    let (dropped, hot) = both_paths(&g, "get_order").await;
    assert!(hot, "a null-free answer still takes the hot path");
    assert_eq!(
        dropped,
        json!({
            "id": "o-1",
            "lines": [null, {"sku": "a", "qty": 2}],
            "customer": {"name": "Ada", "address": {"city": "Paris"}}
        }),
        "null members go, null array items stay"
    );
    let (raw, _) = both_paths(&g, "get_order_raw").await;
    assert_eq!(
        raw,
        order(),
        "without drop_nulls the answer is the backend's"
    );
}

#[test]
fn check_warns_when_an_idempotency_key_comes_from_the_arguments_only() {
    let dir = files(
        "127.0.0.1:9",
        "plain",
        "    headers:\n      Idempotency-Key: '.name + \"-create\"'\n",
    );
    let out = check(&dir.join("orders.yaml"));
    assert!(out.status.success(), "a warning, not an error: {out:?}");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("orders.yaml:11")
            && text.contains(
                "`headers.Idempotency-Key` derives an idempotency key from the arguments only"
            )
            && text.contains("`$meta.uuid`"),
        "{text}"
    );
    let fixed = files("127.0.0.1:9", "plain", MINTING);
    let out = check(&fixed.join("orders.yaml"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains("idempotency key from the arguments"),
        "{text}"
    );
}

fn check(file: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .arg(file)
        .output()
        .unwrap()
}
