//! `portico serve` as a real child process: graceful shutdown on SIGTERM (the in-flight call
//! completes, SSE streams end, new connections are refused, exit 0) and reload on SIGHUP.
#![cfg(unix)]

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::Full;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// A backend whose every answer waits until the test opens the gate; each request is announced
/// on `arrived` first. No clock is involved.
async fn gated_backend() -> (SocketAddr, Arc<Notify>, mpsc::UnboundedReceiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Arc::new(Notify::new());
    let (tx, rx) = mpsc::unbounded_channel();
    let g = gate.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (g, tx) = (g.clone(), tx.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let (g, tx) = (g.clone(), tx.clone());
                    async move {
                        let _ = tx.send(req.uri().path().to_string());
                        g.notified().await;
                        let mut r = hyper::Response::new(Full::new(Bytes::from_static(
                            br#"{"slept":true}"#,
                        )));
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
    (addr, gate, rx)
}

/// Starts `portico serve` and returns it with its MCP URL (read from its `mcp:` line).
fn serve(mapping: &Path, extra: &[&str]) -> (Child, String) {
    let (child, mut lines) = serve_logging(mapping, extra, Stdio::null());
    (child, lines.remove(0))
}

/// Starts `portico serve`; returns it and the URLs of its `name: url` lines (`mcp` first, then
/// `admin` when `--admin-addr` is given).
fn serve_logging(mapping: &Path, extra: &[&str], stderr: Stdio) -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("serve")
        .arg(mapping)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("portico serve starts");
    let wanted = if extra.contains(&"--admin-addr") {
        2
    } else {
        1
    };
    let urls = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .take(wanted)
        .map(|l| {
            let l = l.unwrap();
            let (_, url) = l
                .split_once(": ")
                .unwrap_or_else(|| panic!("unexpected line: {l:?}"));
            url.trim().to_string()
        })
        .collect();
    (child, urls)
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} failed");
}

/// Sends SIGTERM and waits for `child` to exit 0.
async fn stopped_cleanly(mut child: Child) {
    signal(&child, "-TERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// Waits until the MCP port of `url` refuses connections (after SIGTERM); fails after a bound
/// that only keeps a broken shutdown from hanging the suite.
async fn until_refused(url: &str) {
    let port = url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .unwrap()
        .parse::<u16>()
        .unwrap();
    for _ in 0..400 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the MCP port still accepts connections after SIGTERM");
}

fn slow_mapping(backend: &str) -> std::path::PathBuf {
    let dir = fixture_with_backend("gateway", backend);
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("timeout: 400ms", "timeout: 60s");
    std::fs::write(&file, text).unwrap();
    file
}

#[tokio::test]
async fn sigterm_drains_the_in_flight_call_then_exits_zero() {
    let (backend, gate, mut arrived) = gated_backend().await;
    let mapping = slow_mapping(&backend.to_string());
    let (mut child, urls) = serve_logging(
        &mapping,
        &["--shutdown-timeout", "60s", "--admin-addr", "127.0.0.1:0"],
        Stdio::null(),
    );
    let (url, admin) = (urls[0].clone(), urls[1].clone());
    let client = reqwest::Client::new();

    // A 2025-era SSE stream that must be closed, not waited for.
    let (sid, _) = initialize(&client, &url, "2025-11-25").await;
    let stream = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    let in_flight = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { call(&client, &url, "slow", json!({"ms": 1})).await })
    };
    assert_eq!(arrived.recv().await.as_deref(), Some("/t/slow/1"));

    signal(&child, "-TERM");

    // The SSE stream ends while the call is still held at the backend.
    let rest = stream.text().await;
    assert!(rest.is_ok(), "the SSE stream ends cleanly: {rest:?}");

    // New connections are refused while the in-flight call is still held at the backend.
    until_refused(&url).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "portico exited before the in-flight call finished"
    );
    // While draining, the admin listener still answers, and says "not ready".
    let readyz = client.get(format!("{admin}readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), 503);
    let body: serde_json::Value = readyz.json().await.unwrap();
    assert_eq!(body["draining"], true, "{body}");

    gate.notify_one();
    let answer = in_flight.await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.sc()["slept"], true, "{}", answer.text);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "portico exits 0 after draining: {status:?}"
    );
}

/// SIGTERM with many calls in flight: every one of them is answered (none cut short while the
/// deadline has not passed), new connections are refused meanwhile, and portico exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_every_in_flight_call() {
    const CALLS: usize = 12;
    let (backend, gate, mut arrived) = gated_backend().await;
    let mapping = slow_mapping(&backend.to_string());
    let (mut child, url) = serve(&mapping, &["--shutdown-timeout", "60s"]);
    let client = reqwest::Client::new();
    let in_flight: Vec<_> = (0..CALLS)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { call(&client, &url, "slow", json!({"ms": i})).await })
        })
        .collect();
    for _ in 0..CALLS {
        assert!(arrived.recv().await.is_some(), "a call reached the backend");
    }

    signal(&child, "-TERM");
    // Draining: the listener is closed while every call is still held at the backend.
    until_refused(&url).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "portico exited with calls in flight"
    );

    for _ in 0..CALLS {
        gate.notify_one();
    }
    for (i, call) in in_flight.into_iter().enumerate() {
        let answer = call.await.unwrap();
        assert_eq!(answer.status, 200, "call {i}: {}", answer.text);
        assert_eq!(answer.sc()["slept"], true, "call {i}: {}", answer.text);
    }
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// A call still running when the shutdown deadline passes is abandoned (the client's request
/// fails) and portico still exits 0: the deadline bounds the drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_deadline_bounds_the_drain() {
    let (backend, _gate, mut arrived) = gated_backend().await;
    let mapping = slow_mapping(&backend.to_string());
    let (mut child, url) = serve(&mapping, &["--shutdown-timeout", "200ms"]);
    let client = reqwest::Client::new();
    let stuck = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "slow")
                .body(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                        "name": "slow", "arguments": {"ms": 1},
                        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                  "io.modelcontextprotocol/clientCapabilities": {}}}})
                    .to_string(),
                )
                .send()
                .await
        })
    };
    assert!(arrived.recv().await.is_some());
    signal(&child, "-TERM");
    // The gate never opens: only the deadline can end the drain.
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        stuck.await.unwrap().is_err(),
        "the call held past the deadline was cut"
    );
}

#[tokio::test]
async fn sighup_reloads_the_configuration() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let shape = "  shape:\n    http: GET /echo/shape\n    result: '{ wrong: true }'\n";
    assert!(text.contains(shape));
    std::fs::write(&file, text.replace(shape, "")).unwrap();
    let (mut child, url) = serve(&file, &["--reload-interval", "off"]);
    let client = reqwest::Client::new();
    let listed = |a: Answer| {
        a.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "shape")
    };
    assert!(!listed(
        send(modern(&client, &url, 1, "tools/list", json!({}))).await
    ));

    std::fs::write(&file, text).unwrap();
    signal(&child, "-HUP");
    let mut seen = false;
    for _ in 0..400 {
        if listed(send(modern(&client, &url, 1, "tools/list", json!({}))).await) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen, "SIGHUP did not reload the configuration");
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP must not end portico"
    );
    stopped_cleanly(child).await;
}

#[tokio::test]
async fn each_call_logs_one_json_line_with_ids_and_outcome() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let (mut child, urls) = serve_logging(
        &dir.join("usp.yaml"),
        &["--log-format", "json"],
        Stdio::piped(),
    );
    let url = &urls[0];
    let client = reqwest::Client::new();
    let args = json!({"name": "x", "count": 1, "_meta": {"usp": {"correlation_id": "corr-77"}}});
    let a = call(&client, url, "echo_post", args).await;
    assert_eq!(a.status, 200, "{}", a.text);
    signal(&child, "-TERM");
    let stderr = child.stderr.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(child.wait().unwrap().success());
    let calls: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{lines:#?}");
    let line = &calls[0];
    assert_eq!(line["fields"]["business"], "test-usp");
    assert_eq!(line["fields"]["tool"], "echo_post");
    assert_eq!(line["fields"]["outcome"], "ok");
    assert_eq!(line["fields"]["status"], 200);
    assert!(line["fields"]["latency_us"].is_u64(), "{line}");
    assert_eq!(line["span"]["correlation_id"], "corr-77", "{line}");
    assert!(
        line["span"]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{line}"
    );
}

/// Resident bytes of the `portico` executable's code mappings in the process `pid`.
fn resident_code(pid: u32) -> usize {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_portico")).unwrap();
    let exe = exe.to_str().unwrap();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut code = false;
    let mut total = 0;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            code = fields.get(1) == Some(&"r-xp") && fields.get(5) == Some(&exe);
        } else if code && fields.first() == Some(&"Rss:") {
            total += fields[1].parse::<usize>().unwrap() * 1024;
        }
    }
    total
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn startup_code_is_unmapped_and_calls_still_run() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let client = reqwest::Client::new();
    let mut resident = Vec::new();
    for extra in [&[][..], &["--keep-startup-code"][..]] {
        let (child, url) = serve(&dir.join("plain.yaml"), extra);
        // Code the requests run after the release is mapped back as it runs.
        for id in 1..=3 {
            let a = send(modern(
                &client,
                &url,
                id,
                "tools/call",
                json!({"name": "echo_get", "arguments": {"id": "7", "tag": "x"}}),
            ))
            .await;
            assert_eq!(a.status, 200, "{}", a.text);
            assert_ne!(a.result()["isError"], json!(true), "{}", a.text);
            assert_eq!(a.sc()["path"], "/t/echo/items/7", "{}", a.text);
        }
        resident.push(resident_code(child.id()));
        stopped_cleanly(child).await;
    }
    let (released, kept) = (resident[0], resident[1]);
    assert!(kept > 0, "no code mapping of the executable found");
    // Startup runs code that requests do not (YAML, schema and jq compilation): more than
    // 10 MiB of a release build, more of a debug one. 4 MiB leaves room for what one run maps
    // and the other does not.
    assert!(
        released + (4 << 20) < kept,
        "resident code after three calls: {released} bytes with the release against {kept} kept"
    );
}
