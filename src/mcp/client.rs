//! A 2025-era session's link to its client for server->client requests: declared capabilities,
//! the requests waiting for an answer, and the call's SSE stream. It never builds those requests.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// One 2025 session's view of its client: declared capabilities and the server->client
/// requests waiting for an answer.
#[derive(Debug, Default)]
pub struct Pending {
    capabilities: OnceLock<Value>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next: AtomicU64,
}

/// Why a client's response POST was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliverError {
    #[error("no request with this id is waiting for an answer in this session")]
    Unknown,
}

/// Removes a waiting request when its call ends (answered, timed out or abandoned).
pub(super) struct Waiting<'a> {
    pending: &'a Pending,
    pub(super) id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.pending.waiting.lock() {
            m.remove(&self.id);
        }
    }
}

impl Pending {
    /// Records the capabilities the client declared at `initialize` (first call wins).
    pub fn set_capabilities(&self, caps: Value) {
        let _ = self.capabilities.set(caps);
    }

    pub(super) fn capabilities(&self) -> Value {
        self.capabilities
            .get()
            .cloned()
            .unwrap_or_else(|| json!({}))
    }

    /// Routes a client response (`result` or `error` object) to the call waiting for `id`.
    pub fn deliver(&self, id: &Value, response: Value) -> Result<(), DeliverError> {
        let Some(key) = id.as_str() else {
            return Err(DeliverError::Unknown);
        };
        let tx = self
            .waiting
            .lock()
            .ok()
            .and_then(|mut m| m.remove(key))
            .ok_or(DeliverError::Unknown)?;
        // The waiting call may have ended in between: the answer then has no one to go to.
        tx.send(response).map_err(|_| DeliverError::Unknown)
    }

    /// Registers a new request id; the returned guard removes it when the call ends.
    pub(super) fn wait(&self) -> (Waiting<'_>, oneshot::Receiver<Value>) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("portico-ask-{n}");
        let (tx, rx) = oneshot::channel();
        if let Ok(mut m) = self.waiting.lock() {
            m.insert(id.clone(), tx);
        }
        (Waiting { pending: self, id }, rx)
    }

    /// Number of requests waiting for an answer.
    pub fn waiting(&self) -> usize {
        self.waiting.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// A 2025-era call's way to its client: the POST's SSE stream and the session's waiting table.
#[derive(Debug, Clone)]
pub struct ClientLink {
    pub tx: mpsc::UnboundedSender<Value>,
    pub pending: Arc<Pending>,
}
