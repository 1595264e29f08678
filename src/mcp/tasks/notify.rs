//! Task status notifications: which open streams of this process listen for which tasks (a 2025-11-25 session's GET stream: its owner's tasks, as `notifications/tasks/status`; a 2026-07-28 `subscriptions/listen` stream: the task ids it named and owns, as `notifications/tasks`), and the frames they get.
//! It never sends a task to a stream of another owner, never blocks on a slow stream (a full queue loses the frame; polling still answers), and never crosses to another replica.

use super::wire::{detailed, task_fields};
use crate::tasks::TaskRecord;
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use tokio::sync::mpsc;

/// Frames queued per stream before new ones are lost.
const QUEUE: usize = 64;

/// The 2025-11-25 notification.
pub const LEGACY_METHOD: &str = "notifications/tasks/status";
/// The 2026-07-28 extension's notification.
pub const METHOD: &str = "notifications/tasks";

/// What one stream listens for.
enum Wants {
    /// Every task of this owner (a 2025-11-25 session's GET stream).
    Owner(String),
    /// These tasks (already checked to belong to the listener), each frame tagged with
    /// `_meta` (the `subscriptions/listen` request's `subscriptionId`).
    Tasks { ids: HashSet<String>, meta: Value },
}

struct Listener {
    wants: Wants,
    tx: mpsc::Sender<Bytes>,
}

fn listeners() -> &'static Mutex<HashMap<u64, Listener>> {
    static L: OnceLock<Mutex<HashMap<u64, Listener>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(HashMap::new()))
}

fn sse(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// The 2025-11-25 `notifications/tasks/status` of `rec`: the task's fields.
fn legacy_frame(rec: &TaskRecord) -> Bytes {
    sse(&json!({"jsonrpc": "2.0", "method": LEGACY_METHOD,
                "params": Value::Object(task_fields(rec, false))}))
}

/// The 2026-07-28 `notifications/tasks` of `rec`: the `DetailedTask` `tasks/get` would answer,
/// with the subscription's `_meta`.
fn modern_frame(rec: &TaskRecord, meta: &Value) -> Bytes {
    let mut params = detailed(rec);
    params["_meta"] = meta.clone();
    sse(&json!({"jsonrpc": "2.0", "method": METHOD, "params": params}))
}

/// Tells the streams that listen for `rec` its current state (called after every stored change
/// of status, or of the questions an `input_required` task waits on).
pub(super) fn changed(rec: &TaskRecord) {
    let Ok(all) = listeners().lock() else {
        return;
    };
    for l in all.values() {
        let frame = match &l.wants {
            Wants::Owner(o) if rec.owner.as_deref() == Some(o.as_str()) => legacy_frame(rec),
            Wants::Tasks { ids, meta } if ids.contains(&rec.id) => modern_frame(rec, meta),
            _ => continue,
        };
        // A stream that does not keep up loses the frame (its client can poll `tasks/get`).
        let _ = l.tx.try_send(frame);
    }
}

/// Removes a listener when its stream is dropped.
struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut all) = listeners().lock() {
            all.remove(&self.0);
        }
    }
}

fn register(wants: Wants) -> (Registration, mpsc::Receiver<Bytes>) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(QUEUE);
    if let Ok(mut all) = listeners().lock() {
        all.insert(id, Listener { wants, tx });
    }
    (Registration(id), rx)
}

fn frames(
    reg: Registration,
    rx: mpsc::Receiver<Bytes>,
) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
    futures_util::stream::unfold((rx, reg), |(mut rx, reg)| async move {
        let frame = rx.recv().await?;
        Some((frame, (rx, reg)))
    })
}

/// The task notifications of a 2025-11-25 session's GET stream whose owner (see
/// [`super::caller`]) is `owner`: every status change of that owner's tasks, while the stream
/// is open.
pub fn for_owner(owner: String) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
    let (reg, rx) = register(Wants::Owner(owner));
    frames(reg, rx)
}

/// The task notifications of a 2026-07-28 `subscriptions/listen` stream for `ids`, which the
/// caller checked it owns: the current state of each first (a task may have changed before the
/// stream opened), then every change.
pub(super) async fn for_tasks(
    ids: Vec<String>,
    meta: Value,
) -> impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static {
    use futures_util::StreamExt;
    // Registered before the current states are read, so no change falls between the two.
    let (reg, rx) = register(Wants::Tasks {
        ids: ids.iter().cloned().collect(),
        meta: meta.clone(),
    });
    let mut first = Vec::new();
    for id in &ids {
        if let Ok(Some(rec)) = crate::tasks::get(id).await {
            first.push(modern_frame(&rec, &meta));
        }
    }
    futures_util::stream::iter(first).chain(frames(reg, rx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::long_running::TaskState;
    use futures_util::StreamExt;

    fn rec(id: &str, owner: Option<&str>, state: TaskState) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            tool: "t".into(),
            args: json!({}),
            state,
            created_ms: 1_765_000_000_000,
            updated_ms: 1_765_000_001_000,
            ttl_ms: 60_000,
            poll_ms: 500,
            job: None,
            waiting: None,
            result: Some(json!({"content": []})),
            error: None,
            message: None,
            owner: owner.map(str::to_string),
        }
    }

    fn data(frame: &Bytes) -> Value {
        let text = std::str::from_utf8(frame).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(line).unwrap()
    }

    #[tokio::test]
    async fn an_owners_stream_gets_only_its_own_tasks_in_the_2025_form() {
        let mut mine = Box::pin(for_owner("unit-owner-a".into()));
        let mut theirs = Box::pin(for_owner("unit-owner-b".into()));
        changed(&rec("x1", Some("unit-owner-a"), TaskState::Completed));
        let got = data(&mine.next().await.unwrap());
        assert_eq!(got["method"], LEGACY_METHOD);
        assert_eq!(got["params"]["taskId"], "x1");
        assert_eq!(got["params"]["status"], "completed");
        assert_eq!(got["params"]["ttl"], 60_000);
        assert_eq!(got["params"]["pollInterval"], 500);
        assert!(got["params"].get("result").is_none(), "{got}");
        let nothing =
            tokio::time::timeout(std::time::Duration::from_millis(50), theirs.next()).await;
        assert!(nothing.is_err(), "another owner's stream got a frame");
    }

    #[tokio::test]
    async fn a_listen_stream_gets_its_tasks_as_detailed_tasks_tagged_with_its_subscription() {
        let meta = json!({"io.modelcontextprotocol/subscriptionId": 7});
        let mut s = Box::pin(for_tasks(vec!["unit-y1".into()], meta.clone()).await);
        changed(&rec("unit-y2", None, TaskState::Completed));
        changed(&rec("unit-y1", None, TaskState::Completed));
        let got = data(&s.next().await.unwrap());
        assert_eq!(got["method"], METHOD);
        assert_eq!(got["params"]["taskId"], "unit-y1");
        assert_eq!(got["params"]["ttlMs"], 60_000);
        assert_eq!(got["params"]["result"], json!({"content": []}));
        assert_eq!(got["params"]["_meta"], meta);
        drop(s);
        assert!(
            listeners()
                .lock()
                .unwrap()
                .values()
                .all(|l| !matches!(&l.wants, Wants::Tasks { ids, .. } if ids.contains("unit-y1")))
        );
    }
}
