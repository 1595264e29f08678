//! Webhook ingress and fan-out end to end over real HTTP on 127.0.0.1: signed webhooks POSTed to
//! portico reach 2025-era GET SSE streams as `usp_webhook` notifications (and
//! `notifications/resources/updated` for subscribed booking resources); every bad webhook is
//! refused with its status and never delivered.

mod common;

use common::*;
use portico::webhook::keys::{Alg, SigningKey};
use portico::webhook::sig::{self, RequestParts, USP_COMPONENTS};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const TRANSFORM: &str = r#"{ event: (if .kind == "appointment.booked" then "booking.confirmed" else "booking.canceled" end), event_id: .webhook_id, booking_id: .appointment.number, timestamp: .occurred_at }"#;

struct Keys {
    ec: SigningKey,
    ed: SigningKey,
}

/// A USP mapping whose webhooks trust `keys` (ECDSA only when `ecdsa_only`) and an HMAC secret.
fn mapping(keys: &Keys, ecdsa_only: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portico-wh-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let jwks = json!({"keys": [keys.ec.verifying_key().jwk(), keys.ed.verifying_key().jwk()]});
    std::fs::write(dir.join("keys.json"), jwks.to_string()).expect("jwks written");
    let algorithms = if ecdsa_only {
        "[ecdsa-p256-sha256]"
    } else {
        "[ecdsa-p256-sha256, ed25519]"
    };
    let text = format!(
        r#"business: spa
binding: usp
openrpc: {openrpc}
backend:
  url: http://127.0.0.1:9/spa
tools: {{}}
webhooks:
  jwks: keys.json
  algorithms: {algorithms}
  max_age: 300s
  hmac: {{ secret: legacy-secret, header: X-Legacy-Signature }}
  transform: '{TRANSFORM}'
"#,
        openrpc = root().join("openrpc/usp.openrpc.json").display(),
    );
    let file = dir.join("spa.yaml");
    std::fs::write(&file, text).expect("mapping written");
    file
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

fn legacy(id: &str, kind: &str, booking: &str) -> Vec<u8> {
    json!({"webhook_id": id, "kind": kind, "occurred_at": "2026-12-01T09:00:00Z",
           "appointment": {"number": booking, "status": "BOOKED"}})
    .to_string()
    .into_bytes()
}

/// A signed webhook request (headers in order: content-type, content-digest, signature pair).
struct Signed {
    headers: http::HeaderMap,
    body: Vec<u8>,
}

fn sign(key: &SigningKey, authority: &str, body: &[u8], created: i64) -> Signed {
    let url = url::Url::parse(&format!("http://{authority}/webhooks/spa")).expect("URL");
    Signed {
        headers: sig::sign_webhook(key, &url, body, created).expect("signed"),
        body: body.to_vec(),
    }
}

struct Env {
    gw: portico::app::Running,
    http: reqwest::Client,
    keys: Keys,
}

impl Env {
    async fn start(ecdsa_only: bool) -> Env {
        Env::start_with(ecdsa_only, portico::mcp::http::HttpOptions::default()).await
    }

    async fn start_with(ecdsa_only: bool, opts: portico::mcp::http::HttpOptions) -> Env {
        let keys = Keys {
            ec: SigningKey::generate(Alg::EcdsaP256Sha256, "biz-ec").unwrap(),
            ed: SigningKey::generate(Alg::Ed25519, "biz-ed").unwrap(),
        };
        let g = portico::config::load(&[mapping(&keys, ecdsa_only)]).expect("mapping loads");
        let gw = portico::app::start(
            g,
            "127.0.0.1:0".parse().unwrap(),
            opts,
            portico::mcp::handler::ServerInfo::default(),
        )
        .await
        .unwrap();
        Env {
            gw,
            http: reqwest::Client::new(),
            keys,
        }
    }

    fn authority(&self) -> String {
        self.gw.addr.to_string()
    }

    fn hook_url(&self) -> String {
        format!("http://{}/webhooks/spa", self.gw.addr)
    }

    async fn post(&self, s: &Signed) -> (u16, Value) {
        let r = self
            .http
            .post(self.hook_url())
            .headers(s.headers.clone())
            .body(s.body.clone())
            .send()
            .await
            .expect("webhook sent");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn good(&self, id: &str, booking: &str) -> (u16, Value) {
        let s = sign(
            &self.keys.ec,
            &self.authority(),
            &legacy(id, "appointment.booked", booking),
            now(),
        );
        self.post(&s).await
    }

    /// Opens a 2025-11-25 session and its GET stream (with an optional query and Last-Event-ID).
    async fn stream(&self, query: &str, last: Option<u64>) -> (String, SseReader) {
        let url = self.gw.mcp_url();
        let (sid, _) = initialize(&self.http, &url, "2025-11-25").await;
        let mut rb = self
            .http
            .get(format!("{url}{query}"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid);
        if let Some(l) = last {
            rb = rb.header("last-event-id", l.to_string());
        }
        let resp = rb.send().await.expect("GET stream");
        assert_eq!(resp.status(), 200);
        (sid, SseReader::new(resp))
    }
}

/// USP's BookingEvent schema, from the fetched upstream folder (the `data` booking is checked by the e2e suite).
fn booking_event_validator() -> jsonschema::Validator {
    let path = common::upstream("usp/schemas/webhook_event.json");
    let text = std::fs::read_to_string(path).expect("USP webhook_event.json is readable");
    let doc: Value = serde_json::from_str(&text).expect("schema JSON");
    let mut schema = doc["$defs"]["BookingEvent"].clone();
    schema["properties"]["data"] = json!({"type": "object"});
    jsonschema::validator_for(&schema).expect("schema compiles")
}

#[tokio::test]
async fn signed_webhook_reaches_a_2025_get_stream_once() {
    let env = Env::start(false).await;
    let (_, mut sse) = env.stream("", None).await;
    let (status, body) = env.good("wh-1", "A-1001").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "queued");
    // The sender retries the same event id with a fresh signature: acknowledged, not delivered.
    let s = sign(
        &env.keys.ed,
        &env.authority(),
        &legacy("wh-1", "appointment.booked", "A-1001"),
        now(),
    );
    let (status, body) = env.post(&s).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "duplicate");
    let s = sign(
        &env.keys.ed,
        &env.authority(),
        &legacy("wh-2", "appointment.cancelled", "A-1001"),
        now(),
    );
    assert_eq!(env.post(&s).await.0, 202);

    let (id1, first) = sse.next().await;
    assert_eq!(first["jsonrpc"], "2.0");
    assert_eq!(first["method"], "usp_webhook");
    assert!(first.get("id").is_none(), "a notification has no id");
    assert_eq!(first["params"]["event"], "booking.confirmed");
    assert_eq!(first["params"]["event_id"], "wh-1");
    assert_eq!(first["params"]["booking_id"], "A-1001");
    let v = booking_event_validator();
    assert!(v.is_valid(&first["params"]), "{}", first["params"]);
    // The next frame is the second event: the duplicate was never delivered.
    let (id2, second) = sse.next().await;
    assert_eq!(second["params"]["event_id"], "wh-2");
    assert_eq!(second["params"]["event"], "booking.canceled");
    assert!(v.is_valid(&second["params"]));
    assert!(id2 > id1, "SSE ids increase: {id1:?} < {id2:?}");
    env.gw.stop().await.unwrap();
}

#[tokio::test]
async fn bad_webhooks_are_refused_and_never_delivered() {
    let env = Env::start(true).await;
    let (_, mut sse) = env.stream("", None).await;
    let auth = env.authority();
    let body = legacy("bad", "appointment.booked", "A-1");

    // Forged: signed by another key that claims the trusted kid.
    let impostor = SigningKey::from_jwk(&{
        let mut j = SigningKey::generate(Alg::EcdsaP256Sha256, "biz-ec")
            .unwrap()
            .private_jwk()
            .unwrap();
        j["kid"] = json!("biz-ec");
        j
    })
    .unwrap();
    let forged = sign(&impostor, &auth, &body, now());
    // Stale: created outside the 300 s window.
    let stale = sign(&env.keys.ec, &auth, &body, now() - 400);
    // Unknown key.
    let unknown = sign(
        &SigningKey::generate(Alg::EcdsaP256Sha256, "nobody").unwrap(),
        &auth,
        &body,
        now(),
    );
    // Wrong algorithm: a trusted Ed25519 key, but this mapping accepts ECDSA only.
    let wrong_alg = sign(&env.keys.ed, &auth, &body, now());
    // Digest missing / mismatched.
    let mut no_digest = sign(&env.keys.ec, &auth, &body, now());
    no_digest.headers.remove("content-digest");
    let mut mismatch = sign(&env.keys.ec, &auth, &body, now());
    mismatch.body = legacy("bad", "appointment.booked", "A-2");
    // Signed for another host.
    let relayed = sign(&env.keys.ec, "elsewhere.example", &body, now());
    // Malformed payloads, validly signed.
    let not_json = sign(&env.keys.ec, &auth, b"{\"webhook_id\": ", now());
    let no_id = sign(
        &env.keys.ec,
        &auth,
        br#"{"kind":"appointment.booked","appointment":{"number":"A-1"}}"#,
        now(),
    );
    // Unsigned.
    let mut unsigned = sign(&env.keys.ec, &auth, &body, now());
    unsigned.headers.remove("signature-input");
    unsigned.headers.remove("signature");
    unsigned.headers.remove("content-digest");

    let cases: Vec<(&str, &Signed, u16, &str)> = vec![
        ("forged", &forged, 401, "forged"),
        ("stale", &stale, 401, "stale"),
        ("unknown key", &unknown, 401, "unknown_key"),
        ("wrong algorithm", &wrong_alg, 401, "wrong_algorithm"),
        ("digest missing", &no_digest, 400, "digest_missing"),
        ("digest mismatch", &mismatch, 400, "digest_mismatch"),
        ("relayed", &relayed, 401, "forged"),
        ("not json", &not_json, 400, "payload_malformed"),
        ("no event id", &no_id, 422, "event_invalid"),
        ("unsigned", &unsigned, 401, "unsigned"),
    ];
    for (name, req, status, slug) in cases {
        let (got, body) = env.post(req).await;
        assert_eq!(got, status, "{name}: {body}");
        assert_eq!(
            body["type"],
            format!("urn:portico:webhook:{slug}"),
            "{name}: {body}"
        );
    }
    // Replayed signature: the first copy is accepted, the byte-identical second is refused.
    let once = sign(
        &env.keys.ec,
        &auth,
        &legacy("wh-ok", "appointment.booked", "A-9"),
        now(),
    );
    assert_eq!(env.post(&once).await.0, 202);
    let (status, body) = env.post(&once).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["type"], "urn:portico:webhook:replayed");
    // Unknown business and wrong method.
    let r = env
        .http
        .post(format!("http://{}/webhooks/nope", env.gw.addr))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = env.http.get(env.hook_url()).send().await.unwrap();
    assert_eq!(r.status(), 405);

    // Only the one good event ever reached the stream.
    let (_, first) = sse.next().await;
    assert_eq!(first["params"]["event_id"], "wh-ok");
    let (status, _) = env.good("wh-last", "A-9").await;
    assert_eq!(status, 202);
    let (_, next) = sse.next().await;
    assert_eq!(next["params"]["event_id"], "wh-last");
    env.gw.stop().await.unwrap();
}

#[tokio::test]
async fn legacy_hmac_senders_are_verified() {
    let env = Env::start(false).await;
    let (_, mut sse) = env.stream("", None).await;
    let body = legacy("wh-h1", "appointment.booked", "A-7");
    let send = |header: String, body: Vec<u8>| {
        env.http
            .post(env.hook_url())
            .header("content-type", "application/json")
            .header("x-legacy-signature", header)
            .body(body)
            .send()
    };
    let r = send(sig::hmac_header(b"wrong", &body, now()), body.clone())
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = send(
        sig::hmac_header(b"legacy-secret", &body, now() - 1000),
        body.clone(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    let r = send(
        sig::hmac_header(b"legacy-secret", &body, now()),
        body.clone(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 202);
    let (_, n) = sse.next().await;
    assert_eq!(n["params"]["event_id"], "wh-h1");
    env.gw.stop().await.unwrap();
}

#[tokio::test]
async fn booking_resources_are_readable_and_subscribable() {
    let env = Env::start(false).await;
    let url = env.gw.mcp_url();
    // This client wants only resource updates: the usp_webhook filter matches nothing.
    let (sid, mut sse) = env.stream("?events=none", None).await;
    let uri = "usp://bookings/A-1001";
    let sub = send(legacy_req(
        &env.http,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri": uri}}),
    ))
    .await;
    assert_eq!(sub.result(), &json!({}), "{}", sub.text);
    assert_eq!(env.good("wh-r1", "A-1001").await.0, 202);
    let (_, updated) = sse.next().await;
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], uri);
    let read = send(legacy_req(
        &env.http,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri": uri}}),
    ))
    .await;
    let contents = &read.result()["contents"][0];
    assert_eq!(contents["uri"], uri);
    assert_eq!(contents["mimeType"], "application/json");
    let latest: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(latest["event_id"], "wh-r1");
    // A booking nobody has heard of is still "not found".
    let missing = send(legacy_req(
        &env.http,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri": "usp://bookings/A-404"}}),
    ))
    .await;
    assert_eq!(missing.error_code(), Some(-32002), "{}", missing.text);
    env.gw.stop().await.unwrap();
}

#[tokio::test]
async fn last_event_id_replays_missed_events() {
    let env = Env::start(false).await;
    for n in 1..=3 {
        assert_eq!(env.good(&format!("wh-{n}"), "A-1").await.0, 202);
    }
    let (_, mut sse) = env.stream("", Some(1)).await;
    let (id, e) = sse.next().await;
    assert_eq!(
        (id, e["params"]["event_id"].clone()),
        (Some(2), json!("wh-2"))
    );
    let (id, e) = sse.next().await;
    assert_eq!(
        (id, e["params"]["event_id"].clone()),
        (Some(3), json!("wh-3"))
    );
    assert_eq!(env.good("wh-4", "A-1").await.0, 202);
    let (id, _) = sse.next().await;
    assert_eq!(id, Some(4));
    env.gw.stop().await.unwrap();
}

fn legacy_req(
    client: &reqwest::Client,
    url: &str,
    sid: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    common::legacy(client, url, sid, body)
}

/// `portico demo`: bookings an MCP client creates and cancels come back to it as signed
/// webhooks from the demo backend, as `usp_webhook` notifications on its GET stream.
#[tokio::test]
async fn demo_backend_webhooks_reach_the_client_that_booked() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    assert!(
        demo.banner()
            .contains(&format!("webhooks: {}\n", demo.webhooks_url()))
    );
    let http = reqwest::Client::new();
    let url = demo.mcp_url();
    let (sid, _) = initialize(&http, &url, "2025-11-25").await;
    let resp = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .expect("GET stream");
    let mut sse = SseReader::new(resp);
    let profile = json!({"usp": {"profile": "https://agent.example/p.json",
                                  "idempotency_key": uuid::Uuid::new_v4().to_string()}});
    let tool = |id: i64, name: &str, args: Value| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}});
    let created = send(legacy_req(
        &http,
        &url,
        &sid,
        tool(
            1,
            "usp_bookings_create",
            json!({
        "service_id": "MASSAGE-60", "slot_id": "MASSAGE-60@2026-12-01T09:00",
        "buyer": {"first_name": "Alice", "last_name": "Example", "email": "alice@example.com"},
        "_meta": profile}),
        ),
    ))
    .await;
    let booking_id = created.sc()["booking"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("booked: {}", created.text))
        .to_string();
    let cancelled = send(legacy_req(
        &http,
        &url,
        &sid,
        tool(
            2,
            "usp_bookings_cancel",
            json!({
        "booking_id": booking_id, "reason": "plans changed",
        "_meta": {"usp": {"profile": "https://agent.example/p.json"}}}),
        ),
    ))
    .await;
    assert_eq!(
        cancelled.sc()["booking"]["status"],
        "canceled",
        "{}",
        cancelled.text
    );

    let (_, confirmed) = sse.next().await;
    assert_eq!(confirmed["method"], "usp_webhook");
    assert_eq!(confirmed["params"]["event"], "booking.confirmed");
    assert_eq!(confirmed["params"]["booking_id"], booking_id.as_str());
    assert_eq!(confirmed["params"]["data"]["id"], booking_id.as_str());
    let (_, canceled) = sse.next().await;
    assert_eq!(canceled["params"]["event"], "booking.canceled");
    assert_eq!(canceled["params"]["data"]["status"], "canceled");
    let v = booking_event_validator();
    assert!(v.is_valid(&confirmed["params"]), "{}", confirmed["params"]);
    assert!(v.is_valid(&canceled["params"]));
    // The latest event is the booking resource's content.
    let read = send(legacy_req(
        &http,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":3,
        "method":"resources/read","params":{"uri": format!("usp://bookings/{booking_id}")}}),
    ))
    .await;
    let text = read.result()["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("booking.canceled"), "{}", read.text);
    demo.stop().await;
}

/// One request a webhook receiver got.
/// A receiver on 127.0.0.1: `/ok` answers 500 to its first request and 200 after; `/dead`
/// always answers 503. Every request is reported.
async fn receiver() -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<Received>,
) {
    let ok_seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    hook_receiver(move |path| match path {
        "/ok" if ok_seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => 500,
        "/ok" => 200,
        _ => 503,
    })
    .await
}

/// Fresh keys and a mapping whose webhooks are also sent to `urls` with the `retry` schedule.
fn egress_mapping(urls: &[String], retry: &str) -> (Keys, PathBuf) {
    let keys = Keys {
        ec: SigningKey::generate(Alg::EcdsaP256Sha256, "biz-ec").unwrap(),
        ed: SigningKey::generate(Alg::Ed25519, "biz-ed").unwrap(),
    };
    let file = mapping(&keys, false);
    let text = std::fs::read_to_string(&file).unwrap()
        + &format!("  deliver_to: {}\n  retry: {retry}\n", json!(urls));
    std::fs::write(&file, text).unwrap();
    (keys, file)
}

#[tokio::test]
async fn accepted_events_are_sent_on_signed_with_retries_and_dead_letters() {
    let (recv_addr, mut received) = receiver().await;
    let (keys, file) = egress_mapping(
        &[
            format!("http://{recv_addr}/ok"),
            format!("http://{recv_addr}/dead"),
        ],
        "{ initial: 10ms, retries: 2, max_total: 5s, timeout: 2s }",
    );
    let admin = portico::app::Ops {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        ..portico::app::Ops::default()
    };
    let env = Env {
        gw: gateway_ops(&[file], admin).await,
        http: reqwest::Client::new(),
        keys,
    };
    assert_eq!(env.good("wh-out", "A-5").await.0, 202);

    // /ok: a 500, then a 200. /dead: the first try and two retries, all 503.
    let mut by_path: std::collections::HashMap<String, Vec<Received>> = Default::default();
    while by_path.get("/ok").map_or(0, Vec::len) < 2 || by_path.get("/dead").map_or(0, Vec::len) < 3
    {
        let r = tokio::time::timeout(Duration::from_secs(10), received.recv())
            .await
            .expect("deliveries within 10 s (hang guard)")
            .expect("receiver alive");
        by_path.entry(r.path.clone()).or_default().push(r);
    }
    let jwks: Value = env
        .http
        .get(format!("http://{}/.well-known/jwks.json", env.gw.addr))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let portico_keys =
        portico::webhook::keys::VerifyingKey::from_jwks(&jwks.to_string()).expect("portico JWKS");
    assert_eq!(portico_keys.len(), 1);
    let authority = recv_addr.to_string();
    let policy = sig::Policy {
        required: &USP_COMPONENTS,
        algorithms: &Alg::ALL,
        max_age: Duration::from_secs(300),
        require_created: true,
    };
    let validator = booking_event_validator();
    let mut signatures = std::collections::HashSet::new();
    for r in by_path.values().flatten() {
        sig::verify_content_digest(&r.headers, &r.body).expect("Content-Digest matches");
        let parts = RequestParts {
            method: "POST",
            authority: &authority,
            path: &r.path,
            query: None,
            headers: &r.headers,
        };
        let v = sig::verify(&parts, &portico_keys, &policy, now())
            .expect("portico's signature verifies");
        assert!(
            signatures.insert(v.signature),
            "each attempt is signed afresh"
        );
        let event: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(event["event_id"], "wh-out");
        assert!(validator.is_valid(&event), "{event}");
    }
    // /dead was given up: one dead letter with three attempts.
    let egress = env
        .gw
        .server
        .webhooks
        .egress
        .clone()
        .expect("a signing key");
    // The record is written just after the last 503 is read; poll for it (10 s hang guard).
    let dead = dead_letters(&egress, 1).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].url, format!("http://{recv_addr}/dead"));
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].last_error, "HTTP 503");
    // The admin status page lists the accepted event and the dead letter.
    let page = env
        .http
        .get(env.gw.admin_url().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("1 dead letter(s)"), "{page}");
    assert!(
        page.contains(&format!(
            "<td><code>wh-out</code></td><td><code>http://{recv_addr}/dead</code></td><td>3</td><td>HTTP 503</td>"
        )),
        "{page}"
    );
    assert!(page.contains("<code>booking.confirmed</code>"), "{page}");
    env.gw.stop().await.unwrap();
}

/// 2026-07-28: `subscriptions/listen` acknowledges the honoured filter first, then carries the
/// webhook notifications and `resources/updated` for the booking, tagged with its request id.
#[tokio::test]
async fn a_2026_listen_stream_gets_acknowledged_tagged_notifications() {
    let env = Env::start(false).await;
    let url = env.gw.mcp_url();
    let params = json!({"notifications": {
        "resourceSubscriptions": ["usp://bookings/A-77", "test://not-a-booking"],
        "toolsListChanged": true,
        "dev.portico/webhooks": {"events": ["booking.canceled"]}
    }});
    let resp = modern(&env.http, &url, 7, "subscriptions/listen", params)
        .send()
        .await
        .expect("listen");
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut sse = SseReader::new(resp);
    let (id, ack) = sse.next().await;
    assert_eq!(id, None, "2026-07-28 streams carry no event ids");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["usp://bookings/A-77"],
               "dev.portico/webhooks": {"events": ["booking.canceled"]}})
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // booking.confirmed for A-77: only the resource update (the event filter wants cancellations).
    assert_eq!(env.good("wh-l1", "A-77").await.0, 202);
    let (_, updated) = sse.next().await;
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "usp://bookings/A-77");
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // A cancellation of another booking: the webhook notification, tagged, and no update.
    let s = sign(
        &env.keys.ec,
        &env.authority(),
        &legacy("wh-l2", "appointment.cancelled", "A-78"),
        now(),
    );
    assert_eq!(env.post(&s).await.0, 202);
    let (id, note) = sse.next().await;
    assert_eq!(id, None);
    assert_eq!(note["method"], "usp_webhook");
    assert_eq!(note["params"]["event_id"], "wh-l2");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // 2026-07-28 resources/read of the booking returns the latest event.
    let read = send(modern(
        &env.http,
        &url,
        9,
        "resources/read",
        json!({"uri": "usp://bookings/A-77"}),
    ))
    .await;
    assert_eq!(read.result()["resultType"], "complete", "{}", read.text);
    assert_eq!(read.result()["cacheScope"], "private");
    let text = read.result()["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("wh-l1"), "{}", read.text);
    // A listen request without a filter is refused.
    let bad = send(modern(
        &env.http,
        &url,
        8,
        "subscriptions/listen",
        json!({}),
    ))
    .await;
    assert_eq!(bad.error_code(), Some(-32602), "{}", bad.text);
    env.gw.stop().await.unwrap();
}

async fn journaled(file: &std::path::Path, journal: &std::path::Path) -> portico::app::Running {
    let g = portico::config::load(&[file.to_path_buf()]).expect("mapping loads");
    let opts = portico::mcp::http::HttpOptions {
        webhook_journal: Some(journal.to_path_buf()),
        ..Default::default()
    };
    portico::app::start(
        g,
        "127.0.0.1:0".parse().unwrap(),
        opts,
        portico::mcp::handler::ServerInfo::default(),
    )
    .await
    .expect("gateway starts")
}

/// With a journal, what was acknowledged survives a restart: the replay buffer (and sequence
/// numbers), the dedupe store, and a delivery that had not got through yet.
#[tokio::test]
async fn acknowledged_events_survive_a_restart_with_a_journal() {
    let (recv_addr, mut received) = receiver().await;
    // The first attempt gets a 500; the retry would wait an hour: only a restart resumes it.
    let (keys, file) = egress_mapping(
        &[format!("http://{recv_addr}/ok")],
        "{ initial: 60m, retries: 1, max_total: 120m }",
    );
    let journal = file.with_file_name("journal.jsonl");

    let env = Env {
        gw: journaled(&file, &journal).await,
        http: reqwest::Client::new(),
        keys,
    };
    assert_eq!(env.good("wh-j1", "A-31").await.0, 202);
    let first = received.recv().await.expect("first attempt");
    assert_eq!(first.path, "/ok");
    let Env { gw, http, keys } = env;
    gw.stop().await.unwrap();

    let env = Env {
        gw: journaled(&file, &journal).await,
        http,
        keys,
    };
    // The unfinished delivery is resumed (and this time acknowledged).
    let again = tokio::time::timeout(Duration::from_secs(10), received.recv())
        .await
        .expect("the delivery resumes after the restart (hang guard)")
        .expect("receiver alive");
    let before: Value = serde_json::from_slice(&first.body).unwrap();
    let after: Value = serde_json::from_slice(&again.body).unwrap();
    assert_eq!(before, after);
    // The event id is still known: a retry by the sender is acknowledged, not delivered.
    let (status, body) = env.good("wh-j1", "A-31").await;
    assert_eq!((status, body["status"].clone()), (200, json!("duplicate")));
    // A client that saw nothing replays from the journal, and numbering continues.
    let (_, mut sse) = env.stream("", Some(0)).await;
    let (id, e) = sse.next().await;
    assert_eq!(
        (id, e["params"]["event_id"].clone()),
        (Some(1), json!("wh-j1"))
    );
    assert_eq!(env.good("wh-j2", "A-31").await.0, 202);
    let (id, e) = sse.next().await;
    assert_eq!(
        (id, e["params"]["event_id"].clone()),
        (Some(2), json!("wh-j2"))
    );
    env.gw.stop().await.unwrap();
}

/// Mistakes in a `webhooks:` section fail the load, each named with its line, key and a hint.
#[test]
fn webhook_mapping_mistakes_are_diagnosed() {
    let dir = std::env::temp_dir().join(format!("portico-whbad-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        r#"business: spa
binding: usp
openrpc: {openrpc}
backend:
  url: http://127.0.0.1:9/spa
tools: {{}}
webhooks:
  jwks: missing.json
  algorithms: [rsa-pss-sha512]
  max_age: soon
  event_id: event_id
  transform: '{{ event: '
  deliver_to: ["ftp://platform.example/hooks"]
  retry: {{ initial: later }}
"#,
        openrpc = root().join("openrpc/usp.openrpc.json").display(),
    );
    let file = dir.join("spa.yaml");
    std::fs::write(&file, text).unwrap();
    let diags = portico::config::load(&[file]).expect_err("the mapping is refused");
    let at: Vec<&str> = diags.iter().filter_map(|d| d.at.as_deref()).collect();
    for key in [
        "webhooks.jwks",
        "webhooks.algorithms",
        "webhooks.max_age",
        "webhooks.event_id",
        "webhooks.transform",
        "webhooks.deliver_to",
        "webhooks.retry",
    ] {
        assert!(at.contains(&key), "{key} not diagnosed: {diags:?}");
    }
    for d in &diags {
        assert!(d.line.is_some() && d.hint.is_some(), "{d:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A receiver that accepts connections and reads requests but never answers; counts accepts.
async fn hanging_receiver() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                // Read until the client gives up (closes); never write a byte.
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// The egress's dead letters once there are at least `n` (polled; a 15 s hang guard).
async fn dead_letters(
    egress: &portico::webhook::egress::Egress,
    n: usize,
) -> Vec<portico::webhook::egress::DeadLetter> {
    let mut dead = egress.dead_letters();
    for _ in 0..3000 {
        if dead.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        dead = egress.dead_letters();
    }
    dead
}

/// The next delivery a receiver got (10 s hang guard).
async fn next(r: &mut tokio::sync::mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(10), r.recv())
        .await
        .expect("a delivery within 10 s (hang guard)")
        .expect("receiver alive")
}

/// USP §9.2.3: events for one booking are delivered in causal order. The booking's first
/// event meets a 500 and waits for its retry; the booking's next event waits behind it, while
/// another booking's event is delivered at once.
#[tokio::test]
async fn events_about_one_booking_reach_a_receiver_in_order() {
    let (recv_addr, mut received) = receiver().await;
    let (keys, file) = egress_mapping(
        &[format!("http://{recv_addr}/ok")],
        "{ initial: 400ms, retries: 2, max_total: 5s, timeout: 2s }",
    );
    let env = Env {
        gw: gateway(&[file]).await,
        http: reqwest::Client::new(),
        keys,
    };
    let post = async |id: &str, kind: &str, booking: &str| {
        let s = sign(
            &env.keys.ec,
            &env.authority(),
            &legacy(id, kind, booking),
            now(),
        );
        env.post(&s).await.0
    };
    let seen = |r: &Received| {
        let e: Value = serde_json::from_slice(&r.body).unwrap();
        (e["event_id"].as_str().unwrap().to_string(), r.status)
    };
    assert_eq!(post("ord-1", "appointment.booked", "B-1").await, 202);
    assert_eq!(seen(&next(&mut received).await), ("ord-1".into(), 500));
    assert_eq!(post("ord-2", "appointment.cancelled", "B-1").await, 202);
    assert_eq!(post("ord-3", "appointment.booked", "B-2").await, 202);
    // B-2 does not wait for B-1; B-1's cancellation waits for its confirmation to get through.
    assert_eq!(seen(&next(&mut received).await), ("ord-3".into(), 200));
    assert_eq!(seen(&next(&mut received).await), ("ord-1".into(), 200));
    assert_eq!(seen(&next(&mut received).await), ("ord-2".into(), 200));
    env.gw.stop().await.unwrap();
}

/// Fault injection (issue 9): a receiver that hangs. Each attempt ends at the policy's
/// `timeout`, is retried on the schedule and the delivery ends as a dead letter whose error is
/// `timeout`; meanwhile deliveries of the same and later events to a healthy receiver are not
/// held up, and the ingress keeps accepting webhooks.
#[tokio::test]
async fn a_hanging_receiver_times_out_into_a_dead_letter_without_blocking_others() {
    let (hang_addr, accepted) = hanging_receiver().await;
    let (ok_addr, mut received) = hook_receiver(|_| 200).await;
    let (keys, file) = egress_mapping(
        &[
            format!("http://{hang_addr}/hang"),
            format!("http://{ok_addr}/ok"),
        ],
        "{ initial: 20ms, retries: 2, max_total: 10s, timeout: 300ms }",
    );
    let env = Env {
        gw: gateway(&[file]).await,
        http: reqwest::Client::new(),
        keys,
    };
    let event_of = |r: &Received| {
        serde_json::from_slice::<Value>(&r.body).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(env.good("wh-hang-1", "A-1").await.0, 202);
    assert_eq!(event_of(&next(&mut received).await), "wh-hang-1");
    // While the first event's delivery to /hang is still waiting, a second event is accepted
    // and reaches the healthy receiver.
    assert_eq!(env.good("wh-hang-2", "A-2").await.0, 202);
    assert_eq!(event_of(&next(&mut received).await), "wh-hang-2");
    let egress = env
        .gw
        .server
        .webhooks
        .egress
        .clone()
        .expect("a signing key");
    // Both deliveries to /hang end as dead letters after three timed-out attempts (polled, with
    // a hang guard: 3 × 300 ms plus the schedule each).
    let dead = dead_letters(&egress, 2).await;
    assert_eq!(dead.len(), 2, "{dead:?}");
    let mut ids: Vec<&str> = dead.iter().map(|d| d.event_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["wh-hang-1", "wh-hang-2"]);
    for d in &dead {
        assert_eq!(d.url, format!("http://{hang_addr}/hang"));
        assert_eq!(d.attempts, 3);
        assert_eq!(d.last_error, "timeout");
    }
    // Each attempt was a connection of its own (a timed-out one is never reused).
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 6);
    // The healthy receiver got each event exactly once, and portico keeps serving.
    assert!(received.try_recv().is_err(), "no duplicate delivery to /ok");
    assert_eq!(env.good("wh-hang-3", "A-3").await.0, 202);
    assert_eq!(event_of(&next(&mut received).await), "wh-hang-3");
    env.gw.stop().await.unwrap();
}

/// serve's retention flags bound the webhook history: the replay buffer keeps only the last
/// `replay` events, and an event id counts as a duplicate only within the dedupe window.
#[tokio::test]
async fn retention_bounds_the_replay_buffer_and_the_dedupe_window() {
    let opts = portico::mcp::http::HttpOptions {
        webhook_retention: portico::webhook::ingress::Retention {
            replay: 2,
            dedupe: Duration::from_secs(3),
            latest: 10,
        },
        ..Default::default()
    };
    let env = Env::start_with(false, opts).await;
    for n in 1..=4 {
        assert_eq!(env.good(&format!("wh-{n}"), "A-1").await.0, 202);
    }
    // A client that last saw event 1: event 2 has left the two-event buffer.
    let (_, mut sse) = env.stream("", Some(1)).await;
    let (id, e) = sse.next().await;
    assert_eq!(
        (id, e["params"]["event_id"].clone()),
        (Some(3), json!("wh-3"))
    );
    // Within the window the same id (signed afresh) is a duplicate; after it, an event again.
    let (status, body) = env.good("wh-4", "A-1").await;
    assert_eq!((status, body["status"].clone()), (200, json!("duplicate")));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (status, body) = env.good("wh-4", "A-1").await;
    assert_eq!((status, body["status"].clone()), (202, json!("queued")));
    env.gw.stop().await.unwrap();
}
