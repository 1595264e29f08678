//! The gateway's idempotency store: a replayed key with the same arguments gets the stored answer.
//! It never sends two calls with one key to the backend at once, and never keeps a transient failure.
//!
//! Scope: backend + business + key, for 24 hours (USP §9.1.1, UCP idempotency), in this
//! process or, with `--state redis://...`, in Redis for every replica (`crate::state::idempotency`);
//! the backend's base URL is part of it because it is the system of record. A key names one
//! operation: reused by another tool of the business, or with other arguments, it conflicts.
//! The tool and its arguments are compared in a canonical form (object keys sorted), metadata
//! excluded.
//!
//! The in-memory store is bounded twice: at most [`CAPACITY`] keys and a byte budget
//! (`--idempotency-bytes`, default [`DEFAULT_BUDGET`]) counted from the stored answers' JSON
//! text, which is what it holds. Past either bound the least recently used records go first
//! (`portico_idempotency_evictions_total`); a retry whose record was evicted is treated as a
//! new call (it reaches the backend again), the documented trade-off of a bounded store.

use crate::binding::Reply;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// How long a key is remembered.
pub const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Most keys remembered at once (least recently used evicted first).
pub const CAPACITY: u64 = 100_000;

/// Default byte budget of the in-memory store: the answers' JSON text, keys and arguments.
pub const DEFAULT_BUDGET: u64 = 64 * 1024 * 1024;

/// Bytes counted per record on top of its text (the entry, the channel, the cache's node).
const OVERHEAD: u64 = 256;

/// A stored answer: the JSON text of the reply (`state::idempotency::reply_json`), parsed back
/// on replay, so the budget counts what is actually held.
type Stored = Arc<str>;

struct Entry {
    /// The arguments the key was first used with, canonical.
    args: String,
    /// `None` while the first call runs; its answer once it is stored.
    done: watch::Receiver<Option<Stored>>,
}

impl Entry {
    /// What the record counts against the budget, at least `floor` (budget / CAPACITY) so the
    /// key count stays under [`CAPACITY`] too.
    fn weight(&self, key: &str, floor: u64) -> u32 {
        let answer = self.done.borrow().as_ref().map_or(0, |s| s.len());
        let bytes = (key.len() + self.args.len() + answer) as u64 + OVERHEAD;
        u32::try_from(bytes.max(floor)).unwrap_or(u32::MAX)
    }
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
        store: &'static Store,
        key: String,
        args: String,
        tx: watch::Sender<Option<Stored>>,
    },
    Shared(crate::state::idempotency::Lease),
}

impl Leader {
    /// Stores `reply` for replays (when `keep`), and wakes the duplicates waiting for it.
    pub async fn finish(mut self, reply: &Reply, keep: bool) {
        match self.inner.take() {
            Some(Held::Memory {
                store,
                key,
                args,
                tx,
            }) => {
                if keep {
                    store.keep(key, args, &tx, reply);
                } else {
                    store.entries.invalidate(&key);
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
            Some(Held::Memory { store, key, .. }) => store.entries.invalidate(&key),
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
    /// Records evicted for the key or byte bound (not expiry).
    evictions: Arc<AtomicU64>,
}

impl Store {
    fn new(budget: u64) -> Store {
        let floor = (budget / CAPACITY).max(1);
        let evictions = Arc::new(AtomicU64::new(0));
        let counted = evictions.clone();
        Store {
            entries: moka::sync::Cache::builder()
                .max_capacity(budget)
                .weigher(move |k: &String, e: &Arc<Entry>| e.weight(k, floor))
                // Oldest (least recently used) first; TinyLFU could refuse to keep a new answer.
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .eviction_listener(move |_k, _v, cause| {
                    if cause == moka::notification::RemovalCause::Size {
                        counted.fetch_add(1, Ordering::Relaxed);
                        crate::ops::metrics::idempotency_evicted();
                    }
                })
                .time_to_live(TTL)
                .build(),
            evictions,
        }
    }

    /// Stores the leader's answer: re-inserted (so the cache weighs it with its answer), then
    /// the duplicates waiting on the first record are woken.
    fn keep(&self, key: String, args: String, tx: &watch::Sender<Option<Stored>>, reply: &Reply) {
        let text: Stored = crate::state::idempotency::reply_json(reply)
            .to_string()
            .into();
        let (_, done) = watch::channel(Some(text.clone()));
        self.entries.insert(key, Arc::new(Entry { args, done }));
        let _ = tx.send(Some(text));
    }

    /// Claims `id` in this store (see [`claim`]).
    async fn claim(&'static self, id: String, args: String) -> Claim {
        loop {
            let (tx, rx) = watch::channel(None);
            let mine = Arc::new(Entry {
                args: args.clone(),
                done: rx,
            });
            let entry = self
                .entries
                .entry(id.clone())
                .or_insert_with(|| mine.clone())
                .into_value();
            if Arc::ptr_eq(&entry, &mine) {
                return Claim::Run(Leader {
                    inner: Some(Held::Memory {
                        store: self,
                        key: id,
                        args,
                        tx,
                    }),
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
            let reply = answered.and_then(|text| {
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| crate::state::idempotency::reply_from(&v))
            });
            match reply {
                Some(reply) => return Claim::Replay(reply),
                // The first call was dropped or failed transiently (its leader already forgot
                // the key): try to become the leader.
                None => continue,
            }
        }
    }
}

/// The byte budget of the in-memory store; set once at start-up, before the first keyed call.
static BUDGET: OnceLock<u64> = OnceLock::new();

/// Sets the in-memory store's byte budget (`serve --idempotency-bytes`). False when the store
/// already exists (the budget in force stays).
pub fn set_budget(bytes: u64) -> bool {
    BUDGET.set(bytes).is_ok() && STORE.get().is_none()
}

static STORE: OnceLock<Store> = OnceLock::new();

/// The process's in-memory store, created on first use with the budget in force.
fn store() -> &'static Store {
    STORE.get_or_init(|| Store::new(BUDGET.get().copied().unwrap_or(DEFAULT_BUDGET)))
}

/// Records evicted from the in-memory store for its key or byte bound since start.
pub fn evictions() -> u64 {
    STORE
        .get()
        .map_or(0, |s| s.evictions.load(Ordering::Relaxed))
}

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
/// while a duplicate runs. The key is the business's: the same key on another tool conflicts.
pub async fn claim(backend: &str, business: &str, tool: &str, key: &str, args: &Value) -> Claim {
    let id = format!("{backend}\u{0}{business}\u{0}{key}");
    let args = format!("{tool}\u{0}{}", canonical(args));
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
    store().claim(id, args).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(i: usize, bytes: usize) -> Reply {
        Reply::Result(
            json!({"content": [{"type": "text", "text": format!("{i}:{}", "x".repeat(bytes))}]}),
        )
    }

    async fn keep(store: &'static Store, key: &str, reply: &Reply) {
        match store.claim(key.into(), "{}".into()).await {
            Claim::Run(leader) => leader.finish(reply, true).await,
            _ => panic!("{key} was not new"),
        }
    }

    #[tokio::test]
    async fn the_byte_budget_evicts_the_oldest_answers_and_an_evicted_key_runs_again() {
        const BUDGET: u64 = 16 * 1024;
        let store: &'static Store = Box::leak(Box::new(Store::new(BUDGET)));
        for i in 0..40 {
            keep(store, &format!("k{i}"), &answer(i, 1000)).await;
            store.entries.run_pending_tasks();
            assert!(
                store.entries.weighted_size() <= BUDGET,
                "{} bytes held over a {BUDGET}-byte budget",
                store.entries.weighted_size()
            );
        }
        let held = store.entries.entry_count();
        assert!((5..40).contains(&held), "{held} records held");
        assert_eq!(store.evictions.load(Ordering::Relaxed), 40 - held);
        // The newest answer is replayed as it was stored.
        match store.claim("k39".into(), "{}".into()).await {
            Claim::Replay(r) => assert_eq!(r, answer(39, 1000)),
            _ => panic!("the newest key was not replayed"),
        }
        // The oldest was evicted: its retry is a new call (the documented trade-off).
        assert!(matches!(
            store.claim("k0".into(), "{}".into()).await,
            Claim::Run(_)
        ));
    }

    #[tokio::test]
    async fn an_answer_larger_than_the_budget_is_not_kept() {
        let store: &'static Store = Box::leak(Box::new(Store::new(4096)));
        keep(store, "big", &answer(0, 10_000)).await;
        store.entries.run_pending_tasks();
        assert!(store.entries.weighted_size() <= 4096);
        assert!(matches!(
            store.claim("big".into(), "{}".into()).await,
            Claim::Run(_)
        ));
    }

    #[tokio::test]
    async fn an_error_answer_round_trips_through_the_stored_text() {
        let store: &'static Store = Box::leak(Box::new(Store::new(DEFAULT_BUDGET)));
        let err = Reply::Error(crate::binding::RpcError {
            code: -32009,
            message: "booking_conflict".into(),
            data: Some(json!({"code": "slot_taken"})),
            http_status: Some(409),
        });
        keep(store, "e", &err).await;
        match store.claim("e".into(), "{}".into()).await {
            Claim::Replay(r) => assert_eq!(r, err),
            _ => panic!("not replayed"),
        }
        assert!(matches!(
            store.claim("e".into(), "{\"other\":1}".into()).await,
            Claim::Conflict
        ));
    }
}
