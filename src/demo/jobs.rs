//! The fixture backend's long-running jobs: `POST /v1/jobs` answers `202` + `Location`, `GET
//! /v1/jobs/{id}` reports the job, `DELETE /v1/jobs/{id}` cancels it. It keeps jobs in process
//! memory (bounded), and never panics on request input.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Most jobs kept; the oldest go first.
const MAX_JOBS: usize = 4096;
/// Longest job (`seconds`).
const MAX_SECONDS: f64 = 600.0;

/// How a job ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `succeeded` with `{label, seconds, message}`.
    Compute,
    /// `rejected` with a 422 problem (a refusal: a tool error).
    Reject,
    /// `crashed` (the operation itself failed).
    Crash,
}

struct Job {
    label: String,
    seconds: f64,
    kind: Kind,
    started: Instant,
    cancelled: bool,
}

fn jobs() -> &'static Mutex<HashMap<String, Job>> {
    static J: OnceLock<Mutex<HashMap<String, Job>>> = OnceLock::new();
    J.get_or_init(|| Mutex::new(HashMap::new()))
}

fn json_reply(status: StatusCode, v: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// `POST /v1/jobs` with `{seconds, label, kind?}` (`kind`: `compute`, `reject`, `crash`).
pub fn create(body: &[u8]) -> Response<Full<Bytes>> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return json_reply(StatusCode::BAD_REQUEST, json!({"error": "NOT_JSON"}));
    };
    let seconds = v.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
    if !(0.0..=MAX_SECONDS).contains(&seconds) {
        return json_reply(StatusCode::BAD_REQUEST, json!({"error": "BAD_SECONDS"}));
    }
    let kind = match v.get("kind").and_then(Value::as_str) {
        None | Some("compute") => Kind::Compute,
        Some("reject") => Kind::Reject,
        Some("crash") => Kind::Crash,
        Some(_) => return json_reply(StatusCode::BAD_REQUEST, json!({"error": "BAD_KIND"})),
    };
    let label = v
        .get("label")
        .and_then(Value::as_str)
        .unwrap_or("job")
        .chars()
        .take(200)
        .collect::<String>();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let Ok(mut all) = jobs().lock() else {
        return json_reply(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "LOCK"}));
    };
    if all.len() >= MAX_JOBS
        && let Some(oldest) = all
            .iter()
            .min_by_key(|(_, j)| j.started)
            .map(|(k, _)| k.clone())
    {
        all.remove(&oldest);
    }
    all.insert(
        id.clone(),
        Job {
            label,
            seconds,
            kind,
            started: Instant::now(),
            cancelled: false,
        },
    );
    let mut r = json_reply(StatusCode::ACCEPTED, json!({"id": id, "status": "running"}));
    if let Ok(loc) = header::HeaderValue::from_str(&format!("/v1/jobs/{id}")) {
        r.headers_mut().insert(header::LOCATION, loc);
    }
    r
}

fn report(id: &str, j: &Job) -> Value {
    let done = j.started.elapsed() >= Duration::from_secs_f64(j.seconds);
    if j.cancelled {
        return json!({"id": id, "status": "cancelled"});
    }
    if !done {
        return json!({"id": id, "status": "running", "label": j.label});
    }
    match j.kind {
        Kind::Compute => json!({"id": id, "status": "succeeded", "result": {
            "label": j.label, "seconds": j.seconds, "message": format!("{} done", j.label)
        }}),
        Kind::Reject => json!({"id": id, "status": "rejected", "http_status": 422, "result": {
            "error": "This job intentionally fails for testing", "label": j.label
        }}),
        Kind::Crash => json!({"id": id, "status": "crashed", "error": "the job crashed"}),
    }
}

/// `GET` or `DELETE /v1/jobs/{id}`.
pub fn at(delete: bool, id: &str) -> Response<Full<Bytes>> {
    let Ok(mut all) = jobs().lock() else {
        return json_reply(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "LOCK"}));
    };
    let Some(j) = all.get_mut(id) else {
        return json_reply(StatusCode::NOT_FOUND, json!({"error": "NO_JOB"}));
    };
    if delete {
        let running = !j.cancelled && j.started.elapsed() < Duration::from_secs_f64(j.seconds);
        if !running {
            return json_reply(StatusCode::CONFLICT, report(id, j));
        }
        j.cancelled = true;
    }
    json_reply(StatusCode::OK, report(id, j))
}
