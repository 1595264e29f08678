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
//! document (fetched with `auth::fetch`'s limits, cached for [`PROFILE_TTL`]).

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

/// Platforms learnt from facade calls: booking id -> profile URI, profile -> `webhook_url`.
#[derive(Debug)]
pub struct Platforms {
    bookings: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    urls: Mutex<HashMap<String, (Option<url::Url>, Instant)>>,
    limits: Limits,
}

impl Platforms {
    pub fn new(limits: Limits) -> Self {
        Platforms {
            bookings: Mutex::new((HashMap::new(), VecDeque::new())),
            urls: Mutex::new(HashMap::new()),
            limits,
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
        }
    }

    /// The platform profile that made or read the booking of `event` (`booking_id`).
    fn profile_of(&self, event: &Value) -> Option<String> {
        let id = event.get("booking_id").and_then(Value::as_str)?;
        self.bookings.lock().ok()?.0.get(id).cloned()
    }

    /// The `webhook_url` of the platform behind `event`, if it published an acceptable one.
    async fn target(&self, event: &Value) -> Option<url::Url> {
        let profile = self.profile_of(event)?;
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

/// Starts relaying `upstream`'s notifications through `egress`.
pub fn start(
    upstream: Arc<crate::upstream::mcp::McpUpstream>,
    n: Notifications,
    egress: Arc<Egress>,
) -> Relay {
    let (tx, mut rx) = mpsc::channel::<Value>(256);
    let connected = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = crate::upstream::listen::ListenOptions {
        filter: n.listen.clone(),
        connected: connected.clone(),
    };
    let task = tokio::spawn(async move {
        let listener = upstream.listen_forever(opts, tx);
        let relay = async move {
            let mut recent = Recent::default();
            while let Some(msg) = rx.recv().await {
                match judge(&n, &mut recent, msg) {
                    Verdict::Deliver { event_id, body } => {
                        crate::ops::metrics::facade_notification("delivered");
                        let mut urls = n.deliver_to.clone();
                        if let Some(p) = &n.platforms
                            && let Some(u) = p.target(&body).await
                            && !urls.contains(&u)
                        {
                            urls.push(u);
                        }
                        let body = Arc::new(body);
                        for url in urls {
                            egress.deliver(url, body.clone(), event_id.clone(), n.retry, None);
                        }
                    }
                    Verdict::Ignored => crate::ops::metrics::facade_notification("ignored"),
                    Verdict::Duplicate => crate::ops::metrics::facade_notification("duplicate"),
                }
            }
        };
        tokio::join!(listener, relay);
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
            p.profile_of(&json!({"booking_id": "bkg_1"})).as_deref(),
            Some("https://agent.example/p.json")
        );
        assert_eq!(p.profile_of(&json!({"booking_id": "bkg_2"})), None);
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
