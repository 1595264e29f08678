//! The gateway's idempotency store: a replayed key with the same arguments gets the stored answer.
//! It never sends two calls with one key to the backend at once, and never keeps a transient failure.
//!
//! Scope: backend + business + tool + key, for 24 hours (USP §9.1.1, UCP idempotency), in this
//! process or, with `--state redis://...`, in Redis for every replica (`crate::state::idempotency`);
//! the backend's base URL is part of it because it is the system of record.
//! Arguments are compared in a canonical form (object keys sorted), metadata excluded.

use crate::binding::Reply;
use serde_json::Value;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::watch;

/// How long a key is remembered.
pub const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Most keys remembered at once (oldest evicted first).
const CAPACITY: u64 = 100_000;

struct Entry {
    /// The arguments the key was first used with, canonical.
    args: String,
    /// `None` while the first call runs; its answer once it is stored.
    done: watch::Receiver<Option<Reply>>,
}

/// What a call carrying a key must do.
pub enum Claim {
    /// First use (or the earlier one failed transiently): run it, then `finish`.
    Run(Leader),
    /// The same key and arguments were answered: this is the answer.
    Replay(Reply),
    /// The key was used with other arguments.
    Conflict,
    /// The shared store cannot be reached: the call is refused rather than risk running twice.
    Unavailable(String),
}

/// The right to run a keyed call; dropping it without `finish` forgets the key.
pub struct Leader {
    inner: Option<Held>,
}

enum Held {
    Memory {
        key: String,
        tx: watch::Sender<Option<Reply>>,
    },
    Shared(crate::state::idempotency::Lease),
}

impl Leader {
    /// Stores `reply` for replays (when `keep`), and wakes the duplicates waiting for it.
    pub async fn finish(mut self, reply: &Reply, keep: bool) {
        match self.inner.take() {
            Some(Held::Memory { key, tx }) => {
                if keep {
                    let _ = tx.send(Some(reply.clone()));
                } else {
                    STORE.entries.invalidate(&key);
                }
            }
            Some(Held::Shared(lease)) => {
                if let Some(state) = crate::state::shared() {
                    let reply = keep.then(|| reply.clone());
                    let stored = tokio::spawn(async move {
                        lease.finish(state, reply.as_ref(), TTL).await;
                    });
                    let _ = stored.await;
                }
            }
            None => {}
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // Cancelled before an answer: a retry must reach the backend.
        match self.inner.take() {
            Some(Held::Memory { key, .. }) => STORE.entries.invalidate(&key),
            Some(Held::Shared(lease)) => {
                if let (Some(state), Ok(rt)) = (
                    crate::state::shared(),
                    tokio::runtime::Handle::try_current(),
                ) {
                    rt.spawn(lease.finish(state, None, TTL));
                }
            }
            None => {}
        }
    }
}

struct Store {
    entries: moka::sync::Cache<String, Arc<Entry>>,
}

static STORE: LazyLock<Store> = LazyLock::new(|| Store {
    entries: moka::sync::Cache::builder()
        .max_capacity(CAPACITY)
        .time_to_live(TTL)
        .build(),
});

/// JSON text with object keys sorted at every level.
pub(crate) fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

/// Claims `key` for a call of `tool` (of `business`, served by `backend`) with `args`; waits
/// while a duplicate runs.
pub async fn claim(backend: &str, business: &str, tool: &str, key: &str, args: &Value) -> Claim {
    let id = format!("{backend}\u{0}{business}\u{0}{tool}\u{0}{key}");
    let args = canonical(args);
    if let Some(state) = crate::state::shared() {
        use crate::state::idempotency::{SharedClaim, claim as shared_claim};
        // In a task of its own: the Redis client's futures are not `Sync`, and a streamed
        // tools/call answer must be.
        let claimed = tokio::spawn(async move { shared_claim(state, &id, &args).await }).await;
        return match claimed {
            Ok(Ok(SharedClaim::Run(lease))) => Claim::Run(Leader {
                inner: Some(Held::Shared(lease)),
            }),
            Ok(Ok(SharedClaim::Replay(reply))) => Claim::Replay(reply),
            Ok(Ok(SharedClaim::Conflict)) => Claim::Conflict,
            Ok(Err(e)) => Claim::Unavailable(e.to_string()),
            Err(e) => Claim::Unavailable(e.to_string()),
        };
    }
    loop {
        let (tx, rx) = watch::channel(None);
        let mine = Arc::new(Entry {
            args: args.clone(),
            done: rx,
        });
        let entry = STORE
            .entries
            .entry(id.clone())
            .or_insert_with(|| mine.clone())
            .into_value();
        if Arc::ptr_eq(&entry, &mine) {
            return Claim::Run(Leader {
                inner: Some(Held::Memory { key: id, tx }),
            });
        }
        if entry.args != args {
            return Claim::Conflict;
        }
        let mut done = entry.done.clone();
        let answered = done
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|r| r.clone());
        match answered {
            Some(reply) => return Claim::Replay(reply),
            // The first call was dropped or failed transiently (its leader already forgot the
            // key): try to become the leader.
            None => continue,
        }
    }
}
