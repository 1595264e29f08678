//! Compiling a tool's `long_running:` section (a `202` + status resource served as an MCP task)
//! into a `LongRunning`. It must never panic on user input: every problem becomes a `Diagnostic`.

use super::diag::{Diagnostic, locate_yaml};
use super::mapping::LongRunningSpec;
use crate::translate::transform::Transform;
use crate::util::duration::parse_duration;
use http::Method;
use std::path::Path;
use std::time::Duration;

/// What a task is in: the task states of MCP tasks that a status resource can map to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    /// The wire name (`working`, `input_required`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Completed, failed or cancelled: the task no longer changes.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "working" => TaskState::Working,
            "completed" => TaskState::Completed,
            "failed" => TaskState::Failed,
            "cancelled" => TaskState::Cancelled,
            _ => return None,
        })
    }
}

/// The cancel call of a long-running operation.
#[derive(Debug, Clone)]
pub struct CancelCall {
    pub method: Method,
    /// `None`: the status URL itself; else a URL where `{status_url}` stands for it.
    pub url: Option<String>,
}

/// A compiled `long_running:` section.
#[derive(Debug)]
pub struct LongRunning {
    pub status_url: Option<Transform>,
    pub state: Transform,
    pub states: Vec<(String, TaskState)>,
    pub answer: Option<Transform>,
    pub answer_status: Option<Transform>,
    pub error: Option<Transform>,
    pub poll_every: Duration,
    pub backoff: f64,
    pub poll_max: Duration,
    pub deadline: Duration,
    pub ttl: Duration,
    pub cancel: Option<CancelCall>,
    /// `task: required`.
    pub required: bool,
    /// `ask: before_task`.
    pub ask_before: bool,
}

impl LongRunning {
    /// The task state a backend state maps to (unlisted: working).
    pub fn task_state(&self, backend: &str) -> TaskState {
        self.states
            .iter()
            .find(|(k, _)| k == backend)
            .map(|(_, s)| *s)
            .unwrap_or(TaskState::Working)
    }
}

/// Compiles `spec` of tool `name`; problems go to `diags` (and yield `None`).
pub(super) fn compile(
    file: &Path,
    text: &str,
    name: &str,
    spec: &LongRunningSpec,
    defs: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> Option<LongRunning> {
    let before = diags.iter().filter(|d| d.is_error()).count();
    let at = |field: &str| {
        locate_yaml(text, &["tools", name, "long_running", field])
            .or_else(|| locate_yaml(text, &["tools", name, "long_running"]))
    };
    let here = |field: &str| format!("tools.{name}.long_running.{field}");
    let error = |field: &str, message: String, hint: &str, diags: &mut Vec<Diagnostic>| {
        diags.push(
            Diagnostic::error(file, message)
                .line(at(field))
                .at(here(field))
                .hint(hint.to_string()),
        );
    };
    let jq = |field: &str, src: Option<&str>, diags: &mut Vec<Diagnostic>| {
        let src = src?;
        match Transform::compile_with(defs, src) {
            Ok(t) => Some(t),
            Err(e) => {
                error(
                    field,
                    format!("long_running.{field}: {}", e.message),
                    "a jq program over the backend's JSON body, e.g. `.status`",
                    diags,
                );
                None
            }
        }
    };
    let status_url = jq("status_url", spec.status_url.as_deref(), diags);
    let state = jq(
        "state",
        Some(spec.state.as_deref().unwrap_or(".status")),
        diags,
    );
    let answer = jq("answer", spec.answer.as_deref(), diags);
    let answer_status = jq("answer_status", spec.answer_status.as_deref(), diags);
    let error_msg = jq("error", spec.error.as_deref(), diags);
    let mut states = Vec::new();
    for (k, v) in &spec.states {
        match TaskState::parse(v) {
            Some(s) => states.push((k.clone(), s)),
            None => diags.push(
                Diagnostic::error(
                    file,
                    format!("`{v}` (for backend state `{k}`) is not a task state"),
                )
                .line(at("states"))
                .at(here("states"))
                .hint("map each backend state to one of working, completed, failed, cancelled"),
            ),
        }
    }
    if !states.iter().any(|(_, s)| *s == TaskState::Completed) {
        diags.push(
            Diagnostic::error(
                file,
                "`states` maps no backend state to `completed`".to_string(),
            )
            .line(at("states"))
            .at(here("states"))
            .hint("e.g. `states: { running: working, done: completed, error: failed }`"),
        );
    }
    let duration = |field: &str, v: Option<&str>, default: Duration, diags: &mut Vec<_>| match v {
        None => default,
        Some(s) => match parse_duration(s).filter(|d| !d.is_zero()) {
            Some(d) => d,
            None => {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a positive duration"))
                        .line(at(field))
                        .at(here(field))
                        .hint("write e.g. `500ms`, `2s` or `1h`"),
                );
                default
            }
        },
    };
    let poll_every = duration(
        "poll_every",
        spec.poll_every.as_deref(),
        Duration::from_secs(1),
        diags,
    );
    let poll_max = duration(
        "poll_max",
        spec.poll_max.as_deref(),
        Duration::from_secs(30),
        diags,
    );
    let deadline = duration(
        "deadline",
        spec.deadline.as_deref(),
        Duration::from_secs(3600),
        diags,
    );
    let ttl = duration("ttl", spec.ttl.as_deref(), Duration::from_secs(3600), diags);
    let backoff = spec.backoff.unwrap_or(1.5);
    if !(1.0..=10.0).contains(&backoff) {
        diags.push(
            Diagnostic::error(file, format!("backoff {backoff} is outside 1..10"))
                .line(at("backoff"))
                .at(here("backoff"))
                .hint("1 keeps the interval; 2 doubles it after each poll"),
        );
    }
    let cancel = spec.cancel.as_deref().and_then(|c| {
        let (verb, url) = c.trim().split_once(' ').unwrap_or((c.trim(), ""));
        let method = match verb.to_ascii_uppercase().as_str() {
            "DELETE" => Method::DELETE,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            _ => {
                diags.push(
                    Diagnostic::error(file, format!("cancel: unknown HTTP method `{verb}`"))
                        .line(at("cancel"))
                        .at(here("cancel"))
                        .hint("write `cancel: DELETE` or `cancel: POST {status_url}/cancel`"),
                );
                return None;
            }
        };
        let url = url.trim();
        Some(CancelCall {
            method,
            url: (!url.is_empty()).then(|| url.to_string()),
        })
    });
    let required = match spec.task.as_deref() {
        None | Some("optional") => false,
        Some("required") => true,
        Some(other) => {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("task: `{other}` is neither optional nor required"),
                )
                .line(at("task"))
                .at(here("task"))
                .hint("`optional` completes the call synchronously for clients without tasks"),
            );
            false
        }
    };
    let ask_before = match spec.ask.as_deref() {
        None | Some("in_task") => false,
        Some("before_task") => true,
        Some(other) => {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("ask: `{other}` is neither in_task nor before_task"),
                )
                .line(at("ask"))
                .at(here("ask"))
                .hint("`in_task` asks through the task's `input_required` state"),
            );
            false
        }
    };
    if diags.iter().filter(|d| d.is_error()).count() != before {
        return None;
    }
    Some(LongRunning {
        status_url,
        state: state?,
        states,
        answer,
        answer_status,
        error: error_msg,
        poll_every,
        backoff,
        poll_max,
        deadline,
        ttl,
        cancel,
        required,
        ask_before,
    })
}
