//! MCP task records and where they live: process memory, or Redis with `--state` (shared by
//! replicas, kept across restarts). It never talks MCP wire shapes and never overwrites a finished task.

pub mod poll;

use crate::config::long_running::TaskState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most records kept in memory (without `--state`); the oldest expired ones go first.
const MEMORY_CAP: usize = 10_000;

/// A REST operation being polled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub status_url: String,
    /// Unix ms of the next poll.
    pub next_poll_ms: u64,
    /// The current interval (grows by the mapping's backoff).
    pub interval_ms: u64,
    /// Unix ms after which the task fails.
    pub deadline_ms: u64,
}

/// Questions a task waits on (`input_required`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Waiting {
    /// The open round's requests, key -> request.
    pub requests: Map<String, Value>,
    /// Answers received so far, key -> response.
    pub answers: Map<String, Value>,
    /// The `requestState` of the open round.
    pub request_state: Option<Value>,
    /// The client capabilities the questions were chosen for.
    #[serde(default)]
    pub caps: Value,
}

/// One task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub tool: String,
    pub args: Value,
    pub state: TaskState,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub ttl_ms: u64,
    pub poll_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Job>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// The tool result of a completed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// `{code, message, data?}` of a failed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// A status message for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who created the task (a digest of its authorization context, see `mcp::tasks::Owner`);
    /// only that caller may read, cancel, answer or list it. `None`: created without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl TaskRecord {
    /// Unix ms when the record expires.
    pub fn expires_ms(&self) -> u64 {
        self.created_ms.saturating_add(self.ttl_ms)
    }
}

/// Why a task store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum TaskStoreError {
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error("stored task record is unreadable: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A fresh task id (unguessable: 128 random bits).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn memory() -> &'static Mutex<HashMap<String, TaskRecord>> {
    static M: OnceLock<Mutex<HashMap<String, TaskRecord>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The task `id`, unless unknown or expired.
pub async fn get(id: &str) -> Result<Option<TaskRecord>, TaskStoreError> {
    let now = now_ms();
    let rec = match crate::state::shared() {
        Some(s) => match crate::state::tasks::get(s, id).await? {
            Some(text) => Some(serde_json::from_str::<TaskRecord>(&text)?),
            None => None,
        },
        None => memory().lock().map_err(|_| poisoned())?.get(id).cloned(),
    };
    Ok(rec.filter(|r| r.expires_ms() > now))
}

fn poisoned() -> TaskStoreError {
    TaskStoreError::Corrupt(serde_json::Error::io(std::io::Error::other(
        "task table lock poisoned",
    )))
}

/// Stores `rec` unless the stored task is already terminal; whether it was written.
pub async fn put(rec: &TaskRecord) -> Result<bool, TaskStoreError> {
    let left = rec.expires_ms().saturating_sub(now_ms()).max(1);
    match crate::state::shared() {
        Some(s) => {
            let text = serde_json::to_string(rec)?;
            Ok(crate::state::tasks::put(s, &rec.id, &text, Duration::from_millis(left)).await?)
        }
        None => {
            let mut m = memory().lock().map_err(|_| poisoned())?;
            if m.get(&rec.id).is_some_and(|r| r.state.is_terminal()) {
                return Ok(false);
            }
            if m.len() >= MEMORY_CAP {
                let now = now_ms();
                m.retain(|_, r| r.expires_ms() > now);
            }
            if m.len() >= MEMORY_CAP
                && let Some(oldest) = m
                    .values()
                    .min_by_key(|r| r.created_ms)
                    .map(|r| r.id.clone())
            {
                m.remove(&oldest);
            }
            m.insert(rec.id.clone(), rec.clone());
            Ok(true)
        }
    }
}

/// Records a new task under its owner, for [`list`] (Redis only: memory lists by scanning).
pub async fn index(rec: &TaskRecord) -> Result<(), TaskStoreError> {
    if let (Some(s), Some(owner)) = (crate::state::shared(), &rec.owner) {
        let ttl = Duration::from_millis(rec.ttl_ms.max(1));
        crate::state::tasks::index(s, owner, &rec.id, rec.created_ms, ttl).await?;
    }
    Ok(())
}

/// Where a page of [`list`] starts: after the task created at `.0` with id `.1`.
pub type After = (u64, String);

/// `owner`'s live tasks after `after`, oldest first, at most `n`; whether more follow.
pub async fn list(
    owner: &str,
    after: Option<&After>,
    n: usize,
) -> Result<(Vec<TaskRecord>, bool), TaskStoreError> {
    let now = now_ms();
    let later =
        |ms: u64, id: &str| after.is_none_or(|(a_ms, a_id)| (ms, id) > (*a_ms, a_id.as_str()));
    let mut out = Vec::new();
    match crate::state::shared() {
        Some(s) => {
            let from = after.map(|a| a.0).unwrap_or(0);
            let mut ids = crate::state::tasks::owned(s, owner, from).await?;
            ids.retain(|(id, ms)| later(*ms, id));
            ids.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            let mut gone = Vec::new();
            for (id, _) in ids {
                if out.len() > n {
                    break;
                }
                match get(&id).await? {
                    Some(r) if r.owner.as_deref() == Some(owner) => out.push(r),
                    _ => gone.push(id),
                }
            }
            crate::state::tasks::unindex(s, owner, &gone).await?;
        }
        None => {
            let m = memory().lock().map_err(|_| poisoned())?;
            out = m
                .values()
                .filter(|r| r.owner.as_deref() == Some(owner) && r.expires_ms() > now)
                .filter(|r| later(r.created_ms, &r.id))
                .cloned()
                .collect();
            out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        }
    }
    let more = out.len() > n;
    out.truncate(n);
    Ok((out, more))
}

/// What the forward path hands back when a task-wanting call's backend answered `202`.
#[derive(Debug, Default)]
pub struct Slot {
    /// The caller asked for a task (else the call is completed synchronously).
    pub wanted: bool,
    /// The accepted operation, when the backend answered `202`.
    pub job: Option<Job>,
}

tokio::task_local! {
    /// Set by the MCP edge around a `tools/call` that may become a task.
    pub static SLOT: std::cell::RefCell<Slot>;
}

/// Whether the call in progress asked for a task.
pub fn wanted() -> bool {
    SLOT.try_with(|s| s.borrow().wanted).unwrap_or(false)
}

/// Hands an accepted operation to the edge that asked for a task.
pub fn hand_over(job: Job) {
    let _ = SLOT.try_with(|s| s.borrow_mut().job = Some(job));
}
