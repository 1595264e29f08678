//! Progress, log notifications and cancellation of `tools/call` over Streamable HTTP, at both
//! eras, against the scriptable backend on 127.0.0.1 (its `/slow/{ms}` route).

mod common;
use common::*;
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

async fn setup() -> (
    portico::app::Running,
    std::sync::Arc<Seen>,
    reqwest::Client,
    String,
) {
    gateway_on_test_backend("plain").await
}

/// Every JSON message of an SSE body, in order.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// Sends one message inside session `sid`.
async fn session(c: &reqwest::Client, url: &str, sid: &str, body: Value) -> Answer {
    send(legacy(c, url, sid, body)).await
}

fn call(id: i64, name: &str, args: Value, meta: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": args, "_meta": meta}})
}

/// Reads an SSE response until `stop` accepts a message; returns what was read.
async fn read_until(
    resp: &mut futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut buf = String::new();
    while let Some(chunk) = resp.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.expect("stream chunk")));
        let seen = events(&buf);
        if seen.iter().any(&stop) {
            return seen;
        }
    }
    events(&buf)
}

fn progress_of(msgs: &[Value], token: &Value) -> Vec<Value> {
    msgs.iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"].clone())
        .filter(|p| &p["progressToken"] == token)
        .collect()
}

fn assert_progress_well_formed(p: &[Value]) {
    assert!(p.len() >= 2, "a start and a final notification: {p:?}");
    assert_eq!(p[0]["progress"], 0);
    for w in p.windows(2) {
        assert!(
            w[1]["progress"].as_u64() > w[0]["progress"].as_u64(),
            "progress increases: {p:?}"
        );
    }
    let last = p.last().unwrap();
    assert_eq!(last["total"], last["progress"], "the final one is complete");
}

#[tokio::test]
async fn legacy_progress_arrives_on_the_post_stream_before_the_answer() {
    let (g, _, c, url) = setup().await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let a = session(
        &c,
        &url,
        &sid,
        call(
            2,
            "slow",
            json!({"ms": 120}),
            json!({"progressToken": "p-1"}),
        ),
    )
    .await;
    assert!(
        a.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let msgs = events(&a.text);
    let p = progress_of(&msgs, &json!("p-1"));
    assert_progress_well_formed(&p);
    let last = msgs.last().unwrap();
    assert_eq!(last["id"], 2, "the response comes last");
    assert_eq!(last["result"]["structuredContent"]["slept"], true);
    // No token, no level: a plain JSON answer.
    let a = session(&c, &url, &sid, call(3, "slow", json!({"ms": 1}), json!({}))).await;
    assert_eq!(a.headers["content-type"], "application/json");
    assert_eq!(a.body["result"]["structuredContent"]["slept"], true);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn a_progress_token_may_be_reused_after_its_call_but_not_during_it() {
    let (g, _, c, url) = setup().await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let token = json!(42);
    for id in [2, 3] {
        let a = session(
            &c,
            &url,
            &sid,
            call(id, "slow", json!({"ms": 10}), json!({"progressToken": 42})),
        )
        .await;
        let msgs = events(&a.text);
        assert_progress_well_formed(&progress_of(&msgs, &token));
        assert_eq!(msgs.last().unwrap()["id"], id);
    }
    // While call 4 runs (its first progress has arrived), call 5 reuses the token: refused.
    let resp = legacy(
        &c,
        &url,
        &sid,
        call(4, "slow", json!({"ms": 1500}), json!({"progressToken": 42})),
    )
    .send()
    .await
    .unwrap();
    let mut stream = resp.bytes_stream().boxed();
    let first = read_until(&mut stream, |m| m["method"] == "notifications/progress").await;
    assert!(!first.is_empty());
    let dup = session(
        &c,
        &url,
        &sid,
        call(5, "slow", json!({"ms": 1}), json!({"progressToken": 42})),
    )
    .await;
    assert_eq!(dup.error_code(), Some(-32602), "{}", dup.text);
    assert_eq!(dup.body["id"], 5);
    // The first call is unaffected.
    let rest = read_until(&mut stream, |m| m["id"] == 4).await;
    assert_eq!(
        rest.last().unwrap()["result"]["structuredContent"]["slept"],
        true
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn log_notifications_follow_the_session_level() {
    let (g, _, c, url) = setup().await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    // Before any logging/setLevel: no log messages (a plain JSON answer).
    let a = session(
        &c,
        &url,
        &sid,
        call(2, "status", json!({"code": "503"}), json!({})),
    )
    .await;
    assert_eq!(a.headers["content-type"], "application/json");
    let set = |id: i64, level: &str| {
        legacy(
            &c,
            &url,
            &sid,
            json!({"jsonrpc":"2.0","id":id,"method":"logging/setLevel","params":{"level":level}}),
        )
    };
    assert_eq!(send(set(3, "debug")).await.body["result"], json!({}));
    let a = session(
        &c,
        &url,
        &sid,
        call(4, "status", json!({"code": "503"}), json!({})),
    )
    .await;
    let msgs = events(&a.text);
    let levels: Vec<&str> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().unwrap())
        .collect();
    assert!(
        levels.contains(&"debug") && levels.contains(&"info"),
        "{levels:?}"
    );
    assert!(
        levels.contains(&"warning") || levels.contains(&"error"),
        "a backend failure is reported: {levels:?}"
    );
    assert!(
        msgs.iter()
            .all(|m| m["method"] != "notifications/message" || m["params"]["logger"] == "portico")
    );
    assert_eq!(msgs.last().unwrap()["id"], 4);
    // At `error`, only messages of that severity or above.
    assert_eq!(send(set(5, "error")).await.body["result"], json!({}));
    let a = session(
        &c,
        &url,
        &sid,
        call(6, "status", json!({"code": "503"}), json!({})),
    )
    .await;
    for m in events(&a.text) {
        if m["method"] == "notifications/message" {
            assert!(
                ["error", "critical", "alert", "emergency"]
                    .contains(&m["params"]["level"].as_str().unwrap())
            );
        }
    }
    // An unknown level is refused and leaves the level alone.
    assert_eq!(send(set(7, "loud")).await.error_code(), Some(-32602));
    g.stop().await.unwrap();
}

#[tokio::test]
async fn notifications_cancelled_aborts_the_backend_call() {
    let (g, seen, c, url) = setup().await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    // The backend would answer after 3 s, inside the tool's 10 s timeout: only the
    // cancellation can end the call before that.
    let resp = legacy(
        &c,
        &url,
        &sid,
        call(
            9,
            "slow",
            json!({"ms": 3000}),
            json!({"progressToken": "c"}),
        ),
    )
    .send()
    .await
    .unwrap();
    let mut stream = resp.bytes_stream().boxed();
    read_until(&mut stream, |m| m["method"] == "notifications/progress").await;
    assert!(
        wait_received(&seen, "/slow/").await,
        "the backend call is sent"
    );
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                        "params":{"requestId": 9, "reason": "user gave up"}});
    let a = send(legacy(&c, &url, &sid, cancel)).await;
    assert_eq!(a.status, 202);
    let rest = read_until(&mut stream, |m| m.get("id").is_some()).await;
    assert!(
        rest.iter().all(|m| m.get("id").is_none()),
        "no response after cancellation: {rest:?}"
    );
    let abandoned = wait_abandoned(&seen).await;
    assert_eq!(abandoned, 1, "the backend request was dropped");
    assert_eq!(seen.completed.load(Ordering::SeqCst), 0);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_finished_or_unknown_call_changes_nothing() {
    let (g, _, c, url) = setup().await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let a = session(&c, &url, &sid, call(2, "slow", json!({"ms": 1}), json!({}))).await;
    assert_eq!(a.body["result"]["structuredContent"]["slept"], true);
    for rid in [json!(2), json!("never-sent"), Value::Null] {
        let cancel =
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": rid}});
        let a = send(legacy(&c, &url, &sid, cancel)).await;
        assert_eq!(a.status, 202);
        assert!(a.text.is_empty());
    }
    // The session still works, and id 2 may be used again.
    let a = session(&c, &url, &sid, call(2, "slow", json!({"ms": 1}), json!({}))).await;
    assert_eq!(a.body["result"]["structuredContent"]["slept"], true);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn modern_progress_and_log_level_come_from_meta() {
    let (g, _, c, url) = setup().await;
    let mut req = modern(
        &c,
        &url,
        3,
        "tools/call",
        json!({"name": "status", "arguments": {"code": "503"}}),
    );
    // `modern` fills `_meta`; rebuild the body with a token and a level added.
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status","arguments":{"code":"503"},"_meta":{
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "warning",
        "progressToken": "m-1"}}});
    req = req.body(body.to_string());
    let a = send(req).await;
    let msgs = events(&a.text);
    assert_progress_well_formed(&progress_of(&msgs, &json!("m-1")));
    let logs: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert!(!logs.is_empty(), "the 503 is logged at warning or above");
    assert!(logs.iter().all(|m| m["params"]["level"] != "info"));
    assert_eq!(msgs.last().unwrap()["id"], 3);
    assert_eq!(msgs.last().unwrap()["result"]["resultType"], "complete");
    // Without a logLevel or a token: no notifications at all.
    let a = send(modern(
        &c,
        &url,
        4,
        "tools/call",
        json!({"name": "status", "arguments": {"code": "503"}}),
    ))
    .await;
    assert!(!a.text.contains("notifications/"), "{}", a.text);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn legacy_calls_keep_the_binding_http_status() {
    // UCP errors ride on their table's HTTP status, in a 2025 session as at 2026-07-28.
    let d = portico::demo::start(0).await.expect("demo starts");
    let c = reqwest::Client::new();
    let url = d.mcp_url();
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let a = session(
        &c,
        &url,
        &sid,
        call(
            2,
            "ask_business",
            json!({"ask": {"query": "pets?"}}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert_eq!(a.status, 400, "UCP invalid_params is HTTP 400");
    d.stop().await;
}

/// One JSON-RPC line on a stdio pipe.
async fn put(w: &mut (impl tokio::io::AsyncWrite + Unpin), msg: Value) {
    use tokio::io::AsyncWriteExt;
    w.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
}

/// Reads stdio lines until `stop` accepts one; returns every message read.
async fn take_until(
    r: &mut tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    while let Some(line) = r.next_line().await.unwrap() {
        let v: Value = serde_json::from_str(&line).expect("stdout carries JSON-RPC only");
        let done = stop(&v);
        seen.push(v);
        if done {
            break;
        }
    }
    seen
}

#[tokio::test]
async fn stdio_reports_progress_logs_and_honours_cancellation() {
    use tokio::io::AsyncBufReadExt;
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let g = portico::config::load(&[dir.join("plain.yaml")]).unwrap();
    let core = std::sync::Arc::new(portico::mcp::handler::Core {
        gateway: arc_swap::ArcSwap::from_pointee(g),
        info: portico::mcp::handler::ServerInfo::default(),
    });
    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_in, server_out) = tokio::io::split(server);
    let serving = tokio::spawn(portico::mcp::stdio::serve(core, server_in, server_out, 64));
    let (client_in, mut w) = tokio::io::split(client);
    let mut r = tokio::io::BufReader::new(client_in).lines();

    put(&mut w, json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})).await;
    put(
        &mut w,
        json!({"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}),
    )
    .await;
    take_until(&mut r, |m| m["id"] == 2).await;

    // A finished call, with progress and log messages before its answer.
    put(
        &mut w,
        call(3, "slow", json!({"ms": 1}), json!({"progressToken": "s"})),
    )
    .await;
    let msgs = take_until(&mut r, |m| m["id"] == 3).await;
    assert_progress_well_formed(&progress_of(&msgs, &json!("s")));
    assert!(msgs.iter().any(|m| m["method"] == "notifications/message"));
    assert_eq!(
        msgs.last().unwrap()["result"]["structuredContent"]["slept"],
        true
    );

    // A cancelled one: no answer, the backend request dropped; the session keeps serving.
    put(
        &mut w,
        call(
            4,
            "slow",
            json!({"ms": 3000}),
            json!({"progressToken": "c"}),
        ),
    )
    .await;
    take_until(&mut r, |m| m["method"] == "notifications/progress").await;
    assert!(
        wait_received(&seen, "/slow/3000").await,
        "the backend call is sent"
    );
    put(
        &mut w,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}),
    )
    .await;
    put(
        &mut w,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}),
    )
    .await;
    put(&mut w, json!({"jsonrpc":"2.0","id":5,"method":"ping"})).await;
    let rest = take_until(&mut r, |m| m["id"] == 5).await;
    assert!(rest.iter().all(|m| m["id"] != 4), "{rest:?}");
    assert_eq!(wait_abandoned(&seen).await, 1);
    tokio::io::AsyncWriteExt::shutdown(&mut w).await.unwrap();
    let tail = take_until(&mut r, |_| false).await;
    assert!(tail.iter().all(|m| m["id"] != 4), "{tail:?}");
    serving.await.unwrap().unwrap();
}
