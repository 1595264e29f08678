//! Backends that close or reset keep-alive connections (issue 41, item 1): a raw HTTP/1.1
//! backend on 127.0.0.1 answers a 500 and resets that connection a moment later, or drops a
//! reused connection after reading a request; portico neither fails the next write nor sends a
//! write twice that is not safe to replay.

mod common;

use common::{call, fixture_with_backend, gateway, keyed, one_connection_client};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests the backend read, by the `name` in their JSON body (or the path's last segment).
#[derive(Default)]
struct Hits(Mutex<HashMap<String, usize>>);

impl Hits {
    fn get(&self, name: &str) -> usize {
        self.0.lock().unwrap().get(name).copied().unwrap_or(0)
    }
    fn add(&self, name: &str) {
        *self.0.lock().unwrap().entry(name.to_string()).or_default() += 1;
    }
}

/// Reads one request (head and a `content-length` body); returns its name, or None at EOF.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > 64 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    buf.drain(..head_end + len);
    Some(match body["name"].as_str() {
        Some(n) => n.to_string(),
        None => path.rsplit('/').next().unwrap_or("").to_string(),
    })
}

fn answer(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Resets the connection (RST, not FIN) when dropped.
fn reset(s: TcpStream) {
    #[allow(deprecated)]
    let _ = s.set_linger(Some(Duration::ZERO));
    drop(s);
}

/// One backend connection. `boom`: answer 500 (keep-alive, no `Connection: close`), then reset
/// the connection 30 ms later without reading on, as uvicorn does after an unhandled exception.
/// `drop-*`: read the request, then reset without a byte of answer (`drop-once-*`: only the
/// first time that name is seen). Anything else: 200.
async fn serve(mut s: TcpStream, hits: Arc<Hits>) {
    let mut buf = Vec::new();
    while let Some(name) = read_request(&mut s, &mut buf).await {
        hits.add(&name);
        if name == "boom" {
            let _ = s
                .write_all(answer("500 Internal Server Error", r#"{"detail":"boom"}"#).as_bytes())
                .await;
            tokio::time::sleep(Duration::from_millis(30)).await;
            return reset(s);
        }
        if name.starts_with("drop-") && !(name.starts_with("drop-once-") && hits.get(&name) > 1) {
            return reset(s);
        }
        let body = json!({"path": "/t/echo/items", "name": name, "signature": "sig-ok"});
        if s.write_all(answer("200 OK", &body.to_string()).as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn backend() -> (String, Arc<Hits>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let hits = Arc::new(Hits::default());
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, h.clone()));
        }
    });
    (addr, hits)
}

/// The backend, portico on `tests/fixtures/gateway/usp.yaml` pointed at it, a client, the URL.
async fn gateway_on_backend() -> (portico::app::Running, Arc<Hits>, reqwest::Client, String) {
    let (addr, hits) = backend().await;
    let dir = fixture_with_backend("gateway", &addr);
    let g = gateway(&[dir.join("usp.yaml")]).await;
    let c = one_connection_client();
    let url = g.mcp_url();
    (g, hits, c, url)
}

/// The usp binding's error text for a failed call, or None when the call succeeded.
fn failure(a: &common::Answer) -> Option<String> {
    if a.body.get("error").is_some() {
        return Some(a.text.clone());
    }
    (a.result()["isError"] == true).then(|| a.text.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_after_a_500_and_its_delayed_reset_all_succeed() {
    let (g, hits, c, url) = gateway_on_backend().await;
    for round in 0..20 {
        let a = call(&c, &url, "echo_post", json!({"name": "boom"})).await;
        assert!(
            failure(&a).is_some(),
            "round {round}: the 500 is an error: {}",
            a.text
        );
        let name = format!("order-{round}");
        let a = call(&c, &url, "echo_post", json!({"name": name})).await;
        assert_eq!(failure(&a), None, "round {round}: the write failed");
        assert_eq!(a.sc()["name"], name.as_str(), "{}", a.text);
    }
    for round in 0..20 {
        assert_eq!(hits.get(&format!("order-{round}")), 1, "order-{round}");
    }
    assert_eq!(hits.get("boom"), 20);
    g.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_lost_on_a_reused_connection_is_reported_and_never_resent() {
    let (g, hits, c, url) = gateway_on_backend().await;
    let a = call(&c, &url, "echo_post", json!({"name": "warm"})).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    // Same gateway connection, same shard: the write goes out on the kept-alive connection.
    let a = call(&c, &url, "echo_post", json!({"name": "drop-write"})).await;
    let text = failure(&a).expect("the lost write is an error");
    assert!(
        text.contains("closed a reused connection")
            && text.contains("may or may not have been applied"),
        "{text}"
    );
    assert_eq!(a.error_code(), Some(-32009), "service_unavailable: {text}");
    assert_eq!(hits.get("drop-write"), 1, "portico sent the write again");
    // The next write is served on a fresh connection.
    let a = call(&c, &url, "echo_post", json!({"name": "after"})).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    g.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayable_requests_lost_on_a_reused_connection_are_sent_once_more() {
    let (g, hits, c, url) = gateway_on_backend().await;
    let a = call(&c, &url, "echo_post", json!({"name": "warm"})).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    // A keyed write: the backend can deduplicate by its Idempotency-Key, so it is replayed on a
    // fresh connection.
    let args = keyed(json!({"name": "drop-once-keyed"}), "key-1");
    let a = call(&c, &url, "echo_post", args).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    assert_eq!(hits.get("drop-once-keyed"), 2);
    // Dropped again on the fresh connection: an error, and no third send.
    let args = keyed(json!({"name": "drop-keyed"}), "key-2");
    let a = call(&c, &url, "echo_post", args).await;
    assert!(failure(&a).is_some(), "{}", a.text);
    assert_eq!(hits.get("drop-keyed"), 2, "one replay, never more");
    // A safe read lost on a reused connection succeeds on a fresh one.
    let a = call(&c, &url, "echo_get", json!({"id": "warm-again"})).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    let a = call(&c, &url, "echo_get", json!({"id": "drop-once-read"})).await;
    assert_eq!(failure(&a), None, "{}", a.text);
    assert_eq!(hits.get("drop-once-read"), 2);
    g.stop().await.unwrap();
}
