//! The reverse path's egress over real HTTP on 127.0.0.1: notifications of an upstream MCP
//! server reach a facade's `deliver_to` receiver as RFC 9421-signed webhooks that verify with
//! the facade's `/.well-known/jwks.json`, once per event id, at both protocol eras.

mod common;

use bytes::Bytes;
use common::*;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use portico::webhook::keys::{Alg, SigningKey, VerifyingKey};
use portico::webhook::sig::{self, Policy, RequestParts, USP_COMPONENTS};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portico-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A facade file in front of `mcp_url` whose notifications go to `hook` (tight retries).
fn facade_file(dir: &Path, mcp_url: &str, hook: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"facade: platform-relay
binding: usp
upstream:
  url: {mcp_url}
  timeout: 5s
routes:
  "GET /services": usp_services_list
notifications:
  deliver_to: [{hook}]
  retry: {{ initial: 100ms, retries: 2, max_total: 2s, timeout: 2s }}
{extra}"#
    );
    let file = dir.join("relay.yaml");
    std::fs::write(&file, text).expect("facade file written");
    file
}

/// Checks the digest and RFC 9421 signature of a received webhook against `keys`.
fn verified(r: &Received, authority: &str, keys: &[VerifyingKey]) -> Result<String, String> {
    sig::verify_content_digest(&r.headers, &r.body).map_err(|e| e.to_string())?;
    let parts = RequestParts {
        method: "POST",
        authority,
        path: &r.path,
        query: None,
        headers: &r.headers,
    };
    let policy = Policy {
        required: &USP_COMPONENTS,
        algorithms: &Alg::ALL,
        max_age: Duration::from_secs(300),
        require_created: true,
    };
    sig::verify(&parts, keys, &policy, now())
        .map(|v| v.keyid)
        .map_err(|e| e.to_string())
}

async fn facade_keys(http: &reqwest::Client, facade: &str) -> Vec<VerifyingKey> {
    let r = http
        .get(format!("{facade}/.well-known/jwks.json"))
        .send()
        .await
        .expect("jwks fetched");
    assert_eq!(r.status(), 200);
    let text = r.text().await.expect("jwks body");
    VerifyingKey::from_jwks(&text).expect("a JWK Set")
}

async fn next_hook(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a webhook within 10 s")
        .expect("receiver open")
}

// ---- 2026-07-28: portico itself as the upstream, fed by signed business webhooks ----------

const TRANSFORM: &str = r#"{ event: "booking.confirmed", event_id: .webhook_id, booking_id: .appointment.number, timestamp: .occurred_at }"#;

/// A USP gateway that accepts webhooks signed by `business_key`.
fn upstream_mapping(dir: &Path, business_key: &SigningKey) -> PathBuf {
    let jwks = json!({"keys": [business_key.verifying_key().jwk()]});
    std::fs::write(dir.join("keys.json"), jwks.to_string()).expect("jwks written");
    let text = format!(
        r#"business: spa
binding: usp
openrpc: {openrpc}
backend:
  url: http://127.0.0.1:9/spa
tools: {{}}
webhooks:
  jwks: keys.json
  transform: '{TRANSFORM}'
"#,
        openrpc = root().join("openrpc/usp.openrpc.json").display(),
    );
    let file = dir.join("spa.yaml");
    std::fs::write(&file, text).expect("mapping written");
    file
}

async fn post_business_webhook(
    http: &reqwest::Client,
    gw: &portico::app::Running,
    key: &SigningKey,
    id: &str,
    created: i64,
) {
    let url = url::Url::parse(&format!("http://{}/webhooks/spa", gw.addr)).expect("URL");
    let body = json!({"webhook_id": id, "kind": "appointment.booked",
                      "occurred_at": "2026-12-01T09:00:00Z",
                      "appointment": {"number": format!("bkg_{id}")}})
    .to_string();
    let headers = sig::sign_webhook(key, &url, body.as_bytes(), created).expect("signed");
    let r = http
        .post(url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("webhook posted");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let want = if text.contains("\"duplicate\"") {
        200
    } else {
        202
    };
    assert_eq!(
        status, want,
        "the upstream gateway acknowledges webhook {id}: {text}"
    );
}

#[tokio::test]
async fn upstream_2026_notifications_become_signed_webhooks() {
    let dir = temp_dir("relay26");
    let business = SigningKey::generate(Alg::Ed25519, "biz").unwrap();
    let gw = gateway(&[upstream_mapping(&dir, &business)]).await;
    let (hook_addr, mut hooks) = hook_receiver(|_| 200).await;
    let hook = format!("http://{hook_addr}/platform/usp-hooks");
    let file = facade_file(&dir, &gw.mcp_url(), &hook, "");
    let facade = portico::facade::config::load(&file).expect("facade compiles");
    let running = portico::facade::http::start(facade, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("facade listens");
    let http = reqwest::Client::new();
    let keys = facade_keys(&http, &running.url()).await;

    // Events sent before the relay's stream is open are not replayed at 2026-07-28.
    wait_connected(&running).await;
    // One clock reading for all three: Ed25519 signatures are deterministic, so a duplicate
    // signed at `now() - 1` after the clock ticked would repeat the first signature and be
    // refused as a replay (401), which is the ingress doing its job, not what this tests.
    let t = now();
    for id in ["evt_a", "evt_b"] {
        post_business_webhook(&http, &gw, &business, id, t).await;
    }
    // A duplicate event (a fresh signature: a replayed one would be refused) is acknowledged
    // by the upstream and never re-notified.
    post_business_webhook(&http, &gw, &business, "evt_a", t - 1).await;
    let mut first = None;
    for id in ["evt_a", "evt_b"] {
        let r = next_hook(&mut hooks).await;
        assert_eq!(r.path, "/platform/usp-hooks");
        let keyid = verified(&r, &hook_addr.to_string(), &keys).expect("signature verifies");
        assert_eq!(keys[0].kid, keyid);
        let body: Value = serde_json::from_slice(&r.body).expect("JSON body");
        assert_eq!(
            body["event_id"], id,
            "in order, the event itself as the body"
        );
        assert_eq!(body["event"], "booking.confirmed");
        assert_eq!(body["booking_id"], format!("bkg_{id}"));
        assert_eq!(
            r.headers.get("content-type").and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        first.get_or_insert(r);
    }
    let first = first.expect("a delivery");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), hooks.recv())
            .await
            .is_err(),
        "nothing else was delivered"
    );
    // A forged copy of a delivered body fails verification (the receiver's side of the check).
    let mut forged = next_delivery_copy(&first);
    forged.body = Bytes::from_static(b"{\"event_id\":\"evt_a\",\"event\":\"booking.canceled\"}");
    assert!(verified(&forged, &hook_addr.to_string(), &keys).is_err());
    running.stop().await.expect("facade stops");
}

async fn wait_connected(running: &portico::facade::http::Running) {
    for _ in 0..200 {
        if running.relay_connected() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the relay's stream to the upstream did not open within 5 s");
}

fn next_delivery_copy(r: &Received) -> Received {
    Received {
        path: r.path.clone(),
        status: r.status,
        headers: r.headers.clone(),
        body: r.body.clone(),
    }
}

// ---- session era: a scripted legacy-only MCP server -----------------------------------------

/// What the scripted server saw.
#[derive(Default)]
struct Script {
    gets: Mutex<Vec<Option<String>>>,
    answers: Mutex<Vec<Value>>,
}

fn sse_frame(id: u32, msg: &Value) -> Bytes {
    Bytes::from(format!("id: {id}\nevent: message\ndata: {msg}\n\n"))
}

fn webhook(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "usp_webhook",
           "params": {"event": "booking.canceled", "event_id": id, "booking_id": "bkg_1",
                      "timestamp": "2026-12-01T09:00:00Z"}})
}

type Body = BoxBody<Bytes, std::io::Error>;

async fn legacy_server(script: Arc<Script>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let script = script.clone();
                    async move { Ok::<_, std::convert::Infallible>(legacy(script, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn json_response(status: u16, body: Option<Value>, session: bool) -> Response<Body> {
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let mut r = Response::new(
        Full::new(Bytes::from(bytes))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    if session {
        r.headers_mut()
            .insert("mcp-session-id", "s-legacy".parse().unwrap());
    }
    r
}

async fn legacy(script: Arc<Script>, req: Request<Incoming>) -> Response<Body> {
    if req.method() == http::Method::GET {
        assert_eq!(
            req.headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok()),
            Some("s-legacy"),
            "the GET stream carries the session"
        );
        let last = req
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let first = {
            let mut gets = script.gets.lock().unwrap();
            gets.push(last.clone());
            gets.len() == 1
        };
        let frames: Vec<Bytes> = if first {
            vec![
                sse_frame(1, &webhook("evt_1")),
                sse_frame(
                    2,
                    &json!({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"}),
                ),
                sse_frame(
                    3,
                    &json!({"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "data": "not a webhook"}}),
                ),
                sse_frame(4, &webhook("evt_2")),
            ]
        } else {
            // Resumed: the server replays what it thinks was missed (evt_2 again), then more.
            vec![
                sse_frame(4, &webhook("evt_2")),
                sse_frame(5, &webhook("evt_3")),
            ]
        };
        let sent = futures_util::stream::iter(
            frames
                .into_iter()
                .map(|f| Ok::<_, std::io::Error>(Frame::data(f))),
        );
        // The first stream ends after its frames; the resumed one stays open.
        let body: Body = if first {
            BodyExt::boxed(StreamBody::new(sent))
        } else {
            BodyExt::boxed(StreamBody::new(sent.chain(futures_util::stream::pending())))
        };
        let mut r = Response::new(body);
        r.headers_mut()
            .insert("content-type", "text/event-stream".parse().unwrap());
        return r;
    }
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match msg.get("method").and_then(Value::as_str) {
        Some("server/discover") => json_response(
            404,
            Some(json!({"jsonrpc": "2.0", "id": msg["id"],
                        "error": {"code": -32601, "message": "Method not found"}})),
            false,
        ),
        Some("initialize") => json_response(
            200,
            Some(json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "legacy-upstream", "version": "1"}}})),
            true,
        ),
        Some(_) => json_response(202, None, false),
        None => {
            script.answers.lock().unwrap().push(msg);
            json_response(202, None, false)
        }
    }
}

#[tokio::test]
async fn session_era_streams_are_resumed_deduplicated_and_pings_answered() {
    let dir = temp_dir("relay25");
    let script = Arc::new(Script::default());
    let addr = legacy_server(script.clone()).await;
    let (hook_addr, mut hooks) = hook_receiver(|_| 200).await;
    let hook = format!("http://{hook_addr}/hooks");
    let file = facade_file(&dir, &format!("http://{addr}/mcp"), &hook, "");
    let facade = portico::facade::config::load(&file).expect("facade compiles");
    let running = portico::facade::http::start(facade, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("facade listens");
    let keys = facade_keys(&reqwest::Client::new(), &running.url()).await;

    for want in ["evt_1", "evt_2", "evt_3"] {
        let r = next_hook(&mut hooks).await;
        verified(&r, &hook_addr.to_string(), &keys).expect("signature verifies");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["event_id"], want);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(500), hooks.recv())
            .await
            .is_err(),
        "the replayed evt_2 and the log message were not delivered"
    );
    let gets = script.gets.lock().unwrap().clone();
    assert_eq!(
        gets,
        vec![None, Some("4".to_string())],
        "the stream was reopened with the last event id"
    );
    let answers = script.answers.lock().unwrap().clone();
    assert_eq!(
        answers,
        vec![json!({"jsonrpc": "2.0", "id": "srv-ping", "result": {}})],
        "the server's ping was answered"
    );
    running.stop().await.expect("facade stops");
}

#[tokio::test]
async fn a_receiver_that_fails_gets_retries_then_a_dead_letter() {
    let dir = temp_dir("relaydead");
    let script = Arc::new(Script::default());
    let addr = legacy_server(script.clone()).await;
    let (hook_addr, mut hooks) = hook_receiver(|_| 503).await;
    let file = facade_file(
        &dir,
        &format!("http://{addr}/mcp"),
        &format!("http://{hook_addr}/hooks"),
        "",
    );
    let facade = portico::facade::config::load(&file).expect("facade compiles");
    let egress = facade.egress.clone().expect("an egress");
    let running = portico::facade::http::start(facade, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("facade listens");
    // evt_1: the first attempt and 2 retries, all 503.
    let mut attempts = 0;
    while attempts < 3 {
        let r = next_hook(&mut hooks).await;
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        if body["event_id"] == "evt_1" {
            attempts += 1;
        }
    }
    let mut dead = Vec::new();
    for _ in 0..100 {
        dead = egress.dead_letters();
        if dead.iter().any(|d| d.event_id == "evt_1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let d = dead
        .iter()
        .find(|d| d.event_id == "evt_1")
        .expect("evt_1 became a dead letter");
    assert_eq!(d.attempts, 3);
    assert_eq!(d.last_error, "HTTP 503");
    running.stop().await.expect("facade stops");
}

#[test]
fn notification_mistakes_are_diagnosed_with_lines() {
    let dir = temp_dir("relaybad");
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        r#"facade: bad
binding: plain
upstream:
  url: http://127.0.0.1:9/mcp
routes:
  "GET /x": x
notifications:
  deliver_to: [ftp://nowhere]
  event_id: event_id
  listen: [1]
  retry: { initial: soon }
  signing_key: missing.json
  resource_id: booking_id
"#,
    )
    .unwrap();
    let diags = portico::facade::config::load(&file).expect_err("refused");
    let text: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    let all = text.join("\n");
    for needle in [
        "needs the notification methods",
        "`ftp://nowhere` is not an http(s) URL",
        "`event_id` is not a JSON pointer",
        "`booking_id` is not a JSON pointer",
        "`listen` must be an object",
        "retry.initial: `soon` is not a duration",
        "missing.json",
    ] {
        assert!(all.contains(needle), "`{needle}` missing from:\n{all}");
    }
    // Each names its line in the file.
    assert!(
        text.iter().any(|t| t.contains(":8")),
        "deliver_to is on line 8:\n{all}"
    );
}

// ---- from_profiles: the whole loop on the demo -------------------------------------------

/// REST platform -> facade -> portico -> the demo's legacy backend; the backend's own signed
/// webhook comes back through portico's ingress as `usp_webhook`, and the relay sends it to the
/// `webhook_url` of the profile that booked (and to nobody else).
#[tokio::test]
async fn booking_events_reach_the_webhook_url_of_the_platform_that_booked() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    let (hook_addr, mut hooks) = hook_receiver(|_| 200).await;
    // The platform's profile document, served on 127.0.0.1.
    let profile_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let profile_addr = profile_listener.local_addr().unwrap();
    let doc = json!({"usp": {"version": "2026-01-11", "capabilities": {}},
                     "webhook_url": format!("http://{hook_addr}/usp-hooks")})
    .to_string();
    serve_with(profile_listener, move |_req| {
        let doc = doc.clone();
        async move {
            let mut r = Response::new(Full::new(Bytes::from(doc)));
            r.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            r
        }
    });
    let profile = format!("http://{profile_addr}/platform.json");

    let dir = temp_dir("relayprofile");
    let text = format!(
        r#"facade: spa-platforms
binding: usp
upstream:
  url: {mcp}
routes:
  POST /bookings: {{ tool: usp_bookings_create, status: 201 }}
  POST /bookings/{{booking_id}}/cancel: usp_bookings_cancel
notifications:
  from_profiles: true
  allow_hosts: [127.0.0.1]
  retry: {{ initial: 100ms, retries: 1, max_total: 1s, timeout: 2s }}
"#,
        mcp = demo.mcp_url()
    );
    let file = dir.join("platforms.yaml");
    std::fs::write(&file, text).unwrap();
    let facade = portico::facade::config::load(&file).expect("facade compiles");
    let running = portico::facade::http::start(facade, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("facade listens");
    wait_connected(&running).await;
    let keys = facade_keys(&reqwest::Client::new(), &running.url()).await;

    let http = reqwest::Client::new();
    let agent = format!("profile=\"{profile}\"");
    let created = http
        .post(format!("{}/bookings", running.url()))
        .header("usp-agent", &agent)
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .json(
            &json!({"service_id": "MASSAGE-60", "slot_id": "MASSAGE-60@2026-12-01T09:00",
                      "buyer": {"first_name": "Alice", "last_name": "Example",
                                "email": "alice@example.com"}}),
        )
        .send()
        .await
        .expect("booking created");
    let status = created.status();
    let body: Value = created.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    let booking_id = body["booking"]["id"]
        .as_str()
        .expect("a booking id")
        .to_string();
    let cancelled = http
        .post(format!("{}/bookings/{booking_id}/cancel", running.url()))
        .header("usp-agent", &agent)
        .json(&json!({"reason": "plans changed"}))
        .send()
        .await
        .expect("booking cancelled");
    assert_eq!(cancelled.status(), 200);

    for want in ["booking.confirmed", "booking.canceled"] {
        let r = next_hook(&mut hooks).await;
        assert_eq!(r.path, "/usp-hooks", "the profile's webhook_url");
        verified(&r, &hook_addr.to_string(), &keys).expect("signed with the facade's key");
        let event: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(event["event"], want);
        assert_eq!(event["booking_id"], booking_id.as_str());
    }
    running.stop().await.expect("facade stops");
    demo.stop().await;
}
