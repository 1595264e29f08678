//! The fault matrix (issue 41, item 2): a fault-injecting TCP proxy between portico and a real
//! backend (the Rust test backend, and a plain `node:http` server), for reads, unkeyed writes and
//! keyed writes. Each cell checks what the MCP client sees and how many times the backend saw
//! the request; portico never sends a request twice unless it is a read or carries an
//! idempotency key. Two more cells need no proxy: the backend process stopped and started again
//! on its port (its kept-alive connection in portico's pool closed by the stop), and the backend
//! down during a call (connection refused), then back. The expected outcomes are the table in
//! docs/reliability.md.

mod common;

use common::{call, fixture_with_backend, gateway, keyed, one_connection_client};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to the backend's answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Passes everything through.
    None,
    /// Passes the answer, then resets the connection to portico 30 ms later (no
    /// `Connection: close`): the next request on that kept-alive connection is lost.
    ResetAfterAnswer,
    /// Passes the first 40 bytes of the answer, then resets.
    ResetAfterBytes,
    /// Never passes the answer and never closes (half-open from portico's side).
    Stall,
    /// Passes the answer 16 bytes every 5 ms.
    SlowDrip,
    /// Passes the answer, then closes the connection to portico (FIN) at once, as a backend
    /// that closes idle connections or restarts does: the next request must use a new one.
    CloseAfterAnswer,
    /// Instead of the answer: a chunked body cut inside a chunk, then FIN.
    TruncatedChunked,
    /// Instead of the answer: `Content-Length: 100` with a shorter body, then FIN.
    LongerContentLength,
    /// Instead of the answer: an HTTP/1.0 answer whose body ends at FIN (no length).
    Http10CloseDelimited,
    /// An interim `100 Continue` before the answer.
    Continue100,
}

/// The stand-in answers (the backend's own answer is read and dropped).
const TRUNCATED_CHUNKED: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n10\r\n{\"path\": \"/t/e";
const LONGER_LENGTH: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"path\": \"/t/ec";
const HTTP10: &str = "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{\"path\":\"/t/echo/items\",\"signature\":\"sig-ok\"}";

/// Copies portico → backend as is; backend → portico through the current fault.
async fn proxy_conn(mut client: TcpStream, upstream: String, fault: Arc<Mutex<Fault>>) {
    let Ok(mut server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let (mut a, mut b) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        tokio::select! {
            r = client.read(&mut a) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if server.write_all(&a[..n]).await.is_err() {
                        return;
                    }
                }
            },
            r = server.read(&mut b) => {
                let n = match r {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let now = *fault.lock().unwrap();
                let data = &b[..n];
                match now {
                    Fault::None => {
                        if client.write_all(data).await.is_err() {
                            return;
                        }
                    }
                    Fault::ResetAfterAnswer | Fault::ResetAfterBytes => {
                        let cut = if now == Fault::ResetAfterBytes {
                            &data[..data.len().min(40)]
                        } else {
                            data
                        };
                        let _ = client.write_all(cut).await;
                        if now == Fault::ResetAfterAnswer {
                            tokio::time::sleep(Duration::from_millis(30)).await;
                        }
                        #[allow(deprecated)]
                        let _ = client.set_linger(Some(Duration::ZERO));
                        return; // dropping the socket with linger 0 sends RST
                    }
                    Fault::CloseAfterAnswer => {
                        let _ = client.write_all(data).await;
                        let _ = client.shutdown().await;
                        return;
                    }
                    Fault::TruncatedChunked | Fault::LongerContentLength | Fault::Http10CloseDelimited => {
                        let stand_in = match now {
                            Fault::TruncatedChunked => TRUNCATED_CHUNKED,
                            Fault::LongerContentLength => LONGER_LENGTH,
                            _ => HTTP10,
                        };
                        let _ = client.write_all(stand_in.as_bytes()).await;
                        let _ = client.shutdown().await;
                        return;
                    }
                    Fault::Continue100 => {
                        let _ = client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
                        if client.write_all(data).await.is_err() {
                            return;
                        }
                    }
                    Fault::Stall => {
                        // Holds the connection open without a byte of answer.
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        return;
                    }
                    Fault::SlowDrip => {
                        for chunk in data.chunks(16) {
                            if client.write_all(chunk).await.is_err() {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
            }
        }
    }
}

/// The proxy on a free loopback port in front of `upstream`; the fault is switched per cell.
async fn proxy(upstream: String) -> (String, Arc<Mutex<Fault>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let fault = Arc::new(Mutex::new(Fault::None));
    let f = fault.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(proxy_conn(s, upstream.clone(), f.clone()));
        }
    });
    (addr, fault)
}

/// A `node:http` backend on 127.0.0.1 answering the fixture's echo routes and counting each
/// request by its `name` (writes) or last path segment (reads); `GET /hits/NAME` reads a count.
struct Node {
    child: std::process::Child,
    addr: String,
}

const NODE_BACKEND: &str = r#"
const http = require('node:http');
const hits = {};
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    if (req.url.startsWith('/hits/')) {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ hits: hits[req.url.slice(6)] || 0 }));
      return;
    }
    let name = req.url.split('/').pop();
    try { const b = JSON.parse(body); if (b && b.name) name = b.name; } catch (e) {}
    hits[name] = (hits[name] || 0) + 1;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, name, signature: 'sig-ok', pad: 'x'.repeat(200) }));
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => console.log('listening ' + server.address().port));
"#;

impl Node {
    /// A node process listening on `port` (0: a free one).
    fn start(port: u16) -> Node {
        use std::io::BufRead;
        let mut child = std::process::Command::new("node")
            .args(["-e", NODE_BACKEND])
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node is installed");
        let out = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .expect("node printed its port");
        Node {
            child,
            addr: format!("127.0.0.1:{port}"),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many times a backend saw the request named `name`.
enum Backend {
    Rust(Arc<common::Seen>),
    Node(Node),
}

impl Backend {
    async fn hits(&self, name: &str) -> usize {
        match self {
            Backend::Rust(seen) => seen
                .requests
                .lock()
                .unwrap()
                .iter()
                .filter(|r| {
                    r["body"]["name"] == name
                        || r["path"]
                            .as_str()
                            .is_some_and(|p| p.ends_with(&format!("/{name}")))
                })
                .count(),
            Backend::Node(n) => {
                let v: Value = reqwest::get(format!("http://{}/hits/{name}", n.addr))
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                v["hits"].as_u64().unwrap_or(0) as usize
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Read,
    Write,
    KeyedWrite,
}

/// What the client saw.
#[derive(Debug, PartialEq)]
enum Seen {
    Ok,
    /// A failure whose text contains this.
    Error(&'static str),
}

/// One cell: the expected answer and backend hit count for the request made under `fault`.
fn expected(fault: Fault, kind: Kind) -> (Seen, usize) {
    use Kind::*;
    match (fault, kind) {
        (
            Fault::None
            | Fault::SlowDrip
            | Fault::Http10CloseDelimited
            | Fault::Continue100
            | Fault::CloseAfterAnswer,
            _,
        ) => (Seen::Ok, 1),
        (Fault::TruncatedChunked | Fault::LongerContentLength, _) => {
            (Seen::Error("broke while sending the body"), 1)
        }
        // The answer was cut (40 bytes of the head): the backend applied it once, the client
        // is told the connection failed; nothing is replayed once answer bytes arrived.
        (Fault::ResetAfterBytes, _) => (Seen::Error("connection failed"), 1),
        (Fault::Stall, _) => (Seen::Error("did not answer within 400 ms"), 1),
        // The request after the answer goes out on the kept-alive connection the proxy resets
        // before reading it (the backend never sees that attempt): reads and keyed writes are
        // sent once more on a fresh connection, an unkeyed write is reported as unknown.
        (Fault::ResetAfterAnswer, Read | KeyedWrite) => (Seen::Ok, 1),
        (Fault::ResetAfterAnswer, Write) => (Seen::Error("may or may not have been applied"), 0),
    }
}

async fn one_call(c: &reqwest::Client, url: &str, kind: Kind, name: &str) -> common::Answer {
    match kind {
        Kind::Read => call(c, url, "echo_get", json!({ "id": name })).await,
        Kind::Write => call(c, url, "echo_post", json!({ "name": name })).await,
        Kind::KeyedWrite => {
            let args = keyed(json!({ "name": name }), &format!("key-{name}"));
            call(c, url, "echo_post", args).await
        }
    }
}

fn seen_of(a: &common::Answer) -> Result<(), String> {
    if a.body.get("error").is_some() || a.result()["isError"] == true {
        Err(a.text.clone())
    } else {
        Ok(())
    }
}

/// portico on the gateway fixture with `backend` as its backend, its MCP URL, and an MCP client.
/// The client keeps one connection to portico, so every call runs on the same connection shard
/// and meets the backend connection the previous call left in that shard's pool.
async fn portico_to(backend: &str) -> (portico::app::Running, String, reqwest::Client) {
    let dir = fixture_with_backend("gateway", backend);
    let g = gateway(&[dir.join("usp.yaml")]).await;
    let url = g.mcp_url();
    let c = one_connection_client();
    (g, url, c)
}

async fn matrix(backend: Backend, upstream: String) {
    let (addr, switch) = proxy(upstream).await;
    let (g, url, c) = portico_to(&addr).await;
    let faults = [
        Fault::None,
        Fault::ResetAfterBytes,
        Fault::Stall,
        Fault::SlowDrip,
        Fault::ResetAfterAnswer,
        Fault::CloseAfterAnswer,
        Fault::TruncatedChunked,
        Fault::LongerContentLength,
        Fault::Http10CloseDelimited,
        Fault::Continue100,
    ];
    let mut problems = Vec::new();
    for (i, fault) in faults.into_iter().enumerate() {
        for (j, kind) in [Kind::Read, Kind::Write, Kind::KeyedWrite]
            .into_iter()
            .enumerate()
        {
            // A healthy call first: it leaves a kept-alive connection in the pool.
            let warm = format!("warm-{i}-{j}");
            let a = one_call(&c, &url, Kind::Read, &warm).await;
            assert!(seen_of(&a).is_ok(), "warm-up failed: {}", a.text);
            let name = format!("cell-{i}-{j}");
            let a = if matches!(fault, Fault::ResetAfterAnswer | Fault::CloseAfterAnswer) {
                // The fault hits the answer of a call, and the request after it pays.
                *switch.lock().unwrap() = fault;
                let first = one_call(&c, &url, Kind::Read, &format!("before-{i}-{j}")).await;
                *switch.lock().unwrap() = Fault::None;
                assert!(seen_of(&first).is_ok(), "{}", first.text);
                one_call(&c, &url, kind, &name).await
            } else {
                *switch.lock().unwrap() = fault;
                let a = one_call(&c, &url, kind, &name).await;
                *switch.lock().unwrap() = Fault::None;
                a
            };
            let (want, want_hits) = expected(fault, kind);
            let got = match seen_of(&a) {
                Ok(()) => Seen::Ok,
                Err(text) => match want {
                    Seen::Error(needle) if text.contains(needle) => Seen::Error(needle),
                    _ => Seen::Error(Box::leak(text.into_boxed_str())),
                },
            };
            let hits = backend.hits(&name).await;
            if got != want || hits != want_hits {
                problems.push(format!(
                    "{fault:?} {kind:?}: saw {got:?} with {hits} backend hit(s), expected {want:?} with {want_hits}"
                ));
            }
        }
    }
    g.stop().await.unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_matrix_against_the_rust_backend() {
    let (addr, seen) = common::test_backend().await;
    matrix(Backend::Rust(seen), addr.to_string()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_matrix_against_a_node_backend() {
    let node = Node::start(0);
    let addr = node.addr.clone();
    matrix(Backend::Node(node), addr).await;
}

/// A backend that can be stopped and started again on the same port: the Rust test backend on a
/// runtime of its own (shutting that runtime down closes its listener and every connection, as
/// a process exit does), or a `node:http` process (killed, then a new one started).
struct Process {
    backend: Backend,
    runtime: Option<tokio::runtime::Runtime>,
    port: u16,
}

impl Process {
    /// Starts a backend on `port` (0: a free one); a fresh one remembers no earlier request.
    fn start(node: bool, port: u16) -> Process {
        if node {
            let n = Node::start(port);
            let port = n.addr.rsplit(':').next().and_then(|p| p.parse().ok());
            return Process {
                backend: Backend::Node(n),
                runtime: None,
                port: port.expect("node printed a port"),
            };
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // std binds with SO_REUSEADDR, so the port is free again once the old backend closed.
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = {
            let _inside = rt.enter();
            common::serve_test_backend(TcpListener::from_std(listener).unwrap())
        };
        Process {
            backend: Backend::Rust(seen),
            runtime: Some(rt),
            port,
        }
    }

    /// Stops the backend: its listener and its connections are closed when this returns.
    async fn stop(self) {
        let Process {
            backend, runtime, ..
        } = self;
        drop(backend); // a node process is killed and reaped here
        if let Some(rt) = runtime {
            // Dropping a runtime blocks until its tasks are dropped (their sockets closed).
            tokio::task::spawn_blocking(move || drop(rt)).await.unwrap();
        }
    }
}

/// `portico_upstream_reused_connection_lost_total` summed over the backend on `port`: how many
/// requests went out on a pooled connection that turned out to be dead.
fn reused_connections_lost(port: u16) -> f64 {
    let at = format!("127.0.0.1:{port}");
    portico::ops::metrics::render()
        .lines()
        .filter(|l| {
            l.starts_with("portico_upstream_reused_connection_lost_total{") && l.contains(&at)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The restart and down cells for one kind of backend, straight from portico (no proxy).
async fn restarts(node: bool) {
    assert!(
        portico::ops::metrics::install().is_some(),
        "the metrics recorder is installed, so the reused-connection count below is real"
    );
    let mut p = Process::start(node, 0);
    let port = p.port;
    let (g, url, c) = portico_to(&format!("127.0.0.1:{port}")).await;
    let mut problems = Vec::new();
    let kinds = [Kind::Read, Kind::Write, Kind::KeyedWrite];
    for (j, kind) in kinds.into_iter().enumerate() {
        // Restarted: answered one call (its connection kept alive in the pool), stopped, and
        // started again on the same port before the call.
        let warm = format!("before-restart-{j}");
        let a = one_call(&c, &url, Kind::Read, &warm).await;
        assert!(seen_of(&a).is_ok(), "{}", a.text);
        assert_eq!(p.backend.hits(&warm).await, 1, "{warm}");
        p.stop().await;
        p = Process::start(node, port);
        let name = format!("after-restart-{j}");
        let a = one_call(&c, &url, kind, &name).await;
        let hits = p.backend.hits(&name).await;
        if seen_of(&a).is_err() || hits != 1 {
            problems.push(format!(
                "restarted, {kind:?}: {} with {hits} hit(s) on the new backend, expected ok with 1",
                a.text
            ));
        }
    }
    for (j, kind) in kinds.into_iter().enumerate() {
        // Down during the call (connection refused), then back: the client sends it again.
        let warm = format!("before-down-{j}");
        let a = one_call(&c, &url, Kind::Read, &warm).await;
        assert!(seen_of(&a).is_ok(), "{}", a.text);
        p.stop().await;
        let name = format!("while-down-{j}");
        let down = one_call(&c, &url, kind, &name).await;
        let refused = down.body["error"]["code"] == -32009
            && down
                .text
                .contains("the backend refused or failed the connection");
        p = Process::start(node, port);
        let again = one_call(&c, &url, kind, &name).await;
        let hits = p.backend.hits(&name).await;
        if !refused || seen_of(&again).is_err() || hits != 1 {
            problems.push(format!(
                "down, {kind:?}: {} then {} with {hits} hit(s) once back, expected -32009 \
                 \"the backend refused or failed the connection\", then ok with 1",
                down.text, again.text
            ));
        }
    }
    let lost = reused_connections_lost(port);
    if lost != 0.0 {
        problems.push(format!(
            "{lost} request(s) went out on a pooled connection the stopped backend had closed"
        ));
    }
    g.stop().await.unwrap();
    p.stop().await;
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_backend_restarted_or_down_on_its_port() {
    restarts(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_backend_restarted_or_down_on_its_port() {
    restarts(true).await;
}
