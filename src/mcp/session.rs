//! Sessions of the 2025 protocol era (`Mcp-Session-Id`): negotiated version and the GET stream.
//! A bounded, expiring in-memory table; it never holds a lock across an await.

use bytes::Bytes;
use moka::sync::Cache;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

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
}

impl Session {
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
}

/// The session table.
#[derive(Clone)]
pub struct Sessions {
    cache: Cache<String, Arc<Session>>,
}

impl Sessions {
    pub fn new(max: u64, idle: Duration) -> Self {
        Sessions {
            cache: Cache::builder()
                .max_capacity(max)
                .time_to_idle(idle)
                .build(),
        }
    }

    /// Creates a session with a fresh, unguessable id (visible ASCII).
    pub fn create(&self, version: &str) -> Arc<Session> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let s = Self::fresh(&id, version);
        self.cache.insert(id, s.clone());
        s
    }

    /// Takes in a session another replica created (its record came from the shared state; the
    /// client capabilities it declared there are not known here).
    pub fn adopt(&self, id: &str, version: &str) -> Arc<Session> {
        self.cache
            .get_with(id.to_string(), || Self::fresh(id, version))
    }

    fn fresh(id: &str, version: &str) -> Arc<Session> {
        Arc::new(Session {
            id: id.to_string(),
            version: version.to_string(),
            stream: Mutex::new(None),
            calls: Arc::default(),
            asks: Arc::default(),
        })
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.cache.get(id)
    }

    /// Ends a session; false when it did not exist.
    pub fn remove(&self, id: &str) -> bool {
        self.cache.remove(id).is_some()
    }

    pub fn len(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.entry_count()
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
        let a = s.create("2025-11-25");
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
        let s = Sessions::new(10, Duration::from_secs(60)).create("2025-11-25");
        assert!(!s.push(Bytes::from_static(b"x")));
        let (tx, mut rx) = mpsc::channel(4);
        s.attach_stream(tx);
        assert!(s.has_stream());
        assert!(s.push(Bytes::from_static(b"hello")));
        assert_eq!(rx.recv().await.as_deref(), Some(&b"hello"[..]));
    }
}
