//! Webhook fan-out benchmark (measured, never asserted): `portico serve` runs as a child
//! process on 127.0.0.1; N 2025-era sessions hold GET SSE streams; signed webhooks are POSTed one
//! at a time and each is timed from the POST until the last of the N clients has read its
//! notification. Also reports portico's resident set before and after the N idle streams.
//!
//! `CLIENTS=1000 EVENTS=200 cargo bench --bench webhook_fanout` (defaults 1000 and 200).

use futures_util::StreamExt;
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let clients = env("CLIENTS", 1000);
    let events = env("EVENTS", 200);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("portico-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "bench").expect("key");
    std::fs::write(
        dir.join("keys.json"),
        json!({"keys": [key.verifying_key().jwk()]}).to_string(),
    )
    .expect("jwks");
    std::fs::write(
        dir.join("spa.yaml"),
        format!(
            "business: spa\nbinding: usp\nopenrpc: {}\nbackend: {{ url: http://127.0.0.1:9/x }}\ntools: {{}}\nwebhooks: {{ jwks: keys.json }}\n",
            root.join("openrpc/usp.openrpc.json").display()
        ),
    )
    .expect("mapping");

    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--reload-interval",
            "off",
        ])
        .arg(dir.join("spa.yaml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("portico serve starts");
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let mcp = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("mcp: ").map(str::to_string))
        .expect("portico printed its mcp: URL");
    let base = mcp.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients + 8)
        .build()
        .expect("client");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = rss_kib(pid);

    // N sessions, each with a GET stream whose reader reports every usp_webhook event id.
    let (tx, mut seen) = mpsc::unbounded_channel::<u64>();
    for _ in 0..clients {
        let init = http
            .post(&mcp)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}).to_string())
            .send()
            .await
            .expect("initialize");
        let sid = init.headers()["mcp-session-id"]
            .to_str()
            .expect("sid")
            .to_string();
        let resp = http
            .get(&mcp)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .send()
            .await
            .expect("GET stream");
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let frame: Vec<u8> = buf.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&frame);
                    if let Some(n) = text
                        .split("\"event_id\":\"ev-")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .and_then(|n| n.parse().ok())
                    {
                        let _ = tx.send(n);
                    }
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let streams_rss = rss_kib(pid);

    let url = url::Url::parse(&format!("{base}/webhooks/spa")).expect("url");
    let mut took = Vec::with_capacity(events);
    for n in 0..events as u64 {
        let body = json!({"event": "booking.confirmed", "event_id": format!("ev-{n}"),
                          "booking_id": format!("A-{}", n % 50), "timestamp": "2026-12-01T09:00:00Z"})
        .to_string()
        .into_bytes();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        let headers = portico::webhook::sig::sign_webhook(&key, &url, &body, now).expect("signed");
        let started = Instant::now();
        let r = http
            .post(url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .expect("webhook");
        assert_eq!(r.status(), 202, "webhook accepted");
        let mut got = 0;
        while got < clients {
            match tokio::time::timeout(Duration::from_secs(30), seen.recv()).await {
                Ok(Some(id)) if id == n => got += 1,
                Ok(Some(_)) => {}
                _ => panic!("only {got} of {clients} clients got event {n}"),
            }
        }
        took.push(started.elapsed());
    }
    took.sort();
    println!("clients: {clients}, events: {events}");
    println!(
        "webhook POST -> notification read by all clients: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&took, 0.5).as_secs_f64() * 1e3,
        percentile(&took, 0.99).as_secs_f64() * 1e3,
        took.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    );
    println!(
        "portico RSS: {idle_rss} KiB idle, {streams_rss} KiB with {clients} idle streams: {:.1} KiB per stream (session included)",
        (streams_rss.saturating_sub(idle_rss)) as f64 / clients.max(1) as f64
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
