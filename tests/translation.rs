//! The REST translation path against a scriptable backend on 127.0.0.1: path encoding, headers,
//! metadata, status tables, and every backend failure mode the forward path must answer.

mod common;
use common::*;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;

async fn setup(
    binding: &str,
) -> (
    portico::app::Running,
    std::sync::Arc<Seen>,
    reqwest::Client,
    String,
) {
    gateway_on_test_backend(binding).await
}

fn last_request(seen: &Seen) -> Value {
    seen.requests
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn path_arguments_stay_one_encoded_segment() {
    let (g, seen, c, url) = setup("usp").await;
    for (id, expected) in [
        ("plain-id", "/t/echo/items/plain-id"),
        ("../../admin", "/t/echo/items/..%2F..%2Fadmin"),
        ("a/b?c#d", "/t/echo/items/a%2Fb%3Fc%23d"),
        ("%2F", "/t/echo/items/%252F"),
        ("sp ace", "/t/echo/items/sp%20ace"),
        ("café", "/t/echo/items/caf%C3%A9"),
    ] {
        let a = call(&c, &url, "echo_get", json!({"id": id})).await;
        assert!(a.body.get("result").is_some(), "{id}: {}", a.text);
        assert_eq!(last_request(&seen)["path"], expected, "{id}");
    }
    let before = seen.requests.lock().unwrap().len();
    for id in ["..", ".", ""] {
        let a = call(&c, &url, "echo_get", json!({"id": id})).await;
        assert_eq!(a.error_code(), Some(-32600), "{id:?}: {}", a.text);
        assert_eq!(a.body["error"]["data"]["code"], "invalid_request");
    }
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        before,
        "refused arguments never reach the backend"
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn usp_metadata_becomes_headers_and_never_reaches_the_body() {
    let (g, seen, c, url) = setup("usp").await;
    let a = call(
        &c,
        &url,
        "echo_post",
        json!({"name": "x", "count": 2, "_meta": {"usp": {"profile": "https://agent.example/p.json", "idempotency_key": "k-123", "correlation_id": "corr-9"}}}),
    )
    .await;
    assert!(a.body.get("result").is_some(), "{}", a.text);
    let r = last_request(&seen);
    assert_eq!(r["method"], "POST");
    assert_eq!(
        r["headers"]["usp-agent"],
        "profile=\"https://agent.example/p.json\""
    );
    assert_eq!(r["headers"]["idempotency-key"], "k-123");
    assert_eq!(r["headers"]["usp-correlation-id"], "corr-9");
    assert_eq!(r["headers"]["x-static"], "static-value");
    assert_eq!(r["headers"]["content-type"], "application/json");
    assert_eq!(r["body"], json!({"name": "x", "count": 2}));
    assert_eq!(a.result()["_meta"]["usp"]["correlation_id"], "corr-9");
    assert_eq!(a.sc()["usp"]["version"], "2026-08-20");
    assert_eq!(a.sc()["messages"], json!([]));

    // Query parameters: present when the argument is, absent otherwise.
    call(&c, &url, "echo_get", json!({"id": "q", "tag": "a&b=c"})).await;
    assert_eq!(last_request(&seen)["query"], "tag=a%26b%3Dc");
    call(&c, &url, "echo_get", json!({"id": "q"})).await;
    assert_eq!(last_request(&seen)["query"], "");
    g.stop().await.unwrap();
}

/// `$meta` reaches every kind of program that names it (it is built only for such tools).
#[tokio::test]
async fn meta_reaches_query_header_and_result_programs() {
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let mapping = std::fs::read_to_string(dir.join("usp.yaml"))
        .unwrap()
        .replace(
            "    query: { tag: .tag }\n",
            "    query: { tag: .tag, key: $meta.idempotency_key }\n    headers: { X-Corr: $meta.correlation_id }\n    result: '{ path: .path, profile: $meta.profile, key: $meta.idempotency_key }'\n",
        );
    assert!(
        mapping.contains("$meta.correlation_id"),
        "the fixture changed"
    );
    std::fs::write(dir.join("usp.yaml"), mapping).unwrap();
    let g = gateway(&[dir.join("usp.yaml")]).await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());
    let meta = json!({"usp": {"profile": "https://agent.example/p.json", "idempotency_key": "k-7", "correlation_id": "corr-7"}});
    let a = call(&c, &url, "echo_get", json!({"id": "x", "_meta": meta})).await;
    let sc = &a.body["result"]["structuredContent"];
    assert_eq!(sc["profile"], "https://agent.example/p.json", "{}", a.text);
    assert_eq!(sc["key"], "k-7", "{}", a.text);
    let r = last_request(&seen);
    assert_eq!(r["headers"]["x-corr"], "corr-7");
    assert!(
        r["path"].as_str().unwrap_or("").ends_with("/items/x"),
        "{r}"
    );
    assert!(r["query"].as_str().unwrap_or("").contains("key=k-7"), "{r}");
    // Without metadata the values are null: the query parameter and header are left out.
    let a = call(&c, &url, "echo_get", json!({"id": "y"})).await;
    assert_eq!(
        a.body["result"]["structuredContent"]["key"],
        Value::Null,
        "{}",
        a.text
    );
    let r = last_request(&seen);
    assert!(r["headers"].get("x-corr").is_none(), "{r}");
    assert!(!r["query"].as_str().unwrap_or("").contains("key="), "{r}");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn header_injection_is_refused() {
    let (g, seen, c, url) = setup("usp").await;
    for (meta, code, slug) in [
        (
            json!({"usp": {"idempotency_key": "k\r\nX-Evil: 1"}}),
            -32600,
            "invalid_request",
        ),
        (
            json!({"usp": {"correlation_id": "c\nX-Evil: 1"}}),
            -32600,
            "invalid_request",
        ),
        // USP: a malformed profile URI is `invalid_profile_url` (-32602).
        (
            json!({"usp": {"profile": "https://a.example/\r\nX-Evil: 1"}}),
            -32602,
            "invalid_profile_url",
        ),
    ] {
        let a = call(&c, &url, "echo_post", json!({"name": "x", "_meta": meta})).await;
        assert_eq!(a.error_code(), Some(code), "{}", a.text);
        assert_eq!(a.body["error"]["data"]["code"], slug);
    }
    assert!(
        seen.requests.lock().unwrap().is_empty(),
        "nothing reached the backend"
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn arguments_are_validated_before_any_backend_call() {
    let (g, seen, c, url) = setup("usp").await;
    let a = call(&c, &url, "echo_post", json!({"count": -1})).await;
    assert_eq!(a.error_code(), Some(-32600));
    let content = a.body["error"]["data"]["content"].as_str().unwrap();
    assert!(content.contains("name"), "{content}");
    let a = call(&c, &url, "echo_post", json!({"name": 5})).await;
    assert_eq!(a.error_code(), Some(-32600));
    let a = send(modern(
        &c,
        &url,
        1,
        "tools/call",
        json!({"name": "echo_post", "arguments": [1, 2]}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32600));
    let a = call(&c, &url, "no_such_tool", json!({})).await;
    assert_eq!(a.error_code(), Some(-32602));
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );
    assert!(seen.requests.lock().unwrap().is_empty());
    g.stop().await.unwrap();

    // The plain binding reports invalid arguments as a tool error (SEP-1303).
    let (g, _, c, url) = setup("plain").await;
    let a = call(&c, &url, "echo_post", json!({"count": 1})).await;
    assert_eq!(a.result()["isError"], true, "{}", a.text);
    assert!(
        a.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("name")
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn backend_statuses_follow_the_binding_tables() {
    let (g, _, c, url) = setup("usp").await;
    let expect = [
        (500, -32603, "server_error"),
        (503, -32009, "service_unavailable"),
        (401, -32006, "authentication_required"),
        (403, -32005, "profile_not_trusted"),
        (412, -32002, "revision_mismatch"),
        (429, -32007, "rate_limited"),
        (400, -32600, "invalid_request"),
    ];
    for (status, code, slug) in expect {
        let a = call(&c, &url, "status", json!({"code": status})).await;
        assert_eq!(a.error_code(), Some(code), "{status}: {}", a.text);
        assert_eq!(a.body["error"]["data"]["code"], slug);
        assert_eq!(
            a.body["error"]["data"]["content"],
            format!("backend said {status}")
        );
    }
    let a = call(&c, &url, "status", json!({"code": 503})).await;
    assert_eq!(a.body["error"]["data"]["retry_after"], 7);
    // A mapped business outcome.
    let a = call(&c, &url, "status", json!({"code": 409})).await;
    assert!(a.result().get("isError").is_none());
    assert_eq!(a.sc()["messages"][0]["code"], "slot_unavailable");
    assert_eq!(a.sc()["messages"][0]["content"], "backend said 409");
    // RFC 9457 problem bodies are carried.
    let a = call(&c, &url, "status", json!({"code": 418})).await;
    assert_eq!(a.body["error"]["data"]["problem"]["title"], "I am a teapot");
    assert_eq!(a.body["error"]["data"]["content"], "short and stout");
    g.stop().await.unwrap();

    let (g, _, c, url) = setup("plain").await;
    let a = call(&c, &url, "status", json!({"code": 502})).await;
    assert_eq!(a.result()["isError"], true);
    assert!(
        a.result()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("502")
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn non_json_timeouts_refusals_and_bad_mappings() {
    let (g, _, c, url) = setup("usp").await;
    let a = call(&c, &url, "text", json!({})).await;
    assert_eq!(a.error_code(), Some(-32603), "{}", a.text);
    assert!(
        a.body["error"]["data"]["content"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
    let a = call(&c, &url, "slow", json!({"ms": 3000})).await;
    assert_eq!(a.error_code(), Some(-32009), "{}", a.text);
    assert!(
        a.body["error"]["data"]["content"]
            .as_str()
            .unwrap()
            .contains("400 ms")
    );
    let a = call(&c, &url, "shape", json!({})).await;
    assert_eq!(a.error_code(), Some(-32603), "{}", a.text);
    assert!(
        a.body["error"]["data"]["content"]
            .as_str()
            .unwrap()
            .contains("output schema")
    );
    // Still serving after all of it.
    let a = call(&c, &url, "echo_get", json!({"id": "ok"})).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/ok");
    g.stop().await.unwrap();

    // A backend that refuses connections.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = fixture_with_backend("gateway", &closed.to_string());
    let g = gateway(&[dir.join("usp.yaml")]).await;
    let a = call(&c, &g.mcp_url(), "echo_get", json!({"id": "x"})).await;
    assert_eq!(a.error_code(), Some(-32009), "{}", a.text);
    g.stop().await.unwrap();
    let g = gateway(&[dir.join("plain.yaml")]).await;
    let a = call(&c, &g.mcp_url(), "echo_get", json!({"id": "x"})).await;
    assert_eq!(a.result()["isError"], true);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn a_closed_stream_cancels_the_backend_call() {
    let (g, seen, c, url) = setup("usp").await;
    // The backend would answer after 350 ms, inside portico's 400 ms timeout. The client goes
    // away once the backend has the request (not on a timer of its own, which a busy machine
    // could let run out before the request is even sent).
    let pending = tokio::spawn(
        modern(
            &c,
            &url,
            1,
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 350}}),
        )
        .send(),
    );
    assert!(
        wait_received(&seen, "/slow/").await,
        "the backend call is sent"
    );
    pending.abort();
    assert!(
        pending.await.is_err_and(|e| e.is_cancelled()),
        "the client gave up first"
    );
    let abandoned = wait_abandoned(&seen).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(abandoned, 1, "the backend request was dropped");
    assert_eq!(
        seen.completed.load(Ordering::SeqCst),
        0,
        "and never completed"
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn a_summary_that_cannot_render_leaves_the_json_text() {
    let (g, _, c, url) = setup("plain").await;
    let a = call(&c, &url, "echo_post", json!({"name": "x"})).await;
    let r = a.result();
    let sc = &r["structuredContent"];
    assert!(sc.is_object(), "{}", a.text);
    let text = r["content"][0]["text"].as_str().expect("text content");
    let parsed: Value =
        serde_json::from_str(text).expect("the text is the JSON of structuredContent");
    assert_eq!(&parsed, sc);
    g.stop().await.unwrap();
}
