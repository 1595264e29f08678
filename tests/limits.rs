//! Connection limits on every listener (`ops::limits`), over real sockets on 127.0.0.1:
//! slowloris heads and bodies cut at the configured (short) timeouts while normal calls keep
//! succeeding, idle and half-closed connections closed, a connection cap in all and per client
//! address that recovers, oversized heads answered 431 on the MCP, admin, webhook and facade
//! listeners, each refusal counted in metrics. Connection counts and durations are bounded.

mod common;
use common::*;
use portico::ops::limits::Limits;
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// portico on the usp fixture with `limits` on its MCP and admin listeners.
async fn gateway_limited(limits: Limits) -> portico::app::Running {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let g = portico::config::load(&[dir.join("usp.yaml")]).expect("fixture loads");
    let opts = portico::mcp::http::HttpOptions {
        limits: limits.clone(),
        ..Default::default()
    };
    let ops = portico::app::Ops {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        admin_opts: portico::ops::admin::AdminOptions {
            limits,
            ..Default::default()
        },
        ..Default::default()
    };
    portico::app::start_with(
        g,
        "127.0.0.1:0".parse().unwrap(),
        opts,
        Default::default(),
        ops,
    )
    .await
    .expect("gateway starts")
}

/// A normal call (`tools/list`) succeeds.
async fn call_ok(c: &reqwest::Client, url: &str) -> bool {
    let a = send(modern(c, url, 7, "tools/list", json!({}))).await;
    a.status == 200 && a.body["result"]["tools"].is_array()
}

/// Reads until the server closes the connection (or `limit` passes): when it closed. What it
/// sent is added to `got` (kept across calls: an answer may come a moment before the close).
async fn closed_within(s: &mut TcpStream, limit: Duration, got: &mut Vec<u8>) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A connection from the loopback address `from` (127.0.0.0/8 is all loopback on Linux).
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{from}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// True when `s` stays open for 300 ms: an admitted connection waits for a request; a refused
/// one reads end of stream at once.
async fn held_open(s: &mut TcpStream) -> bool {
    let mut one = [0u8; 1];
    tokio::time::timeout(Duration::from_millis(300), s.peek(&mut one))
        .await
        .is_err()
}

fn limited(metrics: &str, listener: &str, reason: &str) -> f64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("portico_connections_limited_total")
                && l.contains(&format!("listener=\"{listener}\""))
                && l.contains(&format!("reason=\"{reason}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// 300 connections send a request head at 5 bytes a second, and 50 send a body as slowly (then
/// stall). With
/// a 1 s header and body timeout, every one is cut after about a second (never before it), the
/// slow bodies with a 408, while 20 normal calls made meanwhile all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_heads_and_bodies_are_cut_while_calls_succeed() {
    let timeout = Duration::from_secs(1);
    let g = gateway_limited(Limits {
        header_read_timeout: timeout,
        body_timeout: timeout,
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let addr = g.addr;
    let before = portico::ops::metrics::render();
    let mut heads = tokio::task::JoinSet::new();
    for _ in 0..300 {
        heads.spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let started = Instant::now();
            let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
            for b in head.iter().chain(std::iter::repeat(&b'a')) {
                if s.write_all(&[*b]).await.is_err() {
                    break;
                }
                if closed_within(&mut s, Duration::from_millis(200), &mut Vec::new())
                    .await
                    .is_some()
                {
                    break;
                }
                if started.elapsed() > Duration::from_secs(8) {
                    return None;
                }
            }
            Some(started.elapsed())
        });
    }
    let mut bodies = tokio::task::JoinSet::new();
    for _ in 0..50 {
        bodies.spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n";
            // The clock starts before the head goes out, so never after the server's (which
            // starts when the head arrives), however late this task is polled on a busy runtime.
            let started = Instant::now();
            s.write_all(head.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            loop {
                // A byte every 200 ms, then silence: a write racing the server's close would
                // make the client's kernel drop the answer on the reset that follows.
                if started.elapsed() < Duration::from_millis(600) && s.write_all(b" ").await.is_err() {
                    return None;
                }
                if closed_within(&mut s, Duration::from_millis(200), &mut got)
                    .await
                    .is_some()
                {
                    return Some((started.elapsed(), String::from_utf8_lossy(&got).to_string()));
                }
                if started.elapsed() > Duration::from_secs(8) {
                    return None;
                }
            }
        });
    }
    // Normal calls meanwhile, on fresh connections and on a kept one.
    let c = reqwest::Client::new();
    let url = g.mcp_url();
    for _ in 0..20 {
        let fresh = reqwest::Client::new();
        assert!(call_ok(&fresh, &url).await, "a call during the flood");
        assert!(call_ok(&c, &url).await, "a call on a kept connection");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut cut = Vec::new();
    while let Some(r) = heads.join_next().await {
        cut.push(r.unwrap().expect("a slow head is cut within 8 s"));
    }
    assert_eq!(cut.len(), 300);
    assert!(
        cut.iter()
            .all(|d| *d >= timeout - Duration::from_millis(100)),
        "no head is cut before the timeout: {:?}",
        cut.iter().min()
    );
    while let Some(r) = bodies.join_next().await {
        let (took, answer) = r.unwrap().expect("a slow body is cut within 8 s");
        assert!(
            took >= timeout - Duration::from_millis(100),
            "cut after {took:?} with {answer:?}"
        );
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "{answer:?} after {took:?}"
        );
    }
    let after = portico::ops::metrics::render();
    assert!(
        limited(&after, "mcp", "header_timeout") - limited(&before, "mcp", "header_timeout")
            >= 300.0,
        "{after}"
    );
    assert!(
        limited(&after, "mcp", "body_timeout") - limited(&before, "mcp", "body_timeout") >= 50.0
    );
    assert!(call_ok(&c, &url).await);
    g.stop().await.unwrap();
}

/// With a long header timeout and a 1 s idle timeout: a connection that sends nothing, and a
/// keep-alive connection after its answer, are closed after about a second; an open SSE stream
/// (a request in flight) is not. A client that half-closes mid-head is let go at once.
#[tokio::test]
async fn idle_and_half_closed_connections_are_closed_but_streams_are_not() {
    let idle = Duration::from_secs(1);
    let g = gateway_limited(Limits {
        header_read_timeout: Duration::from_secs(30),
        idle_timeout: idle,
        ..Limits::default()
    })
    .await;
    let early = idle - Duration::from_millis(100);
    // Silent from the start.
    let mut silent = TcpStream::connect(g.addr).await.unwrap();
    let took = closed_within(&mut silent, Duration::from_secs(5), &mut Vec::new())
        .await
        .expect("a silent connection is closed");
    assert!(took >= early, "{took:?}");
    // Idle after one answer.
    let mut kept = TcpStream::connect(g.addr).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}}}})
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    kept.write_all(req.as_bytes()).await.unwrap();
    let mut first = [0u8; 12];
    kept.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let took = closed_within(&mut kept, Duration::from_secs(5), &mut Vec::new())
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(took >= early - Duration::from_millis(100), "{took:?}");
    // An SSE stream stays open past the idle timeout.
    let c = reqwest::Client::new();
    let url = g.mcp_url();
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let mut stream = c
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(idle * 3).await;
    match tokio::time::timeout(Duration::from_millis(200), stream.chunk()).await {
        Err(_) | Ok(Ok(Some(_))) => {}
        Ok(other) => panic!("the stream ended while open: {other:?}"),
    }
    // Half-closed mid-head: the server lets go without waiting for a timeout.
    let slow = gateway_limited(Limits {
        header_read_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let mut half = TcpStream::connect(slow.addr).await.unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    half.shutdown().await.unwrap();
    closed_within(&mut half, Duration::from_secs(3), &mut Vec::new())
        .await
        .expect("a half-closed connection is let go");
    drop(stream);
    slow.stop().await.unwrap();
    g.stop().await.unwrap();
}

/// At the cap (10 per client address, 15 in all) a further connection is closed at once; other
/// addresses still get in up to the total; once connections close, calls succeed again.
#[tokio::test]
async fn connection_caps_refuse_then_recover() {
    let g = gateway_limited(Limits {
        max_connections: 15,
        max_connections_per_client: 10,
        ..Limits::default()
    })
    .await;
    let before = portico::ops::metrics::render();
    let mut a = Vec::new();
    for _ in 0..10 {
        let mut s = connect_from("127.0.0.1", g.addr).await;
        assert!(held_open(&mut s).await, "admitted under the per-client cap");
        a.push(s);
    }
    let mut over = connect_from("127.0.0.1", g.addr).await;
    closed_within(&mut over, Duration::from_secs(2), &mut Vec::new())
        .await
        .expect("the 11th from one address is closed");
    let mut b = Vec::new();
    for _ in 0..5 {
        let mut s = connect_from("127.0.0.2", g.addr).await;
        assert!(held_open(&mut s).await, "another address gets in");
        b.push(s);
    }
    let mut third = connect_from("127.0.0.3", g.addr).await;
    closed_within(&mut third, Duration::from_secs(2), &mut Vec::new())
        .await
        .expect("over the total cap, closed");
    let url = g.mcp_url();
    let at_cap = reqwest::Client::new().post(&url).body("{}").send().await;
    assert!(at_cap.is_err(), "no room for a call at the cap: {at_cap:?}");
    drop(a);
    drop(b);
    let mut recovered = false;
    for _ in 0..50 {
        if let Ok(r) = tokio::time::timeout(
            Duration::from_secs(2),
            reqwest::Client::new()
                .post(&url)
                .header("content-type", "application/json")
                .body("{}")
                .send(),
        )
        .await
            && r.is_ok()
        {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recovered, "connections are accepted again");
    assert!(call_ok(&reqwest::Client::new(), &url).await);
    let after = portico::ops::metrics::render();
    assert!(limited(&after, "mcp", "per_client") > limited(&before, "mcp", "per_client"));
    assert!(limited(&after, "mcp", "max_connections") > limited(&before, "mcp", "max_connections"));
    g.stop().await.unwrap();
}

/// A facade (one route, `GET /items/{id}`) in front of `g`, its listener within `limits`.
async fn facade_in_front(
    g: &portico::app::Running,
    limits: Limits,
) -> portico::facade::http::Running {
    let dir = std::env::temp_dir().join(format!("portico-lim-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let mapping = dir.join("facade.yaml");
    std::fs::write(
        &mapping,
        format!(
            "facade: limits\nbinding: usp\nupstream:\n  url: {}\n  timeout: 10s\nroutes:\n  GET /items/{{id}}: echo_get\n",
            g.mcp_url()
        ),
    )
    .unwrap();
    let f = portico::facade::config::load(&mapping).unwrap_or_else(|d| panic!("{d:?}"));
    let listen = portico::facade::http::Listen {
        limits,
        ..Default::default()
    };
    portico::facade::http::start_with(f, "127.0.0.1:0".parse().unwrap(), listen)
        .await
        .unwrap()
}

/// Sends a request whose head carries a `size`-byte header to `addr` and returns the status line
/// the listener answered with (empty when it only closed).
async fn with_big_header(addr: SocketAddr, path: &str, size: usize) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(size)
    );
    // Written while the answer is read: the listener may answer before reading it all.
    let (mut r, mut w) = s.split();
    let write = async {
        let _ = w.write_all(head.as_bytes()).await;
    };
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(Duration::from_secs(5), r.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(2).any(|w| w == b"\r\n") {
                        break;
                    }
                }
                _ => break,
            }
        }
        String::from_utf8_lossy(&got)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    let ((), line) = tokio::join!(write, read);
    line
}

/// A 500 KB header value is refused with 431 on every listener (MCP, admin, webhook, facade);
/// a 32 KB one, under the 64 KiB default, is read.
#[tokio::test]
async fn oversized_heads_get_431_on_every_listener() {
    let g = gateway_limited(Limits::default()).await;
    let admin = g.admin_addr.expect("admin listener");
    // The webhook-only listener of `portico stdio --webhook-listen`.
    let hooks = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hooks_addr = hooks.local_addr().unwrap();
    tokio::spawn(portico::webhook::listener::serve(
        hooks,
        std::sync::Arc::new(portico::webhook::ingress::Ingress::with_key(None, None)),
        g.server.core.clone(),
        1 << 20,
        Limits::default(),
    ));
    let facade = facade_in_front(&g, Limits::default()).await;
    let before = portico::ops::metrics::render();
    for (name, addr, path) in [
        ("mcp", g.addr, "/mcp"),
        ("admin", admin, "/healthz"),
        ("webhook", hooks_addr, "/.well-known/jwks.json"),
        ("facade", facade.addr, "/items/1"),
    ] {
        let line = with_big_header(addr, path, 500_000).await;
        assert!(line.starts_with("HTTP/1.1 431"), "{name}: {line:?}");
        let line = with_big_header(addr, path, 32 * 1024).await;
        assert!(
            line.starts_with("HTTP/1.1 ") && !line.starts_with("HTTP/1.1 431"),
            "{name}, 32 KB: {line:?}"
        );
    }
    let after = portico::ops::metrics::render();
    for name in ["mcp", "admin", "webhook", "facade"] {
        assert!(
            limited(&after, name, "header_too_large") > limited(&before, name, "header_too_large"),
            "{name}: {after}"
        );
    }
    facade.stop().await.unwrap();
    g.stop().await.unwrap();
}

/// HTTP/2: a stream whose body stalls is answered 408 at the body timeout, while another stream
/// on the same connection is served.
#[tokio::test]
async fn an_http2_stream_with_a_stalled_body_times_out() {
    use futures_util::StreamExt;
    let timeout = Duration::from_secs(1);
    let g = gateway_limited(Limits {
        body_timeout: timeout,
        ..Limits::default()
    })
    .await;
    let c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = g.mcp_url();
    let stalled = futures_util::stream::once(async {
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"jsonrpc\": \"2.0\""))
    })
    .chain(futures_util::stream::pending());
    let started = Instant::now();
    let slow = c
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/list")
        .body(reqwest::Body::wrap_stream(stalled))
        .send();
    let other = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        call_ok(&c, &url).await
    };
    let (slow, served) = tokio::join!(slow, other);
    assert!(served, "another stream is served meanwhile");
    let slow = slow.expect("an answer to the stalled stream");
    assert_eq!(slow.version(), reqwest::Version::HTTP_2);
    assert_eq!(slow.status(), 408);
    assert!(started.elapsed() >= timeout - Duration::from_millis(100));
    g.stop().await.unwrap();
}

/// A raw HTTP/2 client: the preface and an empty SETTINGS frame, then reads frames; with
/// `answer_pings`, every PING is acknowledged (and SETTINGS too). Returns when the server
/// closed the connection (or after 8 s).
async fn h2_client(addr: SocketAddr, answer_pings: bool) -> Option<Duration> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut pings = 0;
    loop {
        let mut head = [0u8; 9];
        let read = tokio::time::timeout(Duration::from_secs(8), s.read_exact(&mut head)).await;
        match read {
            Err(_) => return None,
            Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).await.is_err() {
            return Some(started.elapsed());
        }
        let (kind, flags) = (head[3], head[4]);
        if !answer_pings {
            continue;
        }
        if kind == 0x4 && flags & 1 == 0 {
            // SETTINGS: acknowledge.
            let _ = s.write_all(b"\0\0\0\x04\x01\0\0\0\0").await;
        } else if kind == 0x6 && flags & 1 == 0 {
            pings += 1;
            let mut ack = vec![0u8, 0, 8, 6, 1, 0, 0, 0, 0];
            ack.extend_from_slice(&payload);
            let _ = s.write_all(&ack).await;
        }
        if pings > 100 {
            return None;
        }
    }
}

/// HTTP/2 with pings every 200 ms: a peer that never answers them (half-open) is dropped after
/// about two intervals, before the 1 s idle timeout; one that answers them but sends no request
/// is still closed at the idle timeout (pings do not count as use).
#[tokio::test]
async fn http2_pings_drop_silent_peers_and_do_not_keep_idle_ones() {
    let idle = Duration::from_secs(1);
    let g = gateway_limited(Limits {
        idle_timeout: idle,
        h2_keep_alive: Duration::from_millis(200),
        ..Limits::default()
    })
    .await;
    let silent = h2_client(g.addr, false)
        .await
        .expect("a peer that answers no ping is dropped");
    assert!(silent < idle - Duration::from_millis(100), "{silent:?}");
    let answering = h2_client(g.addr, true)
        .await
        .expect("an idle peer is closed though it answers pings");
    assert!(
        answering >= idle - Duration::from_millis(100),
        "{answering:?}"
    );
    g.stop().await.unwrap();
}

/// The server's first HTTP/2 SETTINGS announce the configured stream cap and header list size.
#[tokio::test]
async fn http2_settings_carry_the_stream_and_header_limits() {
    let g = gateway_limited(Limits {
        h2_max_streams: 7,
        max_header_bytes: 20_000,
        ..Limits::default()
    })
    .await;
    let mut s = TcpStream::connect(g.addr).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .expect("a frame")
        .unwrap();
    assert_eq!((head[3], head[4]), (0x4, 0), "SETTINGS first");
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await.unwrap();
    let settings: std::collections::HashMap<u16, u32> = payload
        .chunks_exact(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) and SETTINGS_MAX_HEADER_LIST_SIZE (0x6).
    assert_eq!(settings.get(&0x3), Some(&7), "{settings:?}");
    assert_eq!(settings.get(&0x6), Some(&20_000), "{settings:?}");
    drop(s);
    g.stop().await.unwrap();
}

/// The facade listener applies the body deadline too: a request whose announced body never
/// comes is answered 408 at the body timeout.
#[tokio::test]
async fn the_facade_answers_a_stalled_body_with_408() {
    let timeout = Duration::from_secs(1);
    let g = gateway_limited(Limits::default()).await;
    let facade = facade_in_front(
        &g,
        Limits {
            body_timeout: timeout,
            ..Limits::default()
        },
    )
    .await;
    let mut s = TcpStream::connect(facade.addr).await.unwrap();
    s.write_all(b"GET /items/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    closed_within(&mut s, Duration::from_secs(5), &mut got)
        .await
        .expect("the stalled request is ended");
    assert!(started.elapsed() >= timeout - Duration::from_millis(100));
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    facade.stop().await.unwrap();
    g.stop().await.unwrap();
}
