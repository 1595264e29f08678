//! Sessions of the 2025 protocol era (`Mcp-Session-Id`): negotiated version and the GET stream.
//! A bounded, expiring in-memory table; it never holds a lock across an await, and never drops a
//! session it handed out except by idle expiry or `DELETE`.
//!
//! At the cap, a new session is refused (the caller answers 503 with `Retry-After`) rather than
//! evicting one: every id handed out stays valid until it is idle for the configured time. A
//! session with an open GET stream or a call in flight is busy, never idle.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// Milliseconds since the first use of this clock, so instants fit in an atomic.
fn now_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    EPOCH.elapsed().as_millis() as u64
}

/// One client session.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    /// Negotiated protocol version.
    pub version: String,
    /// Sender of the open GET SSE stream, when one is open.
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// Log level, calls in flight and their progress tokens.
    pub calls: Arc<super::notify::Calls>,
    /// Client capabilities and the server->client requests waiting for answers.
    pub asks: Arc<super::input::Pending>,
    /// Last use (`now_ms`): a request naming it, or a sweep that found it busy.
    last_used: AtomicU64,
    /// When this replica last renewed the session's shared record (`now_ms`).
    renewed_at: AtomicU64,
    /// Turns true when the session ends (DELETE, expiry, or ended on another replica).
    ended: watch::Sender<bool>,
}

impl Session {
    fn new(id: &str, version: &str) -> Session {
        let now = now_ms();
        Session {
            id: id.to_string(),
            version: version.to_string(),
            stream: Mutex::new(None),
            calls: Arc::default(),
            asks: Arc::default(),
            last_used: AtomicU64::new(now),
            renewed_at: AtomicU64::new(now),
            ended: watch::Sender::new(false),
        }
    }

    /// Attaches a new GET stream (replacing an older one, which then ends).
    pub fn attach_stream(&self, tx: mpsc::Sender<Bytes>) {
        if let Ok(mut slot) = self.stream.lock() {
            *slot = Some(tx);
        }
    }

    /// Queues one SSE frame on the GET stream; false when none is open or it is full.
    pub fn push(&self, frame: Bytes) -> bool {
        let tx = match self.stream.lock() {
            Ok(slot) => slot.clone(),
            Err(_) => None,
        };
        tx.is_some_and(|tx| tx.try_send(frame).is_ok())
    }

    /// True while a GET stream is attached and its reader alive.
    pub fn has_stream(&self) -> bool {
        self.stream
            .lock()
            .map(|s| s.as_ref().is_some_and(|tx| !tx.is_closed()))
            .unwrap_or(false)
    }

    /// Busy: a GET stream is open or a call is in flight. A busy session never expires.
    pub fn busy(&self) -> bool {
        self.calls.in_flight() > 0 || self.has_stream()
    }

    /// True once, per `every`, when this replica should renew the shared record (the caller
    /// then renews it); false in between, so use is not a Redis write per request.
    pub fn renewal_due(&self, every: Duration) -> bool {
        let now = now_ms();
        let last = self.renewed_at.load(Ordering::Relaxed);
        now.saturating_sub(last) >= every.as_millis() as u64
            && self
                .renewed_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Resolves when the session has ended (at once if it already has).
    pub async fn ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }

    fn end(&self) {
        self.ended.send_replace(true);
        if let Ok(mut slot) = self.stream.lock() {
            *slot = None;
        }
    }

    fn touch(&self, now: u64) {
        self.last_used.store(now, Ordering::Relaxed);
    }

    /// When it expires if left idle from now on (`now_ms`).
    fn expires_at(&self, idle: Duration) -> u64 {
        self.last_used
            .load(Ordering::Relaxed)
            .saturating_add(idle.as_millis() as u64)
    }

    /// Expired: idle for `idle` and not busy. A busy one is touched, so that it has a whole idle
    /// period once its stream or call ends.
    fn expired(&self, idle: Duration, now: u64) -> bool {
        if self.expires_at(idle) > now {
            return false;
        }
        if self.busy() {
            self.touch(now);
            return false;
        }
        true
    }
}

/// Why no session was made: the table is full of sessions not yet idle long enough.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("portico holds its maximum of {max} sessions; one expires within {retry_after_s} s")]
pub struct Full {
    pub max: usize,
    /// Seconds until the first idle session expires (at least 1).
    pub retry_after_s: u64,
}

/// The session table: at most `max` sessions, each ended after `idle` without use.
#[derive(Clone)]
pub struct Sessions {
    table: Arc<Table>,
}

struct Table {
    map: RwLock<HashMap<String, Arc<Session>>>,
    max: usize,
    idle: Duration,
    /// While full: `now_ms` before which a refusal does not scan the table again (at most a
    /// second later, since a stream or call ending can make a session expirable)...
    full_until: AtomicU64,
    /// ...and the first idle session's expiry found by the last scan, for `Retry-After`.
    first_expiry: AtomicU64,
}

impl Sessions {
    pub fn new(max: u64, idle: Duration) -> Self {
        Sessions {
            table: Arc::new(Table {
                map: RwLock::new(HashMap::new()),
                max: usize::try_from(max).unwrap_or(usize::MAX).max(1),
                idle,
                full_until: AtomicU64::new(0),
                first_expiry: AtomicU64::new(0),
            }),
        }
    }

    /// The idle time after which a session ends.
    pub fn idle(&self) -> Duration {
        self.table.idle
    }

    /// Creates a session with a fresh, unguessable id (visible ASCII). The session is in the
    /// table when this returns.
    pub fn create(&self, version: &str) -> Result<Arc<Session>, Full> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.insert(&id, version, false)
    }

    /// Takes in a session whose record is in the shared state (another replica created it, or
    /// this one and it expired here; the client capabilities it declared are not known here).
    /// When full, the least recently used copy that is not busy makes room: its record stays
    /// in the shared state, so it is taken in again when next used.
    pub fn adopt(&self, id: &str, version: &str) -> Result<Arc<Session>, Full> {
        self.insert(id, version, true)
    }

    fn insert(&self, id: &str, version: &str, evict: bool) -> Result<Arc<Session>, Full> {
        let t = &*self.table;
        let Ok(mut map) = t.map.write() else {
            return Err(Full {
                max: t.max,
                retry_after_s: 1,
            });
        };
        if let Some(s) = map.get(id) {
            return Ok(s.clone());
        }
        if map.len() >= t.max {
            let now = now_ms();
            if now < t.full_until.load(Ordering::Relaxed) {
                return Err(self.full_at(t.first_expiry.load(Ordering::Relaxed), now));
            }
            map.retain(|_, s| {
                let gone = s.expired(t.idle, now);
                if gone {
                    s.end();
                }
                !gone
            });
            if map.len() >= t.max && evict {
                let lru = map
                    .iter()
                    .filter(|(_, s)| !s.busy())
                    .min_by_key(|(_, s)| s.last_used.load(Ordering::Relaxed))
                    .map(|(k, _)| k.clone());
                if let Some(s) = lru.and_then(|k| map.remove(&k)) {
                    s.end();
                }
            }
            if map.len() >= t.max {
                let first = self.first_expiry(&map, now);
                t.first_expiry.store(first, Ordering::Relaxed);
                t.full_until
                    .store(first.min(now.saturating_add(1000)), Ordering::Relaxed);
                return Err(self.full_at(first, now));
            }
        }
        let s = Arc::new(Session::new(id, version));
        map.insert(id.to_string(), s.clone());
        Ok(s)
    }

    /// When the first idle session of the full `map` expires (`now_ms`); with every session
    /// busy, one idle period from now.
    fn first_expiry(&self, map: &HashMap<String, Arc<Session>>, now: u64) -> u64 {
        let t = &*self.table;
        map.values()
            .filter(|s| !s.busy())
            .map(|s| s.expires_at(t.idle))
            .min()
            .unwrap_or(now.saturating_add(t.idle.as_millis() as u64))
    }

    /// The refusal while full, the first session expiring at `first`.
    fn full_at(&self, first: u64, now: u64) -> Full {
        Full {
            max: self.table.max,
            retry_after_s: first.saturating_sub(now).div_ceil(1000).max(1),
        }
    }

    /// The session `id`, touched (its idle time starts again); `None` when it does not exist
    /// or has expired.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let t = &*self.table;
        let s = t.map.read().ok()?.get(id).cloned()?;
        let now = now_ms();
        if s.expired(t.idle, now) {
            self.remove(id);
            return None;
        }
        s.touch(now);
        Some(s)
    }

    /// Ends a session; false when it did not exist.
    pub fn remove(&self, id: &str) -> bool {
        let removed = self.table.map.write().ok().and_then(|mut m| m.remove(id));
        removed.map(|s| s.end()).is_some()
    }

    /// Ends every expired session and returns their ids.
    pub fn sweep(&self) -> Vec<String> {
        let t = &*self.table;
        let now = now_ms();
        let mut gone = Vec::new();
        if let Ok(mut map) = t.map.write() {
            map.retain(|id, s| {
                let expired = s.expired(t.idle, now);
                if expired {
                    s.end();
                    gone.push(id.clone());
                }
                !expired
            });
        }
        gone
    }

    /// The ids of busy sessions whose shared record is due for renewal (marked renewed), so
    /// a long call keeps its session alive on other replicas too.
    pub fn busy_renewals(&self, every: Duration) -> Vec<String> {
        let Ok(map) = self.table.map.read() else {
            return Vec::new();
        };
        map.values()
            .filter(|s| s.calls.in_flight() > 0 && s.renewal_due(every))
            .map(|s| s.id.clone())
            .collect()
    }

    pub fn len(&self) -> u64 {
        self.table.map.read().map(|m| m.len() as u64).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_get_remove() {
        let s = Sessions::new(100, Duration::from_secs(60));
        let a = s.create("2025-11-25").expect("room");
        assert!(a.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert_eq!(
            s.get(&a.id).map(|x| x.version.clone()).as_deref(),
            Some("2025-11-25")
        );
        assert!(s.remove(&a.id));
        assert!(s.get(&a.id).is_none());
        assert!(!s.remove(&a.id));
    }

    #[tokio::test]
    async fn pushes_to_the_attached_stream() {
        let s = Sessions::new(10, Duration::from_secs(60))
            .create("2025-11-25")
            .expect("room");
        assert!(!s.push(Bytes::from_static(b"x")));
        let (tx, mut rx) = mpsc::channel(4);
        s.attach_stream(tx);
        assert!(s.has_stream());
        assert!(s.push(Bytes::from_static(b"hello")));
        assert_eq!(rx.recv().await.as_deref(), Some(&b"hello"[..]));
    }

    #[test]
    fn a_full_table_refuses_and_keeps_every_session_it_handed_out() {
        let s = Sessions::new(3, Duration::from_secs(60));
        let made: Vec<_> = (0..3)
            .map(|_| s.create("2025-11-25").expect("room"))
            .collect();
        let full = s.create("2025-11-25").expect_err("full");
        assert_eq!(full.max, 3);
        assert!((59..=60).contains(&full.retry_after_s), "{full:?}");
        for m in &made {
            assert!(s.get(&m.id).is_some(), "a session handed out stays valid");
        }
        assert!(s.remove(&made[0].id));
        assert!(s.create("2025-11-25").is_ok(), "room again after a DELETE");
    }

    #[test]
    fn a_full_table_takes_in_a_shared_session_for_its_least_recently_used_copy() {
        let s = Sessions::new(3, Duration::from_secs(60));
        s.adopt("old", "2025-11-25").expect("room");
        std::thread::sleep(Duration::from_millis(3));
        let busy = s.adopt("busy", "2025-11-25").expect("room");
        let (tx, _rx) = mpsc::channel(1);
        busy.attach_stream(tx);
        std::thread::sleep(Duration::from_millis(3));
        s.adopt("recent", "2025-11-25").expect("room");
        std::thread::sleep(Duration::from_millis(3));
        assert!(s.get("old").is_some(), "now the most recently used");
        assert!(s.adopt("new", "2025-11-25").is_ok());
        assert!(
            s.get("recent").is_none(),
            "the least recently used idle copy made room"
        );
        assert!(s.get("busy").is_some() && s.get("old").is_some());
        assert!(
            s.create("2025-11-25").is_err(),
            "a new session is refused, not evicted for"
        );
    }

    #[tokio::test]
    async fn idle_sessions_expire_busy_ones_do_not() {
        let s = Sessions::new(2, Duration::from_millis(50));
        let idle = s.create("2025-11-25").expect("room");
        let streaming = s.create("2025-11-25").expect("room");
        let (tx, _rx) = mpsc::channel(1);
        streaming.attach_stream(tx);
        std::thread::sleep(Duration::from_millis(80));
        // Full, but the idle one has expired: it makes room, the streaming one stays.
        let fresh = s
            .create("2025-11-25")
            .expect("the expired session made room");
        assert!(s.get(&idle.id).is_none());
        idle.ended().await;
        assert!(s.get(&streaming.id).is_some());
        assert!(s.get(&fresh.id).is_some());
        assert_eq!(s.sweep(), Vec::<String>::new());
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(s.sweep(), vec![fresh.id.clone()], "only the idle one");
    }

    #[test]
    fn a_session_with_a_call_in_flight_is_renewed_once_per_period() {
        let s = Sessions::new(10, Duration::from_secs(60));
        let calling = s.create("2025-11-25").expect("room");
        s.create("2025-11-25").expect("room");
        let (reg, _cancel) = calling
            .calls
            .register(&serde_json::json!(1), None)
            .expect("registered");
        std::thread::sleep(Duration::from_millis(5));
        let every = Duration::from_millis(1);
        assert_eq!(s.busy_renewals(every), vec![calling.id.clone()]);
        assert!(
            s.busy_renewals(Duration::from_secs(60)).is_empty(),
            "just renewed"
        );
        drop(reg);
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.busy_renewals(every).is_empty(), "the call ended");
    }

    #[test]
    fn renewal_is_due_once_per_period() {
        let s = Session::new("x", "2025-11-25");
        assert!(!s.renewal_due(Duration::from_secs(60)));
        assert!(s.renewal_due(Duration::ZERO));
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.renewal_due(Duration::from_millis(1)));
        assert!(!s.renewal_due(Duration::from_secs(60)));
    }
}
