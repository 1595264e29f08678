//! The reverse path's egress: notifications of the upstream MCP server become signed REST
//! webhooks POSTed to the facade's `deliver_to` URLs; it never sends one unsigned or twice per event id.
//!
//! A relay task listens to the upstream ([`crate::upstream::listen`]), keeps the configured
//! notification methods, and hands each event (the notification's `params`, which for USP's
//! `usp_webhook` is exactly the REST webhook body of §9.2.3) to [`Egress`], which signs it
//! (RFC 9421 + `Content-Digest` with portico's key), retries with backoff and keeps dead
//! letters. Events are deduplicated by their id (a JSON pointer, `/event_id` by default; a
//! digest of the body when absent) over the last [`RECENT_IDS`] events, so a stream replayed
//! after a reconnect is not delivered twice.
//!
//! With `from_profiles`, platforms are also found the way USP §9.2.3 registers them: a REST
//! call through the facade that names its platform profile (`USP-Agent: profile="…"`) and
//! answers with a booking ties that booking to the profile ([`Platforms::learn`]); a later
//! event for the booking is also sent to the profile's `webhook_url`, read from the profile
//! document (fetched with `auth::fetch`'s limits, cached for [`PROFILE_TTL`]). The backend's
//! webhook for a new booking can overtake the answer that ties the booking to its platform, so
//! an event of a booking no platform has claimed yet is held (up to [`CLAIM_WAIT`], at most
//! [`HELD_EVENTS`]) and sent on when the answer arrives; events of one booking keep their order.

use crate::auth::fetch::Limits;
use crate::model::Outcome;
use crate::webhook::egress::{Egress, RetryPolicy};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Event ids remembered for deduplication.
pub const RECENT_IDS: usize = 4096;
/// Bookings whose platform is remembered (the oldest are forgotten first).
pub const KNOWN_BOOKINGS: usize = 10_000;
/// How long a profile's `webhook_url` (or its absence) is reused before it is fetched again.
pub const PROFILE_TTL: Duration = Duration::from_secs(300);
/// How long an event of a booking that no platform has claimed yet waits for its claim.
pub const CLAIM_WAIT: Duration = Duration::from_secs(10);
/// Most events held waiting for their booking's claim (the oldest give up first).
pub const HELD_EVENTS: usize = 1024;

/// Platforms learnt from facade calls: booking id -> profile URI, profile -> `webhook_url`.
#[derive(Debug)]
pub struct Platforms {
    bookings: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    urls: Mutex<HashMap<String, (Option<url::Url>, Instant)>>,
    limits: Limits,
    /// Signalled when a booking is tied to a platform for the first time.
    claimed: tokio::sync::Notify,
}

impl Platforms {
    pub fn new(limits: Limits) -> Self {
        Platforms {
            bookings: Mutex::new((HashMap::new(), VecDeque::new())),
            urls: Mutex::new(HashMap::new()),
            limits,
            claimed: tokio::sync::Notify::new(),
        }
    }

    /// Ties the booking an answer carries (`booking.id`) to the calling platform's profile.
    pub fn learn(&self, profile: &str, outcome: &Outcome) {
        let booking = match outcome {
            Outcome::Success { body } => body.pointer("/booking/id"),
            Outcome::Business { body, .. } => body.get("booking").and_then(|b| b.get("id")),
            Outcome::Failure(_) => None,
        };
        let Some(id) = booking.and_then(Value::as_str).filter(|s| !s.is_empty()) else {
            return;
        };
        let Ok(mut guard) = self.bookings.lock() else {
            return;
        };
        let (map, order) = &mut *guard;
        if map.insert(id.to_string(), profile.to_string()).is_none() {
            order.push_back(id.to_string());
            if order.len() > KNOWN_BOOKINGS
                && let Some(old) = order.pop_front()
            {
                map.remove(&old);
            }
            drop(guard);
            self.claimed.notify_one();
        }
    }

    /// The platform profile that made or read `booking`.
    fn profile_of(&self, booking: &str) -> Option<String> {
        self.bookings.lock().ok()?.0.get(booking).cloned()
    }

    fn is_claimed(&self, booking: &str) -> bool {
        self.bookings
            .lock()
            .is_ok_and(|b| b.0.contains_key(booking))
    }

    /// The `webhook_url` of the platform behind `booking`, if it published an acceptable one.
    async fn target(&self, booking: &str) -> Option<url::Url> {
        let profile = self.profile_of(booking)?;
        if let Ok(cache) = self.urls.lock()
            && let Some((url, at)) = cache.get(&profile)
            && at.elapsed() < PROFILE_TTL
        {
            return url.clone();
        }
        let url = match self.fetch_webhook_url(&profile).await {
            Ok(u) => Some(u),
            Err(why) => {
                tracing::warn!(profile = %profile, reason = %why, "no webhook_url from the platform profile");
                None
            }
        };
        if let Ok(mut cache) = self.urls.lock() {
            if cache.len() >= KNOWN_BOOKINGS {
                cache.retain(|_, (_, at)| at.elapsed() < PROFILE_TTL);
            }
            cache.insert(profile, (url.clone(), Instant::now()));
        }
        url
    }

    async fn fetch_webhook_url(&self, profile: &str) -> Result<url::Url, String> {
        let bytes = crate::auth::fetch::get(profile, &self.limits)
            .await
            .map_err(|e| e.to_string())?;
        let doc: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("the profile is not JSON: {e}"))?;
        let raw = doc
            .get("webhook_url")
            .and_then(Value::as_str)
            .ok_or("the profile has no `webhook_url`")?;
        acceptable_target(raw, &self.limits).await
    }
}

/// A webhook URL a profile may name: the same rule as every URL another party names
/// (`auth::fetch::check_target`: https, public addresses, unless the host is allowed).
async fn acceptable_target(raw: &str, limits: &Limits) -> Result<url::Url, String> {
    crate::auth::fetch::check_target(raw, limits)
        .await
        .map(|t| t.url)
        .map_err(|e| format!("webhook_url `{raw}`: {e}"))
}

/// Compiled `notifications:` of a facade file.
#[derive(Debug, Clone)]
pub struct Notifications {
    /// Notification methods sent on as webhooks.
    pub methods: Vec<String>,
    pub deliver_to: Vec<url::Url>,
    /// JSON pointer to the event id in the notification's params.
    pub event_id: String,
    /// JSON pointer to the resource an event is about: its deliveries to one URL keep their order.
    pub resource_id: String,
    /// The 2026-07-28 `subscriptions/listen` filter.
    pub listen: Value,
    pub retry: RetryPolicy,
    /// Platforms found through the profiles of facade callers (`from_profiles: true`).
    pub platforms: Option<Arc<Platforms>>,
}

/// The running relay; dropping it stops listening (deliveries already started go on).
pub struct Relay {
    task: tokio::task::AbortHandle,
    connected: Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    /// True while the relay's stream to the upstream is open.
    pub fn connected(&self) -> bool {
        self.connected.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An event held until its booking is claimed by a platform.
#[derive(Debug)]
struct Held {
    since: Instant,
    booking: String,
    event_id: String,
    body: Arc<Value>,
}

/// Events of bookings no platform has claimed yet, in arrival order (so per booking too).
#[derive(Debug, Default)]
struct Unclaimed {
    events: VecDeque<Held>,
}

impl Unclaimed {
    fn holds(&self, booking: &str) -> bool {
        self.events.iter().any(|h| h.booking == booking)
    }

    /// Holds `h`; when full, the oldest held event gives up (and is returned).
    fn hold(&mut self, h: Held) -> Option<Held> {
        let dropped = (self.events.len() >= HELD_EVENTS)
            .then(|| self.events.pop_front())
            .flatten();
        self.events.push_back(h);
        dropped
    }

    /// Takes out, in arrival order, the events whose booking is now claimed.
    fn take_claimed(&mut self, claimed: impl Fn(&str) -> bool) -> Vec<Held> {
        let (ready, waiting) = std::mem::take(&mut self.events)
            .into_iter()
            .partition(|h| claimed(&h.booking));
        self.events = waiting;
        ready.into()
    }

    /// Gives up the events held since before `now - CLAIM_WAIT`; returns how many.
    fn expire(&mut self, now: Instant) -> usize {
        let before = self.events.len();
        while self
            .events
            .front()
            .is_some_and(|h| now.duration_since(h.since) >= CLAIM_WAIT)
        {
            self.events.pop_front();
        }
        before - self.events.len()
    }

    /// When the oldest held event gives up.
    fn deadline(&self) -> Option<Instant> {
        self.events.front().map(|h| h.since + CLAIM_WAIT)
    }
}

/// Remembers the most recent event ids.
#[derive(Default)]
struct Recent {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Recent {
    /// True when `id` is new (and now remembered).
    fn first(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() >= RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        true
    }
}

/// What to do with one upstream notification.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Deliver this body under this event id.
    Deliver { event_id: String, body: Value },
    /// Not a configured method.
    Ignored,
    /// Already delivered.
    Duplicate,
}

fn judge(n: &Notifications, recent: &mut Recent, msg: Value) -> Verdict {
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !n.methods.contains(&method) {
        return Verdict::Ignored;
    }
    let body = match msg {
        Value::Object(mut m) => m
            .remove("params")
            .unwrap_or(Value::Object(Default::default())),
        _ => Value::Object(Default::default()),
    };
    let event_id = match body.pointer(&n.event_id) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v @ Value::Number(_)) => v.to_string(),
        _ => format!(
            "sha256:{}",
            crate::auth::jws::sha256_b64(body.to_string().as_bytes())
        ),
    };
    if !recent.first(&format!("{method}\u{0}{event_id}")) {
        return Verdict::Duplicate;
    }
    Verdict::Deliver { event_id, body }
}

/// Sends `body` to the `webhook_url` of the platform that claimed `booking`, unless that URL
/// is already one of the `deliver_to` URLs (which got it).
async fn to_platform(
    n: &Notifications,
    p: &Platforms,
    egress: &Arc<Egress>,
    booking: &str,
    body: Arc<Value>,
    event_id: String,
) {
    if let Some(url) = p.target(booking).await
        && !n.deliver_to.contains(&url)
    {
        egress.deliver(
            url,
            body,
            event_id,
            n.retry,
            None,
            Some(booking.to_string()),
        );
    }
}

/// Sends on, in arrival order, the held events whose booking has been claimed since.
async fn release(
    n: &Notifications,
    p: &Platforms,
    egress: &Arc<Egress>,
    unclaimed: &mut Unclaimed,
) {
    // One look at the claims for all held events (the lock is not held across the sends).
    let ready = match p.bookings.lock() {
        Ok(claims) => unclaimed.take_claimed(|b| claims.0.contains_key(b)),
        Err(_) => Vec::new(),
    };
    for h in ready {
        to_platform(n, p, egress, &h.booking, h.body, h.event_id).await;
    }
}

/// Relays each notification from `rx` to its webhook URLs until the channel closes.
async fn relay(n: Notifications, egress: Arc<Egress>, mut rx: mpsc::Receiver<Value>) {
    let mut recent = Recent::default();
    let mut unclaimed = Unclaimed::default();
    loop {
        let deadline = unclaimed.deadline();
        let expiry = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let msg = tokio::select! {
            msg = rx.recv() => match msg {
                Some(m) => m,
                None => break,
            },
            () = async {
                match &n.platforms {
                    Some(p) => p.claimed.notified().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(p) = &n.platforms {
                    release(&n, p, &egress, &mut unclaimed).await;
                }
                continue;
            }
            () = expiry => {
                let gone = unclaimed.expire(Instant::now());
                for _ in 0..gone {
                    crate::ops::metrics::facade_notification("unclaimed");
                }
                continue;
            }
        };
        match judge(&n, &mut recent, msg) {
            Verdict::Deliver { event_id, body } => {
                crate::ops::metrics::facade_notification("delivered");
                let booking = crate::webhook::egress::subject_at(&body, &n.resource_id);
                let body = Arc::new(body);
                for url in &n.deliver_to {
                    egress.deliver(
                        url.clone(),
                        body.clone(),
                        event_id.clone(),
                        n.retry,
                        None,
                        booking.clone(),
                    );
                }
                let (Some(p), Some(booking)) = (&n.platforms, booking) else {
                    continue;
                };
                if !p.is_claimed(&booking) {
                    // Its booking's answer has not reached the facade yet: wait for the claim.
                    let held = Held {
                        since: Instant::now(),
                        booking,
                        event_id,
                        body,
                    };
                    if let Some(gone) = unclaimed.hold(held) {
                        tracing::debug!(event_id = %gone.event_id, "no platform claimed the booking; dropping the held event");
                        crate::ops::metrics::facade_notification("unclaimed");
                    }
                    continue;
                }
                // Claimed since its earlier events were held (the signal not yet seen here):
                // they go first.
                if unclaimed.holds(&booking) {
                    release(&n, p, &egress, &mut unclaimed).await;
                }
                to_platform(&n, p, &egress, &booking, body, event_id).await;
            }
            Verdict::Ignored => crate::ops::metrics::facade_notification("ignored"),
            Verdict::Duplicate => crate::ops::metrics::facade_notification("duplicate"),
        }
    }
}

/// Starts relaying `upstream`'s notifications through `egress`.
pub fn start(
    upstream: Arc<crate::upstream::mcp::McpUpstream>,
    n: Notifications,
    egress: Arc<Egress>,
) -> Relay {
    let (tx, rx) = mpsc::channel::<Value>(256);
    let connected = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = crate::upstream::listen::ListenOptions {
        filter: n.listen.clone(),
        connected: connected.clone(),
    };
    let task = tokio::spawn(async move {
        let listener = upstream.listen_forever(opts, tx);
        tokio::join!(listener, relay(n, egress, rx));
    });
    Relay {
        task: task.abort_handle(),
        connected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Notifications {
        Notifications {
            methods: vec!["usp_webhook".into()],
            deliver_to: vec![],
            event_id: "/event_id".into(),
            resource_id: "/booking_id".into(),
            listen: json!({}),
            retry: RetryPolicy::default(),
            platforms: None,
        }
    }

    #[test]
    fn the_params_are_the_body_and_repeats_are_dropped() {
        let n = config();
        let mut recent = Recent::default();
        let msg = json!({"jsonrpc": "2.0", "method": "usp_webhook",
                         "params": {"event": "booking.confirmed", "event_id": "evt_1"}});
        assert_eq!(
            judge(&n, &mut recent, msg.clone()),
            Verdict::Deliver {
                event_id: "evt_1".into(),
                body: json!({"event": "booking.confirmed", "event_id": "evt_1"})
            }
        );
        assert_eq!(judge(&n, &mut recent, msg), Verdict::Duplicate);
        let other = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        assert_eq!(judge(&n, &mut recent, other), Verdict::Ignored);
    }

    #[test]
    fn an_event_without_an_id_is_known_by_its_digest() {
        let n = config();
        let mut recent = Recent::default();
        let msg = json!({"jsonrpc": "2.0", "method": "usp_webhook", "params": {"event": "x"}});
        let Verdict::Deliver { event_id, .. } = judge(&n, &mut recent, msg.clone()) else {
            panic!("delivered");
        };
        assert!(event_id.starts_with("sha256:"));
        assert_eq!(judge(&n, &mut recent, msg), Verdict::Duplicate);
    }

    #[tokio::test]
    async fn a_profile_may_not_aim_webhooks_at_private_or_plain_http_targets() {
        let allowed = Limits {
            allow_hosts: vec!["127.0.0.1".to_string()],
            ..Limits::default()
        };
        assert!(
            acceptable_target("http://127.0.0.1:9/h", &allowed)
                .await
                .is_ok()
        );
        for (url, why) in [
            ("http://127.0.0.1:9/h", "must be https"),
            ("https://127.0.0.1/h", "private, loopback or link-local"),
            ("https://10.0.0.7/h", "private, loopback or link-local"),
            (
                "https://169.254.169.254/latest",
                "private, loopback or link-local",
            ),
            ("https://[::1]/h", "private, loopback or link-local"),
            ("not a url", "is not valid"),
        ] {
            let e = acceptable_target(url, &Limits::default())
                .await
                .expect_err(url);
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn a_booking_is_tied_to_the_profile_that_made_it() {
        let p = Platforms::new(Default::default());
        let created = Outcome::Success {
            body: json!({"booking": {"id": "bkg_1", "status": "confirmed"}}),
        };
        p.learn("https://agent.example/p.json", &created);
        p.learn(
            "https://other.example/p.json",
            &Outcome::Success {
                body: json!({"services": []}),
            },
        );
        assert_eq!(
            p.profile_of("bkg_1").as_deref(),
            Some("https://agent.example/p.json")
        );
        assert_eq!(p.profile_of("bkg_2"), None);
    }

    fn held(booking: &str, id: &str, since: Instant) -> Held {
        Held {
            since,
            booking: booking.into(),
            event_id: id.into(),
            body: Arc::new(json!({"booking_id": booking, "event_id": id})),
        }
    }

    #[test]
    fn held_events_come_out_in_order_once_claimed_and_give_up_after_the_wait() {
        let t0 = Instant::now();
        let mut u = Unclaimed::default();
        assert_eq!(u.deadline(), None);
        u.hold(held("b1", "e1", t0));
        u.hold(held("b2", "e2", t0 + Duration::from_secs(1)));
        u.hold(held("b1", "e3", t0 + Duration::from_secs(2)));
        assert!(u.holds("b1") && u.holds("b2") && !u.holds("b3"));
        assert_eq!(u.deadline(), Some(t0 + CLAIM_WAIT));
        let out: Vec<String> = u
            .take_claimed(|b| b == "b1")
            .into_iter()
            .map(|h| h.event_id)
            .collect();
        assert_eq!(out, ["e1", "e3"]);
        assert!(!u.holds("b1"));
        // b2 is never claimed: it gives up CLAIM_WAIT after it came, not before.
        assert_eq!(u.expire(t0 + CLAIM_WAIT), 0);
        assert_eq!(u.expire(t0 + CLAIM_WAIT + Duration::from_secs(1)), 1);
        assert_eq!(u.deadline(), None);
        // Bounded: the oldest gives up first.
        for i in 0..HELD_EVENTS {
            assert!(u.hold(held("b", &i.to_string(), t0)).is_none());
        }
        let gone = u.hold(held("b", "last", t0)).expect("the oldest gives up");
        assert_eq!(gone.event_id, "0");
        assert_eq!(u.events.len(), HELD_EVENTS);
    }

    /// A webhook receiver on 127.0.0.1 that reports each body it gets (answering 200).
    async fn hooks() -> (url::Url, mpsc::UnboundedReceiver<Value>) {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url =
            url::Url::parse(&format!("http://{}/hooks", listener.local_addr().unwrap())).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let tx = tx.clone();
                            async move {
                                let body = req.into_body().collect().await.map(|c| c.to_bytes());
                                if let Ok(b) = body {
                                    let _ =
                                        tx.send(serde_json::from_slice(&b).unwrap_or(Value::Null));
                                }
                                Ok::<_, std::convert::Infallible>(http::Response::new(
                                    http_body_util::Full::new(bytes::Bytes::new()),
                                ))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        (url, rx)
    }

    /// The backend's webhook for a new booking can reach the relay before the facade's answer
    /// ties the booking to its platform: the event waits for the tie, then goes out ahead of the
    /// booking's later events.
    #[tokio::test]
    async fn an_event_that_overtakes_its_bookings_answer_waits_for_it() {
        let (hook, mut got) = hooks().await;
        let profile = "https://agent.example/p.json";
        let platforms = Arc::new(Platforms::new(Limits::default()));
        // The profile's webhook_url, as if fetched a moment ago.
        platforms
            .urls
            .lock()
            .unwrap()
            .insert(profile.into(), (Some(hook), Instant::now()));
        let n = Notifications {
            platforms: Some(platforms.clone()),
            ..config()
        };
        let key = crate::webhook::keys::SigningKey::generate(
            crate::webhook::keys::Alg::EcdsaP256Sha256,
            "t",
        )
        .unwrap();
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(relay(n, Egress::new(Arc::new(key), None), rx));
        let note = |event: &str, id: &str| {
            json!({"jsonrpc": "2.0", "method": "usp_webhook",
                   "params": {"event": event, "event_id": id, "booking_id": "bkg_9"}})
        };
        tx.send(note("booking.confirmed", "e1")).await.unwrap();
        // Nothing goes out while no platform has claimed bkg_9.
        let early = tokio::time::timeout(Duration::from_millis(200), got.recv()).await;
        assert!(early.is_err(), "sent before the claim: {early:?}");
        platforms.learn(
            profile,
            &Outcome::Success {
                body: json!({"booking": {"id": "bkg_9", "status": "confirmed"}}),
            },
        );
        tx.send(note("booking.canceled", "e2")).await.unwrap();
        for want in ["e1", "e2"] {
            let body = tokio::time::timeout(Duration::from_secs(5), got.recv())
                .await
                .expect("delivered within 5 s (hang guard)")
                .expect("receiver alive");
            assert_eq!(body["event_id"], want);
        }
    }

    #[test]
    fn the_memory_of_ids_is_bounded() {
        let mut recent = Recent::default();
        for i in 0..RECENT_IDS + 10 {
            assert!(recent.first(&i.to_string()));
        }
        assert_eq!(recent.set.len(), RECENT_IDS);
        // The oldest were forgotten, the newest are remembered.
        assert!(recent.first("0"));
        assert!(!recent.first(&(RECENT_IDS + 9).to_string()));
    }
}
