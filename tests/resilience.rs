//! Per-backend resilience over real HTTP: a backend down at startup, a flapping backend (the
//! breaker opens, then closes after a good trial), one caller's slow argument (its tool's breaker
//! opens on the failure ratio, the other tools keep working), a hanging backend (the timeout
//! frees the slot), load shedding under a concurrency limit, and retries of safe or keyed calls
//! only, within the backend's retry budget, never past a breaker that opened between two
//! attempts; a slow token endpoint delays calls, not fails them.

mod common;

use common::*;
use portico::app::{Ops, Running};
use portico::ops::admin::AdminOptions;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

const OK: u8 = 0;
/// Answer 503 (no `Retry-After`).
const FAIL: u8 = 1;
/// Hold the request until the gate opens (or the caller goes away).
const HOLD: u8 = 2;

/// How the backend behaves, switchable while it runs.
struct Ctl {
    mode: AtomicU8,
    /// Requests answered 503 before the mode applies again.
    fail_next: AtomicUsize,
    hits: AtomicUsize,
    gate: Semaphore,
}

/// A backend on a fixed loopback port that can go down (listener and connections closed) and
/// come back up.
struct Backend {
    addr: SocketAddr,
    ctl: Arc<Ctl>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Backend {
    /// A backend whose port is reserved but not listening yet.
    fn reserved() -> Backend {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        Backend {
            addr,
            ctl: Arc::new(Ctl {
                mode: AtomicU8::new(OK),
                fail_next: AtomicUsize::new(0),
                hits: AtomicUsize::new(0),
                gate: Semaphore::new(0),
            }),
            task: Mutex::new(None),
        }
    }

    async fn started() -> Backend {
        let b = Backend::reserved();
        b.up().await;
        b
    }

    async fn up(&self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind the port");
        let ctl = self.ctl.clone();
        let task = tokio::spawn(async move {
            // Dropping the set (the task aborted) closes every connection.
            let mut conns = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let ctl = ctl.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let ctl = ctl.clone();
                        async move { Ok::<_, std::convert::Infallible>(answer(&ctl, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        *self.task.lock().unwrap() = Some(task);
    }

    async fn down(&self) {
        let task = self.task.lock().unwrap().take();
        if let Some(t) = task {
            t.abort();
            let _ = t.await;
        }
    }

    fn hits(&self) -> usize {
        self.ctl.hits.load(Ordering::SeqCst)
    }
}

async fn answer(
    ctl: &Ctl,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    ctl.hits.fetch_add(1, Ordering::SeqCst);
    let path = req.uri().path().to_string();
    let reply = |status: u16, body: String| {
        let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        r.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        r
    };
    let failing = ctl
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing || ctl.mode.load(Ordering::SeqCst) == FAIL {
        return reply(503, r#"{"detail":"backend overloaded"}"#.into());
    }
    if ctl.mode.load(Ordering::SeqCst) == HOLD {
        let _ = ctl.gate.acquire().await.map(|p| p.forget());
    }
    // One caller's slow argument: an id starting `slow-` takes 2 s.
    if path.contains("/slow-") {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    reply(200, json!({ "path": path }).to_string())
}

/// The usp fixture pointed at `backend`, under a business name of its own (metrics are
/// process-wide), with `settings` added to its `backend:` section.
fn mapping(backend: &Backend, business: &str, settings: &str) -> std::path::PathBuf {
    let dir = fixture_with_backend("gateway", &backend.addr.to_string());
    let file = dir.join("usp.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("  timeout: 400ms\n"), "fixture changed");
    let text = text
        .replace("business: test-usp", &format!("business: {business}"))
        .replace("  timeout: 400ms\n", &format!("{settings}\n"));
    std::fs::write(&file, text).unwrap();
    file
}

async fn start(file: std::path::PathBuf) -> (Running, String, String, reqwest::Client) {
    let g = gateway_ops(
        &[file],
        Ops {
            admin: Some("127.0.0.1:0".parse().unwrap()),
            // Probe on every /readyz: the test changes the backend between two reads.
            admin_opts: AdminOptions {
                probe_cache: Duration::ZERO,
                ..AdminOptions::default()
            },
            ..Ops::default()
        },
    )
    .await;
    let (url, admin) = (g.mcp_url(), g.admin_url().unwrap());
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(30)) // failure guard only
        .build()
        .unwrap();
    (g, url, admin, c)
}

async fn readyz(c: &reqwest::Client, admin: &str) -> (u16, Value) {
    let r = c.get(format!("{admin}readyz")).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

async fn metrics(c: &reqwest::Client, admin: &str) -> String {
    let r = c.get(format!("{admin}metrics")).send().await.unwrap();
    r.text().await.unwrap()
}

fn content(a: &Answer) -> String {
    a.body["error"]["data"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// USP's answer for an unavailable backend: -32009 `service_unavailable`.
fn assert_unavailable(a: &Answer, says: &str) {
    assert_eq!(a.error_code(), Some(-32009), "{}", a.text);
    assert_eq!(a.body["error"]["data"]["code"], "service_unavailable");
    assert!(content(a).contains(says), "expected `{says}`: {}", a.text);
}

async fn echo(c: &reqwest::Client, url: &str) -> Answer {
    call(c, url, "echo_get", json!({"id": "x"})).await
}

/// `echo_post` (another tool of the same backend), answered by the backend.
async fn other_tool(c: &reqwest::Client, url: &str) -> Answer {
    let args = json!({"name": "n", "_meta": {"usp": {"profile": "https://agent.example/p.json"}}});
    call(c, url, "echo_post", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_argument_opens_only_its_tool_and_only_past_the_ratio() {
    let backend = Backend::started().await;
    let business = "res-route";
    let file = mapping(
        &backend,
        business,
        "  timeout: 300ms\n  breaker: { min_calls: 4, failure_ratio: 0.6, window: 1m, open_for: 1m }",
    );
    let (g, url, admin, c) = start(file).await;
    let get = |id: &'static str| {
        let (c, url) = (c.clone(), url.clone());
        async move { call(&c, &url, "echo_get", json!({ "id": id })).await }
    };
    let timed_out = |a: &Answer| {
        assert_eq!(
            a.body["error"]["data"]["code"], "service_unavailable",
            "{}",
            a.text
        );
        assert!(
            !content(a).contains("circuit breaker"),
            "a timeout, not a refusal: {}",
            a.text
        );
    };
    // Two timeouts: every call failed, but under the minimum volume of 4.
    for _ in 0..2 {
        timed_out(&get("slow-1").await);
    }
    // Other callers' calls on the same tool succeed: 5 calls, 2 failed (40 %).
    for _ in 0..3 {
        let a = get("fast").await;
        assert!(a.body.get("result").is_some(), "{}", a.text);
    }
    // 6 calls, 3 failed (50 %); 7 calls, 4 failed (57 %): under 60 %, still reaching the backend.
    for _ in 0..2 {
        let before = backend.hits();
        timed_out(&get("slow-1").await);
        assert_eq!(backend.hits(), before + 1);
    }
    // 8 calls, 5 failed (62.5 %): open.
    timed_out(&get("slow-1").await);
    let before = backend.hits();
    let refused = get("fast").await;
    assert_unavailable(&refused, "circuit breaker open");
    assert!(content(&refused).contains("echo_get"), "{}", refused.text);
    assert_eq!(backend.hits(), before, "an open route sends nothing");
    // Another tool of the same backend is not refused.
    for _ in 0..3 {
        let a = other_tool(&c, &url).await;
        assert!(a.body.get("result").is_some(), "{}", a.text);
    }
    assert_eq!(backend.hits(), before + 3);
    // Ready: one route open is not the backend open; /readyz names the route.
    let (status, body) = readyz(&c, &admin).await;
    assert_eq!(status, 200, "{body}");
    let r = &body["backends"][0]["resilience"];
    assert_eq!(r["breaker"], "closed", "{body}");
    assert_eq!(r["routes"][0]["route"], "echo_get", "{body}");
    assert_eq!(r["routes"][0]["breaker"], "open", "{body}");
    let m = metrics(&c, &admin).await;
    let state = |route: &str| {
        sample(
            &m,
            &format!("portico_breaker_state{{business=\"{business}\",route=\"{route}\"}}"),
        )
    };
    assert_eq!(state("echo_get"), Some(1.0), "{m}");
    assert_eq!(state("echo_post"), Some(0.0), "{m}");
    promtool_accepts(&m);
    g.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_down_at_startup_then_flapping_opens_and_closes_the_breaker() {
    let backend = Backend::reserved();
    let business = "res-flap";
    let file = mapping(
        &backend,
        business,
        "  timeout: 2s\n  breaker: { failures: 3, open_for: 1s }",
    );
    // portico starts although nothing listens at the backend's address.
    let (g, url, admin, c) = start(file).await;
    let (status, body) = readyz(&c, &admin).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["backends"][0]["business"], business);
    assert_eq!(body["backends"][0]["state"], "down");
    assert_eq!(body["backends"][0]["resilience"]["breaker"], "closed");

    for _ in 0..3 {
        assert_unavailable(&echo(&c, &url).await, "refused or failed the connection");
    }
    // Three failures in a row: the breaker is open and the backend is not called, even once
    // it is back.
    backend.up().await;
    let a = echo(&c, &url).await;
    assert_unavailable(&a, "circuit breaker open");
    assert!(
        a.body["error"]["data"]["retry_after"]
            .as_u64()
            .is_some_and(|s| s >= 1)
    );
    assert_eq!(backend.hits(), 0, "an open breaker sends nothing");
    let (status, body) = readyz(&c, &admin).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["backends"][0]["state"], "up");
    assert_eq!(body["backends"][0]["resilience"]["breaker"], "open");
    let m = metrics(&c, &admin).await;
    let state = format!("portico_breaker_state{{business=\"{business}\",route=\"echo_get\"}}");
    assert_eq!(sample(&m, &state), Some(1.0), "{m}");

    // Once the open time is over, one trial call goes through and closes it.
    let mut closed = None;
    for _ in 0..100 {
        let a = echo(&c, &url).await;
        if a.body.get("result").is_some() {
            closed = Some(a);
            break;
        }
        assert_unavailable(&a, "circuit breaker open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = closed.expect("the breaker closed again");
    assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    assert_eq!(backend.hits(), 1, "the trial was the first request it saw");
    let (status, body) = readyz(&c, &admin).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["backends"][0]["resilience"]["breaker"], "closed");

    // Flapping: the backend fails again (503s), the breaker opens again.
    backend.ctl.mode.store(FAIL, Ordering::SeqCst);
    for _ in 0..3 {
        assert_unavailable(&echo(&c, &url).await, "backend overloaded");
    }
    let before = backend.hits();
    assert_unavailable(&echo(&c, &url).await, "circuit breaker open");
    assert_eq!(backend.hits(), before);
    let m = metrics(&c, &admin).await;
    let moved = |to: &str| {
        sample(
            &m,
            &format!(
                "portico_breaker_transitions_total{{business=\"{business}\",route=\"echo_get\",state=\"{to}\"}}"
            ),
        )
    };
    assert_eq!(moved("open"), Some(2.0), "{m}");
    assert_eq!(moved("half_open"), Some(1.0), "{m}");
    assert_eq!(moved("closed"), Some(1.0), "{m}");
    promtool_accepts(&m);
    backend.down().await;
    g.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_backend_times_out_and_frees_its_slot() {
    let backend = Backend::started().await;
    backend.ctl.mode.store(HOLD, Ordering::SeqCst);
    let business = "res-hang";
    let file = mapping(
        &backend,
        business,
        "  timeout: 2s\n  max_concurrency: 1\n  breaker: { failures: 0 }",
    );
    let (g, url, admin, c) = start(file).await;
    let hung = {
        let (c, url) = (c.clone(), url.clone());
        tokio::spawn(async move { echo(&c, &url).await })
    };
    while backend.hits() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The one slot is taken: a second call is shed without reaching the backend.
    let (_, body) = readyz(&c, &admin).await;
    assert_eq!(body["backends"][0]["resilience"]["in_flight"], 1, "{body}");
    let second = echo(&c, &url).await;
    assert_unavailable(&second, "shed");
    assert_eq!(backend.hits(), 1);
    let first = hung.await.unwrap();
    assert_unavailable(&first, "did not answer within 2000 ms");
    // The timeout freed the slot: the next call reaches the backend and succeeds.
    backend.ctl.mode.store(OK, Ordering::SeqCst);
    let a = echo(&c, &url).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    let (status, body) = readyz(&c, &admin).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["backends"][0]["resilience"]["in_flight"], 0);
    assert_eq!(body["backends"][0]["resilience"]["max_concurrency"], 1);
    g.stop().await.unwrap();
    backend.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_the_concurrency_limit_are_shed() {
    let backend = Backend::started().await;
    backend.ctl.mode.store(HOLD, Ordering::SeqCst);
    let business = "res-shed";
    let file = mapping(&backend, business, "  timeout: 20s\n  max_concurrency: 2");
    let (g, url, admin, c) = start(file).await;
    let mut calls = JoinSet::new();
    for _ in 0..2 {
        let (c, url) = (c.clone(), url.clone());
        calls.spawn(async move { echo(&c, &url).await });
    }
    while backend.hits() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Both slots are held by calls the backend is sitting on: three more are shed at once.
    for _ in 0..3 {
        let a = echo(&c, &url).await;
        assert_unavailable(&a, "shed");
        assert_eq!(a.body["error"]["data"]["retry_after"], 1);
    }
    assert_eq!(backend.hits(), 2, "shed calls never reach the backend");
    backend.ctl.gate.add_permits(2);
    while let Some(done) = calls.join_next().await {
        let a = done.unwrap();
        assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    }
    let m = metrics(&c, &admin).await;
    let shed = format!("portico_upstream_shed_total{{business=\"{business}\"}}");
    assert_eq!(sample(&m, &shed), Some(3.0), "{m}");
    g.stop().await.unwrap();
    backend.down().await;
}

fn keyed(mut args: Value, key: &str) -> Value {
    args["_meta"] =
        json!({"usp": {"profile": "https://agent.example/p.json", "idempotency_key": key}});
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_safe_or_keyed_calls_are_retried() {
    let backend = Backend::started().await;
    let business = "res-retry";
    let file = mapping(
        &backend,
        business,
        "  timeout: 10s\n  retries: { attempts: 3, backoff: 10ms, max_backoff: 40ms }\n  breaker: { failures: 0 }",
    );
    let (g, url, admin, c) = start(file).await;
    let fail = |n| backend.ctl.fail_next.store(n, Ordering::SeqCst);

    // A GET is safe: two 503s, then the answer.
    fail(2);
    let a = echo(&c, &url).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    assert_eq!(backend.hits(), 3);

    // A POST without an idempotency key is sent once.
    fail(1);
    let a = call(&c, &url, "echo_post", json!({"name": "n"})).await;
    assert_unavailable(&a, "backend overloaded");
    assert_eq!(backend.hits(), 4, "an unkeyed POST is never repeated");

    // The same POST carrying a key is retried.
    fail(1);
    let a = call(&c, &url, "echo_post", keyed(json!({"name": "n"}), "k-1")).await;
    assert!(a.body.get("result").is_some(), "{}", a.text);
    assert_eq!(backend.hits(), 6);

    // Attempts are bounded: three in all, then the last answer is the call's.
    fail(5);
    assert_unavailable(&echo(&c, &url).await, "backend overloaded");
    assert_eq!(backend.hits(), 9);
    fail(0);

    let m = metrics(&c, &admin).await;
    let retries = format!("portico_upstream_retries_total{{business=\"{business}\"}}");
    assert_eq!(sample(&m, &retries), Some(5.0), "{m}");
    g.stop().await.unwrap();
    backend.down().await;
}

#[test]
fn bad_resilience_settings_are_load_errors_with_lines() {
    let backend = Backend::reserved();
    let file = mapping(
        &backend,
        "res-bad",
        "  timeout: 1s\n  retries:\n    attempts: 0\n  breaker:\n    open_for: soon",
    );
    let diags = portico::config::load(&[file]).expect_err("refused");
    let text = diags
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("retries.attempts is 0"), "{text}");
    assert!(text.contains("`soon` is not a duration"), "{text}");
    assert!(text.contains("backend.breaker.open_for"), "{text}");
    assert!(
        diags.iter().all(|d| d.line.is_some()),
        "every diagnostic names its line: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_stops_retries_once_spent() {
    let backend = Backend::started().await;
    backend.ctl.mode.store(FAIL, Ordering::SeqCst);
    let business = "res-budget";
    // Half a retry per retryable call and no minimum rate; nothing leaves the 60 s window
    // during the test, so the budget is spent and refilled by the calls alone.
    let file = mapping(
        &backend,
        business,
        "  timeout: 10s\n  retries: { attempts: 3, backoff: 1ms, max_backoff: 2ms, budget: { ratio: 0.5, min_per_s: 0, window: 60s } }\n  breaker: { failures: 0 }",
    );
    let (g, url, admin, c) = start(file).await;
    // Without a budget each call would be sent three times (18 requests in all). With it, a
    // call gets one retry when two calls' deposits are in the budget, never a second one.
    let mut sent = Vec::new();
    for _ in 0..6 {
        let before = backend.hits();
        assert_unavailable(&echo(&c, &url).await, "backend overloaded");
        sent.push(backend.hits() - before);
    }
    assert_eq!(
        sent,
        [1, 2, 1, 2, 1, 2],
        "requests the backend received per call"
    );
    assert_eq!(backend.hits(), 9);
    let m = metrics(&c, &admin).await;
    let count = |name: &str| sample(&m, &format!("{name}{{business=\"{business}\"}}"));
    assert_eq!(count("portico_upstream_retries_total"), Some(3.0), "{m}");
    assert_eq!(
        count("portico_upstream_retries_denied_total"),
        Some(6.0),
        "each call's last failure met a spent budget: {m}"
    );
    promtool_accepts(&m);
    g.stop().await.unwrap();
    backend.down().await;
}

#[test]
fn bad_retry_budgets_are_load_errors_with_lines() {
    let backend = Backend::reserved();
    for (budget, says) in [
        ("{ ratio: 2000 }", "retries.budget.ratio is 2000"),
        ("{ ratio: -0.5 }", "retries.budget.ratio is -0.5"),
        ("{ window: 2m }", "retries.budget.window is 120s"),
        ("{ window: 500ms }", "retries.budget.window is 500ms"),
        ("{ window: later }", "`later` is not a duration"),
    ] {
        let file = mapping(
            &backend,
            "res-bad-budget",
            &format!("  timeout: 1s\n  retries:\n    attempts: 2\n    budget: {budget}"),
        );
        let diags = portico::config::load(&[file]).expect_err("refused");
        let text = diags
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(text.contains(says), "{budget}: {text}");
        assert!(text.contains("backend.retries.budget."), "{budget}: {text}");
        assert!(
            diags.iter().all(|d| d.line.is_some()),
            "every diagnostic names its line: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_token_endpoint_delays_calls_without_using_their_timeout() {
    let backend = Backend::started().await;
    // The backend's own token endpoint, answering after 700 ms: longer than the call's 300 ms.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let token_url = format!("http://{}/token", listener.local_addr().unwrap());
    let fetched = Arc::new(AtomicUsize::new(0));
    let count = fetched.clone();
    let tokens = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    let count = count.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(700)).await;
                        count.fetch_add(1, Ordering::SeqCst);
                        let doc = json!({"access_token": "bt-1", "token_type": "Bearer", "expires_in": 3600});
                        let mut r = hyper::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(doc.to_string()),
                        ));
                        r.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    let file = mapping(
        &backend,
        "res-token",
        &format!(
            "  timeout: 300ms\n  breaker: {{ failures: 0 }}\n  oauth:\n    token_url: {token_url}\n    client_id: portico\n    client_secret: backend-secret-0123456789"
        ),
    );
    let (g, url, _admin, c) = start(file).await;
    // The token is fetched before the attempt's timeout starts: the first call waits for it,
    // and is not failed by a timeout it did not spend on the backend.
    let started = std::time::Instant::now();
    let a = echo(&c, &url).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(fetched.load(Ordering::SeqCst), 1);
    assert_eq!(backend.hits(), 1);
    // The cached token serves the next call.
    let a = echo(&c, &url).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/x", "{}", a.text);
    assert_eq!(fetched.load(Ordering::SeqCst), 1);
    g.stop().await.unwrap();
    tokens.abort();
    backend.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opening_between_two_attempts_stops_the_retries_of_that_call() {
    let backend = Backend::started().await;
    backend.ctl.mode.store(FAIL, Ordering::SeqCst);
    let business = "res-breaker-retry";
    // Retries sit outside the breaker: each attempt asks it. Two failures open it, so the
    // call's second attempt opens it and its third is never sent.
    let file = mapping(
        &backend,
        business,
        "  timeout: 10s\n  retries: { attempts: 3, backoff: 1ms, max_backoff: 2ms }\n  breaker: { failures: 2, open_for: 30s }",
    );
    let (g, url, admin, c) = start(file).await;
    let a = echo(&c, &url).await;
    assert_eq!(
        backend.hits(),
        2,
        "the third attempt met the open breaker: {}",
        a.text
    );
    // The call answers with what stopped it: the open breaker, and when to come back.
    assert_unavailable(&a, "circuit breaker open");
    assert_eq!(a.body["error"]["data"]["retry_after"], 30, "{}", a.text);
    // The next call is refused at once.
    assert_unavailable(&echo(&c, &url).await, "circuit breaker open");
    assert_eq!(backend.hits(), 2, "an open breaker sends nothing");
    let (_, body) = readyz(&c, &admin).await;
    assert_eq!(
        body["backends"][0]["resilience"]["breaker"], "open",
        "{body}"
    );
    g.stop().await.unwrap();
    backend.down().await;
}
