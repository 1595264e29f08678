//! OTLP trace export from `portico serve --otlp-endpoint` and `portico facade --otlp-endpoint`
//! (real child processes) to a local OTLP/HTTP receiver: the backend request carries a W3C
//! `traceparent`, the exported `request` span has that trace and span id, the call's fields and
//! service name `portico`; a caller's `traceparent` makes the spans children of the caller's
//! trace, through the facade, its MCP upstream call and the gateway to the backend.
#![cfg(unix)]

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
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

/// `portico <args> --otlp-endpoint <collector>` as a child; its first stdout line's URL.
fn traced(args: &[&str], collector: std::net::SocketAddr, prefix: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(args)
        .args(["--otlp-endpoint", &format!("http://{collector}")])
        // Export batches every 100 ms instead of 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("portico starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("expected `{prefix}...`, got {line:?}"))
        .to_string();
    (child, url)
}

/// `portico serve` on the plain fixture in front of `backend`, exporting to `collector`.
fn serve_traced(
    collector: std::net::SocketAddr,
    backend: &std::net::SocketAddr,
) -> (Child, String) {
    let mapping = fixture_with_backend("gateway", &backend.to_string()).join("plain.yaml");
    let mapping = mapping.display().to_string();
    traced(
        &["serve", &mapping, "--listen", "127.0.0.1:0"],
        collector,
        "mcp: ",
    )
}

/// The (traceId, spanId, parentSpanId) of every exported span of trace `trace`, collected until
/// `want` of them arrived.
async fn spans_of(
    exports: &mut mpsc::UnboundedReceiver<Value>,
    trace: &str,
    want: usize,
) -> Vec<Value> {
    let mut found = Vec::new();
    while found.len() < want {
        let export = tokio::time::timeout(Duration::from_secs(20), exports.recv())
            .await
            .expect("an export within 20 s (hang guard)")
            .expect("receiver alive");
        found.extend(
            spans(&export)
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| s["traceId"] == trace),
        );
    }
    found
}

/// The parts of a W3C `traceparent` the backend received last.
fn received_traceparent(seen: &Seen) -> Vec<String> {
    let requests = seen.requests.lock().unwrap();
    let tp = requests.last().unwrap()["headers"]["traceparent"]
        .as_str()
        .expect("the backend request carries traceparent")
        .to_string();
    tp.split('-').map(str::to_string).collect()
}

/// The caller's trace: 32 hex trace id, 16 hex parent (span) id, sampled.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn caller_traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_traceparent_parents_the_call_span_and_reaches_the_backend() {
    let (collector, mut exports) = receiver().await;
    let (backend, seen) = test_backend().await;
    let (child, url) = serve_traced(collector, &backend);
    let a = send(
        modern(
            &reqwest::Client::new(),
            &url,
            1,
            "tools/call",
            json!({"name": "echo_get", "arguments": {"id": "child"}}),
        )
        .header("traceparent", caller_traceparent()),
    )
    .await;
    assert_eq!(a.sc()["path"], "/t/echo/items/child", "{}", a.text);
    let tp = received_traceparent(&seen);
    assert_eq!(
        tp[1], CALLER_TRACE,
        "the backend call continues the caller's trace"
    );
    assert_ne!(
        tp[2], CALLER_SPAN,
        "portico's own span is the backend call's parent"
    );

    let got = spans_of(&mut exports, CALLER_TRACE, 1).await;
    let span = &got[0];
    assert_eq!(span["name"], "request", "{span}");
    assert_eq!(
        span["parentSpanId"], CALLER_SPAN,
        "child of the caller: {span}"
    );
    assert_eq!(span["spanId"], tp[2].as_str(), "{span}");

    // A malformed traceparent is ignored: a fresh trace, not an error.
    let a = send(
        modern(
            &reqwest::Client::new(),
            &url,
            2,
            "tools/call",
            json!({"name": "echo_get", "arguments": {"id": "fresh"}}),
        )
        .header("traceparent", "00-not-a-trace-01"),
    )
    .await;
    assert_eq!(a.sc()["path"], "/t/echo/items/fresh", "{}", a.text);
    let tp = received_traceparent(&seen);
    assert_ne!(tp[1], CALLER_TRACE);
    assert!(tp[1].len() == 32 && tp[1] != "0".repeat(32), "{tp:?}");
    terminate(child);
}

/// REST client -> `portico facade` -> (MCP, traceparent) -> `portico serve` -> backend: one trace
/// from the client's `traceparent` to the backend, each hop the child of the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_continues_the_trace_into_its_mcp_upstream() {
    let (collector, mut exports) = receiver().await;
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let mapping = dir.join("plain.yaml").display().to_string();
    let (gateway, mcp) = traced(
        &["serve", &mapping, "--listen", "127.0.0.1:0"],
        collector,
        "mcp: ",
    );
    let facade_file = dir.join("traced-facade.yml");
    std::fs::write(
        &facade_file,
        format!(
            "facade: traced\nbinding: usp\nupstream:\n  url: {mcp}\n  timeout: 10s\nroutes:\n  GET /items/{{id}}: echo_get\n"
        ),
    )
    .unwrap();
    let facade_file = facade_file.display().to_string();
    let (facade, rest) = traced(
        &["facade", &facade_file, "--listen", "127.0.0.1:0"],
        collector,
        "facade: ",
    );
    let r = reqwest::Client::new()
        .get(format!("{rest}/items/hop"))
        .header("traceparent", caller_traceparent())
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("the facade answers");
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/t/echo/items/hop"), "{body}");
    let tp = received_traceparent(&seen);
    assert_eq!(
        tp[1], CALLER_TRACE,
        "the backend call continues the caller's trace"
    );

    // The facade's span (child of the caller) and the gateway's (child of the facade's).
    let got = spans_of(&mut exports, CALLER_TRACE, 2).await;
    let facade_span = got
        .iter()
        .find(|s| s["parentSpanId"] == CALLER_SPAN)
        .unwrap_or_else(|| panic!("no span is the caller's child: {got:?}"));
    let gateway_span = got
        .iter()
        .find(|s| s["parentSpanId"] == facade_span["spanId"])
        .unwrap_or_else(|| panic!("no span is the facade span's child: {got:?}"));
    assert_eq!(gateway_span["spanId"], tp[2].as_str(), "{gateway_span}");
    terminate(facade);
    terminate(gateway);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_exported_and_traceparent_reaches_the_backend() {
    let (collector, mut exports) = receiver().await;
    let (backend, seen) = test_backend().await;
    let (child, url) = serve_traced(collector, &backend);

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

    terminate(child);
}
