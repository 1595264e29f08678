//! Several `portico serve` replicas sharing state through a real Redis (`--state`): a keyed call
//! retried on another replica is answered from the store (the backend sees one call), a webhook
//! received by one replica reaches a client held by another (in order, once), a client whose
//! replica dies resumes on another with `Last-Event-ID`, and Redis faults get their documented
//! answers. Each test starts its own `redis-server` on a free 127.0.0.1 port.
#![cfg(unix)]

mod common;

use common::redis::Redis;
use common::*;
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One `portico serve --state` process.
struct Replica {
    child: Child,
    mcp: String,
    admin: String,
}

impl Replica {
    fn start(mapping: &Path, redis: &str) -> Replica {
        Self::start_with(mapping, Some(redis), &[])
    }

    /// A replica with more `serve` flags, sharing state through `redis` when given.
    fn start_with(mapping: &Path, redis: Option<&str>, flags: &[&str]) -> Replica {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_portico"));
        cmd.arg("serve")
            .arg(mapping)
            .args(["--listen", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
            .args(["--reload-interval", "off"])
            .args(flags);
        if let Some(url) = redis {
            cmd.args(["--state", url]);
        }
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("portico serve starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut url = |name: &str| {
            let l = lines.next().expect("a banner line").expect("utf-8");
            let (n, u) = l.split_once(": ").expect("`name: url`");
            assert_eq!(n, name, "banner line {l:?}");
            u.trim().to_string()
        };
        let mcp = url("mcp");
        let admin = url("admin");
        Replica { child, mcp, admin }
    }

    fn authority(&self) -> String {
        url::Url::parse(&self.mcp)
            .map(|u| format!("{}:{}", u.host_str().unwrap_or(""), u.port().unwrap_or(0)))
            .expect("URL")
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_keyed_call_retried_on_another_replica_reaches_the_backend_once() {
    let (backend, seen) = test_backend().await;
    let mapping = fixture_with_backend("gateway", &backend.to_string()).join("usp.yaml");
    let redis = Redis::start();
    let a = Replica::start(&mapping, &redis.url());
    let b = Replica::start(&mapping, &redis.url());
    let c = reqwest::Client::new();

    let before = hits(&seen);
    let first = call(&c, &a.mcp, "echo_post", keyed(json!({"name": "x"}), "k-1")).await;
    assert!(first.body.get("result").is_some(), "{}", first.text);
    let retried = call(&c, &b.mcp, "echo_post", keyed(json!({"name": "x"}), "k-1")).await;
    assert_eq!(
        retried.body["result"], first.body["result"],
        "the stored answer"
    );
    assert_eq!(hits(&seen), before + 1, "one backend call for one key");

    // The same key with other arguments, on the other replica: a conflict, no backend call.
    let other = call(&c, &b.mcp, "echo_post", keyed(json!({"name": "y"}), "k-1")).await;
    assert!(other.body.get("error").is_some(), "{}", other.text);
    assert_eq!(other.body["error"]["data"]["code"], "idempotency_conflict");
    assert_eq!(hits(&seen), before + 1);

    // Concurrent duplicates on both replicas: one runs, the other waits for its answer.
    let (x, y) = tokio::join!(
        call(&c, &a.mcp, "echo_post", keyed(json!({"name": "z"}), "k-2")),
        call(&c, &b.mcp, "echo_post", keyed(json!({"name": "z"}), "k-2")),
    );
    assert!(x.body.get("result").is_some(), "{}", x.text);
    assert_eq!(x.body["result"], y.body["result"]);
    assert_eq!(hits(&seen), before + 2, "still one backend call per key");
}

const TRANSFORM: &str =
    r#"{ event: "booking.confirmed", event_id: .webhook_id, booking_id: .number, timestamp: .at }"#;

/// A USP mapping whose webhooks trust `key`.
fn webhook_mapping(key: &SigningKey) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portico-scale-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let jwks = json!({"keys": [key.verifying_key().jwk()]});
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
  algorithms: [ecdsa-p256-sha256]
  max_age: 300s
  transform: '{TRANSFORM}'
"#,
        openrpc = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("openrpc/usp.openrpc.json")
            .display(),
    );
    let file = dir.join("spa.yaml");
    std::fs::write(&file, text).expect("mapping written");
    file
}

/// POSTs a signed webhook `id` to `business` on `to`; returns the HTTP status.
async fn webhook_to(
    http: &reqwest::Client,
    key: &SigningKey,
    to: &Replica,
    business: &str,
    id: &str,
) -> u16 {
    let body = json!({"webhook_id": id, "number": "B-1", "at": "2026-12-01T09:00:00Z"})
        .to_string()
        .into_bytes();
    let url = format!("http://{}/webhooks/{business}", to.authority());
    let url = url::Url::parse(&url).expect("URL");
    // Each send is signed afresh, as a sender's retry is: the same body signed with the same
    // `created` twice would be a replay, so every send gets a `created` of its own, strictly
    // after the previous send's and within `max_age` (300 s). `now - k` with a counter `k` is not
    // enough: two sends `n` calls and `n` seconds apart would get the same one.
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let earlier = |last: i64| (last + 1).max(now - 120);
    let created = earlier(
        LAST.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |last| Some(earlier(last)),
        )
        .expect("always updated"),
    );
    assert!(
        created <= now,
        "more than 120 webhooks a second: `created` ran ahead of the clock"
    );
    let headers = portico::webhook::sig::sign_webhook(key, &url, &body, created).expect("signed");
    http.post(url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("webhook sent")
        .status()
        .as_u16()
}

async fn webhook(http: &reqwest::Client, key: &SigningKey, to: &Replica, id: &str) -> u16 {
    webhook_to(http, key, to, "spa", id).await
}

/// Opens the GET stream of session `sid` on `r` (resuming after `last`).
async fn stream(http: &reqwest::Client, r: &Replica, sid: &str, last: Option<u64>) -> SseReader {
    let mut rb = http
        .get(&r.mcp)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid);
    if let Some(l) = last {
        rb = rb.header("last-event-id", l.to_string());
    }
    let resp = rb.send().await.expect("GET stream");
    assert_eq!(resp.status(), 200, "GET stream on {}", r.mcp);
    SseReader::new(resp)
}

/// The next `n` events as (SSE id, webhook event id).
async fn next_events(sse: &mut SseReader, n: usize) -> Vec<(Option<u64>, String)> {
    let mut got = Vec::new();
    for _ in 0..n {
        let (id, e) = sse.next().await;
        got.push((
            id,
            e["params"]["event_id"].as_str().unwrap_or("").to_string(),
        ));
    }
    got
}

/// What `next_events` should see for webhooks `wh-<n>` numbered `n`.
fn numbered(ns: std::ops::RangeInclusive<u64>) -> Vec<(Option<u64>, String)> {
    ns.map(|n| (Some(n), format!("wh-{n}"))).collect()
}

/// Two replicas receiving webhooks signed by `key`, sharing a private Redis.
struct Cluster {
    key: SigningKey,
    mapping: PathBuf,
    redis: Redis,
    a: Replica,
    b: Replica,
    http: reqwest::Client,
}

impl Cluster {
    fn start() -> Cluster {
        let key = SigningKey::generate(Alg::EcdsaP256Sha256, "biz").expect("key");
        let mapping = webhook_mapping(&key);
        let redis = Redis::start();
        let a = Replica::start(&mapping, &redis.url());
        let b = Replica::start(&mapping, &redis.url());
        Cluster {
            key,
            mapping,
            redis,
            a,
            b,
            http: reqwest::Client::new(),
        }
    }
}

#[tokio::test]
async fn webhooks_fan_out_across_replicas_once_in_order_and_survive_a_failover() {
    let Cluster {
        key,
        mapping,
        redis,
        a,
        b,
        http,
    } = Cluster::start();

    // The client's session and stream live on B; the webhooks arrive at A.
    let (sid, _) = initialize(&http, &b.mcp, "2025-11-25").await;
    let mut sse = stream(&http, &b, &sid, None).await;
    for n in 1..=3 {
        assert_eq!(webhook(&http, &key, &a, &format!("wh-{n}")).await, 202);
    }
    // A retry of wh-2 (to either replica) is a duplicate, acknowledged but not sent again.
    assert_eq!(webhook(&http, &key, &b, "wh-2").await, 200);
    assert_eq!(webhook(&http, &key, &a, "wh-4").await, 202);
    assert_eq!(
        next_events(&mut sse, 4).await,
        numbered(1..=4),
        "every event once, in acceptance order, numbered the same everywhere"
    );

    // B dies; the client had processed only up to event 2 (its Last-Event-ID).
    drop(sse);
    b.kill();
    // An event acknowledged while the client is away.
    assert_eq!(webhook(&http, &key, &a, "wh-5").await, 202);
    // The client reconnects to A with its session and Last-Event-ID: 2.
    let mut sse = stream(&http, &a, &sid, Some(2)).await;
    assert_eq!(
        next_events(&mut sse, 3).await,
        numbered(3..=5),
        "nothing acknowledged upstream is lost"
    );
    // A replica started after the events were accepted has them for replay too.
    let c = Replica::start(&mapping, &redis.url());
    let mut sse = stream(&http, &c, &sid, Some(4)).await;
    assert_eq!(next_events(&mut sse, 1).await, numbered(5..=5));
}

#[tokio::test]
async fn redis_down_refuses_keyed_calls_and_webhooks_then_recovers() {
    let (backend, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "biz").expect("key");
    // The USP tools plus a webhook-receiving business, served together.
    let hooks = webhook_mapping(&key);
    let text = std::fs::read_to_string(&hooks)
        .expect("mapping")
        .replace("business: spa", "business: hooks")
        .replace("http://127.0.0.1:9/spa", &format!("http://{backend}"))
        .replace(
            "keys.json",
            &hooks.with_file_name("keys.json").display().to_string(),
        );
    std::fs::write(dir.join("hooks.yaml"), text).expect("mapping written");
    for other in ["autonym.yaml", "plain.yaml"] {
        let _ = std::fs::remove_file(dir.join(other));
    }
    let redis = Redis::start();
    let a = Replica::start(&dir, &redis.url());
    let http = reqwest::Client::new();
    let ready = |r: &Replica| {
        let url = format!("{}readyz", r.admin);
        let http = http.clone();
        async move {
            let resp = http.get(url).send().await.expect("readyz");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.expect("JSON"))
        }
    };
    let up = call(
        &http,
        &a.mcp,
        "echo_post",
        keyed(json!({"name": "x"}), "k-up"),
    )
    .await;
    assert!(up.body["result"].is_object(), "{}", up.text);

    let port = redis.stop();
    let before = hits(&seen);
    // Keyed calls fail closed: without the store, a retry could run twice.
    let refused = call(
        &http,
        &a.mcp,
        "echo_post",
        keyed(json!({"name": "x"}), "k-down"),
    )
    .await;
    assert_eq!(
        refused.body["error"]["data"]["code"], "service_unavailable",
        "{}",
        refused.text
    );
    assert_eq!(
        hits(&seen),
        before,
        "a refused keyed call never reaches the backend"
    );
    // Unkeyed calls degrade gracefully: they need no shared state.
    let plain = call(
        &http,
        &a.mcp,
        "echo_post",
        json!({"name": "x", "_meta": {"usp": {"profile": "https://agent.example/p.json"}}}),
    )
    .await;
    assert!(plain.body["result"].is_object(), "{}", plain.text);
    // No session id is handed out that Redis does not hold (other replicas would refuse it).
    let (sid, refused) = initialize(&http, &a.mcp, "2025-11-25").await;
    assert_eq!(
        (refused.status, sid.as_str()),
        (503, ""),
        "{}",
        refused.text
    );
    assert_eq!(refused.headers["retry-after"], "1");
    // Webhooks are refused with 503 (the sender retries) rather than accepted and lost.
    assert_eq!(webhook_to(&http, &key, &a, "hooks", "wh-down").await, 503);
    let (status, detail) = ready(&a).await;
    assert_eq!(status, 503, "{detail}");
    assert_eq!(detail["shared_state"]["state"], "down", "{detail}");

    // Redis comes back on the same address: portico reconnects by itself.
    let _redis = Redis::on(port);
    let mut back = false;
    for _ in 0..100 {
        let r = call(
            &http,
            &a.mcp,
            "echo_post",
            keyed(json!({"name": "x"}), "k-back"),
        )
        .await;
        if r.body["result"].is_object() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "keyed calls work again once Redis is back");
    let (status, detail) = ready(&a).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        webhook_to(&http, &key, &a, "hooks", "wh-down").await,
        202,
        "the refused webhook is accepted on retry"
    );
    // The restarted Redis starts empty (this one keeps nothing on disk), and the store works
    // as new: the key refused while Redis was down runs once on retry, then replays...
    let before = hits(&seen);
    let first = call(
        &http,
        &a.mcp,
        "echo_post",
        keyed(json!({"name": "x"}), "k-down"),
    )
    .await;
    let again = call(
        &http,
        &a.mcp,
        "echo_post",
        keyed(json!({"name": "x"}), "k-down"),
    )
    .await;
    assert!(first.body["result"].is_object(), "{}", first.text);
    assert_eq!(first.body["result"], again.body["result"], "{}", again.text);
    assert_eq!(
        hits(&seen),
        before + 1,
        "one backend call for the refused key's retries"
    );
    // ...and webhook de-duplication is back: the same event id again is a duplicate.
    assert_eq!(
        webhook_to(&http, &key, &a, "hooks", "wh-down").await,
        200,
        "a resent event after the restart is acknowledged as a duplicate"
    );
}

#[tokio::test]
async fn a_delivery_left_by_a_dead_replica_is_taken_over_by_another() {
    let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let up = healthy.clone();
    let (recv, mut received) = hook_receiver(move |_| {
        if up.load(std::sync::atomic::Ordering::SeqCst) {
            200
        } else {
            503
        }
    })
    .await;
    let event_id = |r: &Received| {
        serde_json::from_slice::<Value>(&r.body).ok()?["event_id"]
            .as_str()
            .map(str::to_string)
    };
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "biz").expect("key");
    let mapping = webhook_mapping(&key);
    // The first attempt fails; the retry would come 2 s later, from a replica that is dead by then.
    let text = std::fs::read_to_string(&mapping).expect("mapping")
        + &format!(
            "  deliver_to: [\"http://{recv}/hook\"]\n  retry: {{ initial: 2s, retries: 1, max_total: 3s, timeout: 500ms }}\n"
        );
    std::fs::write(&mapping, text).expect("mapping written");
    let redis = Redis::start();
    let a = Replica::start(&mapping, &redis.url());
    let b = Replica::start(&mapping, &redis.url());
    let http = reqwest::Client::new();

    assert_eq!(webhook(&http, &key, &a, "wh-out").await, 202);
    let first = tokio::time::timeout(Duration::from_secs(10), received.recv())
        .await
        .expect("A's first attempt within 10 s")
        .expect("receiver open");
    assert_eq!(
        (first.status, event_id(&first)),
        (503, Some("wh-out".into()))
    );
    a.kill();
    healthy.store(true, std::sync::atomic::Ordering::SeqCst);

    // A's lease ends (its whole schedule, ~6 s) and B sends the event from the first attempt.
    let again = tokio::time::timeout(Duration::from_secs(20), received.recv())
        .await
        .expect("B takes the delivery over within 20 s")
        .expect("receiver open");
    assert_eq!(
        (again.status, event_id(&again)),
        (200, Some("wh-out".into()))
    );
    // Delivered once more, not again and again: the lease ended with the delivery.
    let more = tokio::time::timeout(Duration::from_secs(3), received.recv()).await;
    assert!(more.is_err(), "no further delivery after the 200");
    drop(b);
}

/// `resources/read` of a booking resource at 2026-07-28 on `r`: the latest event's text.
async fn latest_booking_event(http: &reqwest::Client, r: &Replica, uri: &str) -> String {
    let read = send(modern(
        http,
        &r.mcp,
        9,
        "resources/read",
        json!({ "uri": uri }),
    ))
    .await;
    read.result()["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_2026_client_re_listens_on_another_replica_and_reads_what_it_missed() {
    let Cluster {
        key,
        mapping,
        redis,
        a,
        b,
        http,
    } = Cluster::start();
    let uri = "usp://bookings/B-1";
    let listen = json!({"notifications": {"resourceSubscriptions": [uri]}});

    // The listen stream is on B; the webhook arrives at A.
    let resp = modern(&http, &b.mcp, 1, "subscriptions/listen", listen.clone())
        .send()
        .await
        .expect("listen on B");
    let mut sse = SseReader::new(resp);
    let (_, ack) = sse.next().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(webhook(&http, &key, &a, "wh-1").await, 202);
    let (_, updated) = sse.next().await;
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], uri);

    // B dies; an event is acknowledged while the client is away.
    drop(sse);
    b.kill();
    assert_eq!(webhook(&http, &key, &a, "wh-2").await, 202);
    // The client re-listens on A (2026-07-28 has no resumption) and reads the resource.
    let resp = modern(&http, &a.mcp, 2, "subscriptions/listen", listen)
        .send()
        .await
        .expect("listen on A");
    let mut sse = SseReader::new(resp);
    let (_, ack) = sse.next().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let latest = latest_booking_event(&http, &a, uri).await;
    assert!(
        latest.contains("wh-2"),
        "the missed event is readable: {latest}"
    );
    // Live events keep coming on the new stream.
    assert_eq!(webhook(&http, &key, &a, "wh-3").await, 202);
    let (_, updated) = sse.next().await;
    assert_eq!(updated["params"]["uri"], uri);
    // A replica started afterwards knows the booking's latest event too.
    let c = Replica::start(&mapping, &redis.url());
    let latest = latest_booking_event(&http, &c, uri).await;
    assert!(latest.contains("wh-3"), "{latest}");
}

#[tokio::test]
async fn security_stores_are_shared_between_replicas_and_fail_closed() {
    use portico::auth::store::{Bound, Issued};
    use portico::state::Shared;
    let redis = Redis::start();
    // Two processes' worth of stores on one Redis (each with its own connection).
    let leak =
        |s: std::sync::Arc<Shared>| -> &'static std::sync::Arc<Shared> { Box::leak(Box::new(s)) };
    let one = leak(Shared::new(&redis.url(), "sec").expect("state"));
    let two = leak(Shared::new(&redis.url(), "sec").expect("state"));
    let (a, b) = (
        portico::state::auth::stores(one),
        portico::state::auth::stores(two),
    );

    // Identity binding (USP §10.1.6): first contact on A, checked on B.
    assert_eq!(
        a.identities
            .bind("spa", "key-1", "https://p.example/a")
            .await,
        Bound::New
    );
    assert_eq!(
        b.identities
            .bind("spa", "key-1", "https://p.example/a")
            .await,
        Bound::Same
    );
    assert_eq!(
        b.identities
            .bind("spa", "key-1", "https://p.example/b")
            .await,
        Bound::Conflict
    );
    assert_eq!(
        b.identities
            .bind("spa", "key-2", "https://p.example/a")
            .await,
        Bound::New
    );
    // A proof's jti used on A is a replay on B.
    assert!(a.replay.first_use("spa", "jti-1").await);
    assert!(!b.replay.first_use("spa", "jti-1").await);
    assert!(b.replay.first_use("hotel", "jti-1").await, "per business");
    // A credential issued on A is known on B; Redis holds only its digest.
    let issued = Issued {
        business: "spa".into(),
        resource: "B-1".into(),
        scope: vec!["usp_bookings_get".into()],
        jkt: Some("thumbprint".into()),
        expires_at: 4_000_000_000,
        principal: "key-1".into(),
    };
    a.credentials
        .put("secret-credential-value", issued.clone())
        .await;
    assert_eq!(
        b.credentials.get("secret-credential-value").await,
        Some(issued)
    );
    assert_eq!(b.credentials.get("another-value").await, None);
    let keys = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "--scan"])
        .output()
        .expect("redis-cli");
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(keys.contains("{sec}:cred:"), "{keys}");
    assert!(!keys.contains("secret-credential-value"), "{keys}");
    // A nonce issued by A's challenge is accepted on B, for that business only.
    let nonce = a.nonces.issue("spa").await;
    assert!(b.nonces.valid("spa", &nonce).await);
    assert!(!b.nonces.valid("hotel", &nonce).await);
    // A booking's owner recorded on A is its owner on B (reads and deliveries, auth::access).
    assert!(!b.owners.known("spa", "B-7").await);
    a.owners.record("spa", "B-7", "api_key:a").await;
    a.owners.record("spa", "B-8", "api_key:a").await;
    a.owners.record("spa", "B-7", "api_key:a").await;
    assert!(b.owners.known("spa", "B-7").await);
    assert!(b.owners.owns("spa", "B-7", "api_key:a").await);
    assert!(!b.owners.owns("spa", "B-7", "api_key:b").await);
    assert!(!b.owners.owns("hotel", "B-7", "api_key:a").await);
    assert_eq!(b.owners.owned("spa", "api_key:a").await, ["B-7", "B-8"]);

    // Redis down: every answer is the refusing one.
    redis.stop();
    assert!(
        !a.replay.first_use("spa", "jti-2").await,
        "an unverifiable jti is a replay"
    );
    assert_eq!(
        a.identities
            .bind("spa", "key-3", "https://p.example/a")
            .await,
        Bound::Conflict
    );
    assert_eq!(a.credentials.get("secret-credential-value").await, None);
    assert!(!a.nonces.valid("spa", &nonce).await);
    assert!(
        !a.owners.owns("spa", "B-7", "api_key:a").await,
        "an owner that cannot be looked up is no owner"
    );
}

/// A mapping whose tools need no backend for `tools/list`.
fn session_mapping() -> PathBuf {
    fixture_with_backend("gateway", "127.0.0.1:9").join("usp.yaml")
}

/// The HTTP status of `tools/list` in session `sid` on `r`.
async fn use_session(http: &reqwest::Client, r: &Replica, sid: &str) -> u16 {
    let a = send(legacy(
        http,
        &r.mcp,
        sid,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ))
    .await;
    if a.status == 200 {
        assert!(a.result()["tools"].is_array(), "{}", a.text);
    }
    a.status
}

/// `n` `initialize` requests to `r`, 32 at a time: the session ids handed out, and the refusals
/// as (status, `Retry-After` in seconds).
async fn flood(http: &reqwest::Client, r: &Replica, n: usize) -> (Vec<String>, Vec<(u16, u64)>) {
    use futures_util::StreamExt;
    let answers: Vec<(String, Answer)> = futures_util::stream::iter(0..n)
        .map(|_| initialize(http, &r.mcp, "2025-11-25"))
        .buffer_unordered(32)
        .collect()
        .await;
    let (mut made, mut refused) = (Vec::new(), Vec::new());
    for (sid, a) in answers {
        if a.status == 200 {
            assert!(!sid.is_empty(), "a 200 without a session id: {}", a.text);
            made.push(sid);
        } else {
            assert!(sid.is_empty(), "a refusal with a session id: {}", a.text);
            let retry = a
                .headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{} without Retry-After: {}", a.status, a.text));
            assert!(retry >= 1, "{}", a.text);
            refused.push((a.status, retry));
        }
    }
    (made, refused)
}

/// Three replicas sharing a private Redis, sessions ending after `idle` unused.
fn three_replicas(idle: &str) -> (Redis, Vec<Replica>) {
    let mapping = session_mapping();
    let redis = Redis::start();
    let flags = ["--session-idle", idle];
    let replicas = (0..3)
        .map(|_| Replica::start_with(&mapping, Some(&redis.url()), &flags))
        .collect();
    (redis, replicas)
}

/// The HTTP status of `DELETE` of session `sid` on `r`.
async fn end_session(http: &reqwest::Client, r: &Replica, sid: &str) -> u16 {
    let resp = http
        .delete(&r.mcp)
        .header("mcp-session-id", sid)
        .send()
        .await;
    resp.expect("DELETE").status().as_u16()
}

async fn metrics(http: &reqwest::Client, r: &Replica) -> String {
    let url = format!("{}metrics", r.admin);
    let resp = http.get(url).send().await.expect("metrics");
    resp.text().await.expect("metrics text")
}

#[tokio::test]
async fn a_session_flood_gets_usable_sessions_or_a_503_never_a_dropped_id() {
    let mapping = session_mapping();
    let redis = Redis::start();
    let flags = ["--max-sessions", "100", "--session-rate", "0"];
    let a = Replica::start_with(&mapping, Some(&redis.url()), &flags);
    let b = Replica::start_with(&mapping, Some(&redis.url()), &flags);
    let http = reqwest::Client::new();

    let (made, refused) = flood(&http, &a, 3000).await;
    assert_eq!(made.len(), 100, "the cap, all of it");
    assert_eq!(refused.len(), 2900);
    assert!(
        refused.iter().all(|&(status, _)| status == 503),
        "past the cap: 503 with Retry-After"
    );
    // Every id handed out works, on the replica that made it and (it was stored in the shared
    // state before it was handed out) on the other.
    for sid in &made {
        assert_eq!(use_session(&http, &a, sid).await, 200, "{sid} on A");
        assert_eq!(use_session(&http, &b, sid).await, 200, "{sid} on B");
    }
    let refusals = metrics(&http, &a).await;
    assert_eq!(
        sample(&refusals, "portico_sessions_refused_total{reason=\"full\"}"),
        Some(2900.0),
        "{refusals}"
    );
    // A DELETE makes room for exactly one more.
    assert_eq!(end_session(&http, &a, &made[0]).await, 200);
    let (again, refused) = flood(&http, &a, 5).await;
    assert_eq!((again.len(), refused.len()), (1, 4));
    assert_eq!(use_session(&http, &b, &again[0]).await, 200);
}

#[tokio::test]
async fn session_creation_is_rate_limited_per_client_address() {
    let mapping = session_mapping();
    let flags = ["--session-rate", "1", "--session-burst", "20"];
    let r = Replica::start_with(&mapping, None, &flags);
    let http = reqwest::Client::new();
    let (made, refused) = flood(&http, &r, 300).await;
    // The burst, and the odd token refilled while the flood ran.
    assert!((20..=25).contains(&made.len()), "{} made", made.len());
    assert_eq!(made.len() + refused.len(), 300);
    assert!(
        refused.iter().all(|&(status, _)| status == 429),
        "past the rate: 429 with Retry-After"
    );
    for sid in &made {
        assert_eq!(use_session(&http, &r, sid).await, 200, "{sid}");
    }
    let m = metrics(&http, &r).await;
    assert_eq!(
        sample(
            &m,
            "portico_sessions_refused_total{reason=\"rate_limited\"}"
        ),
        Some(refused.len() as f64),
        "{m}"
    );
}

#[tokio::test]
async fn a_session_deleted_on_one_replica_is_refused_on_every_replica_at_once() {
    // A short idle time makes the open stream's checks of the shared record frequent.
    let (_redis, replicas) = three_replicas("4s");
    let [a, b, c] = &replicas[..] else {
        unreachable!()
    };
    let http = reqwest::Client::new();
    let (sid, _) = initialize(&http, &a.mcp, "2025-11-25").await;
    let (other, _) = initialize(&http, &b.mcp, "2025-11-25").await;
    // Every replica holds its own copy of the session now, and C a GET stream.
    for r in &replicas {
        assert_eq!(use_session(&http, r, &sid).await, 200);
    }
    let stream = http
        .get(&c.mcp)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .expect("GET stream");
    assert_eq!(stream.status(), 200);

    assert_eq!(end_session(&http, a, &sid).await, 200);
    // At once: the very next request on each other replica.
    assert_eq!(use_session(&http, b, &sid).await, 404, "B");
    assert_eq!(use_session(&http, c, &sid).await, 404, "C");
    assert_eq!(use_session(&http, a, &sid).await, 404, "A");
    assert_eq!(end_session(&http, b, &sid).await, 404, "ended already");
    // C's open stream ends with the session (at C's next check of the shared record).
    let mut body = stream.bytes_stream();
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        use futures_util::StreamExt;
        while let Some(chunk) = body.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the GET stream of an ended session closes");
    // Another session is untouched.
    for r in &replicas {
        assert_eq!(use_session(&http, r, &other).await, 200);
    }
}

#[tokio::test]
async fn a_session_busy_on_one_replica_outlives_the_idle_expiry_on_the_others() {
    let (_redis, replicas) = three_replicas("2s");
    let [a, b, c] = &replicas[..] else {
        unreachable!()
    };
    let http = reqwest::Client::new();
    let (busy, _) = initialize(&http, &a.mcp, "2025-11-25").await;
    let (idle, _) = initialize(&http, &a.mcp, "2025-11-25").await;
    assert_eq!(use_session(&http, c, &idle).await, 200);
    // `busy` is used only on B, for two and a half idle periods.
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < until {
        assert_eq!(use_session(&http, b, &busy).await, 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(use_session(&http, c, &busy).await, 200, "valid on C");
    assert_eq!(use_session(&http, a, &busy).await, 200, "valid on A");
    // The one nobody used has expired everywhere, on the replicas that held it too.
    for r in &replicas {
        assert_eq!(use_session(&http, r, &idle).await, 404);
    }
}
