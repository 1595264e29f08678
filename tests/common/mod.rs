//! Shared helpers for integration tests: a scriptable test backend on 127.0.0.1 and a raw
//! MCP-over-HTTP client. Test-only code; it never listens beyond loopback.
#![allow(dead_code)]

pub mod oauth;
pub mod redis;
pub mod schemas;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The fetched copy of upstream protocol file (or folder) `rel`, e.g. `usp/schemas`: the one place
/// the tests find upstream files. `scripts/fetch-upstream` fills `.upstream/` at the crate root
/// with the files pinned in `upstream.lock`; a path the lock does not list, or a missing folder,
/// fails the test naming the command to run.
pub fn upstream(rel: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lock = std::fs::read_to_string(root.join("upstream.lock"))
        .unwrap_or_else(|e| panic!("upstream.lock is unreadable: {e}"));
    let listed = lock
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .any(|p| p == rel || p.strip_prefix(rel).is_some_and(|r| r.starts_with('/')));
    assert!(
        listed,
        "upstream file {rel} is not listed in upstream.lock: add a row for it"
    );
    let p = root.join(".upstream").join(rel);
    assert!(
        p.exists(),
        "upstream file {} is missing: run `scripts/fetch-upstream` (or `scripts/fetch-upstream \
         --mirror DIR` with a local copy) to fetch the files pinned in upstream.lock",
        p.display()
    );
    p
}

/// What the test backend saw.
#[derive(Default)]
pub struct Seen {
    pub requests: Mutex<Vec<Value>>,
    /// Handlers of `/slow` dropped before they finished (the caller went away).
    pub abandoned: AtomicUsize,
    pub completed: AtomicUsize,
}

struct DropGuard(Arc<Seen>, bool);
impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn respond(status: u16, ct: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut().insert("content-type", ct.parse().unwrap());
    r
}

async fn handle(seen: Arc<Seen>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let headers: serde_json::Map<String, Value> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or("<bin>"))))
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let record = json!({"method": method, "path": path, "query": query, "headers": headers, "body": body_json});
    seen.requests.lock().unwrap().push(record.clone());
    let rest = path.strip_prefix("/t").unwrap_or(&path);
    if rest.starts_with("/echo/") {
        return respond(200, "application/json", record.to_string());
    }
    if let Some(code) = rest.strip_prefix("/status/") {
        let code: u16 = code.parse().unwrap_or(500);
        let mut r = match code {
            418 => respond(
                code,
                "application/problem+json",
                r#"{"type":"https://example.test/teapot","title":"I am a teapot","status":418,"detail":"short and stout"}"#,
            ),
            _ => respond(
                code,
                "application/json",
                format!(r#"{{"detail":"backend said {code}"}}"#),
            ),
        };
        if code == 503 || code == 429 {
            r.headers_mut().insert("retry-after", "7".parse().unwrap());
        }
        return r;
    }
    if let Some(ms) = rest.strip_prefix("/slow/") {
        let ms: u64 = ms.parse().unwrap_or(1000);
        let mut guard = DropGuard(seen.clone(), false);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        guard.1 = true;
        seen.completed.fetch_add(1, Ordering::SeqCst);
        return respond(200, "application/json", r#"{"slept":true}"#);
    }
    if let Some(what) = rest.strip_prefix("/autonym/") {
        return autonym(what);
    }
    if rest == "/text" {
        return respond(200, "text/plain", "hello, not json");
    }
    respond(404, "application/json", r#"{"error":"NO_ROUTE"}"#)
}

/// A small autonym REST surface: signed disclosures, and registered Problem Details failures.
fn autonym(what: &str) -> Response<Full<Bytes>> {
    let problem = |status: u16, code: &str, title: &str| {
        respond(
            status,
            "application/problem+json",
            json!({"type": format!("https://autonym.example/problems/{code}"), "title": title,
                   "status": status, "code": code})
            .to_string(),
        )
    };
    match what {
        "briefing" => respond(
            200,
            "application/json",
            r#"{"briefing":"prefers mornings","signature":"sig-briefing"}"#,
        ),
        "context/health" => problem(403, "domain_not_granted", "Domain not granted"),
        "context/gone" => respond(404, "application/json", r#"{"detail":"no such domain"}"#),
        "context/boom" => respond(500, "text/plain", "stack trace with secrets"),
        "context/busy" => {
            let mut r = problem(429, "rate_limited", "Rate limited");
            r.headers_mut().insert("retry-after", "7".parse().unwrap());
            r
        }
        _ => match what.strip_prefix("context/") {
            Some(d) => respond(
                200,
                "application/json",
                json!({"domain": d, "signature": format!("sig-{d}")}).to_string(),
            ),
            None => respond(404, "application/json", r#"{"error":"NO_ROUTE"}"#),
        },
    }
}

/// Waits until the backend has received a request whose path contains `path`; false after 20 s.
/// A test that cancels a call waits for this first, so that what it cancels is a backend request
/// in flight, not one a busy machine has yet to send (that one is never sent at all, and the
/// backend sees nothing to drop).
pub async fn wait_received(seen: &Seen, path: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let got = seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r["path"].as_str().is_some_and(|p| p.contains(path)));
        if got {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Waits until the backend saw a `/slow` handler dropped, or one more finish than when the wait
/// began; returns how many were dropped. A handler that is not dropped finishes (its `ms` is the
/// test's own) and ends the wait with none counted, so the wait can be long without letting a
/// test pass: a loaded machine can take seconds to notice the closed connection. Bounded at 20 s
/// against a backend that hangs.
pub async fn wait_abandoned(seen: &Seen) -> usize {
    let finished_before = seen.completed.load(Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let n = seen.abandoned.load(Ordering::SeqCst);
        if n > 0 || seen.completed.load(Ordering::SeqCst) > finished_before {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen.abandoned.load(Ordering::SeqCst)
}

/// A loopback address that refuses connections for as long as the returned socket lives. The
/// port is bound but never listens, so no other test process can take it meanwhile; a port merely
/// "free a moment ago" can be handed to a parallel test's server and answer.
pub fn refused_addr() -> (SocketAddr, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("a loopback port");
    let addr = socket.local_addr().expect("the bound address");
    (addr, socket)
}

/// Starts the scriptable backend on a free loopback port.
pub async fn test_backend() -> (SocketAddr, Arc<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, serve_test_backend(listener))
}

/// Serves the scriptable backend on `listener` from tasks of the current runtime: they end,
/// closing the listener and every connection, when that runtime shuts down.
pub fn serve_test_backend(listener: tokio::net::TcpListener) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let s = s.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let s = s.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(s, req).await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            });
        }
    });
    seen
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Copies a fixture folder to a temp dir with the backend address filled in.
pub fn fixture_with_backend(folder: &str, backend: &str) -> PathBuf {
    let src = fixtures().join(folder);
    let dst = std::env::temp_dir().join(format!(
        "portico-it-{}-{}",
        folder,
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("127.0.0.1:9101", backend);
        std::fs::write(dst.join(p.file_name().unwrap()), text).unwrap();
    }
    dst
}

/// The scriptable backend plus portico on `tests/fixtures/gateway/{binding}.yaml` pointed at it:
/// (gateway, what the backend saw, a client, the MCP URL).
pub async fn gateway_on_test_backend(
    binding: &str,
) -> (portico::app::Running, Arc<Seen>, reqwest::Client, String) {
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let g = gateway(&[dir.join(format!("{binding}.yaml"))]).await;
    let url = g.mcp_url();
    (g, seen, reqwest::Client::new(), url)
}

/// Starts portico on the given mapping files.
pub async fn gateway(files: &[PathBuf]) -> portico::app::Running {
    gateway_with(files, portico::mcp::handler::ServerInfo::default()).await
}

pub async fn gateway_with(
    files: &[PathBuf],
    info: portico::mcp::handler::ServerInfo,
) -> portico::app::Running {
    let g = portico::config::load(files).unwrap_or_else(|ds| {
        panic!(
            "{}",
            ds.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    portico::app::start(
        g,
        "127.0.0.1:0".parse().unwrap(),
        portico::mcp::http::HttpOptions::default(),
        info,
    )
    .await
    .unwrap()
}

pub const MODERN: &str = "2026-07-28";

/// A raw answer: status, headers and parsed JSON body (SSE bodies are decoded to their last event).
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Answer {
    pub fn result(&self) -> &Value {
        &self.body["result"]
    }
    pub fn error_code(&self) -> Option<i64> {
        self.body["error"]["code"].as_i64()
    }
    pub fn sc(&self) -> &Value {
        &self.body["result"]["structuredContent"]
    }
}

pub async fn send(req: reqwest::RequestBuilder) -> Answer {
    let resp = req.send().await.expect("request sent");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    let body = if headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        text.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str(d.trim()).ok())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    Answer {
        status,
        headers,
        body,
        text,
    }
}

/// A 2026-07-28 request with every required header and `_meta`.
pub fn modern(
    client: &reqwest::Client,
    url: &str,
    id: i64,
    method: &str,
    mut params: Value,
) -> reqwest::RequestBuilder {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}
    });
    let mut rb = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
    {
        rb = rb.header("mcp-name", name);
    }
    rb.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

/// An MCP client that carries every call on one HTTP/2 connection to portico, so every call
/// runs on the connection shard that owns it and meets the backend connections earlier calls
/// left idle in that shard's pool. (An HTTP/1.1 client opens a second connection when the first
/// is not back in its own pool yet; that one may land on another shard, whose idle list is
/// empty, and a test would see a fresh backend connection where it means a reused one.)
pub fn one_connection_client() -> reqwest::Client {
    reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(Duration::from_secs(20)) // failure guard only
        .build()
        .unwrap()
}

/// `tools/call` at 2026-07-28.
pub async fn call(client: &reqwest::Client, url: &str, name: &str, args: Value) -> Answer {
    send(modern(
        client,
        url,
        1,
        "tools/call",
        json!({"name": name, "arguments": args}),
    ))
    .await
}

/// Opens a 2025 session: returns its id.
pub async fn initialize(client: &reqwest::Client, url: &str, version: &str) -> (String, Answer) {
    let a = send(
        client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"it","version":"1"}}}).to_string()),
    )
    .await;
    let sid = a
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (sid, a)
}

/// A 2025-era request inside a session.
pub fn legacy(
    client: &reqwest::Client,
    url: &str,
    sid: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string())
}

/// Starts portico on the given mapping files with operations (admin listener, reload).
pub async fn gateway_ops(files: &[PathBuf], ops: portico::app::Ops) -> portico::app::Running {
    let g = portico::config::load(files).expect("fixture loads");
    portico::app::start_with(
        g,
        "127.0.0.1:0".parse().unwrap(),
        portico::mcp::http::HttpOptions::default(),
        portico::mcp::handler::ServerInfo::default(),
        ops,
    )
    .await
    .expect("gateway starts")
}

/// Reads SSE events (`id`, parsed `data`) from a streaming response, skipping comments.
pub struct SseReader {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl SseReader {
    pub fn new(resp: reqwest::Response) -> Self {
        SseReader {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event; a stream that stays silent for 10 s fails the test instead of hanging.
    pub async fn next(&mut self) -> (Option<u64>, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).ok();
                    }
                }
                if let Some(d) = data {
                    return (id, d);
                }
                continue;
            }
            let chunk = tokio::time::timeout(
                Duration::from_secs(10),
                futures_util::StreamExt::next(&mut self.body),
            )
            .await
            .expect("an SSE event within 10 s (hang guard)")
            .expect("stream open")
            .expect("chunk");
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }
}

/// USP tool arguments carrying a profile and the idempotency key `key`.
pub fn keyed(mut args: Value, key: &str) -> Value {
    args["_meta"] =
        json!({"usp": {"profile": "https://agent.example/p.json", "idempotency_key": key}});
    args
}

/// Requests the test backend has answered so far.
pub fn hits(seen: &Seen) -> usize {
    seen.requests.lock().unwrap().len()
}

/// One request a `hook_receiver` got, and the status it answered.
pub struct Received {
    pub path: String,
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
}

/// A webhook receiver on 127.0.0.1 answering each request with `status_for(path)`; every
/// request is reported on the channel.
pub async fn hook_receiver(
    status_for: impl Fn(&str) -> u16 + Send + Sync + 'static,
) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Received>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let status_for = Arc::new(status_for);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (tx, status_for) = (tx.clone(), status_for.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (tx, status_for) = (tx.clone(), status_for.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|c| c.to_bytes())
                            .unwrap_or_default();
                        let path = parts.uri.path().to_string();
                        let status = status_for(&path);
                        let _ = tx.send(Received {
                            path,
                            status,
                            headers: parts.headers,
                            body,
                        });
                        let mut r = Response::new(Full::new(Bytes::new()));
                        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, rx)
}

/// `promtool check metrics` must accept the exposition (lint included).
pub fn promtool_accepts(metrics: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is installed (Debian package `prometheus`; scripts/test installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- exposition ---\n{metrics}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sample value of the series whose line starts with `prefix` (name plus labels).
pub fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Serves HTTP/1.1 on `listener` (loopback) with `handler` for every request, until the test ends.
pub fn serve_with<F, Fut>(listener: tokio::net::TcpListener, handler: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let fut = handler(req);
                    async move { Ok::<_, std::convert::Infallible>(fut.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
}

/// Sends SIGTERM to a portico child process and asserts it exits 0 (drained, not killed).
pub fn terminate(mut child: std::process::Child) {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM failed");
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "exit 0 after SIGTERM"
    );
}

/// The P-256 group order n, big-endian.
const P256_N: [u8; 32] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
];

/// The other valid form of an RFC 9421 `Signature` header's ECDSA P-256 signature (`r || s`):
/// `r || (n - s)`, which verifies for the same message and key. `label=:<base64>:` in and out.
pub fn high_s_twin(signature_header: &str) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let (label, rest) = signature_header.split_once('=').expect("label=:...:");
    let raw = b64
        .decode(rest.trim_matches(':'))
        .expect("a base64 signature");
    assert_eq!(raw.len(), 64, "an ECDSA P-256 r || s signature");
    let mut twin = raw[..32].to_vec();
    let mut s = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = i16::from(P256_N[i]) - i16::from(raw[32 + i]) - borrow;
        borrow = i16::from(d < 0);
        s[i] = (d + 256 * borrow) as u8;
    }
    assert_eq!(borrow, 0, "s < n");
    assert_ne!(&s[..], &raw[32..], "the twin differs from the original");
    twin.extend_from_slice(&s);
    format!("{label}=:{}:", b64.encode(twin))
}

/// An Ed25519 key proving possession (USP `platform_key_pop`) to the `portico demo --secure`
/// audience.
pub struct PopKey {
    pub key: portico::webhook::keys::SigningKey,
    /// The public key (`x` of its JWK).
    pub x: String,
}

impl PopKey {
    pub fn new() -> PopKey {
        use portico::webhook::keys::{Alg, SigningKey};
        let key = SigningKey::generate(Alg::Ed25519, "ephemeral").unwrap();
        let x = key.verifying_key().jwk()["x"].as_str().unwrap().to_string();
        PopKey { key, x }
    }

    pub fn jkt(&self) -> String {
        portico::auth::pop::thumbprint(&self.x)
    }

    /// A `usp-pop+jwt` over `args` (their `_meta.usp.authorization` excluded) for `method`;
    /// `extra` claims are added, or removed when null.
    pub fn proof(&self, method: &str, args: &Value, extra: Value) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({"usp_m": method, "aud": portico::demo::SECURE_AUDIENCE,
                                "usp_p": portico::auth::pop::usp_p(args).unwrap(),
                                "iat": now, "jti": uuid::Uuid::new_v4().to_string()});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        let header = json!({"typ": "usp-pop+jwt", "alg": "EdDSA", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": self.x}});
        portico::auth::jws::sign(&header, &claims, &self.key).unwrap()
    }
}
