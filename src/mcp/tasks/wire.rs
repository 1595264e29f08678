//! The wire shapes of a task: its shared fields in each era's names, `CreateTaskResult` and the 2026-07-28 `DetailedTask`.
//! A leaf: it never reads or writes the task store and never decides who may see a task.

use crate::config::long_running::TaskState;
use crate::mcp::answer::Answer;
use crate::tasks::TaskRecord;
use serde_json::{Map, Value, json};

fn rfc3339(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    format!(
        "{}.{:03}Z",
        crate::clock::rfc3339(secs).trim_end_matches('Z'),
        ms % 1000
    )
}

/// The task's shared fields, in the era's names.
pub(super) fn task_fields(rec: &TaskRecord, modern: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(rec.id));
    m.insert("status".into(), json!(rec.state.as_str()));
    if let Some(msg) = &rec.message {
        m.insert("statusMessage".into(), json!(msg));
    }
    m.insert("createdAt".into(), json!(rfc3339(rec.created_ms)));
    m.insert("lastUpdatedAt".into(), json!(rfc3339(rec.updated_ms)));
    let (ttl, poll) = if modern {
        ("ttlMs", "pollIntervalMs")
    } else {
        ("ttl", "pollInterval")
    };
    m.insert(ttl.into(), json!(rec.ttl_ms));
    m.insert(poll.into(), json!(rec.poll_ms));
    m
}

/// `CreateTaskResult`: flat with `resultType: "task"` (2026-07-28), `{task}` (2025-11-25).
pub(super) fn created(rec: &TaskRecord, modern: bool) -> Answer {
    if modern {
        let mut m = task_fields(rec, true);
        m.insert("resultType".into(), json!("task"));
        Answer::Result(Value::Object(m))
    } else {
        Answer::Result(json!({ "task": Value::Object(task_fields(rec, false)) }))
    }
}

/// The `DetailedTask` of 2026-07-28 `tasks/get`: result, error or open questions inlined.
pub(super) fn detailed(rec: &TaskRecord) -> Value {
    let mut m = task_fields(rec, true);
    match rec.state {
        TaskState::Completed => {
            if let Some(r) = &rec.result {
                m.insert("result".into(), r.clone());
            }
        }
        TaskState::Failed => {
            if let Some(e) = &rec.error {
                m.insert("error".into(), e.clone());
            }
        }
        TaskState::InputRequired => {
            if let Some(w) = &rec.waiting {
                let open: Map<String, Value> = w
                    .requests
                    .iter()
                    .filter(|(k, _)| !w.answers.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                m.insert("inputRequests".into(), Value::Object(open));
            }
        }
        _ => {}
    }
    Value::Object(m)
}
