//! Fan-out to MCP clients: SSE ids, `Last-Event-ID` replay, drop-oldest per-client queues, subscriptions, latest per booking, each client's delivery gate.
//! It never holds a lock across an await, never lets one slow client block another, and never hands a gated client an event its gate refused.

use bytes::Bytes;
use moka::sync::Cache;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A [`Gate`]'s answer.
pub type GateFut<'a> = Pin<Box<dyn Future<Output = bool> + Send + Sync + 'a>>;

/// Decides whether one client stream receives an event (`auth::access` implements it): the
/// event's `business`, the booking resource `uri` it is about, and when this hub published it.
pub trait Gate: Send + Sync {
    fn allows<'a>(&'a self, business: &'a str, uri: Option<&'a str>, at: Instant) -> GateFut<'a>;
}

/// Buffer sizes.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// Events kept for `Last-Event-ID` replay.
    pub replay: usize,
    /// Frames queued per client before the oldest is dropped.
    pub queue: usize,
    /// Booking resources whose latest event is kept for `resources/read`.
    pub latest: u64,
    /// How long a session's resource subscriptions outlive its last use.
    pub subscription_idle: Duration,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            replay: 1024,
            queue: 256,
            latest: 100_000,
            subscription_idle: Duration::from_secs(30 * 60),
        }
    }
}

/// One accepted event, framed once for every client.
#[derive(Debug)]
pub struct Event {
    pub seq: u64,
    pub business: String,
    /// The event type (`event` member), when it has one.
    pub kind: Option<String>,
    pub uri: Option<String>,
    /// When this hub published (or restored) it.
    pub at: Instant,
    /// The notification method and the event (for frames built per listener).
    method: String,
    event: Arc<Value>,
    /// `id:` + the JSON-RPC notification, as one SSE event.
    notification: Bytes,
    /// `id:` + `notifications/resources/updated` for `uri`.
    updated: Option<Bytes>,
}

/// Which events a client wants (empty lists accept all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub businesses: Vec<String>,
    pub events: Vec<String>,
}

impl Filter {
    /// From a query string: `business=a,b&events=booking.canceled`.
    pub fn from_query(query: Option<&str>) -> Filter {
        let mut f = Filter::default();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let list = v.split(',').filter(|s| !s.is_empty()).map(str::to_string);
            match k.as_ref() {
                "business" => f.businesses.extend(list),
                "events" => f.events.extend(list),
                _ => {}
            }
        }
        f
    }

    fn accepts(&self, e: &Event) -> bool {
        (self.businesses.is_empty() || self.businesses.contains(&e.business))
            && (self.events.is_empty() || e.kind.as_ref().is_some_and(|k| self.events.contains(k)))
    }
}

/// Who a client stream is for.
enum Mode {
    /// A 2025-era GET stream: the session's resource subscriptions apply; frames carry ids.
    Session(String),
    /// A 2026-07-28 `subscriptions/listen` stream: its own URIs; frames carry the
    /// `subscriptionId` in `_meta` and no ids (no resumability in that revision).
    Listen {
        meta: Value,
        uris: HashSet<String>,
        webhooks: bool,
    },
}

/// A queued frame and the event it was built from (what the client's gate judges).
type Queued = (Bytes, Arc<Event>);

struct Client {
    mode: Mode,
    filter: Filter,
    queue: Mutex<VecDeque<Queued>>,
    notify: Notify,
    gate: Option<Arc<dyn Gate>>,
}

#[derive(Default)]
struct State {
    next_seq: u64,
    next_client: u64,
    ring: VecDeque<Arc<Event>>,
    clients: HashMap<u64, Arc<Client>>,
}

/// The fan-out hub.
pub struct Hub {
    opts: HubOptions,
    state: Mutex<State>,
    latest: Cache<String, Arc<Value>>,
    subs: Cache<String, Arc<Mutex<HashSet<String>>>>,
}

fn frame(seq: u64, message: &Value) -> Bytes {
    Bytes::from(format!("id: {seq}\nevent: message\ndata: {message}\n\n"))
}

impl Hub {
    pub fn new(opts: HubOptions) -> Arc<Hub> {
        Arc::new(Hub {
            latest: Cache::builder().max_capacity(opts.latest).build(),
            subs: Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(opts.subscription_idle)
                .build(),
            state: Mutex::new(State {
                next_seq: 1,
                ..State::default()
            }),
            opts,
        })
    }

    fn subscribed(&self, session: &str, uri: &str) -> bool {
        self.subs
            .get(session)
            .is_some_and(|s| s.lock().map(|s| s.contains(uri)).unwrap_or(false))
    }

    /// The frames a `subscriptions/listen` client gets for `e`, built for it (tagged `_meta`).
    fn listen_frames(
        c: &Client,
        e: &Event,
        meta: &Value,
        uris: &HashSet<String>,
        webhooks: bool,
    ) -> Option<Bytes> {
        let mut out = String::new();
        if webhooks && c.filter.accepts(e) {
            let mut params = (*e.event).clone();
            if let Some(p) = params.as_object_mut() {
                p.insert("_meta".into(), meta.clone());
            }
            let msg = json!({"jsonrpc": "2.0", "method": e.method, "params": params});
            out.push_str(&format!("event: message\ndata: {msg}\n\n"));
        }
        if let Some(uri) = e.uri.as_ref().filter(|u| uris.contains(*u)) {
            let msg = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                             "params": {"uri": uri, "_meta": meta}});
            out.push_str(&format!("event: message\ndata: {msg}\n\n"));
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    /// The frames `client` gets for `e`.
    fn frames(&self, c: &Client, e: &Event) -> Option<Bytes> {
        let session = match &c.mode {
            Mode::Session(s) => s,
            Mode::Listen {
                meta,
                uris,
                webhooks,
            } => return Self::listen_frames(c, e, meta, uris, *webhooks),
        };
        let updated = match (&e.updated, &e.uri) {
            (Some(u), Some(uri)) if self.subscribed(session, uri) => Some(u),
            _ => None,
        };
        let note = c.filter.accepts(e).then_some(&e.notification);
        match (note, updated) {
            (Some(n), Some(u)) => {
                let mut both = Vec::with_capacity(n.len() + u.len());
                both.extend_from_slice(n);
                both.extend_from_slice(u);
                Some(Bytes::from(both))
            }
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (None, None) => None,
        }
    }

    fn enqueue(&self, c: &Client, frame: Queued) {
        let dropped = match c.queue.lock() {
            Ok(mut q) => {
                let dropped = if q.len() >= self.opts.queue {
                    q.pop_front().is_some()
                } else {
                    false
                };
                q.push_back(frame);
                dropped
            }
            Err(_) => return,
        };
        crate::ops::metrics::webhook_delivery(dropped);
        c.notify.notify_one();
    }

    /// Queues `event` for every client (and the replay buffer); records it as the latest for
    /// `uri`. Returns its sequence number. Events are numbered and queued under one lock, so every
    /// client sees them in the same order (causal order per booking holds).
    pub fn publish(&self, business: &str, method: &str, event: Value, uri: Option<String>) -> u64 {
        let published = self.publish_with(business, method, event, uri, |_, _| {
            Ok::<(), std::convert::Infallible>(())
        });
        published.unwrap_or_else(|never| match never {})
    }

    /// As `publish`, but runs `before(seq, &event)` first, under the hub's lock (a journal
    /// write): when it fails nothing is published and its error is returned.
    pub fn publish_with<E>(
        &self,
        business: &str,
        method: &str,
        event: Value,
        uri: Option<String>,
        before: impl FnOnce(u64, &Value) -> Result<(), E>,
    ) -> Result<u64, E> {
        let Ok(mut st) = self.state.lock() else {
            return Ok(0);
        };
        let seq = st.next_seq;
        before(seq, &event)?;
        st.next_seq += 1;
        let e = self.record(&mut st, seq, business, method, event, uri);
        self.fan_out(&st, &e);
        Ok(seq)
    }

    /// Queues `e` for every client that wants it.
    fn fan_out(&self, st: &State, e: &Arc<Event>) {
        for c in st.clients.values() {
            if let Some(f) = self.frames(c, e) {
                self.enqueue(c, (f, e.clone()));
            }
        }
    }

    /// Sends an event numbered elsewhere (the shared event stream of `crate::state::events`),
    /// like `publish`; an event this hub already has (`seq` not after its newest) is ignored.
    /// Returns whether it was sent.
    pub fn publish_at(
        &self,
        seq: u64,
        business: &str,
        method: &str,
        event: Value,
        uri: Option<String>,
    ) -> bool {
        let Ok(mut st) = self.state.lock() else {
            return false;
        };
        if seq < st.next_seq {
            return false;
        }
        st.next_seq = seq + 1;
        let e = self.record(&mut st, seq, business, method, event, uri);
        self.fan_out(&st, &e);
        true
    }

    /// Puts an event from before a restart back into the replay buffer and the latest-event
    /// table, without sending it; later events are numbered after it.
    pub fn restore(
        &self,
        seq: u64,
        business: &str,
        method: &str,
        event: Value,
        uri: Option<String>,
    ) {
        if let Ok(mut st) = self.state.lock() {
            st.next_seq = st.next_seq.max(seq + 1);
            self.record(&mut st, seq, business, method, event, uri);
        }
    }

    /// Frames an event and records it in the ring and the latest-event table.
    fn record(
        &self,
        st: &mut State,
        seq: u64,
        business: &str,
        method: &str,
        event: Value,
        uri: Option<String>,
    ) -> Arc<Event> {
        let kind = event
            .get("event")
            .and_then(Value::as_str)
            .map(str::to_string);
        let notification = frame(
            seq,
            &json!({"jsonrpc": "2.0", "method": method, "params": &event}),
        );
        let updated = uri.as_ref().map(|u| {
            frame(
                seq,
                &json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": u}}),
            )
        });
        let event = Arc::new(event);
        if let Some(u) = &uri {
            self.latest.insert(u.clone(), event.clone());
        }
        let e = Arc::new(Event {
            seq,
            business: business.to_string(),
            kind,
            uri,
            at: Instant::now(),
            method: method.to_string(),
            event,
            notification,
            updated,
        });
        if st.ring.len() >= self.opts.replay {
            st.ring.pop_front();
        }
        st.ring.push_back(e.clone());
        e
    }

    /// The latest event for a booking resource.
    pub fn latest(&self, uri: &str) -> Option<Arc<Value>> {
        self.latest.get(uri)
    }

    /// Records (or removes) a session's subscription to `uri`.
    pub fn set_subscription(&self, session: &str, uri: &str, on: bool) {
        let set = self
            .subs
            .get_with(session.to_string(), || Arc::new(Mutex::new(HashSet::new())));
        if let Ok(mut s) = set.lock() {
            if on {
                s.insert(uri.to_string());
            } else {
                s.remove(uri);
            }
        }
    }

    /// Forgets a session's subscriptions (the session ended).
    pub fn end_session(&self, session: &str) {
        self.subs.invalidate(session);
    }

    /// Opens a client stream for `session`: events after `last_event_id` still in the replay
    /// buffer first, then live ones, each only when `gate` (if any) allows it. The client is
    /// removed when the stream is dropped.
    pub fn listen(
        self: &Arc<Self>,
        session: &str,
        filter: Filter,
        last_event_id: Option<u64>,
        gate: Option<Arc<dyn Gate>>,
    ) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
        self.open(
            Mode::Session(session.to_string()),
            filter,
            last_event_id,
            gate,
        )
    }

    /// Opens a `subscriptions/listen` stream (2026-07-28): `resources/updated` for `uris`, and
    /// the webhook notifications themselves when `webhooks`, each tagged with `meta`.
    pub fn listen_modern(
        self: &Arc<Self>,
        meta: Value,
        uris: HashSet<String>,
        webhooks: Option<Filter>,
        gate: Option<Arc<dyn Gate>>,
    ) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
        let mode = Mode::Listen {
            meta,
            uris,
            webhooks: webhooks.is_some(),
        };
        self.open(mode, webhooks.unwrap_or_default(), None, gate)
    }

    fn open(
        self: &Arc<Self>,
        mode: Mode,
        filter: Filter,
        last_event_id: Option<u64>,
        gate: Option<Arc<dyn Gate>>,
    ) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
        let client = Arc::new(Client {
            mode,
            filter,
            queue: Mutex::new(VecDeque::new()),
            notify: Notify::new(),
            gate,
        });
        let mut id = 0;
        if let Ok(mut st) = self.state.lock() {
            if let Some(last) = last_event_id {
                let mut replayed = 0u64;
                for e in st.ring.iter().filter(|e| e.seq > last) {
                    if let Some(f) = self.frames(&client, e) {
                        if let Ok(mut q) = client.queue.lock() {
                            q.push_back((f, e.clone()));
                        }
                        replayed += 1;
                    }
                }
                crate::ops::metrics::webhook_replayed(replayed);
            }
            id = st.next_client;
            st.next_client += 1;
            st.clients.insert(id, client.clone());
        }
        let guard = Registration {
            hub: Arc::downgrade(self),
            id,
        };
        futures_util::stream::unfold((client, guard), |(c, g)| async move {
            loop {
                let next = c.queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some((frame, e)) = next else {
                    c.notify.notified().await;
                    continue;
                };
                if let Some(gate) = &c.gate
                    && !gate.allows(&e.business, e.uri.as_deref(), e.at).await
                {
                    continue;
                }
                return Some((frame, (c, g)));
            }
        })
    }

    /// Connected client streams.
    pub fn clients(&self) -> usize {
        self.state.lock().map(|s| s.clients.len()).unwrap_or(0)
    }

    /// The newest `n` events of the replay ring, newest first (for the status page).
    pub fn recent(&self, n: usize) -> Vec<Arc<Event>> {
        self.state
            .lock()
            .map(|s| s.ring.iter().rev().take(n).cloned().collect())
            .unwrap_or_default()
    }
}

/// Removes a client from the hub when its stream is dropped.
struct Registration {
    hub: Weak<Hub>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade()
            && let Ok(mut st) = hub.state.lock()
        {
            st.clients.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn ev(id: &str, booking: &str) -> Value {
        json!({"event": "booking.confirmed", "event_id": id, "booking_id": booking})
    }

    async fn next_text(s: &mut (impl futures_util::Stream<Item = Bytes> + Unpin)) -> String {
        String::from_utf8(s.next().await.unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn live_events_arrive_in_order_with_ids() {
        let hub = Hub::new(HubOptions::default());
        let mut s = Box::pin(hub.listen("s1", Filter::default(), None, None));
        hub.publish("spa", "usp_webhook", ev("e1", "A-1"), None);
        hub.publish("spa", "usp_webhook", ev("e2", "A-1"), None);
        let one = next_text(&mut s).await;
        assert!(one.starts_with("id: 1\n"), "{one}");
        assert!(one.contains("\"method\":\"usp_webhook\""));
        assert!(next_text(&mut s).await.contains("\"event_id\":\"e2\""));
        assert_eq!(hub.clients(), 1);
        drop(s);
        assert_eq!(hub.clients(), 0);
    }

    #[tokio::test]
    async fn replays_after_last_event_id_and_filters() {
        let hub = Hub::new(HubOptions::default());
        for n in 1..=3 {
            hub.publish("spa", "usp_webhook", ev(&format!("e{n}"), "A-1"), None);
        }
        hub.publish(
            "hotel",
            "usp_webhook",
            json!({"event": "booking.canceled", "event_id": "h1"}),
            None,
        );
        let mut s = Box::pin(hub.listen(
            "s1",
            Filter::from_query(Some("business=spa")),
            Some(1),
            None,
        ));
        assert!(next_text(&mut s).await.starts_with("id: 2\n"));
        assert!(next_text(&mut s).await.starts_with("id: 3\n"));
        hub.publish("spa", "usp_webhook", ev("e5", "A-2"), None);
        // The hotel event (seq 4) was filtered out.
        assert!(next_text(&mut s).await.starts_with("id: 5\n"));
        let f = Filter::from_query(Some("events=booking.canceled"));
        let mut h = Box::pin(hub.listen("s2", f, Some(0), None));
        assert!(next_text(&mut h).await.contains("\"h1\""));
    }

    /// Lets through the events of one business only.
    struct Only(&'static str);

    impl Gate for Only {
        fn allows<'a>(&'a self, business: &'a str, _: Option<&'a str>, _: Instant) -> GateFut<'a> {
            let ok = business == self.0;
            Box::pin(async move { ok })
        }
    }

    #[tokio::test]
    async fn a_gated_client_gets_only_what_its_gate_allows_live_and_replayed() {
        let hub = Hub::new(HubOptions::default());
        hub.publish("hotel", "usp_webhook", ev("h0", "H-1"), None);
        hub.publish("spa", "usp_webhook", ev("s0", "A-1"), None);
        let gate: Arc<dyn Gate> = Arc::new(Only("spa"));
        let mut gated = Box::pin(hub.listen("s1", Filter::default(), Some(0), Some(gate)));
        let mut open = Box::pin(hub.listen("s2", Filter::default(), None, None));
        hub.publish("hotel", "usp_webhook", ev("h1", "H-1"), None);
        hub.publish("spa", "usp_webhook", ev("s1", "A-1"), None);
        assert!(next_text(&mut gated).await.contains("\"s0\""), "replayed");
        assert!(next_text(&mut gated).await.contains("\"s1\""), "live");
        assert!(next_text(&mut open).await.contains("\"h1\""));
        assert!(next_text(&mut open).await.contains("\"s1\""));
    }

    #[tokio::test]
    async fn overflow_drops_the_oldest_frames() {
        let hub = Hub::new(HubOptions {
            queue: 2,
            ..HubOptions::default()
        });
        let mut s = Box::pin(hub.listen("s1", Filter::default(), None, None));
        for n in 1..=5 {
            hub.publish("spa", "usp_webhook", ev(&format!("e{n}"), "A-1"), None);
        }
        assert!(next_text(&mut s).await.starts_with("id: 4\n"));
        assert!(next_text(&mut s).await.starts_with("id: 5\n"));
    }

    #[tokio::test]
    async fn subscribed_sessions_get_resource_updates_and_latest_is_kept() {
        let hub = Hub::new(HubOptions::default());
        let uri = "usp://bookings/A-1".to_string();
        hub.set_subscription("s1", &uri, true);
        let mut s = Box::pin(hub.listen("s1", Filter::from_query(Some("events=none")), None, None));
        hub.publish("spa", "usp_webhook", ev("e1", "A-1"), Some(uri.clone()));
        let text = next_text(&mut s).await;
        assert!(text.contains("notifications/resources/updated"), "{text}");
        assert!(!text.contains("usp_webhook"));
        assert_eq!(hub.latest(&uri).unwrap()["event_id"], "e1");
        hub.set_subscription("s1", &uri, false);
        hub.publish("spa", "usp_webhook", ev("e2", "A-1"), Some(uri.clone()));
        hub.publish(
            "spa",
            "usp_webhook",
            json!({"event": "none", "event_id": "e3"}),
            None,
        );
        // e2 produced nothing for this client (unsubscribed, filtered); e3 passes the filter.
        assert!(next_text(&mut s).await.contains("\"e3\""));
        assert_eq!(hub.latest(&uri).unwrap()["event_id"], "e2");
    }
}
