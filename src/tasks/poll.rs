//! The REST side of a long-running tool: the status URL of a `202`, one poll of the status
//! resource (state, answer or error), the next interval, the cancel call. It never follows a URL
//! off the backend's origin and never decides what the answer means (the tool's rules do).

use super::Job;
use crate::config::Tool;
use crate::config::long_running::{LongRunning, TaskState};
use crate::model::{Failure, FailureKind};
use crate::translate::rest::{RestRequest, RestResponse};
use crate::translate::transform::Vars3;
use http::{HeaderMap, HeaderValue, Method, header};
use serde_json::{Value, json};
use std::time::Duration;

/// What one poll found.
#[derive(Debug)]
pub enum Polled {
    /// Still running; the backend's `Retry-After`, if it sent one.
    Working(Option<Duration>),
    /// Finished: the answer, as a backend response for the tool's rules.
    Completed(RestResponse),
    /// The operation failed (protocol-level): the message.
    Failed(String),
    Cancelled,
}

fn failure(message: impl Into<String>) -> Failure {
    Failure::new(FailureKind::BadUpstreamResponse, message.into())
}

fn json_body(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn run_str(
    t: &crate::translate::transform::Transform,
    input: &Value,
    args: &Value,
) -> Option<Value> {
    let meta = Value::Null;
    t.run(
        input,
        Vars3 {
            args,
            status: 200,
            meta: &meta,
        },
    )
    .ok()
    .flatten()
}

/// `url` resolved against the backend base; refused when it leaves the backend's origin.
fn on_backend(tool: &Tool, url: &str) -> Result<String, Failure> {
    let base = url::Url::parse(&tool.business.backend.base)
        .map_err(|e| failure(format!("backend URL does not parse: {e}")))?;
    let joined = base
        .join(url)
        .map_err(|e| failure(format!("status URL `{url}` does not parse: {e}")))?;
    if joined.origin() != base.origin() {
        return Err(failure(format!(
            "status URL `{joined}` is not on the backend's origin; refused"
        )));
    }
    Ok(joined.to_string())
}

/// The job a `202` answer starts: its status URL and first poll time.
pub fn accepted(
    tool: &Tool,
    lr: &LongRunning,
    resp: &RestResponse,
    args: &Value,
) -> Result<Job, Failure> {
    let url = match &lr.status_url {
        Some(t) => match run_str(t, &json_body(&resp.body), args) {
            Some(Value::String(s)) => s,
            _ => {
                return Err(failure(
                    "the 202 body holds no status URL (`long_running.status_url`)",
                ));
            }
        },
        None => resp
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| failure("the backend answered 202 without a Location header"))?,
    };
    let status_url = on_backend(tool, &url)?;
    let now = super::now_ms();
    let first = crate::upstream::resilience::retry_after(resp).unwrap_or(lr.poll_every);
    Ok(Job {
        status_url,
        next_poll_ms: now + first.as_millis() as u64,
        interval_ms: lr.poll_every.as_millis() as u64,
        deadline_ms: now + lr.deadline.as_millis() as u64,
    })
}

/// Schedules the next poll: the backend's `Retry-After` when sent, else the grown interval.
pub fn schedule(lr: &LongRunning, job: &mut Job, retry_after: Option<Duration>) {
    let now = super::now_ms();
    let wait = match retry_after {
        Some(d) => d.as_millis() as u64,
        None => {
            let grown = (job.interval_ms as f64 * lr.backoff) as u64;
            job.interval_ms = grown.min(lr.poll_max.as_millis() as u64).max(1);
            job.interval_ms
        }
    };
    job.next_poll_ms = now + wait;
}

async fn send(tool: &Tool, method: Method, url: String) -> Result<RestResponse, Failure> {
    // The backend's static headers (an API key) go on status reads and cancels too.
    let mut headers = HeaderMap::new();
    headers.extend(tool.business.backend.headers.iter().cloned());
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let req = RestRequest {
        method,
        url,
        headers,
        body: None,
    };
    crate::upstream::rest::send(&tool.business.backend, req, tool.timeout).await
}

/// Reads the status resource once.
pub async fn poll_once(tool: &Tool, lr: &LongRunning, job: &Job, args: &Value) -> Polled {
    let resp = match send(tool, Method::GET, job.status_url.clone()).await {
        Ok(r) => r,
        // Transport trouble: try again at the next interval, until the deadline.
        Err(_) => return Polled::Working(None),
    };
    let retry = crate::upstream::resilience::retry_after(&resp);
    match resp.status {
        200..=299 => {}
        429 | 500..=599 => return Polled::Working(retry),
        s => return Polled::Failed(format!("the status resource answered HTTP {s}")),
    }
    let body = json_body(&resp.body);
    let state = match run_str(&lr.state, &body, args) {
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => {
            return Polled::Failed(
                "the status resource names no state (`long_running.state`)".into(),
            );
        }
    };
    match lr.task_state(&state) {
        TaskState::Working | TaskState::InputRequired => Polled::Working(retry),
        TaskState::Cancelled => Polled::Cancelled,
        TaskState::Failed => {
            let msg = lr
                .error
                .as_ref()
                .and_then(|t| run_str(t, &body, args))
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("the operation failed (state `{state}`)"));
            Polled::Failed(msg)
        }
        TaskState::Completed => {
            let answer = match &lr.answer {
                Some(t) => run_str(t, &body, args).unwrap_or(Value::Null),
                None => body.clone(),
            };
            let status = lr
                .answer_status
                .as_ref()
                .and_then(|t| run_str(t, &body, args))
                .and_then(|v| v.as_u64())
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (100..=599).contains(s))
                .unwrap_or(200);
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Polled::Completed(RestResponse {
                status,
                headers,
                body: crate::json_text::to_vec(&answer).into(),
            })
        }
    }
}

/// Sends the configured cancel call (none configured: nothing is sent).
pub async fn cancel(tool: &Tool, lr: &LongRunning, job: &Job) -> Result<(), Failure> {
    let Some(c) = &lr.cancel else {
        return Ok(());
    };
    let url = match &c.url {
        None => job.status_url.clone(),
        Some(u) => on_backend(tool, &u.replace("{status_url}", &job.status_url))?,
    };
    let resp = send(tool, c.method.clone(), url).await?;
    if resp.status >= 400 && resp.status != 404 && resp.status != 409 {
        return Err(failure(format!(
            "the cancel call answered HTTP {}",
            resp.status
        )));
    }
    Ok(())
}

/// The JSON-RPC error object of a failed task.
pub fn error_object(message: &str) -> Value {
    json!({ "code": -32603, "message": message })
}
