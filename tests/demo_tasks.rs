//! The demo's long-running `export_bookings_report` through `portico demo` on 127.0.0.1 (the legacy spa API answers 202 and a Location, the report is ready after a few status reads): synchronous without tasks, a task at both eras, and task status notifications (2025-11-25 on a session's GET stream, 2026-07-28 on a `subscriptions/listen` stream with `taskIds`).
//! It never lets a notification about one caller's task reach another caller's stream unnoticed: each test checks the other stream stays silent.
#![cfg(unix)]

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TOOL: &str = "export_bookings_report";

/// An open SSE response body.
type Sse =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Books a massage through the legacy API, so the report has something to count.
async fn book(backend: &str) {
    let r = reqwest::Client::new()
        .post(format!("{backend}/spa/v1/appointments"))
        .header("x-api-key", "demo-key")
        .json(
            &json!({"treatment": "MASSAGE-60", "opening": "MASSAGE-60@2026-12-02T09:00",
                      "client": {"name": "Ana Lima", "email": "ana@example.com"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// A 2026-07-28 request carrying `key` as its business credential (the task owner), declaring
/// the tasks extension when `tasks`.
fn request(
    url: &str,
    key: &str,
    method: &str,
    mut params: Value,
    tasks: bool,
) -> reqwest::RequestBuilder {
    let ext = if tasks {
        json!({ TASKS: {} })
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": ext},
    });
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method)
        .header("x-api-key", key);
    if let Some(n) = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
    {
        rb = rb.header("mcp-name", n);
    }
    rb.body(json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).to_string())
}

fn report_args() -> Value {
    json!({"name": TOOL, "arguments": {"from": "2026-12-01", "to": "2026-12-31"}})
}

fn check_report(sc: &Value) {
    assert_eq!(sc["booked"], 1, "{sc}");
    assert_eq!(sc["cancelled"], 0, "{sc}");
    assert_eq!(
        sc["revenue"],
        json!({"amount": 9000, "currency": "EUR"}),
        "{sc}"
    );
    assert_eq!(sc["lines"][0]["booking_id"], "A-1001", "{sc}");
    assert_eq!(sc["lines"][0]["status"], "confirmed", "{sc}");
}

/// The next SSE `data:` of `body` within `wait`; `None` when none came.
async fn next_event(
    body: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
    wait: Duration,
) -> Option<Value> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        if let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            if let Some(d) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                return Some(serde_json::from_str(d).expect("JSON data"));
            }
            continue;
        }
        let chunk = tokio::time::timeout_at(until, futures_util::StreamExt::next(body)).await;
        match chunk {
            Ok(Some(Ok(c))) => buf.push_str(std::str::from_utf8(&c).expect("utf-8")),
            _ => return None,
        }
    }
}

/// The first event of `method` on the stream within 10 s.
async fn wait_for(
    body: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
    method: &str,
) -> Value {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Some(e) = next_event(body, buf, Duration::from_secs(1)).await
            && e["method"] == method
        {
            return e;
        }
    }
    panic!("no {method} within 10 s");
}

#[tokio::test]
async fn the_demo_report_completes_synchronously_for_a_client_without_tasks() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    book(&demo.backend_url()).await;
    let url = demo.mcp_url();
    let a = send(request(&url, "k", "tools/call", report_args(), false)).await;
    assert_eq!(a.result()["resultType"], "complete", "{}", a.text);
    check_report(a.sc());
    let text = a.result()["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("1 booked, 0 cancelled, revenue 9000 EUR"),
        "{text}"
    );
    // The legacy validation answer (200 with errors) is a business outcome, not a task.
    let mut bad = report_args();
    bad["arguments"] = json!({"from": "2026-12-31", "to": "2026-12-01"});
    let b = send(request(&url, "k", "tools/call", bad, true)).await;
    assert_eq!(b.result()["isError"], true, "{}", b.text);
    assert!(b.text.contains("must not be before from"), "{}", b.text);
    // tools/list serves it with its output schema.
    let l = send(request(&url, "k", "tools/list", json!({}), false)).await;
    let tool = l.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == TOOL)
        .cloned()
        .unwrap_or_else(|| panic!("{}", l.text));
    assert!(
        tool["outputSchema"]["properties"]["lines"].is_object(),
        "{tool}"
    );
    demo.stop().await;
}

#[tokio::test]
async fn the_demo_report_runs_as_a_task_at_both_eras_and_can_be_cancelled() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    book(&demo.backend_url()).await;
    let url = demo.mcp_url();
    // 2026-07-28: a CreateTaskResult, then tasks/get until completed.
    let c = send(request(&url, "k", "tools/call", report_args(), true)).await;
    assert_eq!(c.result()["resultType"], "task", "{}", c.text);
    let id = c.result()["taskId"].as_str().unwrap().to_string();
    let until = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let g = send(request(&url, "k", "tasks/get", json!({"taskId": id}), true)).await;
        if g.result()["status"] == "completed" {
            break g.result().clone();
        }
        assert_eq!(g.result()["status"], "working", "{}", g.text);
        assert!(Instant::now() < until, "still working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    check_report(&done["result"]["structuredContent"]);
    // 2025-11-25: params.task, then tasks/result waits for the report.
    let client = reqwest::Client::new();
    let (sid, _) = initialize(&client, &url, "2025-11-25").await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": TOOL, "arguments": report_args()["arguments"], "task": {}}});
    let t = send(legacy(&client, &url, &sid, body)).await;
    let id = t.result()["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", t.text));
    let body =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}});
    let r = send(legacy(&client, &url, &sid, body)).await;
    check_report(r.sc());
    // A cancelled task: the backend's report is cancelled too (its next read says so).
    let c = send(request(&url, "k", "tools/call", report_args(), true)).await;
    let id = c.result()["taskId"].as_str().unwrap().to_string();
    let x = send(request(
        &url,
        "k",
        "tasks/cancel",
        json!({"taskId": id}),
        true,
    ))
    .await;
    assert!(x.body["error"].is_null(), "{}", x.text);
    let g = send(request(&url, "k", "tasks/get", json!({"taskId": id}), true)).await;
    assert_eq!(g.result()["status"], "cancelled", "{}", g.text);
    let rid = "R-3003";
    let read = reqwest::Client::new()
        .get(format!("{}/spa/v1/reports/{rid}", demo.backend_url()))
        .header("x-api-key", "demo-key")
        .send()
        .await
        .unwrap();
    let v: Value = read.json().await.unwrap();
    assert_eq!(v["report"]["state"], "CANCELLED", "{v}");
    demo.stop().await;
}

/// Opens the GET stream of 2025 session `sid`.
async fn get_stream(client: &reqwest::Client, url: &str, sid: &str) -> Sse {
    let r = client
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    Box::pin(r.bytes_stream())
}

#[tokio::test]
async fn a_sessions_get_stream_gets_its_own_tasks_status_notifications_only() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    let url = demo.mcp_url();
    let client = reqwest::Client::new();
    let (mine, _) = initialize(&client, &url, "2025-11-25").await;
    let (theirs, _) = initialize(&client, &url, "2025-11-25").await;
    let (mut my_stream, mut my_buf) = (get_stream(&client, &url, &mine).await, String::new());
    let (mut their_stream, mut their_buf) =
        (get_stream(&client, &url, &theirs).await, String::new());
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": TOOL, "arguments": report_args()["arguments"], "task": {}}});
    let t = send(legacy(&client, &url, &mine, body)).await;
    let task = t.result()["task"].clone();
    assert_eq!(task["status"], "working", "{}", t.text);
    let n = wait_for(&mut my_stream, &mut my_buf, "notifications/tasks/status").await;
    let p = &n["params"];
    assert_eq!(p["taskId"], task["taskId"], "{n}");
    assert_eq!(p["status"], "completed", "{n}");
    assert_eq!(p["createdAt"], task["createdAt"], "{n}");
    assert_eq!(p["ttl"], task["ttl"], "{n}");
    assert_eq!(p["pollInterval"], task["pollInterval"], "{n}");
    assert!(
        p["lastUpdatedAt"].as_str() >= task["lastUpdatedAt"].as_str(),
        "{n}"
    );
    assert!(
        p.get("result").is_none(),
        "the 2025 form carries the task alone: {n}"
    );
    // Polling still answers the same.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
                      "params": {"taskId": task["taskId"]}});
    let g = send(legacy(&client, &url, &mine, body)).await;
    assert_eq!(g.result()["status"], "completed", "{}", g.text);
    // The other session's stream got nothing about it.
    let leaked = next_event(
        &mut their_stream,
        &mut their_buf,
        Duration::from_millis(800),
    )
    .await;
    assert!(leaked.is_none(), "another session got {leaked:?}");
    demo.stop().await;
}

/// Opens a `subscriptions/listen` stream as `key` for `ids`: the acknowledgement and the stream.
async fn listen(url: &str, key: &str, ids: &[&str]) -> (Value, Sse, String) {
    let params = json!({"notifications": {"taskIds": ids}});
    let r = request(url, key, "subscriptions/listen", params, true)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut body: Sse = Box::pin(r.bytes_stream());
    let mut buf = String::new();
    let ack = next_event(&mut body, &mut buf, Duration::from_secs(5))
        .await
        .expect("an acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    (ack, body, buf)
}

#[tokio::test]
async fn a_listen_stream_with_task_ids_gets_notifications_for_the_callers_own_tasks_only() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    book(&demo.backend_url()).await;
    let url = demo.mcp_url();
    let c = send(request(&url, "key-a", "tools/call", report_args(), true)).await;
    let id = c.result()["taskId"].as_str().unwrap().to_string();
    let never = "0123456789abcdef0123456789abcdef";
    // Without the extension declared: -32021.
    let params = json!({"notifications": {"taskIds": [id]}});
    let bare = send(request(
        &url,
        "key-a",
        "subscriptions/listen",
        params,
        false,
    ))
    .await;
    assert_eq!(bare.error_code(), Some(-32021), "{}", bare.text);
    // The owner: only its own task is agreed to.
    let (ack, mut mine, mut my_buf) = listen(&url, "key-a", &[id.as_str(), never]).await;
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "{ack}"
    );
    let sub = &ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
    assert_eq!(*sub, json!(9), "{ack}");
    // Another caller naming the same task: not agreed, nothing sent.
    let (ack, mut theirs, mut their_buf) = listen(&url, "key-b", &[id.as_str()]).await;
    assert!(
        ack["params"]["notifications"].get("taskIds").is_none(),
        "{ack}"
    );
    let until = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let n = wait_for(&mut mine, &mut my_buf, "notifications/tasks").await;
        assert_eq!(n["params"]["taskId"], json!(id), "{n}");
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            json!(9)
        );
        assert!(
            n["params"]["ttlMs"].is_u64() && n["params"]["pollIntervalMs"].is_u64(),
            "{n}"
        );
        if n["params"]["status"] == "completed" {
            break n;
        }
        assert_eq!(n["params"]["status"], "working", "{n}");
        assert!(Instant::now() < until);
    };
    // The whole DetailedTask, as tasks/get answers it.
    check_report(&done["params"]["result"]["structuredContent"]);
    let g = send(request(
        &url,
        "key-a",
        "tasks/get",
        json!({"taskId": id}),
        true,
    ))
    .await;
    assert_eq!(g.result()["result"], done["params"]["result"], "{}", g.text);
    let leaked = next_event(&mut theirs, &mut their_buf, Duration::from_millis(800)).await;
    assert!(leaked.is_none(), "another caller got {leaked:?}");
    demo.stop().await;
}

#[tokio::test]
async fn with_secure_the_report_needs_the_demo_key() {
    let demo = portico::demo::start_opts(0, false, true)
        .await
        .expect("demo starts");
    let url = demo.mcp_url();
    let refused = send(request(
        &url,
        "not-the-key",
        "tools/call",
        report_args(),
        true,
    ))
    .await;
    assert_eq!(refused.error_code(), Some(-32001), "{}", refused.text);
    assert_eq!(refused.body["error"]["data"]["code"], "unauthorized");
    let key = portico::demo::SECURE_API_KEY;
    let ok = send(request(&url, key, "tools/call", report_args(), false)).await;
    assert_eq!(ok.sc()["booked"], 0, "{}", ok.text);
    demo.stop().await;
}
