//! MCP tasks over long-running tools: task creation on `tools/call`, `tasks/get`, `tasks/update`, `tasks/cancel` (2026-07-28 extension `io.modelcontextprotocol/tasks`), `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` (2025-11-25), each scoped to the task's owner, and the poller.
//! It never answers another owner's task otherwise than an unknown one, never calls a backend except through `forward` and `tasks::poll`, and never overwrites a finished task.

use super::answer::Answer;
use super::input::{Asking, Gathered};
use super::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CAPABILITY};
use super::notify::Notifier;
use crate::binding::Reply;
use crate::config::long_running::{LongRunning, TaskState};
use crate::config::{Gateway, Tool};
use crate::tasks::poll::{self, Polled};
use crate::tasks::{self, TaskRecord, Waiting};
use serde_json::{Map, Value, json};
use std::sync::Arc;

mod list;

/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 50;

/// The extension's identifier (2026-07-28).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How long `tasks/result` (2025-11-25) waits for a task to finish.
const RESULT_WAIT_MS: u64 = 60_000;

fn err(code: i64, message: impl Into<String>) -> Answer {
    Answer::Error {
        code,
        message: message.into(),
        data: None,
        http_status: None,
    }
}

/// The JSON-RPC error of a failed task: its recorded error object (code, message, data), or a
/// bare internal error when none was recorded.
fn failed_answer(error: Option<Value>) -> Answer {
    let e = error.unwrap_or_else(|| poll::error_object("failed"));
    Answer::Error {
        code: e
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(INTERNAL_ERROR),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("failed")
            .into(),
        data: e.get("data").cloned(),
        http_status: None,
    }
}

fn store_err(e: tasks::TaskStoreError) -> Answer {
    err(INTERNAL_ERROR, format!("task store: {e}"))
}

/// The 2026-07-28 missing-extension error (-32021).
pub fn missing_extension(what: &str) -> Answer {
    Answer::Error {
        code: MISSING_CAPABILITY,
        message: format!(
            "Missing required client capability: {what} needs the {EXTENSION} extension"
        ),
        data: Some(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } })),
        http_status: None,
    }
}

/// Whether a 2026-07-28 request declares the tasks extension in its `_meta`.
pub fn declares_extension(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some()
}

fn rfc3339(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    format!(
        "{}.{:03}Z",
        crate::clock::rfc3339(secs).trim_end_matches('Z'),
        ms % 1000
    )
}

/// The task's shared fields, in the era's names.
fn task_fields(rec: &TaskRecord, modern: bool) -> Map<String, Value> {
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
fn created(rec: &TaskRecord, modern: bool) -> Answer {
    if modern {
        let mut m = task_fields(rec, true);
        m.insert("resultType".into(), json!("task"));
        Answer::Result(Value::Object(m))
    } else {
        Answer::Result(json!({ "task": Value::Object(task_fields(rec, false)) }))
    }
}

/// The `DetailedTask` of 2026-07-28 `tasks/get`: result, error or open questions inlined.
fn detailed(rec: &TaskRecord) -> Value {
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

/// Who is asking, as a task owner: a digest (never the credential itself) of the request's
/// authorization context. The MCP access token's principal (issuer, subject, client) when MCP
/// authorization is on; else the 2025-era session; else the business credential the request
/// carries (`Authorization`, `X-API-Key`); over stdio, this process (one client). `None`: an
/// anonymous stateless request, whose tasks only their unguessable id protects.
pub fn caller(modern: bool) -> Option<String> {
    let who = if let Some(p) = crate::auth::transport::mcp_principal() {
        let t = &p.token;
        let client = t.client_id.as_deref().unwrap_or("");
        format!("oauth\0{}\0{}\0{client}", t.issuer, t.subject)
    } else if let Some(creds) = crate::auth::transport::current() {
        match (modern, creds.session, creds.authorization, creds.api_key) {
            (false, Some(s), _, _) => format!("session\0{s}"),
            (_, _, Some(Ok(a)), _) => format!("authorization\0{a}"),
            (_, _, _, Some(Ok(k))) => format!("api-key\0{k}"),
            _ => return None,
        }
    } else {
        static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        format!("stdio\0{}", PROCESS.get_or_init(tasks::new_id))
    };
    Some(crate::auth::jws::sha256_b64(who.as_bytes()))
}

fn fresh(
    tool: &Tool,
    lr: &LongRunning,
    args: &Value,
    state: TaskState,
    owner: &Option<String>,
) -> TaskRecord {
    let now = tasks::now_ms();
    TaskRecord {
        id: tasks::new_id(),
        tool: tool.name.clone(),
        args: args.clone(),
        state,
        created_ms: now,
        updated_ms: now,
        ttl_ms: lr.ttl.as_millis() as u64,
        poll_ms: lr.poll_every.as_millis() as u64,
        job: None,
        waiting: None,
        result: None,
        error: None,
        message: None,
        owner: owner.clone(),
    }
}

/// Writes `rec` as it finished with `reply`.
fn settle(rec: &mut TaskRecord, reply: Reply) {
    rec.updated_ms = tasks::now_ms();
    rec.job = None;
    rec.waiting = None;
    match reply {
        Reply::Result(r) => {
            rec.state = TaskState::Completed;
            rec.result = Some(r);
        }
        Reply::Written(w) => {
            rec.state = TaskState::Completed;
            rec.result = Some(w.to_value());
        }
        Reply::Error(e) => {
            rec.state = TaskState::Failed;
            let mut o = json!({ "code": e.code, "message": e.message });
            if let Some(d) = e.data {
                o["data"] = d;
            }
            rec.error = Some(o);
        }
    }
}

/// Runs the tool's call as a task: a `202` leaves the job in `rec`, any other answer settles it.
async fn start(gateway: &Gateway, rec: &mut TaskRecord) {
    let slot = std::cell::RefCell::new(tasks::Slot {
        wanted: true,
        job: None,
    });
    let (reply, slot) = tasks::SLOT
        .scope(slot, async {
            let reply = crate::forward::call_tool(gateway, &rec.tool, Some(rec.args.clone())).await;
            let job = tasks::SLOT.with(|s| s.borrow_mut().job.take());
            (reply, job)
        })
        .await;
    match slot {
        Some(job) => {
            rec.state = TaskState::Working;
            rec.job = Some(job);
            rec.updated_ms = tasks::now_ms();
        }
        None => settle(rec, reply),
    }
}

/// A task-wanting `tools/call` of a long-running tool: the task is stored before it is
/// answered, so an immediate `tasks/get` finds it. A backend that answers at once (no `202`)
/// gets its answer returned directly.
pub async fn create(
    gateway: &Arc<Gateway>,
    tool: &Tool,
    args: Value,
    caps: Value,
    modern: bool,
    asked: bool,
    owner: Option<String>,
) -> Answer {
    let Some(lr) = tool.long_running.as_deref() else {
        return err(INTERNAL_ERROR, "the tool is no longer long-running");
    };
    // Questions asked inside the task: the task waits in `input_required` from the start.
    if !asked && let Some(asking) = Asking::tool(tool) {
        let mut rec = fresh(tool, lr, &args, TaskState::InputRequired, &owner);
        let params = synthetic(&caps, None, None);
        match super::input::gather(asking, true, &params, Some(args), &Notifier::none()).await {
            Gathered::Ready(a) => {
                rec.args = a.unwrap_or_else(|| json!({}));
                rec.state = TaskState::Working;
            }
            Gathered::Done(Answer::Result(r)) if r.get("inputRequests").is_some() => {
                rec.waiting = Some(waiting_from(&r, caps));
            }
            Gathered::Done(other) => return other,
        }
        if let Err(e) = stored(&rec).await {
            return store_err(e);
        }
        if rec.state == TaskState::Working {
            spawn_start(gateway.clone(), rec.clone());
        }
        return created(&rec, modern);
    }
    let mut rec = fresh(tool, lr, &args, TaskState::Working, &owner);
    start(gateway, &mut rec).await;
    if rec.job.is_none() {
        // The immediate-result shortcut: the backend answered without a `202`.
        return match rec.state {
            TaskState::Completed => Answer::Result(rec.result.unwrap_or_else(|| json!({}))),
            _ => failed_answer(rec.error),
        };
    }
    if let Err(e) = stored(&rec).await {
        return store_err(e);
    }
    spawn_drive(gateway.clone(), rec.id.clone());
    created(&rec, modern)
}

/// Stores a new task and indexes it under its owner.
async fn stored(rec: &TaskRecord) -> Result<(), tasks::TaskStoreError> {
    tasks::put(rec).await?;
    tasks::index(rec).await
}

fn waiting_from(r: &Value, caps: Value) -> Waiting {
    Waiting {
        requests: r
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        answers: Map::new(),
        request_state: r.get("requestState").cloned(),
        caps,
    }
}

/// The params `input::gather` reads: the client's capabilities, answers and state.
fn synthetic(
    caps: &Value,
    answers: Option<&Map<String, Value>>,
    state: Option<&Value>,
) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert(
        "_meta".into(),
        json!({ "io.modelcontextprotocol/clientCapabilities": caps }),
    );
    if let Some(a) = answers {
        p.insert("inputResponses".into(), Value::Object(a.clone()));
    }
    if let Some(s) = state {
        p.insert("requestState".into(), s.clone());
    }
    p
}

fn spawn_start(gateway: Arc<Gateway>, mut rec: TaskRecord) {
    tokio::spawn(async move {
        start(&gateway, &mut rec).await;
        let polling = rec.job.is_some();
        if tasks::put(&rec).await.is_ok() && polling {
            drive(&gateway, &rec.id).await;
        }
    });
}

fn spawn_drive(gateway: Arc<Gateway>, id: String) {
    tokio::spawn(async move { drive(&gateway, &id).await });
}

/// Polls task `id` until it ends (or disappears, or another writer finished it).
async fn drive(gateway: &Gateway, id: &str) {
    loop {
        let Ok(Some(rec)) = tasks::get(id).await else {
            return;
        };
        let Some(job) = &rec.job else {
            return;
        };
        if rec.state.is_terminal() {
            return;
        }
        let wait = job.next_poll_ms.saturating_sub(tasks::now_ms());
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        if step(gateway, id).await.is_none() {
            return;
        }
    }
}

/// One poll of task `id` when it is due: the record as it is afterwards.
async fn step(gateway: &Gateway, id: &str) -> Option<TaskRecord> {
    let mut rec = tasks::get(id).await.ok()??;
    if rec.state.is_terminal() {
        return Some(rec);
    }
    let Some(mut job) = rec.job.clone() else {
        return Some(rec);
    };
    let now = tasks::now_ms();
    if job.next_poll_ms > now {
        return Some(rec);
    }
    let tool = gateway.tools.get(&rec.tool)?.clone();
    let Some(lr) = tool.long_running.clone() else {
        let gone = crate::forward::unknown_tool(&rec.tool);
        settle(&mut rec, Reply::Error(gone));
        let _ = tasks::put(&rec).await;
        return Some(rec);
    };
    if now > job.deadline_ms {
        rec.state = TaskState::Failed;
        rec.error = Some(poll::error_object("the operation passed its deadline"));
        rec.job = None;
        rec.updated_ms = now;
        // Only the writer that ended the task sends the cancel call (once per task).
        if let Ok(true) = tasks::put(&rec).await {
            let _ = poll::cancel(&tool, &lr, &job).await;
        }
        return Some(rec);
    }
    let call = match crate::forward::prepare(&tool, rec.args.clone()) {
        Ok(c) => c,
        Err(reply) => {
            settle(&mut rec, reply);
            let _ = tasks::put(&rec).await;
            return Some(rec);
        }
    };
    match poll::poll_once(&tool, &lr, &job, &call.args).await {
        Polled::Working(retry_after) => {
            poll::schedule(&lr, &mut job, retry_after);
            rec.job = Some(job);
        }
        Polled::Completed(resp) => {
            let reply = crate::forward::translate_response(&tool, &call, resp);
            settle(&mut rec, reply);
        }
        Polled::Failed(m) => {
            rec.state = TaskState::Failed;
            rec.error = Some(poll::error_object(&m));
            rec.job = None;
        }
        Polled::Cancelled => {
            rec.state = TaskState::Cancelled;
            rec.job = None;
        }
    }
    rec.updated_ms = tasks::now_ms();
    // A terminal state written meanwhile (a cancel) wins: read what is stored.
    match tasks::put(&rec).await {
        Ok(true) => Some(rec),
        _ => tasks::get(id).await.ok().flatten(),
    }
}

fn task_id(params: Option<&Value>) -> Result<&str, Answer> {
    params
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| err(INVALID_PARAMS, "needs a string `taskId`"))
}

/// The task, polled first when a poll is due (so any replica, or a restarted process, moves it on).
/// Another owner's task is answered exactly as an unknown one, before anything else is done.
async fn current(
    gateway: &Gateway,
    id: &str,
    owner: &Option<String>,
) -> Result<TaskRecord, Answer> {
    let rec = match tasks::get(id).await {
        Ok(Some(r)) if r.owner == *owner => r,
        Ok(_) => {
            return Err(err(
                INVALID_PARAMS,
                format!("Unknown or expired task: {id}"),
            ));
        }
        Err(e) => return Err(store_err(e)),
    };
    if rec
        .job
        .as_ref()
        .is_some_and(|j| j.next_poll_ms <= tasks::now_ms())
        && !rec.state.is_terminal()
    {
        return Ok(step(gateway, id).await.unwrap_or(rec));
    }
    Ok(rec)
}

/// The task methods (`tasks/*`) of both eras.
async fn handle(
    gateway: &Arc<Gateway>,
    modern: bool,
    method: &str,
    params: Option<&Value>,
    owner: Option<String>,
) -> Answer {
    // The tasks extension (2026-07-28) has neither `tasks/list` nor `tasks/result`.
    if modern && (method == "tasks/list" || method == "tasks/result") {
        return err(METHOD_NOT_FOUND, format!("Method not found: {method}"));
    }
    if !modern && method == "tasks/update" {
        return err(METHOD_NOT_FOUND, format!("Method not found: {method}"));
    }
    if modern && !declares_extension(params) {
        return missing_extension(method);
    }
    if method == "tasks/list" {
        return match owner {
            Some(o) => list(&o, params).await,
            None => err(METHOD_NOT_FOUND, format!("Method not found: {method}")),
        };
    }
    let id = match task_id(params) {
        Ok(id) => id,
        Err(a) => return a,
    };
    let rec = match current(gateway, id, &owner).await {
        Ok(r) => r,
        Err(a) => return a,
    };
    match method {
        "tasks/get" if modern => Answer::Result(detailed(&rec)),
        "tasks/get" => Answer::Result(Value::Object(task_fields(&rec, false))),
        "tasks/cancel" => cancel(gateway, rec, modern).await,
        "tasks/update" => update(gateway, rec, params).await,
        "tasks/result" => result(gateway, rec, &owner).await,
        _ => err(METHOD_NOT_FOUND, format!("Method not found: {method}")),
    }
}

/// One page of `owner`'s tasks after `params.cursor`.
async fn list(owner: &str, params: Option<&Value>) -> Answer {
    let after = match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => match list::decode(c) {
            Some(a) => Some(a),
            None => return err(INVALID_PARAMS, "invalid cursor"),
        },
        Some(_) => return err(INVALID_PARAMS, "invalid cursor"),
    };
    let (page, more) = match tasks::list(owner, after.as_ref(), LIST_PAGE).await {
        Ok(p) => p,
        Err(e) => return store_err(e),
    };
    let listed: Vec<Value> = page
        .iter()
        .map(|r| Value::Object(task_fields(r, false)))
        .collect();
    let mut r = json!({ "tasks": listed });
    if more && let Some(last) = page.last() {
        r["nextCursor"] = json!(list::encode(last.created_ms, &last.id));
    }
    Answer::Result(r)
}

async fn cancel(gateway: &Gateway, mut rec: TaskRecord, modern: bool) -> Answer {
    if rec.state.is_terminal() {
        return if modern {
            Answer::Result(json!({}))
        } else {
            err(
                INVALID_PARAMS,
                format!("Task {} is already {}", rec.id, rec.state.as_str()),
            )
        };
    }
    if let (Some(job), Some(tool)) = (&rec.job, gateway.tools.get(&rec.tool))
        && let Some(lr) = &tool.long_running
        && let Err(f) = poll::cancel(tool, lr, job).await
    {
        tracing::warn!(task = %rec.id, error = %f.message, "cancel call failed");
    }
    rec.state = TaskState::Cancelled;
    rec.job = None;
    rec.waiting = None;
    rec.updated_ms = tasks::now_ms();
    if let Err(e) = tasks::put(&rec).await {
        return store_err(e);
    }
    if modern {
        Answer::Result(json!({}))
    } else {
        Answer::Result(Value::Object(task_fields(&rec, false)))
    }
}

/// 2026-07-28 `tasks/update`: answers to the open questions; the task resumes once every
/// question of the round is answered. Unknown keys are ignored.
async fn update(gateway: &Arc<Gateway>, mut rec: TaskRecord, params: Option<&Value>) -> Answer {
    let Some(responses) = params
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object)
    else {
        return err(
            INVALID_PARAMS,
            "tasks/update needs an `inputResponses` object",
        );
    };
    let (Some(mut w), TaskState::InputRequired) = (rec.waiting.take(), rec.state) else {
        return Answer::Result(json!({}));
    };
    for (k, v) in responses {
        if w.requests.contains_key(k) {
            w.answers.insert(k.clone(), v.clone());
        }
    }
    rec.updated_ms = tasks::now_ms();
    if w.requests.keys().any(|k| !w.answers.contains_key(k)) {
        rec.waiting = Some(w);
        return match tasks::put(&rec).await {
            Ok(_) => Answer::Result(json!({})),
            Err(e) => store_err(e),
        };
    }
    let Some(tool) = gateway.tools.get(&rec.tool).cloned() else {
        return err(INVALID_PARAMS, format!("Unknown tool: {}", rec.tool));
    };
    let Some(asking) = Asking::tool(&tool) else {
        return err(INTERNAL_ERROR, "the task's tool no longer asks questions");
    };
    let params = synthetic(&w.caps, Some(&w.answers), w.request_state.as_ref());
    let args = rec.args.clone();
    match super::input::gather(asking, true, &params, Some(args), &Notifier::none()).await {
        Gathered::Ready(a) => {
            rec.args = a.unwrap_or_else(|| json!({}));
            rec.state = TaskState::Working;
            if let Err(e) = tasks::put(&rec).await {
                return store_err(e);
            }
            spawn_start(gateway.clone(), rec);
        }
        Gathered::Done(Answer::Result(r)) if r.get("inputRequests").is_some() => {
            rec.waiting = Some(waiting_from(&r, w.caps));
            if let Err(e) = tasks::put(&rec).await {
                return store_err(e);
            }
        }
        Gathered::Done(Answer::Result(r)) => {
            settle(&mut rec, Reply::Result(r));
            let _ = tasks::put(&rec).await;
        }
        Gathered::Done(Answer::Written(wr)) => {
            settle(&mut rec, Reply::Written(wr));
            let _ = tasks::put(&rec).await;
        }
        Gathered::Done(Answer::Error {
            code,
            message,
            data,
            http_status,
        }) => {
            settle(
                &mut rec,
                Reply::Error(crate::binding::RpcError {
                    code,
                    message,
                    data,
                    http_status,
                }),
            );
            let _ = tasks::put(&rec).await;
        }
    }
    Answer::Result(json!({}))
}

/// 2025-11-25 `tasks/result`: waits for the task to end, then its tool result (or error).
async fn result(gateway: &Gateway, mut rec: TaskRecord, owner: &Option<String>) -> Answer {
    let until = tasks::now_ms() + RESULT_WAIT_MS;
    while !rec.state.is_terminal() && tasks::now_ms() < until {
        let wait = rec
            .job
            .as_ref()
            .map(|j| j.next_poll_ms.saturating_sub(tasks::now_ms()))
            .unwrap_or(rec.poll_ms)
            .clamp(20, 1000);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        rec = match current(gateway, &rec.id, owner).await {
            Ok(r) => r,
            Err(a) => return a,
        };
    }
    let related = json!({ "io.modelcontextprotocol/related-task": { "taskId": rec.id } });
    match rec.state {
        TaskState::Completed => {
            let mut r = rec.result.unwrap_or_else(|| json!({ "content": [] }));
            if let Value::Object(o) = &mut r {
                o.insert("_meta".into(), related);
            }
            Answer::Result(r)
        }
        TaskState::Failed => failed_answer(rec.error),
        TaskState::Cancelled => err(INVALID_PARAMS, format!("Task {} was cancelled", rec.id)),
        _ => err(
            INTERNAL_ERROR,
            format!("Task {} has not finished yet", rec.id),
        ),
    }
}

/// A `tools/call` of a long-running tool: `Some` answer when it becomes (or is refused) a task,
/// `None` when the client did not ask for one and the call completes synchronously.
pub async fn tools_call(
    gateway: &Arc<Gateway>,
    tool: &Tool,
    modern: bool,
    params: &Map<String, Value>,
    arguments: Option<Value>,
    notifier: &Notifier,
) -> Option<Answer> {
    let lr = tool.long_running.as_deref()?;
    let p = Value::Object(params.clone());
    let wants = if modern {
        declares_extension(Some(&p))
    } else {
        params.get("task").is_some_and(Value::is_object)
    };
    if !wants {
        return lr.required.then(|| {
            if modern {
                missing_extension(&format!("tool `{}`", tool.name))
            } else {
                err(
                    METHOD_NOT_FOUND,
                    format!(
                        "tool `{}` must be called as a task (`params.task`)",
                        tool.name
                    ),
                )
            }
        });
    }
    // 2025-11-25 has no `tasks/update`: a tool's questions are asked before the task starts
    // (on the call's stream), as with `ask: before_task`.
    let before = lr.ask_before || !modern;
    let args = match Asking::tool(tool).filter(|_| before) {
        Some(a) => match super::input::gather(a, modern, params, arguments, notifier).await {
            Gathered::Ready(a) => a,
            Gathered::Done(a) => return Some(a),
        },
        None => arguments,
    };
    let caps = p
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let args = args.unwrap_or_else(|| json!({}));
    // On a task of its own: the task store's and the slot's futures are not `Sync`, and the
    // HTTP edge's response streams must be.
    let (gateway, tool) = (gateway.clone(), gateway.tools.get(&tool.name)?.clone());
    let owner = caller(modern);
    let run =
        tokio::spawn(
            async move { create(&gateway, &tool, args, caps, modern, before, owner).await },
        );
    Some(joined(run.await))
}

fn joined(r: Result<Answer, tokio::task::JoinError>) -> Answer {
    r.unwrap_or_else(|e| err(INTERNAL_ERROR, format!("task handler failed: {e}")))
}

/// [`handle`] on a task of its own (see [`tools_call`]).
pub async fn handle_spawned(
    gateway: Arc<Gateway>,
    modern: bool,
    method: String,
    params: Option<Value>,
) -> Answer {
    let owner = caller(modern);
    let run =
        tokio::spawn(
            async move { handle(&gateway, modern, &method, params.as_ref(), owner).await },
        );
    joined(run.await)
}
