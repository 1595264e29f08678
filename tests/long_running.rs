//! Long-running REST operations as MCP tasks (`long_running:` in a mapping), against a real
//! HTTP backend on 127.0.0.1 whose jobs answer `202` + `Location`: polling to completion,
//! failure, cancel (the backend sees the DELETE), `Retry-After`, the deadline, a synchronous
//! call for a client without tasks, tasks bound to their creator (another caller's task is an
//! unknown task; `tasks/list` shows one's own), and task state in Redis (`--state`) surviving a restart and
//! shared by two replicas (each started as its own `portico serve` process, with its own
//! `redis-server` on a free port).
#![cfg(unix)]

mod common;

use bytes::Bytes;
use common::redis::Redis;
use common::*;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One job of the test backend: done after `polls` status reads.
#[derive(Default)]
struct Job {
    polls_left: u32,
    outcome: String,
    retry_after: Option<u64>,
    cancelled: bool,
    /// When each status read arrived.
    reads: Vec<Instant>,
}

#[derive(Default)]
struct Jobs {
    jobs: HashMap<String, Job>,
    deletes: Vec<String>,
}

type Shared = Arc<Mutex<Jobs>>;

fn reply(status: StatusCode, v: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

/// `POST /ops {polls, outcome, retry_after?}` -> 202 + Location; `GET /ops/{id}`; `DELETE /ops/{id}`.
async fn backend() -> (String, Shared) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let jobs: Shared = Arc::default();
    let j = jobs.clone();
    serve_with(listener, move |req| {
        let jobs = j.clone();
        async move {
            let method = req.method().clone();
            let path = req.uri().path().to_string();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut all = jobs.lock().unwrap();
            if method == http::Method::POST && path == "/ops" {
                let v: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
                let id = uuid::Uuid::new_v4().simple().to_string();
                all.jobs.insert(
                    id.clone(),
                    Job {
                        polls_left: v["polls"].as_u64().unwrap_or(1) as u32,
                        outcome: v["outcome"].as_str().unwrap_or("ok").to_string(),
                        retry_after: v["retry_after"].as_u64(),
                        ..Job::default()
                    },
                );
                let mut r = reply(StatusCode::ACCEPTED, json!({"id": id}));
                r.headers_mut()
                    .insert("location", format!("/ops/{id}").parse().unwrap());
                return r;
            }
            let Some(id) = path.strip_prefix("/ops/") else {
                return reply(StatusCode::NOT_FOUND, json!({}));
            };
            if method == http::Method::DELETE {
                all.deletes.push(id.to_string());
                if let Some(j) = all.jobs.get_mut(id) {
                    j.cancelled = true;
                }
                return reply(StatusCode::OK, json!({"state": "CANCELLED"}));
            }
            let Some(j) = all.jobs.get_mut(id) else {
                return reply(StatusCode::NOT_FOUND, json!({}));
            };
            j.reads.push(Instant::now());
            if j.cancelled {
                return reply(StatusCode::OK, json!({"state": "CANCELLED"}));
            }
            if j.polls_left > 0 {
                j.polls_left -= 1;
                let mut r = reply(StatusCode::OK, json!({"state": "RUNNING"}));
                if let Some(s) = j.retry_after {
                    r.headers_mut()
                        .insert("retry-after", s.to_string().parse().unwrap());
                }
                return r;
            }
            match j.outcome.as_str() {
                "ok" => reply(
                    StatusCode::OK,
                    json!({"state": "DONE", "output": {"report": format!("report {id}")}}),
                ),
                "never" => reply(StatusCode::OK, json!({"state": "RUNNING"})),
                _ => reply(
                    StatusCode::OK,
                    json!({"state": "ERROR", "reason": "the report generator crashed"}),
                ),
            }
        }
    });
    (format!("http://{addr}"), jobs)
}

/// A mapping folder with one long-running tool `make_report` on `backend`.
fn mapping(backend: &str, deadline: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portico-lr-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let rpc = json!({
        "openrpc": "1.3.2",
        "info": {"title": "reports", "version": "1"},
        "methods": [{
            "name": "make_report", "summary": "Make a report",
            "paramStructure": "by-name",
            "params": [
                {"name": "polls", "required": true, "schema": {"type": "integer"}},
                {"name": "outcome", "required": true, "schema": {"type": "string"}},
                {"name": "retry_after", "required": false, "schema": {"type": "integer"}}
            ],
            "result": {"name": "report", "schema": {"type": "object", "required": ["report"],
                "properties": {"report": {"type": "string"}}}}
        }]
    });
    std::fs::write(dir.join("reports.openrpc.json"), rpc.to_string()).unwrap();
    let yaml = format!(
        r#"business: reports
binding: plain
openrpc: reports.openrpc.json
backend:
  url: {backend}
  timeout: 5s
tools:
  make_report:
    http: POST /ops
    long_running:
      state: .state
      states: {{ RUNNING: working, DONE: completed, ERROR: failed, CANCELLED: cancelled }}
      answer: .output
      error: .reason
      poll_every: 50ms
      backoff: 1
      deadline: {deadline}
      cancel: DELETE
    summary: "{{{{ report }}}}"
"#
    );
    std::fs::write(dir.join("reports.yaml"), yaml).unwrap();
    dir.join("reports.yaml")
}

fn with_tasks(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    params
}

/// A 2026-07-28 request declaring the tasks extension.
async fn rpc(client: &reqwest::Client, url: &str, method: &str, params: Value) -> common::Answer {
    let params = with_tasks(params);
    let mut rb = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(n) = params.get("name").and_then(Value::as_str) {
        rb = rb.header("mcp-name", n);
    }
    send(
        rb.body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()),
    )
    .await
}

async fn start_task(client: &reqwest::Client, url: &str, args: Value) -> String {
    let a = rpc(
        client,
        url,
        "tools/call",
        json!({"name": "make_report", "arguments": args}),
    )
    .await;
    assert_eq!(a.result()["resultType"], "task", "{}", a.text);
    a.result()["taskId"].as_str().expect("taskId").to_string()
}

/// Polls `tasks/get` until the task is terminal.
async fn settled(client: &reqwest::Client, url: &str, id: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let a = rpc(client, url, "tasks/get", json!({"taskId": id})).await;
        let r = a.result().clone();
        if ["completed", "failed", "cancelled"].contains(&r["status"].as_str().unwrap_or("")) {
            return r;
        }
        assert!(Instant::now() < until, "task {id} still {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_task_is_polled_to_completion_and_its_answer_goes_through_the_tool() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let id = start_task(&client, &url, json!({"polls": 3, "outcome": "ok"})).await;
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "completed", "{r}");
    let report = r["result"]["structuredContent"]["report"].as_str().unwrap();
    assert!(report.starts_with("report "), "{r}");
    assert_eq!(r["result"]["content"][0]["text"], report);
    let all = jobs.lock().unwrap();
    assert_eq!(all.jobs.len(), 1);
    assert!(all.jobs.values().all(|j| j.reads.len() >= 4));
}

#[tokio::test]
async fn a_client_without_tasks_gets_the_answer_synchronously() {
    let (b, _jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let client = reqwest::Client::new();
    let a = call(
        &client,
        &g.mcp_url(),
        "make_report",
        json!({"polls": 2, "outcome": "ok"}),
    )
    .await;
    assert_eq!(a.result()["resultType"], "complete", "{}", a.text);
    assert!(a.sc()["report"].as_str().unwrap().starts_with("report "));
}

#[tokio::test]
async fn a_failed_operation_fails_the_task_with_the_backend_reason() {
    let (b, _jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let id = start_task(&client, &url, json!({"polls": 1, "outcome": "fail"})).await;
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["error"]["message"], "the report generator crashed");
    assert!(r.get("result").is_none());
}

#[tokio::test]
async fn cancel_sends_the_configured_rest_call() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let id = start_task(&client, &url, json!({"polls": 1000, "outcome": "ok"})).await;
    let ack = rpc(&client, &url, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack.result()["resultType"], "complete", "{}", ack.text);
    assert!(ack.result().get("status").is_none());
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "cancelled");
    assert_eq!(jobs.lock().unwrap().deletes.len(), 1);
    // Unknown ids are invalid params.
    let a = rpc(&client, &url, "tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(a.error_code(), Some(-32602));
}

#[tokio::test]
async fn retry_after_from_the_status_resource_is_honoured() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let args = json!({"polls": 2, "outcome": "ok", "retry_after": 1});
    let id = start_task(&client, &url, args).await;
    // Asked often: portico still waits as long as the backend said.
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "completed");
    three_reads_a_second_apart(&jobs);
}

/// The one job was read three times (two RUNNING answers, each with `Retry-After: 1`, then
/// DONE), each read once and at least 950 ms after the one before.
fn three_reads_a_second_apart(jobs: &Shared) {
    let all = jobs.lock().unwrap();
    let reads = &all.jobs.values().next().unwrap().reads;
    assert_eq!(
        reads.len(),
        3,
        "two RUNNING answers then DONE, each read once"
    );
    for w in reads.windows(2) {
        assert!(
            w[1] - w[0] >= Duration::from_millis(950),
            "{:?}",
            w[1] - w[0]
        );
    }
}

/// Many `tasks/get`s at once while a poll falls due: the process polls the backend once per
/// due time (the background poller and the callers never read the status together).
#[tokio::test]
async fn concurrent_task_gets_never_poll_the_backend_twice_at_once() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let args = json!({"polls": 2, "outcome": "ok", "retry_after": 1});
    let id = start_task(&client, &url, args).await;
    let askers: Vec<_> = (0..12)
        .map(|_| {
            let (client, url, id) = (client.clone(), url.clone(), id.clone());
            tokio::spawn(async move {
                let until = Instant::now() + Duration::from_secs(20);
                while Instant::now() < until {
                    let a = rpc(&client, &url, "tasks/get", json!({"taskId": id})).await;
                    if a.result()["status"] == "completed" {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                panic!("task {id} did not complete");
            })
        })
        .collect();
    for a in askers {
        a.await.expect("asker");
    }
    three_reads_a_second_apart(&jobs);
}

#[tokio::test]
async fn an_operation_past_its_deadline_fails_and_is_cancelled() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "400ms")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let id = start_task(&client, &url, json!({"polls": 0, "outcome": "never"})).await;
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "failed", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("deadline"));
    assert_eq!(jobs.lock().unwrap().deletes.len(), 1);
}

/// One `portico serve --state` process: (child, MCP URL).
fn replica(mapping: &Path, redis: &Redis) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("serve")
        .arg(mapping)
        .args(["--listen", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--reload-interval", "off"])
        .args(["--state", &redis.url()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("portico serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("mcp: ")
        .expect("mcp banner")
        .trim()
        .to_string();
    // Keep reading the banner's rest: a closed pipe would fail the process's next write.
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}

fn kill(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

#[tokio::test]
async fn a_restarted_process_picks_the_task_up_from_the_state_store() {
    let (b, _jobs) = backend().await;
    let m = mapping(&b, "1m");
    let redis = Redis::start();
    let client = reqwest::Client::new();
    let (first, url) = replica(&m, &redis);
    let id = start_task(&client, &url, json!({"polls": 5, "outcome": "ok"})).await;
    kill(first);
    let (second, url) = replica(&m, &redis);
    let r = settled(&client, &url, &id).await;
    assert_eq!(r["status"], "completed", "{r}");
    assert!(r["result"]["structuredContent"]["report"].is_string());
    kill(second);
}

#[tokio::test]
async fn one_replica_creates_the_task_and_another_answers_for_it() {
    let (b, _jobs) = backend().await;
    let m = mapping(&b, "1m");
    let redis = Redis::start();
    let client = reqwest::Client::new();
    let (a, url_a) = replica(&m, &redis);
    let (b2, url_b) = replica(&m, &redis);
    let id = start_task(&client, &url_a, json!({"polls": 3, "outcome": "ok"})).await;
    let now = rpc(&client, &url_b, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(now.result()["taskId"], id.as_str(), "{}", now.text);
    let r = settled(&client, &url_b, &id).await;
    assert_eq!(r["status"], "completed", "{r}");
    kill(a);
    kill(b2);
}

/// A 2026-07-28 task request carrying business credential `key` (`X-API-Key`).
async fn rpc_as(key: &str, url: &str, method: &str, params: Value) -> common::Answer {
    let client = reqwest::Client::builder()
        .default_headers(
            [("x-api-key".parse().unwrap(), key.parse().unwrap())]
                .into_iter()
                .collect(),
        )
        .build()
        .unwrap();
    rpc(&client, url, method, params).await
}

/// The error of `a` with the task id taken out: what tells an unknown task apart.
fn unknown(a: &common::Answer, id: &str) -> (Option<i64>, String) {
    let m = a.body["error"]["message"].as_str().unwrap_or_default();
    (a.error_code(), m.replace(id, "<id>"))
}

#[tokio::test]
async fn another_callers_task_is_answered_as_an_unknown_task() {
    let (b, jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let url = g.mcp_url();
    let args = json!({"name": "make_report", "arguments": {"polls": 1000, "outcome": "ok"}});
    let made = rpc_as("key-a", &url, "tools/call", args).await;
    let id = made.result()["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let never = uuid::Uuid::new_v4().simple().to_string();
    let expected = unknown(
        &rpc_as("key-b", &url, "tasks/get", json!({"taskId": never})).await,
        &never,
    );
    assert_eq!(expected.0, Some(-32602), "{expected:?}");
    let plain = reqwest::Client::new();
    let anonymous = rpc(&plain, &url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(unknown(&anonymous, &id), expected, "{}", anonymous.text);
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let p = json!({"taskId": id, "inputResponses": {}});
        let a = rpc_as("key-b", &url, method, p).await;
        assert_eq!(unknown(&a, &id), expected, "{method}: {}", a.text);
    }
    // The foreign cancel reached neither the task nor the backend; the owner still can.
    assert!(jobs.lock().unwrap().deletes.is_empty());
    let own = rpc_as("key-a", &url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(own.result()["status"], "working", "{}", own.text);
    let c = rpc_as("key-a", &url, "tasks/cancel", json!({"taskId": id})).await;
    assert!(c.body["error"].is_null(), "{}", c.text);
    assert_eq!(jobs.lock().unwrap().deletes.len(), 1);
    // The extension has no `tasks/list`.
    let l = rpc_as("key-a", &url, "tasks/list", json!({})).await;
    assert_eq!(l.error_code(), Some(-32601), "{}", l.text);
}

/// A 2025-11-25 request in session `sid`.
async fn in_session(
    client: &reqwest::Client,
    url: &str,
    sid: &str,
    method: &str,
    params: Value,
) -> common::Answer {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    send(legacy(client, url, sid, body)).await
}

/// Every task `tasks/list` shows session `sid`, following `nextCursor`, in the order listed.
async fn listed(client: &reqwest::Client, url: &str, sid: &str) -> Vec<String> {
    let (mut tasks, mut cursor) = (Vec::new(), Value::Null);
    loop {
        let a = in_session(client, url, sid, "tasks/list", json!({"cursor": cursor})).await;
        let r = a.result();
        for t in r["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", a.text))
        {
            let id = t["taskId"].as_str().unwrap().to_string();
            tasks.push((t["createdAt"].as_str().unwrap().to_string(), id));
        }
        match &r["nextCursor"] {
            Value::String(_) => cursor = r["nextCursor"].clone(),
            _ => break,
        }
    }
    // Oldest first; tasks created within the same millisecond by id.
    let mut ordered = tasks.clone();
    ordered.sort();
    assert_eq!(tasks, ordered, "tasks/list is not oldest first");
    tasks.into_iter().map(|(_, id)| id).collect()
}

/// `listed` holds exactly the tasks `made`, each once (made in order, listed oldest first:
/// the same order but for tasks created within one millisecond).
fn same_tasks(listed: Vec<String>, mut made: Vec<String>) {
    let mut listed = listed;
    listed.sort();
    made.sort();
    assert_eq!(listed, made);
}

#[tokio::test]
async fn sessions_see_and_list_only_their_own_tasks() {
    let (b, _jobs) = backend().await;
    let g = gateway(&[mapping(&b, "1m")]).await;
    let (client, url) = (reqwest::Client::new(), g.mcp_url());
    let (mine, init) = initialize(&client, &url, "2025-11-25").await;
    assert!(
        init.result()["capabilities"]["tasks"]["list"].is_object(),
        "{}",
        init.text
    );
    let (theirs, _) = initialize(&client, &url, "2025-11-25").await;
    let mut made = Vec::new();
    // More than one page (50).
    for _ in 0..52 {
        let p =
            json!({"name": "make_report", "arguments": {"polls": 0, "outcome": "ok"}, "task": {}});
        let a = in_session(&client, &url, &mine, "tools/call", p).await;
        made.push(
            a.result()["task"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("{}", a.text))
                .to_string(),
        );
    }
    same_tasks(listed(&client, &url, &mine).await, made.clone());
    assert!(listed(&client, &url, &theirs).await.is_empty());
    let id = &made[0];
    let never = uuid::Uuid::new_v4().simple().to_string();
    let expected = unknown(
        &in_session(
            &client,
            &url,
            &theirs,
            "tasks/get",
            json!({"taskId": never}),
        )
        .await,
        &never,
    );
    assert_eq!(expected.0, Some(-32602));
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let a = in_session(&client, &url, &theirs, method, json!({"taskId": id})).await;
        assert_eq!(unknown(&a, id), expected, "{method}: {}", a.text);
    }
    let r = in_session(&client, &url, &mine, "tasks/result", json!({"taskId": id})).await;
    assert!(
        r.result()["structuredContent"]["report"].is_string(),
        "{}",
        r.text
    );
    let bad = in_session(
        &client,
        &url,
        &mine,
        "tasks/list",
        json!({"cursor": "nope"}),
    )
    .await;
    assert_eq!(bad.error_code(), Some(-32602), "{}", bad.text);
}

#[tokio::test]
async fn tasks_list_reads_the_owners_index_in_the_state_store() {
    let (b, _jobs) = backend().await;
    let m = mapping(&b, "1m");
    let redis = Redis::start();
    let client = reqwest::Client::new();
    let (first, url) = replica(&m, &redis);
    let (mine, _) = initialize(&client, &url, "2025-11-25").await;
    let (theirs, _) = initialize(&client, &url, "2025-11-25").await;
    let mut made = Vec::new();
    for _ in 0..3 {
        let p =
            json!({"name": "make_report", "arguments": {"polls": 0, "outcome": "ok"}, "task": {}});
        let a = in_session(&client, &url, &mine, "tools/call", p).await;
        made.push(
            a.result()["task"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("{}", a.text))
                .to_string(),
        );
    }
    same_tasks(listed(&client, &url, &mine).await, made.clone());
    assert!(listed(&client, &url, &theirs).await.is_empty());
    let a = in_session(
        &client,
        &url,
        &theirs,
        "tasks/get",
        json!({"taskId": made[1]}),
    )
    .await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    kill(first);
}

#[tokio::test]
async fn with_mcp_authorization_the_tokens_principal_owns_the_task() {
    use portico::webhook::keys::{Alg, SigningKey};
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
    let issuer = common::oauth::As::start("", false, &[&key]).await;
    let (b, _jobs) = backend().await;
    let m = mapping(&b, "1m");
    let mut yaml = std::fs::read_to_string(&m).unwrap();
    yaml += &format!(
        "mcp_authorization:\n  issuers: [\"{}\"]\n  allow_hosts: [127.0.0.1]\n",
        issuer.issuer
    );
    std::fs::write(&m, yaml).unwrap();
    let g = gateway(&[m]).await;
    let url = g.mcp_url();
    // A fresh token each time: the principal, not the token, owns the task.
    let as_who = |sub: &str| {
        let claims = json!({"iss": issuer.issuer, "sub": sub, "aud": url, "client_id": "cli-1",
            "iat": common::oauth::now(), "exp": common::oauth::now() + 300,
            "jti": uuid::Uuid::new_v4().to_string()});
        let t = common::oauth::es256(
            &key,
            json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}),
            &claims,
        );
        reqwest::Client::builder()
            .default_headers(
                [(
                    reqwest::header::AUTHORIZATION,
                    format!("Bearer {t}").parse().unwrap(),
                )]
                .into_iter()
                .collect(),
            )
            .build()
            .unwrap()
    };
    let args = json!({"name": "make_report", "arguments": {"polls": 1000, "outcome": "ok"}});
    let made = rpc(&as_who("alice"), &url, "tools/call", args).await;
    let id = made.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", made.text))
        .to_string();
    let own = rpc(&as_who("alice"), &url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(own.result()["status"], "working", "{}", own.text);
    let other = rpc(&as_who("bob"), &url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(other.error_code(), Some(-32602), "{}", other.text);
    let c = rpc(&as_who("bob"), &url, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c.error_code(), Some(-32602), "{}", c.text);
    let c = rpc(
        &as_who("alice"),
        &url,
        "tasks/cancel",
        json!({"taskId": id}),
    )
    .await;
    assert!(c.body["error"].is_null(), "{}", c.text);
}
