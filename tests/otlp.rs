//! OTLP trace export from `portico serve --otlp-endpoint` (a real child process) to a local
//! OTLP/HTTP receiver: the backend request carries a W3C `traceparent`, and the exported
//! `request` span has that trace and span id, the call's fields and service name `portico`.
#![cfg(unix)]

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;

/// An OTLP/HTTP receiver on 127.0.0.1: every POST body to `/v1/traces` (JSON) is sent on.
async fn receiver() -> (std::net::SocketAddr, mpsc::UnboundedReceiver<Value>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    serve_with(listener, move |req| {
        let tx = tx.clone();
        async move {
            let path = req.uri().path().to_string();
            let ct = req
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            if path == "/v1/traces" && ct.starts_with("application/json") {
                let _ = tx.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
            }
            let mut r = hyper::Response::new(Full::new(Bytes::from_static(b"{}")));
            r.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            r
        }
    });
    (addr, rx)
}

/// Every span of an OTLP JSON export, with its resource.
fn spans(export: &Value) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for rs in export["resourceSpans"].as_array().into_iter().flatten() {
        for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
            for span in ss["spans"].as_array().into_iter().flatten() {
                out.push((rs["resource"].clone(), span.clone()));
            }
        }
    }
    out
}

fn attr<'a>(attrs: &'a Value, key: &str) -> Option<&'a Value> {
    attrs
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_exported_and_traceparent_reaches_the_backend() {
    let (collector, mut exports) = receiver().await;
    let (backend, seen) = test_backend().await;
    let mapping = fixture_with_backend("gateway", &backend.to_string()).join("plain.yaml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("serve")
        .arg(&mapping)
        .args(["--listen", "127.0.0.1:0"])
        .args(["--otlp-endpoint", &format!("http://{collector}")])
        // Export batches every 100 ms instead of 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("portico serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().strip_prefix("mcp: ").unwrap().to_string();

    let a = call(
        &reqwest::Client::new(),
        &url,
        "echo_get",
        json!({"id": "traced"}),
    )
    .await;
    assert_eq!(a.sc()["path"], "/t/echo/items/traced", "{}", a.text);
    let traceparent = {
        let requests = seen.requests.lock().unwrap();
        requests.last().unwrap()["headers"]["traceparent"]
            .as_str()
            .expect("the backend request carries traceparent")
            .to_string()
    };
    // W3C Trace Context: version-traceid-parentid-flags.
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00");
    assert!(parts[1].len() == 32 && parts[1].chars().all(|c| c.is_ascii_hexdigit()));
    assert!(parts[2].len() == 16 && parts[2].chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(parts[1], "0".repeat(32));
    assert_eq!(parts[3], "01", "sampled");

    // The exported span of that call: same trace, and it is the backend request's parent.
    let found = loop {
        let export = tokio::time::timeout(Duration::from_secs(20), exports.recv())
            .await
            .expect("an export within 20 s (hang guard)")
            .expect("receiver alive");
        if let Some(hit) = spans(&export)
            .into_iter()
            .find(|(_, s)| s["traceId"] == parts[1])
        {
            break hit;
        }
    };
    let (resource, span) = found;
    assert_eq!(span["name"], "request", "{span}");
    assert_eq!(span["spanId"], parts[2], "{span}");
    assert_eq!(
        attr(&resource["attributes"], "service.name"),
        Some(&json!({"stringValue": "portico"})),
        "{resource}"
    );
    assert!(
        attr(&span["attributes"], "request_id").is_some(),
        "the span carries the request id: {span}"
    );
    let events = span["events"].as_array().cloned().unwrap_or_default();
    assert!(
        events
            .iter()
            .any(|e| attr(&e["attributes"], "tool") == Some(&json!({"stringValue": "echo_get"}))),
        "the tools/call log line is a span event: {span}"
    );

    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
