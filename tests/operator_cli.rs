//! Operator and command-line behaviour (issue 41, item 3): the demo on a fixed port with its
//! fixtures, `webhook-sign`'s body flags, plain text logs off a terminal, and `portico health`'s
//! default address, each through the built binary or the library entry point `main` uses.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_portico");

/// A port `p` with `p..p + 5` free on 127.0.0.1 at the time of the check.
fn free_run_of_five() -> u16 {
    for _ in 0..50 {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = probe.local_addr().unwrap().port();
        drop(probe);
        if p > 65_000 {
            continue;
        }
        let all: Vec<_> = (p..p + 5)
            .map(|q| std::net::TcpListener::bind(("127.0.0.1", q)))
            .collect();
        if all.iter().all(Result::is_ok) {
            return p;
        }
    }
    panic!("no run of five free ports on 127.0.0.1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_fixtures_starts_on_a_fixed_port_with_distinct_listeners() {
    let port = free_run_of_five();
    let demo = portico::demo::start_with(port, true)
        .await
        .unwrap_or_else(|e| panic!("demo --port {port} --fixtures: {e}"));
    let (fixtures, _) = demo.fixtures.as_ref().expect("fixtures started");
    assert_eq!(demo.gateway.addr.port(), port);
    assert_eq!(demo.backend_addr.port(), port + 1);
    let admin = demo.gateway.admin_url().expect("admin listener");
    assert!(admin.contains(&format!(":{}", port + 2)), "{admin}");
    assert_eq!(demo.facade.addr.port(), port + 3);
    assert_eq!(fixtures.port(), port + 4);
    // Each one answers as itself.
    let c = reqwest::Client::new();
    let health = c.get(format!("{admin}healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let greeting = c
        .get(format!("http://{fixtures}/v1/greeting"))
        .send()
        .await
        .unwrap();
    assert_eq!(greeting.status(), 200);
    demo.stop().await;
}

fn sign(body_args: &[&str]) -> std::process::Output {
    let key = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/demo/webhook-sender.jwk.json"
    );
    Command::new(BIN)
        .args([
            "webhook-sign",
            "--key",
            key,
            "--url",
            "http://127.0.0.1:8080/webhooks/spa",
            "--created",
            "1767225600",
        ])
        .args(body_args)
        .env_remove("PORTICO_SIGN_BODY")
        .env_remove("PORTICO_SIGN_BODY_FILE")
        .output()
        .unwrap()
}

fn digest_line(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("Content-Digest: "))
        .expect("a Content-Digest line")
        .to_string()
}

#[test]
fn webhook_sign_takes_the_body_inline_or_from_a_file() {
    let body = r#"{"event_id":"e1","type":"booking.updated"}"#;
    let file = std::env::temp_dir().join(format!("portico-body-{}.json", std::process::id()));
    std::fs::write(&file, body).unwrap();
    let from_file = digest_line(&sign(&["--body-file", file.to_str().unwrap()]));
    let inline = digest_line(&sign(&["--body", body]));
    assert_eq!(from_file, inline, "the same bytes, the same digest");
    // The inline body is the bytes given, not a path: a path's text is signed as text.
    let path_as_text = digest_line(&sign(&["--body", file.to_str().unwrap()]));
    assert_ne!(path_as_text, from_file);
    for args in [
        vec![],
        vec!["--body", body, "--body-file", file.to_str().unwrap()],
    ] {
        let out = sign(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: usage error");
    }
    let help = Command::new(BIN)
        .args(["webhook-sign", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--body-file <BODY_FILE>") && help.contains("--body <BODY>"),
        "{help}"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn text_logs_carry_no_colour_codes_into_a_pipe() {
    let mapping = concat!(env!("CARGO_MANIFEST_DIR"), "/mappings/demo-spa.yaml");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--shards",
            "1",
            "--log-format",
            "text",
            mapping,
        ])
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut started = false;
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        if line.starts_with("mcp:") {
            started = true;
            break;
        }
    }
    assert!(started, "serve printed its mcp: line");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("DEBUG") || stderr.contains("INFO"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escape in piped logs: {stderr:?}"
    );
}

async fn healthz_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    common::serve_with(
        listener,
        |req: hyper::Request<hyper::body::Incoming>| async move {
            let status = if req.uri().path() == "/healthz" {
                200
            } else {
                404
            };
            hyper::Response::builder()
                .status(status)
                .body(http_body_util::Full::new(bytes::Bytes::from_static(b"ok")))
                .unwrap()
        },
    );
    addr
}

async fn health(env: &[(&str, String)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("health")
        .env_remove("PORTICO_ADMIN_ADDR")
        .env_remove("PORTICO_HEALTH_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::time::timeout(Duration::from_secs(20), cmd.output())
        .await
        .expect("health finished")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_the_admin_listener_serve_opens_from_portico_admin_addr() {
    let addr = healthz_server().await;
    let ok = health(&[("PORTICO_ADMIN_ADDR", addr.to_string())]).await;
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // A wildcard admin address is checked on loopback.
    let wildcard = health(&[("PORTICO_ADMIN_ADDR", format!("0.0.0.0:{}", addr.port()))]).await;
    assert!(
        wildcard.status.success(),
        "{}",
        String::from_utf8_lossy(&wildcard.stderr)
    );
    // No admin address and no URL: a usage error that says why, not a probe of a port nothing
    // opened.
    let none = health(&[]).await;
    assert_eq!(none.status.code(), Some(2));
    let why = String::from_utf8_lossy(&none.stderr);
    assert!(
        why.contains("PORTICO_ADMIN_ADDR") && why.contains("--url"),
        "{why}"
    );
}

/// The status page's recent-calls rows (the HTML between the section's heading and the next).
fn recent_rows(page: &str) -> &str {
    let start = page.find("id=\"calls\"").expect("recent calls section");
    let rest = &page[start..];
    &rest[..rest.find("<h2").unwrap_or(rest.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_calls_show_the_backend_status_and_the_errors_reason() {
    let (backend, _seen) = common::test_backend().await;
    let dir = common::fixture_with_backend("gateway", &backend.to_string());
    let g = common::gateway_ops(
        &[dir.join("usp.yaml")],
        portico::app::Ops {
            admin: Some("127.0.0.1:0".parse().unwrap()),
            ..portico::app::Ops::default()
        },
    )
    .await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());
    let ok = common::call(&c, &url, "echo_get", serde_json::json!({"id": "a"})).await;
    assert!(ok.body.get("error").is_none(), "{}", ok.text);
    // The backend answers 503: portico answers HTTP 200 with a JSON-RPC error.
    let failed = common::call(&c, &url, "status", serde_json::json!({"code": 503})).await;
    assert_eq!(failed.error_code(), Some(-32009), "{}", failed.text);
    let admin = g.admin_url().expect("admin listener");
    let page = c.get(&admin).send().await.unwrap().text().await.unwrap();
    let rows = recent_rows(&page);
    assert!(rows.contains("<th>Backend</th><th>Reason</th>"), "{rows}");
    let status_row = rows
        .split("<tr>")
        .find(|r| r.contains("<code>status</code>"))
        .expect("the failed call's row");
    assert!(
        status_row.contains("<td>-32009</td><td>503</td>"),
        "JSON-RPC code, then the backend's status: {status_row}"
    );
    assert!(
        status_row.contains("service_unavailable: "),
        "the error's code and first words: {status_row}"
    );
    let ok_row = rows
        .split("<tr>")
        .find(|r| r.contains("<code>echo_get</code>"))
        .expect("the good call's row");
    assert!(
        ok_row.contains("<td>&ndash;</td><td>200</td><td>&ndash;</td>"),
        "{ok_row}"
    );
    g.stop().await.unwrap();
}
