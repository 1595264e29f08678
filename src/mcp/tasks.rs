//! MCP tasks over long-running tools: task creation on `tools/call`, `tasks/get`, `tasks/update`, `tasks/cancel` (2026-07-28 extension `io.modelcontextprotocol/tasks`), `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list` (2025-11-25), each scoped to the task's owner, the poller, and the status notifications of every stored change (`notify`).
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
pub mod notify;
mod wire;

use wire::{created, detailed, task_fields};

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

/// Stores `rec` (as [`tasks::put`]) and, when it was written and its status is not `was`
/// (`None`: changed in any case), tells the streams that listen for it.
async fn save(rec: &TaskRecord, was: Option<TaskState>) -> Result<bool, tasks::TaskStoreError> {
    let written = tasks::put(rec).await?;
    if written && was != Some(rec.state) {
        notify::changed(rec);
    }
    Ok(written)
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
        let was = rec.state;
        start(&gateway, &mut rec).await;
        let polling = rec.job.is_some();
        if save(&rec, Some(was)).await.is_ok() && polling {
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
        // At least 10 ms: a due poll another caller is running is not waited on in a spin.
        let wait = job.next_poll_ms.saturating_sub(tasks::now_ms()).max(10);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        if step(gateway, id).await.is_none() {
            return;
        }
    }
}

/// The tasks this process is polling now: the background driver and a `tasks/get` that finds
/// a poll due must not both poll (two status reads at once would not honour `Retry-After`).
static POLLING: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);

/// Holds task `id` in [`POLLING`] until dropped.
struct PollClaim(String);

impl PollClaim {
    /// `None` when the task is being polled already.
    fn take(id: &str) -> Option<Self> {
        let mut set = POLLING.lock().ok()?;
        set.insert(id.to_string()).then(|| Self(id.to_string()))
    }
}

impl Drop for PollClaim {
    fn drop(&mut self) {
        if let Ok(mut set) = POLLING.lock() {
            set.remove(&self.0);
        }
    }
}

/// One poll of task `id` when it is due: the record as it is afterwards. When this process
/// is polling it already, the record as stored (the running poll moves it on).
async fn step(gateway: &Gateway, id: &str) -> Option<TaskRecord> {
    let Some(_claim) = PollClaim::take(id) else {
        return tasks::get(id).await.ok().flatten();
    };
    let mut rec = tasks::get(id).await.ok()??;
    if rec.state.is_terminal() {
        return Some(rec);
    }
    let was = Some(rec.state);
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
        let _ = save(&rec, was).await;
        return Some(rec);
    };
    if now > job.deadline_ms {
        rec.state = TaskState::Failed;
        rec.error = Some(poll::error_object("the operation passed its deadline"));
        rec.job = None;
        rec.updated_ms = now;
        // Only the writer that ended the task sends the cancel call (once per task).
        if let Ok(true) = save(&rec, was).await {
            let _ = poll::cancel(&tool, &lr, &job).await;
        }
        return Some(rec);
    }
    let call = match crate::forward::prepare(&tool, rec.args.clone()) {
        Ok(c) => c,
        Err(reply) => {
            settle(&mut rec, reply);
            let _ = save(&rec, was).await;
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
    match save(&rec, was).await {
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
    let was = Some(rec.state);
    rec.state = TaskState::Cancelled;
    rec.job = None;
    rec.waiting = None;
    rec.updated_ms = tasks::now_ms();
    if let Err(e) = save(&rec, was).await {
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
            if let Err(e) = save(&rec, Some(TaskState::InputRequired)).await {
                return store_err(e);
            }
            spawn_start(gateway.clone(), rec);
        }
        Gathered::Done(Answer::Result(r)) if r.get("inputRequests").is_some() => {
            // A new round of questions: still `input_required`, with other `inputRequests`.
            rec.waiting = Some(waiting_from(&r, w.caps));
            if let Err(e) = save(&rec, None).await {
                return store_err(e);
            }
        }
        Gathered::Done(Answer::Result(r)) => {
            settle(&mut rec, Reply::Result(r));
            let _ = save(&rec, Some(TaskState::InputRequired)).await;
        }
        Gathered::Done(Answer::Written(wr)) => {
            settle(&mut rec, Reply::Written(wr));
            let _ = save(&rec, Some(TaskState::InputRequired)).await;
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
            let _ = save(&rec, Some(TaskState::InputRequired)).await;
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

/// Most task ids one `subscriptions/listen` may name.
const LISTEN_MAX: usize = 100;

/// A `subscriptions/listen` stream's task notifications: the ids agreed to and their frames.
pub type Listened = (
    Vec<String>,
    std::pin::Pin<Box<dyn futures_util::Stream<Item = bytes::Bytes> + Send + Sync>>,
);

/// The tasks part of a 2026-07-28 `subscriptions/listen` (request `id`): `None` when its
/// `notifications` filter names no `taskIds`. A request naming them must declare the tasks
/// extension (-32021 otherwise). Of the ids named, those of the caller's own live tasks are
/// agreed to; any other (unknown, expired, another owner's) is left out of the
/// acknowledgement exactly alike.
pub async fn listen(params: Option<&Value>, id: &Value) -> Result<Option<Listened>, Answer> {
    let Some(named) = params
        .and_then(|p| p.get("notifications"))
        .and_then(|n| n.get("taskIds"))
    else {
        return Ok(None);
    };
    let ids: Vec<&str> = match named.as_array() {
        Some(list) if list.len() <= LISTEN_MAX => list.iter().filter_map(Value::as_str).collect(),
        _ => {
            return Err(err(
                INVALID_PARAMS,
                format!(
                    "`notifications.taskIds` must be an array of at most {LISTEN_MAX} task ids"
                ),
            ));
        }
    };
    if ids.len() != named.as_array().map_or(0, Vec::len) {
        return Err(err(
            INVALID_PARAMS,
            "`notifications.taskIds` holds a non-string",
        ));
    }
    if !declares_extension(params) {
        return Err(missing_extension("`subscriptions/listen` with `taskIds`"));
    }
    let owner = caller(true);
    let mut agreed: Vec<String> = Vec::new();
    for t in ids {
        match tasks::get(t).await {
            Ok(Some(r)) if r.owner == owner && !agreed.iter().any(|a| a == t) => {
                agreed.push(t.to_string())
            }
            Ok(_) => {}
            Err(e) => return Err(store_err(e)),
        }
    }
    let meta = json!({ "io.modelcontextprotocol/subscriptionId": id });
    let frames = notify::for_tasks(agreed.clone(), meta).await;
    Ok(Some((agreed, Box::pin(frames))))
}
