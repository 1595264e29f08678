//! Authorization of every read and every delivery over real HTTP: the demo spa backend (which
//! sends a signed webhook for each booking) behind portico with an API-key policy for two
//! partners, mapped resources and a prompt embedding one. For each path (GET stream,
//! `subscriptions/listen`, `resources/read`, `resources/subscribe`, `resources/list`, resource
//! templates, prompts, mapped REST resources) an anonymous caller and a second partner see
//! nothing of the first partner's booking, while the first partner sees it. `tools/call` on a
//! booking (the backend's requests counted through a relay) and proof-only readers too.

mod common;
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEY_A: &str = "partner-a-key-0123456789abcdef";
const KEY_B: &str = "partner-b-key-0123456789abcdef";
const KEY_DESK: &str = "front-desk-key-0123456789abcdef";
const PROFILE: &str = "https://agent.example/profiles/a.json";
const PROFILE_B: &str = "https://agent.example/profiles/b.json";

/// The policy, resources and prompt added to the demo spa mapping.
const EXTRA: &str = r#"
authorization:
  accepted_mechanisms: [api_key, booking_scoped_credential, platform_key_pop, http_message_signature]
  api_keys:
    - { name: partner-a, value: "partner-a-key-0123456789abcdef" }
    - { name: partner-b, value: "partner-b-key-0123456789abcdef" }
    - { name: front-desk, value: "front-desk-key-0123456789abcdef", business: true }
  platform_key_pop: { audiences: ["https://seaside-spa.example/.well-known/usp"] }
  http_message_signature: { allow_hosts: [127.0.0.1] }
  booking_scoped_credential:
    issue: { usp_bookings_create: /booking/id }
  resources: { "spa://catalog": public }

resources:
  "spa://catalog":
    http: GET /treatments
    name: catalog
  "spa://catalog/staff":
    http: GET /treatments
    name: staff catalog
  "spa://appointments/{booking_id}":
    http: GET /appointments/{booking_id}
    name: appointment
    mime_type: application/json

prompts:
  appointment_brief:
    description: Briefs an agent on one appointment.
    arguments:
      booking_id: { description: The booking, required: true }
    messages:
      - resource_text: "spa://appointments/{{ booking_id }}"
      - text: Summarise this appointment.
"#;

/// How long a refused stream is watched for a frame it must not get: past the time an event
/// about a booking whose owner is not yet recorded may wait for it.
const QUIET: Duration = Duration::from_millis(4_500);

struct Env {
    gw: portico::app::Running,
    http: reqwest::Client,
    url: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    dir: std::path::PathBuf,
    /// `METHOD /path` of every request portico sent the backend.
    hits: Arc<Mutex<Vec<String>>>,
}

/// Passes a request on to the demo backend at `backend`, noting it in `hits`.
async fn relay(
    backend: std::net::SocketAddr,
    hits: Arc<Mutex<Vec<String>>>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    hits.lock()
        .unwrap()
        .push(format!("{} {}", parts.method, parts.uri.path()));
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = body.collect().await.unwrap().to_bytes();
    let mut rb = reqwest::Client::new()
        .request(parts.method.clone(), format!("http://{backend}{target}"))
        .body(body);
    for (k, v) in &parts.headers {
        if k != "host" && k != "content-length" {
            rb = rb.header(k, v);
        }
    }
    let resp = rb.send().await.unwrap();
    let mut out = hyper::Response::builder().status(resp.status().as_u16());
    if let Some(ct) = resp.headers().get("content-type") {
        out = out.header("content-type", ct);
    }
    out.body(http_body_util::Full::new(resp.bytes().await.unwrap()))
        .unwrap()
}

impl Env {
    async fn start() -> Env {
        let (outbox, events) = tokio::sync::mpsc::channel(1024);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backend = listener.local_addr().unwrap();
        let serve = portico::demo::backend::Backend::new()
            .with_outbox(outbox)
            .serve(listener);
        let backend_task = tokio::spawn(async move {
            let _ = serve.await;
        });
        // portico reaches the backend through a relay that counts its requests.
        let hits = Arc::new(Mutex::new(Vec::new()));
        let relay_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relayed = relay_listener.local_addr().unwrap();
        let noted = hits.clone();
        serve_with(relay_listener, move |req| {
            relay(backend, noted.clone(), req)
        });
        let dir = portico::demo::write_files(relayed, None).unwrap();
        let spa = dir.join("mappings/demo-spa.yaml");
        let mut text = std::fs::read_to_string(&spa).unwrap();
        text.push_str(EXTRA);
        std::fs::write(&spa, text).unwrap();
        let gw = gateway(&[spa]).await;
        let hooks = url::Url::parse(&format!(
            "http://{}/webhooks/{}",
            gw.addr,
            portico::demo::WEBHOOK_BUSINESS
        ))
        .unwrap();
        let sender = tokio::spawn(portico::demo::webhooks::run(events, hooks));
        let url = gw.mcp_url();
        Env {
            gw,
            http: reqwest::Client::new(),
            url,
            tasks: vec![backend_task, sender],
            dir,
            hits,
        }
    }

    /// How many requests portico has sent the backend.
    fn hits(&self) -> usize {
        self.hits.lock().unwrap().len()
    }

    /// `tools/call` of `name` with `key` (when given) as `X-API-Key`.
    async fn tool(&self, key: Option<&str>, name: &str, args: Value) -> Answer {
        let params = json!({"name": name, "arguments": args});
        self.modern(key, "tools/call", params).await
    }

    async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.gw.stop().await.unwrap();
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// A 2026-07-28 request with `key` (when given) as `X-API-Key`.
    async fn modern(&self, key: Option<&str>, method: &str, params: Value) -> Answer {
        let mut rb = modern(&self.http, &self.url, 1, method, params);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        send(rb).await
    }

    /// A 2025-era session for `key`'s requests.
    async fn session(&self) -> String {
        let (sid, a) = initialize(&self.http, &self.url, "2025-11-25").await;
        assert_eq!(a.status, 200, "{}", a.text);
        sid
    }

    async fn legacy(&self, key: Option<&str>, sid: &str, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
        let mut rb = legacy(&self.http, &self.url, sid, body);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        send(rb).await
    }

    /// The session's GET stream, opened with `key`.
    async fn stream(&self, key: Option<&str>, sid: &str) -> Sse {
        let mut rb = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        Sse::new(resp)
    }

    /// A 2026-07-28 `subscriptions/listen` stream opened with `key`: its acknowledgement and
    /// the stream.
    async fn listen(&self, key: Option<&str>, uris: &[&str]) -> (Value, Sse) {
        let params = json!({"notifications": {
            "resourceSubscriptions": uris, "dev.portico/webhooks": true}});
        let mut rb = modern(&self.http, &self.url, 7, "subscriptions/listen", params);
        if let Some(k) = key {
            rb = rb.header("x-api-key", k);
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut sse = Sse::new(resp);
        let ack = sse.next(Duration::from_secs(5)).await.expect("an ack");
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        (ack, sse)
    }

    /// A started environment in which partner A booked, and the booking's webhook event
    /// arrived: the booking id and its `usp://bookings/{id}` resource.
    async fn booked() -> (Env, String, String) {
        let env = Env::start().await;
        let id = env.book().await;
        env.event_arrived(&id).await;
        let uri = format!("usp://bookings/{id}");
        (env, id, uri)
    }

    /// Partner A books a massage; the booking id.
    async fn book(&self) -> String {
        let sc = self.book_result().await;
        sc["booking"]["id"].as_str().unwrap_or_default().to_string()
    }

    /// `usp_bookings_create` arguments for Alice in the first free massage slot.
    async fn create_args(&self) -> Value {
        let a = self
            .modern(
                None,
                "tools/call",
                json!({"name": "usp_availability_query", "arguments": {
                    "service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-03"}}),
            )
            .await;
        let slot = a.sc()["slots"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no slot: {}", a.text))
            .to_string();
        json!({"service_id": "MASSAGE-60", "slot_id": slot,
            "buyer": {"first_name": "Alice", "last_name": "Smith", "email": "alice@example.com"},
            "_meta": {"usp": {"profile": PROFILE,
                              "idempotency_key": uuid::Uuid::new_v4().to_string()}}})
    }

    /// Partner A books a massage; the tool's `structuredContent`.
    async fn book_result(&self) -> Value {
        let args = self.create_args().await;
        let a = self
            .modern(
                Some(KEY_A),
                "tools/call",
                json!({"name": "usp_bookings_create", "arguments": args}),
            )
            .await;
        assert!(
            a.sc()["booking"]["id"].is_string(),
            "not booked: {}",
            a.text
        );
        a.sc().clone()
    }

    /// Partner A books a massage; the booking id and its booking-scoped credential.
    async fn book_with_credential(&self) -> (String, String) {
        let sc = self.book_result().await;
        let id = sc["booking"]["id"].as_str().unwrap_or_default().to_string();
        let credential = sc["booking_scoped_credential"]["value"]
            .as_str()
            .unwrap_or_else(|| panic!("no credential: {sc}"))
            .to_string();
        (id, credential)
    }

    /// Partner A cancels the booking (another webhook event about it).
    async fn cancel(&self, id: &str) {
        let args = json!({"booking_id": id, "reason": "test",
            "_meta": {"usp": {"profile": PROFILE,
                              "idempotency_key": uuid::Uuid::new_v4().to_string()}}});
        let a = self
            .modern(
                Some(KEY_A),
                "tools/call",
                json!({"name": "usp_bookings_cancel", "arguments": args}),
            )
            .await;
        assert_eq!(a.sc()["booking"]["status"], "canceled", "{}", a.text);
    }

    /// Waits until the booking's webhook event arrived (the business can read it).
    async fn event_arrived(&self, id: &str) {
        let uri = format!("usp://bookings/{id}");
        for _ in 0..100 {
            let a = self
                .modern(Some(KEY_DESK), "resources/read", json!({"uri": uri}))
                .await;
            if a.result()["contents"].is_array() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the webhook event for {id} never arrived");
    }
}

/// A minimal SSE reader: the JSON of each `data:` line, in order; comments are skipped.
struct Sse {
    resp: reqwest::Response,
    buf: String,
}

impl Sse {
    fn new(resp: reqwest::Response) -> Sse {
        Sse {
            resp,
            buf: String::new(),
        }
    }

    /// The next message within `wait`, or `None`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) {
                    return Some(serde_json::from_str(data.trim()).expect("JSON data"));
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk()).await;
            match chunk {
                Ok(Ok(Some(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(_) | Err(_) => return None,
            }
        }
    }

    /// Asserts that nothing arrives for [`QUIET`].
    async fn stays_quiet(&mut self, who: &str) {
        if let Some(m) = self.next(QUIET).await {
            panic!("{who} received {m}");
        }
    }
}

/// The binding's refusal of a request that presented no credential (USP: -32006
/// `authentication_required`), naming nothing of the booking.
fn unauthenticated(a: &Answer, what: &str) {
    assert_eq!(
        a.body["error"]["data"]["code"], "authentication_required",
        "{what}: {}",
        a.text
    );
    assert!(!a.text.contains("alice"), "{what}: {}", a.text);
}

fn booking_of(m: &Value) -> &str {
    m["params"]["booking_id"].as_str().unwrap_or("")
}

/// 2025-era GET streams: the booking's webhook notification reaches partner A's stream only.
#[tokio::test]
async fn get_stream_delivers_a_booking_event_only_to_its_owner() {
    let env = Env::start().await;
    let (sa, sb, sn) = (
        env.session().await,
        env.session().await,
        env.session().await,
    );
    let mut a = env.stream(Some(KEY_A), &sa).await;
    let mut b = env.stream(Some(KEY_B), &sb).await;
    let mut anon = env.stream(None, &sn).await;
    let id = env.book().await;
    let got = a.next(Duration::from_secs(10)).await.expect("A's event");
    assert_eq!(got["method"], "usp_webhook");
    assert_eq!(booking_of(&got), id);
    assert_eq!(got["params"]["data"]["buyer"]["email"], "alice@example.com");
    b.stays_quiet("partner B").await;
    anon.stays_quiet("an anonymous stream").await;
    // A replay with Last-Event-ID is judged the same way.
    let resp = env
        .http
        .get(&env.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sb)
        .header("last-event-id", "0")
        .header("x-api-key", KEY_B)
        .send()
        .await
        .unwrap();
    Sse::new(resp).stays_quiet("partner B's replay").await;
    env.stop().await;
}

/// 2026-07-28 `subscriptions/listen`: the acknowledgement honours the booking resource for its
/// owner only, and only the owner's stream carries the booking's notifications.
#[tokio::test]
async fn listen_streams_carry_a_booking_only_to_its_owner() {
    let (env, id, uri) = Env::booked().await;
    let (ack_a, mut a) = env.listen(Some(KEY_A), &[&uri]).await;
    let (ack_b, mut b) = env.listen(Some(KEY_B), &[&uri]).await;
    let (ack_n, mut anon) = env.listen(None, &[&uri]).await;
    assert_eq!(
        ack_a["params"]["notifications"]["resourceSubscriptions"],
        json!([uri])
    );
    for ack in [&ack_b, &ack_n] {
        assert!(
            ack["params"]["notifications"]
                .get("resourceSubscriptions")
                .is_none(),
            "{ack}"
        );
    }
    env.cancel(&id).await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let m = a.next(Duration::from_secs(10)).await.expect("A's frames");
        seen.push(m["method"].as_str().unwrap_or("").to_string());
        if m["method"] == "usp_webhook" {
            assert_eq!(booking_of(&m), id);
            assert_eq!(m["params"]["event"], "booking.canceled");
        } else {
            assert_eq!(m["params"]["uri"], uri.as_str());
        }
    }
    seen.sort();
    assert_eq!(seen, ["notifications/resources/updated", "usp_webhook"]);
    b.stays_quiet("partner B").await;
    anon.stays_quiet("an anonymous listener").await;
    env.stop().await;
}

/// `resources/read` of the webhook-fed booking resource, at 2026-07-28 and in a 2025 session.
#[tokio::test]
async fn booking_resource_reads_are_the_owners() {
    let (env, id, uri) = Env::booked().await;
    let a = env
        .modern(Some(KEY_A), "resources/read", json!({"uri": uri}))
        .await;
    let text = a.result()["contents"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains(&id) && text.contains("alice@example.com"),
        "{}",
        a.text
    );
    let b = env
        .modern(Some(KEY_B), "resources/read", json!({"uri": uri}))
        .await;
    assert_eq!(b.error_code(), Some(-32602), "{}", b.text);
    assert!(!b.text.contains("alice"), "{}", b.text);
    let anon = env
        .modern(None, "resources/read", json!({"uri": uri}))
        .await;
    unauthenticated(&anon, "");
    assert!(!anon.text.contains("alice"), "{}", anon.text);
    // The same in a 2025 session: -32002 for partner B, a refusal for no credential.
    let sid = env.session().await;
    let b = env
        .legacy(Some(KEY_B), &sid, "resources/read", json!({"uri": uri}))
        .await;
    assert_eq!(b.error_code(), Some(-32002), "{}", b.text);
    let anon = env
        .legacy(None, &sid, "resources/read", json!({"uri": uri}))
        .await;
    unauthenticated(&anon, "");
    let a = env
        .legacy(Some(KEY_A), &sid, "resources/read", json!({"uri": uri}))
        .await;
    assert!(a.text.contains("alice@example.com"), "{}", a.text);
    env.stop().await;
}

/// `resources/subscribe` (2025 sessions): only the owner may subscribe, and only its stream
/// gets `notifications/resources/updated`.
#[tokio::test]
async fn booking_subscriptions_are_the_owners() {
    let (env, id, uri) = Env::booked().await;
    let (sa, sb, sn) = (
        env.session().await,
        env.session().await,
        env.session().await,
    );
    let b = env
        .legacy(Some(KEY_B), &sb, "resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(b.error_code(), Some(-32002), "{}", b.text);
    let anon = env
        .legacy(None, &sn, "resources/subscribe", json!({"uri": uri}))
        .await;
    unauthenticated(&anon, "");
    let a = env
        .legacy(Some(KEY_A), &sa, "resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(a.result(), &json!({}), "{}", a.text);
    // Streams filtered to resource updates only (no webhook notifications).
    let open = |key: Option<&'static str>, sid: String| {
        let env = &env;
        async move {
            let mut rb = env
                .http
                .get(format!("{}?events=none", env.url))
                .header("accept", "text/event-stream")
                .header("mcp-session-id", sid);
            if let Some(k) = key {
                rb = rb.header("x-api-key", k);
            }
            Sse::new(rb.send().await.unwrap())
        }
    };
    let mut sa_stream = open(Some(KEY_A), sa).await;
    let mut sb_stream = open(Some(KEY_B), sb).await;
    let mut sn_stream = open(None, sn).await;
    env.cancel(&id).await;
    let m = sa_stream
        .next(Duration::from_secs(10))
        .await
        .expect("A's update");
    assert_eq!(m["method"], "notifications/resources/updated");
    assert_eq!(m["params"]["uri"], uri.as_str());
    sb_stream.stays_quiet("partner B").await;
    sn_stream.stays_quiet("an anonymous session").await;
    env.stop().await;
}

/// `resources/list`: the owner's list names its booking; partner B's and an anonymous list do
/// not, and privileged mapped resources are not listed to anonymous callers.
#[tokio::test]
async fn resource_lists_name_only_the_callers_bookings() {
    let (env, _, uri) = Env::booked().await;
    let uris = |a: &Answer| -> Vec<String> {
        a.result()["resources"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", a.text))
            .iter()
            .filter_map(|r| r["uri"].as_str().map(str::to_string))
            .collect()
    };
    let a = env.modern(Some(KEY_A), "resources/list", json!({})).await;
    assert_eq!(
        uris(&a),
        ["spa://catalog", "spa://catalog/staff", uri.as_str()]
    );
    assert_eq!(a.result()["cacheScope"], "private");
    let b = env.modern(Some(KEY_B), "resources/list", json!({})).await;
    assert_eq!(uris(&b), ["spa://catalog", "spa://catalog/staff"]);
    let anon = env.modern(None, "resources/list", json!({})).await;
    assert_eq!(uris(&anon), ["spa://catalog"]);
    // A 2025 session lists the same way.
    let sid = env.session().await;
    let a = env
        .legacy(Some(KEY_A), &sid, "resources/list", json!({}))
        .await;
    assert!(uris(&a).contains(&uri), "{}", a.text);
    let b = env
        .legacy(Some(KEY_B), &sid, "resources/list", json!({}))
        .await;
    assert!(!uris(&b).contains(&uri), "{}", b.text);
    env.stop().await;
}

/// Resource templates: the appointment template is listed and completed for partners only, and
/// a URI made from it reads partner A's booking for partner A alone.
#[tokio::test]
async fn templates_are_listed_to_partners_and_read_by_the_owner() {
    let env = Env::start().await;
    let id = env.book().await;
    let template = "spa://appointments/{booking_id}";
    let listed = |a: &Answer| -> bool {
        a.result()["resourceTemplates"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", a.text))
            .iter()
            .any(|t| t["uriTemplate"] == template)
    };
    for key in [KEY_A, KEY_B] {
        let l = env
            .modern(Some(key), "resources/templates/list", json!({}))
            .await;
        assert!(listed(&l), "{}", l.text);
    }
    let anon = env
        .modern(None, "resources/templates/list", json!({}))
        .await;
    assert!(!listed(&anon), "{}", anon.text);
    let complete = json!({"ref": {"type": "ref/resource", "uri": template},
                          "argument": {"name": "booking_id", "value": ""}});
    let c = env
        .modern(None, "completion/complete", complete.clone())
        .await;
    assert_eq!(c.error_code(), Some(-32602), "{}", c.text);
    let c = env
        .modern(Some(KEY_B), "completion/complete", complete)
        .await;
    assert!(c.result()["completion"]["values"].is_array(), "{}", c.text);
    let uri = format!("spa://appointments/{id}");
    let b = env
        .modern(Some(KEY_B), "resources/read", json!({"uri": uri}))
        .await;
    assert_eq!(b.error_code(), Some(-32602), "{}", b.text);
    let anon = env
        .modern(None, "resources/read", json!({"uri": uri}))
        .await;
    unauthenticated(&anon, "");
    let a = env
        .modern(Some(KEY_A), "resources/read", json!({"uri": uri}))
        .await;
    assert!(a.text.contains("alice@example.com"), "{}", a.text);
    env.stop().await;
}

/// Prompts that embed a resource render it only for a caller who may read it.
#[tokio::test]
async fn prompts_embed_a_booking_only_for_its_owner() {
    let env = Env::start().await;
    let id = env.book().await;
    let params = json!({"name": "appointment_brief", "arguments": {"booking_id": id}});
    let a = env.modern(Some(KEY_A), "prompts/get", params.clone()).await;
    let first = &a.result()["messages"][0]["content"]["text"];
    assert!(
        first
            .as_str()
            .is_some_and(|t| t.contains("alice@example.com")),
        "{}",
        a.text
    );
    let b = env.modern(Some(KEY_B), "prompts/get", params.clone()).await;
    assert_eq!(b.error_code(), Some(-32602), "{}", b.text);
    assert!(!b.text.contains("alice"), "{}", b.text);
    let anon = env.modern(None, "prompts/get", params.clone()).await;
    unauthenticated(&anon, "");
    assert!(!anon.text.contains("alice"), "{}", anon.text);
    // In a 2025 session too.
    let sid = env.session().await;
    let b = env.legacy(Some(KEY_B), &sid, "prompts/get", params).await;
    assert!(
        b.error_code().is_some() && !b.text.contains("alice"),
        "{}",
        b.text
    );
    env.stop().await;
}

/// Mapped REST resources in a 2025 session: reads and subscriptions of partner A's appointment
/// are partner A's; the public catalog stays open to everyone.
#[tokio::test]
async fn mapped_rest_resources_are_the_owners() {
    let env = Env::start().await;
    let id = env.book().await;
    let uri = format!("spa://appointments/{id}");
    let sid = env.session().await;
    for method in ["resources/read", "resources/subscribe"] {
        let b = env
            .legacy(Some(KEY_B), &sid, method, json!({"uri": uri}))
            .await;
        assert_eq!(b.error_code(), Some(-32002), "{method}: {}", b.text);
        assert!(!b.text.contains("alice"), "{}", b.text);
        let anon = env.legacy(None, &sid, method, json!({"uri": uri})).await;
        unauthenticated(&anon, method);
    }
    let a = env
        .legacy(Some(KEY_A), &sid, "resources/read", json!({"uri": uri}))
        .await;
    let text = a.result()["contents"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("alice@example.com"), "{}", a.text);
    let a = env
        .legacy(
            Some(KEY_A),
            &sid,
            "resources/subscribe",
            json!({"uri": uri}),
        )
        .await;
    assert_eq!(a.result(), &json!({}), "{}", a.text);
    // A privileged resource without an owned subject: any partner, never anonymous.
    let anon = env
        .legacy(
            None,
            &sid,
            "resources/read",
            json!({"uri": "spa://catalog/staff"}),
        )
        .await;
    unauthenticated(&anon, "");
    let b = env
        .legacy(
            Some(KEY_B),
            &sid,
            "resources/read",
            json!({"uri": "spa://catalog/staff"}),
        )
        .await;
    assert!(b.result()["contents"].is_array(), "{}", b.text);
    let open = env
        .legacy(
            None,
            &sid,
            "resources/read",
            json!({"uri": "spa://catalog"}),
        )
        .await;
    assert!(open.result()["contents"].is_array(), "{}", open.text);
    env.stop().await;
}

/// A booking-scoped credential (issued to partner A with the booking) is a grant of that one
/// booking: its bearer reads it and lists it, and nothing of partner A's other bookings.
#[tokio::test]
async fn a_booking_scoped_credential_reads_its_own_booking_only() {
    let env = Env::start().await;
    let (id, credential) = env.book_with_credential().await;
    let other = env.book().await;
    env.event_arrived(&id).await;
    env.event_arrived(&other).await;
    let bearer = format!("Bearer {credential}");
    let read = |uri: String| {
        let rb = modern(
            &env.http,
            &env.url,
            1,
            "resources/read",
            json!({"uri": uri}),
        );
        send(rb.header("authorization", bearer.clone()))
    };
    for uri in [
        format!("usp://bookings/{id}"),
        format!("spa://appointments/{id}"),
    ] {
        let a = read(uri.clone()).await;
        assert!(a.text.contains("alice@example.com"), "{uri}: {}", a.text);
    }
    for uri in [
        format!("usp://bookings/{other}"),
        format!("spa://appointments/{other}"),
    ] {
        let a = read(uri.clone()).await;
        assert_eq!(a.error_code(), Some(-32602), "{uri}: {}", a.text);
    }
    let rb = modern(&env.http, &env.url, 1, "resources/list", json!({}));
    let list = send(rb.header("authorization", bearer.clone())).await;
    let uris: Vec<&str> = list.result()["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", list.text))
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| u.starts_with("usp://"))
        .collect();
    assert_eq!(uris, [format!("usp://bookings/{id}")]);
    env.stop().await;
}

/// `usp_bookings_get` arguments about booking `id` from a caller asserting `profile`.
fn booking_args(id: &str, profile: &str) -> Value {
    json!({"booking_id": id, "_meta": {"usp": {"profile": profile}}})
}

/// [`booking_args`] for tool `name` (a cancellation adds a reason and an idempotency key).
fn tool_args(name: &str, id: &str, profile: &str) -> Value {
    let mut args = booking_args(id, profile);
    if name == "usp_bookings_cancel" {
        args["reason"] = json!("test");
        args["_meta"]["usp"]["idempotency_key"] = json!(uuid::Uuid::new_v4().to_string());
    }
    args
}

/// The result of a tool call, without what differs per call (`_meta`).
fn bare(a: &Answer) -> Value {
    let mut r = a.result().clone();
    if let Some(o) = r.as_object_mut() {
        o.remove("_meta");
    }
    r
}

/// `tools/call` on a booking: partner B's get and cancel of partner A's booking are answered
/// exactly as a booking that does not exist (the answer the business itself gets for an
/// unknown id), and the backend is never asked; partner A, the business and A's
/// booking-scoped credential (for its own booking only) act on it.
#[tokio::test]
async fn tool_calls_on_another_partners_booking_are_unknown_bookings() {
    let env = Env::start().await;
    let (id, credential) = env.book_with_credential().await;
    let other = env.book().await;
    for name in ["usp_bookings_get", "usp_bookings_cancel"] {
        // The business's own call about an id that does not exist reaches the backend.
        let before = env.hits();
        let desk = tool_args(name, "999999", "https://desk.example/p.json");
        let unknown = env.tool(Some(KEY_DESK), name, desk).await;
        assert_eq!(
            env.hits(),
            before + 1,
            "the business's {name} is sent: {}",
            unknown.text
        );
        assert_eq!(
            unknown.sc()["messages"][0]["code"],
            "booking_not_found",
            "{}",
            unknown.text
        );
        // Partner B: A's booking and an unknown id get that same answer, without a backend
        // call.
        for target in [id.as_str(), "999999"] {
            let b = env
                .tool(Some(KEY_B), name, tool_args(name, target, PROFILE_B))
                .await;
            assert_eq!(bare(&b), bare(&unknown), "{name} {target}: {}", b.text);
            assert!(!b.text.contains("alice"), "{}", b.text);
        }
        assert_eq!(
            env.hits(),
            before + 1,
            "partner B's {name} never reaches the backend"
        );
    }
    let before = env.hits();
    // Anonymous callers keep the authentication refusal.
    let anon = env
        .tool(None, "usp_bookings_get", booking_args(&id, PROFILE))
        .await;
    unauthenticated(&anon, "anonymous get");
    assert_eq!(env.hits(), before);
    // Partner A and the business see the booking, which B's cancellation did not touch.
    let a = env
        .tool(Some(KEY_A), "usp_bookings_get", booking_args(&id, PROFILE))
        .await;
    assert_eq!(a.sc()["booking"]["id"], id.as_str(), "{}", a.text);
    assert_eq!(a.sc()["booking"]["status"], "confirmed", "{}", a.text);
    let desk = env
        .tool(
            Some(KEY_DESK),
            "usp_bookings_get",
            booking_args(&id, "https://desk.example/p.json"),
        )
        .await;
    assert_eq!(desk.sc()["booking"]["id"], id.as_str(), "{}", desk.text);
    // A's booking-scoped credential acts on its own booking only.
    let bearer = |name: &'static str, target: String| {
        let params = json!({"name": name, "arguments": booking_args(&target, PROFILE)});
        let rb = modern(&env.http, &env.url, 1, "tools/call", params);
        send(rb.header("authorization", format!("Bearer {credential}")))
    };
    let own = bearer("usp_bookings_get", id.clone()).await;
    assert_eq!(own.sc()["booking"]["id"], id.as_str(), "{}", own.text);
    let before = env.hits();
    let elsewhere = bearer("usp_bookings_get", other.clone()).await;
    assert_eq!(elsewhere.error_code(), Some(-32005), "{}", elsewhere.text);
    assert_eq!(env.hits(), before);
    // The owner's cancellation goes through.
    env.cancel(&id).await;
    env.stop().await;
}

/// `params` with `key`'s `usp-pop+jwt` proof for `method` over them in
/// `_meta.usp.authorization`.
fn prove(key: &PopKey, method: &str, mut params: Value) -> Value {
    let proof = key.proof(method, &params, json!({}));
    params["_meta"]["usp"]["authorization"] =
        json!({"mechanism": "platform_key_pop", "proof": proof});
    params
}

/// A principal known only by its proof of possession books, then reads its booking's resource
/// with a proof over the `resources/read` params (another key's proof reads nothing of it, and
/// a proof is accepted once) and listens to it with a proof over `subscriptions/listen`.
#[tokio::test]
async fn a_proof_only_principal_reads_its_own_booking() {
    let env = Env::start().await;
    let k = PopKey::new();
    let args = env.create_args().await;
    let args = prove(&k, "usp_bookings_create", args);
    let booked = env.tool(None, "usp_bookings_create", args).await;
    let id = booked.sc()["booking"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("not booked: {}", booked.text))
        .to_string();
    env.event_arrived(&id).await;
    let uri = format!("usp://bookings/{id}");
    let sid = env.session().await;
    let read = |params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": params});
        send(legacy(&env.http, &env.url, &sid, body))
    };
    let params = prove(
        &k,
        "resources/read",
        json!({"uri": uri, "_meta": {"usp": {}}}),
    );
    let own = read(params.clone()).await;
    let text = own.result()["contents"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains(&id) && text.contains("alice@example.com"),
        "{}",
        own.text
    );
    let again = read(params).await;
    assert_eq!(
        again.body["error"]["data"]["code"], "pop_proof_replayed",
        "{}",
        again.text
    );
    let stranger = prove(
        &PopKey::new(),
        "resources/read",
        json!({"uri": uri, "_meta": {"usp": {}}}),
    );
    let other = read(stranger).await;
    assert_eq!(other.error_code(), Some(-32002), "{}", other.text);
    assert!(!other.text.contains("alice"), "{}", other.text);
    // A proof names the method it was made for.
    let misnamed = prove(
        &k,
        "resources/subscribe",
        json!({"uri": uri, "_meta": {"usp": {}}}),
    );
    let wrong = read(misnamed).await;
    assert_eq!(
        wrong.body["error"]["data"]["code"], "pop_proof_invalid",
        "{}",
        wrong.text
    );
    // Its `subscriptions/listen` stream, opened with a proof over the listen params, is granted
    // the booking resource and carries the booking's events.
    let params = json!({"notifications": {"resourceSubscriptions": [uri], "dev.portico/webhooks": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}, "usp": {}}});
    let params = prove(&k, "subscriptions/listen", params);
    let body =
        json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": params});
    let resp = env
        .http
        .post(&env.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let mut listen = Sse::new(resp);
    let ack = listen.next(Duration::from_secs(5)).await.expect("an ack");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "{ack}"
    );
    let desk = tool_args("usp_bookings_cancel", &id, "https://desk.example/p.json");
    let canceled = env.tool(Some(KEY_DESK), "usp_bookings_cancel", desk).await;
    assert_eq!(
        canceled.sc()["booking"]["status"],
        "canceled",
        "{}",
        canceled.text
    );
    loop {
        let m = listen
            .next(Duration::from_secs(10))
            .await
            .expect("the cancellation reaches the proof's stream");
        if m["method"] == "usp_webhook" {
            assert_eq!(booking_of(&m), id);
            assert_eq!(m["params"]["event"], "booking.canceled");
            break;
        }
    }
    env.stop().await;
}

/// A platform that signs its requests (RFC 9421) with a key its profile, served on 127.0.0.1,
/// publishes.
struct Signer {
    key: portico::webhook::keys::SigningKey,
    profile: String,
}

impl Signer {
    async fn new() -> Signer {
        use portico::webhook::keys::{Alg, SigningKey};
        let key = SigningKey::generate(Alg::Ed25519, "platform-ed").unwrap();
        let doc = json!({"name": "signing agent", "keys": [key.verifying_key().jwk()]});
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body = bytes::Bytes::from(doc.to_string());
        serve_with(listener, move |_req| {
            let body = body.clone();
            async move {
                let mut r = hyper::Response::new(http_body_util::Full::new(body));
                r.headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                r
            }
        });
        Signer {
            key,
            profile: format!("http://{addr}/profiles/agent.json"),
        }
    }

    /// Signs `method` `url` with `headers` (and `body`: then with its `Content-Digest`) over
    /// the components USP requires of such a request.
    fn sign(&self, method: &str, url: &str, headers: &mut http::HeaderMap, body: &[u8]) {
        use portico::webhook::sig;
        let u = url::Url::parse(url).unwrap();
        let authority = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
        let mut components = vec!["@method", "@authority", "@path"];
        if !body.is_empty() {
            headers.insert("content-digest", sig::content_digest(body).parse().unwrap());
            components.extend(["content-digest", "content-type"]);
        }
        if headers.contains_key("usp-agent") {
            components.push("usp-agent");
        }
        let parts = sig::RequestParts {
            method,
            authority: &authority,
            path: u.path(),
            query: u.query(),
            headers,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let signed = sig::sign(&parts, &components, &self.key, now).unwrap();
        headers.insert("signature-input", signed.signature_input.parse().unwrap());
        headers.insert("signature", signed.signature.parse().unwrap());
    }
}

/// A principal known only by its request signature books with a signed `tools/call`, and the
/// 2025-era GET stream it opens with a signed GET (no body: `@method @authority @path
/// usp-agent`) carries that booking's event; the same stream signed by another key gets
/// nothing of it.
#[tokio::test]
async fn a_signature_only_principal_streams_its_own_booking() {
    let env = Env::start().await;
    let (signer, stranger) = (Signer::new().await, Signer::new().await);
    let open = |who: &Signer, sid: String| {
        let mut h = http::HeaderMap::new();
        h.insert("accept", "text/event-stream".parse().unwrap());
        h.insert("mcp-session-id", sid.parse().unwrap());
        let agent = format!("profile=\"{}\"", who.profile);
        h.insert("usp-agent", agent.parse().unwrap());
        who.sign("GET", &env.url, &mut h, b"");
        env.http.get(&env.url).headers(h).send()
    };
    let (sa, sb) = (env.session().await, env.session().await);
    let resp = open(&signer, sa).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut mine = Sse::new(resp);
    let resp = open(&stranger, sb).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut theirs = Sse::new(resp);
    let mut args = env.create_args().await;
    args["_meta"]["usp"]["profile"] = json!(signer.profile);
    let params = json!({"name": "usp_bookings_create", "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        .to_string()
        .into_bytes();
    let mut h = http::HeaderMap::new();
    for (k, v) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", "usp_bookings_create"),
    ] {
        h.insert(k, v.parse().unwrap());
    }
    signer.sign("POST", &env.url, &mut h, &body);
    let booked = send(env.http.post(&env.url).headers(h).body(body)).await;
    let id = booked.sc()["booking"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("not booked: {}", booked.text))
        .to_string();
    let got = mine
        .next(Duration::from_secs(10))
        .await
        .expect("the signer's event");
    assert_eq!(got["method"], "usp_webhook", "{got}");
    assert_eq!(booking_of(&got), id);
    theirs.stays_quiet("another signer's stream").await;
    env.stop().await;
}
