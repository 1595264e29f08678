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
