//! The forward path: a tool call from any MCP edge -> binding -> REST backend -> protocol reply.
//! One place for the whole sequence so every edge (HTTP, stdio) behaves the same; it never
//! touches transport details (sessions, headers of the MCP request, SSE).

use crate::binding::{Reply, RpcError, ToolCtx};
use crate::config::{Gateway, Tool};
use crate::idempotency;
use crate::model::{Call, Failure, FailureKind, Outcome};
use crate::translate::{request, response, summary};
use crate::upstream::resilience::call::BackendCall;
use crate::upstream::rest;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Instant;
use tracing::Instrument;

/// JSON-RPC "invalid params" for calls that name no known tool.
pub fn unknown_tool(name: &str) -> RpcError {
    RpcError {
        code: -32602,
        message: format!("Unknown tool: {name}"),
        data: None,
        http_status: None,
    }
}

/// Explains schema violations briefly (first three), with the argument path.
fn violations(tool: &Tool, args: &Value) -> Option<String> {
    // A valid call (nearly every call) is answered by `is_valid`, which builds no error
    // objects; the errors are gathered only for arguments that have some.
    if tool.input_validator.is_valid(args) {
        return None;
    }
    let errs: Vec<String> = tool
        .input_validator
        .iter_errors(args)
        .take(3)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                format!("arguments: {e}")
            } else {
                format!("arguments{path}: {e}")
            }
        })
        .collect();
    (!errs.is_empty()).then(|| errs.join("; "))
}

/// Runs one `tools/call`. `arguments` may be absent (treated as `{}`).
pub async fn call_tool(gateway: &Gateway, name: &str, arguments: Option<Value>) -> Reply {
    let Some(tool) = gateway.tools.get(name) else {
        return Reply::Error(unknown_tool(name));
    };
    let started = Instant::now();
    let span = crate::ops::log::call_span();
    let (reply, backend_status) = BACKEND_STATUS
        .scope(AtomicU16::new(0), async {
            // The call's whole pipeline, in one box: the levels above move a pointer.
            let args = arguments.unwrap_or_else(|| json!({}));
            let reply = crate::util::boxed::in_place(|| run(tool, args))
                .instrument(span.clone())
                .await;
            (reply, BACKEND_STATUS.with(|s| s.load(Ordering::Relaxed)))
        })
        .await;
    let (outcome, code) = match &reply {
        r if r.is_tool_error() => ("tool_error", 0),
        Reply::Result(_) | Reply::Written(_) => ("ok", 0),
        Reply::Error(e) => ("error", e.code),
    };
    let took = started.elapsed();
    let status = crate::ops::metrics::tool_call(&tool.metrics, names(tool), outcome, &reply, took);
    crate::ops::recent::record(
        tool,
        crate::ops::recent::Finished {
            outcome,
            status,
            rpc_code: code,
            backend_status,
            reason: (outcome != "ok").then(|| reason(&reply)).flatten(),
            latency: took,
        },
    );
    span.in_scope(|| {
        tracing::info!(
            business = %tool.business.name,
            tool = %tool.name,
            outcome,
            status,
            rpc_code = code,
            latency_us = took.as_micros() as u64,
            "tools/call"
        )
    });
    reply
}

tokio::task_local! {
    /// The backend's HTTP status for the call in progress (0: none), for the status page.
    static BACKEND_STATUS: AtomicU16;
}

/// Words of an error text kept for the status page.
const REASON_WORDS: usize = 8;

/// The error's code and first words, for the status page: a JSON-RPC error's message (the
/// binding's code slug, or its text) and the start of its `data` text, or the start of a tool
/// error's first text block. Portico's own failure texts and backend problem titles only: a
/// rendered error never carries argument values beyond what the binding puts in its text.
fn reason(reply: &Reply) -> Option<String> {
    let first_words = |text: &str| {
        let mut words: Vec<&str> = text.split_whitespace().take(REASON_WORDS + 1).collect();
        let more = words.len() > REASON_WORDS;
        words.truncate(REASON_WORDS);
        let mut out = words.join(" ");
        if more {
            out.push_str(" …");
        }
        out
    };
    let text_of = |v: &Value, keys: &[&str]| {
        keys.iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str))
            .map(first_words)
    };
    match reply {
        Reply::Error(e) => {
            let detail = e
                .data
                .as_ref()
                .and_then(|d| text_of(d, &["content", "detail", "title", "code"]));
            Some(match detail {
                Some(d) if d != e.message => format!("{}: {d}", e.message),
                _ => e.message.clone(),
            })
        }
        Reply::Result(r) => r
            .get("content")
            .and_then(|c| c.get(0))
            .and_then(|b| text_of(b, &["text"])),
        Reply::Written(_) => None,
    }
}

async fn run(tool: &Tool, args: Value) -> Reply {
    if let Err(reply) = crate::auth::scoped(tool) {
        return reply;
    }
    let presented = crate::auth::presented(tool, &args);
    let mut call = match prepare(tool, args) {
        Ok(c) => c,
        Err(reply) => return reply,
    };
    // The request's own text, for a body lent from it (`translate::lent`).
    if request::may_lend(tool) {
        call.text = crate::translate::lent::current();
    }
    let grant = match crate::auth::authorize(tool, &call, presented).await {
        Ok(g) => g,
        Err(reply) => return reply,
    };
    if let Err(reply) = crate::auth::admit(tool, &grant) {
        return reply;
    }
    // Another principal's booking is, to this caller, a booking that does not exist.
    if tool.business.auth.is_some() && !crate::auth::access::may_name(tool, &call, &grant).await {
        return unknown_booking(tool, &call);
    }
    // Every answer from here on (replays included) is signed when the tool asks for it.
    sign_response_if_asked(tool);
    crate::ops::log::correlation(call.meta.correlation_id.as_deref());
    // A keyed call: a replay gets the stored answer, a conflicting reuse is refused, and
    // concurrent duplicates wait for the first instead of reaching the backend again.
    let leader = match &call.meta.idempotency_key {
        None => None,
        Some(key) => {
            let business = &tool.business;
            match idempotency::claim(
                &business.backend.base,
                &business.name,
                &tool.name,
                key,
                &call.args,
            )
            .await
            {
                idempotency::Claim::Run(leader) => Some(leader),
                idempotency::Claim::Replay(reply) => return reply,
                idempotency::Claim::Conflict => {
                    let mut f = Failure::new(
                        FailureKind::Conflict,
                        "this idempotency key was already used for another operation (other arguments, or another tool)",
                    );
                    // The bindings that name the case (USP, UCP, autonym) answer with that code.
                    if tool
                        .business
                        .binding
                        .error_code("idempotency_conflict")
                        .is_some()
                    {
                        f = f.with_code("idempotency_conflict");
                    }
                    return reply_for(tool, &call, Outcome::Failure(f));
                }
                idempotency::Claim::Unavailable(why) => {
                    tracing::warn!(error = %why, "idempotency store unavailable; keyed call refused");
                    let f = Failure::new(
                        FailureKind::Unavailable,
                        "the idempotency store is unavailable; retry with the same key later",
                    );
                    return reply_for(tool, &call, Outcome::Failure(f));
                }
            }
        }
    };
    // `keep`: transient failures (transport, 5xx, 429) are not remembered, so a retry with the
    // same key reaches the backend again.
    let (reply, keep) = match request::build(tool, &call) {
        Err(f) => (reply_for(tool, &call, Outcome::Failure(f)), true),
        Ok(req) => match backend_call(tool, req, call.meta.idempotency_key.is_some()).await {
            Err(f) => (reply_for(tool, &call, Outcome::Failure(f)), false),
            // A long-running operation: a task for a caller that asked for one (nothing to
            // remember), else completed here by polling.
            Ok(resp) if resp.status == 202 && tool.long_running.is_some() => {
                // Boxed: the polling loop's state would otherwise size every call's future.
                let reply = crate::util::boxed::in_place(|| long_running(tool, &call, resp)).await;
                let keep = !crate::tasks::wanted();
                (reply, keep)
            }
            Ok(resp) => {
                let keep = resp.status < 500 && resp.status != 429;
                let resource = match tool.follows_up(resp.status) {
                    true => follow_up(tool, &call, &resp).await,
                    false => None,
                };
                (translate_followed(tool, &call, resp, resource), keep)
            }
        },
    };
    let mut reply = reply;
    crate::auth::issue(tool, &grant, &mut reply).await;
    crate::vrp::attach(
        tool.business.vrp.as_deref(),
        &tool.name,
        &call.args,
        &mut reply,
    );
    if let Some(leader) = leader {
        // The store keeps results as values.
        reply.materialize();
        leader.finish(&reply, keep).await;
    }
    reply
}

/// A `202` of a long-running tool: handed to the MCP edge as a task when the caller asked for
/// one (`tasks::SLOT`), else polled to its end within the tool's timeout (the operation is
/// cancelled when that runs out).
async fn long_running(tool: &Tool, call: &Call, resp: response::RestResponse) -> Reply {
    use crate::tasks::poll::{self, Polled};
    let Some(lr) = tool.long_running.as_deref() else {
        return translate_response(tool, call, resp);
    };
    let mut job = match poll::accepted(tool, lr, &resp, &call.args) {
        Ok(j) => j,
        Err(f) => return reply_for(tool, call, Outcome::Failure(f)),
    };
    if crate::tasks::wanted() {
        crate::tasks::hand_over(job);
        return Reply::Result(json!({}));
    }
    let until = crate::tasks::now_ms() + (tool.timeout.min(lr.deadline).as_millis() as u64);
    loop {
        let now = crate::tasks::now_ms();
        if job.next_poll_ms > until {
            let _ = poll::cancel(tool, lr, &job).await;
            let f = Failure::new(
                FailureKind::Timeout,
                "the long-running operation did not finish within the tool's timeout",
            );
            return reply_for(tool, call, Outcome::Failure(f));
        }
        tokio::time::sleep(std::time::Duration::from_millis(
            job.next_poll_ms.saturating_sub(now),
        ))
        .await;
        match poll::poll_once(tool, lr, &job, &call.args).await {
            Polled::Working(retry_after) => poll::schedule(lr, &mut job, retry_after),
            Polled::Completed(resp) => return translate_response(tool, call, resp),
            Polled::Failed(m) => {
                let f = Failure::new(FailureKind::UpstreamError, m);
                return reply_for(tool, call, Outcome::Failure(f));
            }
            Polled::Cancelled => {
                let f = Failure::new(FailureKind::Conflict, "the operation was cancelled");
                return reply_for(tool, call, Outcome::Failure(f));
            }
        }
    }
}

/// The resource a business outcome carries when its rule names a follow-up read and the error
/// body does not hold it: the read's 2xx answer through the tool's `result`. `None` when no
/// such rule matches, or the read fails (logged: the outcome goes out without the resource).
async fn follow_up(
    tool: &Tool,
    call: &Call,
    resp: &response::RestResponse,
) -> Option<serde_json::Map<String, Value>> {
    let body: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    let meta = request::meta_for(tool, call);
    let vars = crate::translate::transform::Vars3 {
        args: &call.args,
        status: resp.status,
        meta: &meta,
    };
    let rule = tool.rule_for(resp.status, Some((&body, vars)));
    let (crate::binding::Rule::Business(_), Some(read)) = (&rule.rule, &rule.follow_up) else {
        return None;
    };
    if !response::carried(tool, rule.with_result, &body, vars).is_empty() {
        return None; // the error body holds the resource
    }
    let why = match read.path.render(&call.args) {
        Err(e) => e.to_string(),
        Ok(path) => {
            let backend = &tool.business.backend;
            let mut headers = http::HeaderMap::new();
            headers.extend(backend.headers.iter().cloned());
            if let Ok(h) = tool.business.binding.headers(&call.meta) {
                headers.extend(h);
            }
            let req = crate::translate::rest::RestRequest {
                method: read.method.clone(),
                url: format!("{}{path}", backend.base),
                headers,
                body: None,
            };
            match backend_call(tool, req, false).await {
                Ok(r) if (200..300).contains(&r.status) => {
                    let answer: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                    let vars = crate::translate::transform::Vars3 {
                        status: r.status,
                        ..vars
                    };
                    let resource = response::carried(tool, true, &answer, vars);
                    if !resource.is_empty() {
                        return Some(resource);
                    }
                    format!(
                        "HTTP {} with no resource the `result` program maps",
                        r.status
                    )
                }
                Ok(r) => format!("HTTP {}", r.status),
                Err(f) => f.message,
            }
        }
    };
    tracing::warn!(tool = %tool.name, why = %why, "follow-up read failed; the business outcome goes out without the resource");
    None
}

/// [`translate_response`], with the resource a follow-up read found for a business outcome.
fn translate_followed(
    tool: &Tool,
    call: &Call,
    resp: response::RestResponse,
    resource: Option<serde_json::Map<String, Value>>,
) -> Reply {
    let Some(resource) = resource else {
        return translate_response(tool, call, resp);
    };
    let mut outcome = response::outcome(tool, call, resp);
    if let Outcome::Business { body, .. } = &mut outcome
        && body.is_empty()
    {
        *body = resource;
    }
    reply_for(tool, call, outcome)
}

/// The answer to a call naming a booking the caller may not see: the tool's own answer to a
/// backend `404` with an empty body, so it is the same for every booking id the caller does not
/// own, whether it exists or not. The backend is not called.
fn unknown_booking(tool: &Tool, call: &Call) -> Reply {
    let resp = response::RestResponse {
        status: 404,
        headers: http::HeaderMap::new(),
        body: bytes::Bytes::new(),
    };
    translate_response(tool, call, resp)
}

/// The backend call through the backend's resilience stack (limit, retries, the tool's
/// breaker, timeout); each attempt is timed and counted.
async fn backend_call(
    tool: &Tool,
    req: request::RestRequest,
    keyed: bool,
) -> Result<response::RestResponse, Failure> {
    let observe = |out: &Result<response::RestResponse, Failure>, took: std::time::Duration| {
        let status = match out {
            Ok(r) => Some(r.status),
            Err(f) => f.status,
        };
        crate::ops::metrics::upstream(
            &tool.metrics,
            names(tool),
            took,
            out.as_ref().map(|r| r.status),
        );
        if let Some(s) = status {
            // Outside `call_tool` (the facade's exchange) there is no page row to fill.
            let _ = BACKEND_STATUS.try_with(|c| c.store(s, Ordering::Relaxed));
        }
    };
    let call = BackendCall::new(req, &tool.breaker, tool.timeout, keyed).observed(&observe);
    rest::call(&tool.business.backend, call).await
}

/// The pure first half: validates the arguments against `inputSchema`, extracts the binding's
/// metadata and checks the idempotency requirement. No I/O; benchmarked on its own.
pub fn prepare(tool: &Tool, args: Value) -> Result<Call, Reply> {
    let binding = &tool.business.binding;
    let ctx = ToolCtx {
        capability: tool.capability.as_deref(),
        ..ToolCtx::default()
    };
    if !args.is_object() {
        return Err(binding.render_failure(
            binding.invalid_arguments("`arguments` must be an object".into()),
            &ctx,
        ));
    }
    if let Some(detail) = violations(tool, &args) {
        // Misplaced protocol metadata is said where it was expected, in the message itself.
        let errors: Vec<_> = tool.input_validator.iter_errors(&args).take(3).collect();
        let f = match binding.meta_mistake(&tool.name, &errors) {
            Some(why) => binding.invalid_arguments(why).explained(),
            None => binding.invalid_arguments(detail),
        };
        return Err(binding.render_failure(f, &ctx));
    }
    let mut args = args;
    let mut meta = binding
        .extract(&mut args)
        .map_err(|f| binding.render_failure(f, &ctx))?;
    // Minted only where something reads them: a transform naming `$meta`, or UCP's request id.
    if tool.meta_used {
        meta.minted = Some(crate::translate::minted::mint());
    } else if binding.kind == crate::binding::Kind::Ucp {
        meta.minted = Some(crate::model::Minted {
            request_id: crate::translate::minted::uuid(),
            ..Default::default()
        });
    }
    if tool.idempotency_required && meta.idempotency_key.is_none() {
        let f = match binding.meta_argument() {
            Some(_) => binding
                .invalid_arguments(binding.missing_idempotency_key(&tool.name))
                .explained(),
            None => {
                binding.invalid_arguments(format!("`{}` requires an idempotency key", tool.name))
            }
        };
        return Err(binding.render_failure(f, &ctx));
    }
    Ok(Call {
        tool: tool.name.clone(),
        args,
        meta,
        text: None,
    })
}

/// The backend exchange of a prepared call, outside the rest of [`call_tool`] (no
/// authorization, no idempotency): for tests and benchmarks of the return path.
pub async fn exchange(tool: &Tool, call: &Call) -> Result<response::RestResponse, Failure> {
    let req = request::build(tool, call)?;
    backend_call(tool, req, call.meta.idempotency_key.is_some()).await
}

/// [`translate_response`] always through `serde_json` trees (the path the hot path,
/// `translate::answer`, must answer exactly as): for tests and benchmarks.
pub fn translate_response_tree(tool: &Tool, call: &Call, resp: response::RestResponse) -> Reply {
    if let Some(rule) = &tool.content
        && let Some(blocks) = response::content_blocks(tool, rule, call, &resp)
    {
        return match blocks {
            Ok(content) => Reply::Result(json!({ "content": content })),
            Err(f) => reply_for(tool, call, Outcome::Failure(f)),
        };
    }
    reply_for(tool, call, response::outcome(tool, call, resp))
}

/// The pure half of the return path: backend answer -> outcome -> protocol reply (envelope,
/// output-schema check, summary). No I/O; benchmarked on its own. A success the hot path
/// models is written without trees (`translate::answer`); everything else goes through them.
pub fn translate_response(tool: &Tool, call: &Call, resp: response::RestResponse) -> Reply {
    if tool.content.is_none()
        && let Some(reply) = crate::translate::answer::written(tool, call, &resp)
    {
        return reply;
    }
    translate_response_tree(tool, call, resp)
}

fn reply_for(tool: &Tool, call: &Call, outcome: Outcome) -> Reply {
    let ctx = ToolCtx {
        capability: tool.capability.as_deref(),
        correlation_id: call.meta.correlation_id.as_deref(),
        text_later: tool.summary.is_some(),
    };
    let reply = tool.business.binding.render(outcome, &ctx);
    finish(tool, call, reply)
}

/// The first content block's `text` (`/content/0/text`), reached without parsing a JSON
/// pointer (which allocates for its escapes) on every call.
fn first_text_mut(result: &mut Value) -> Option<&mut Value> {
    result.get_mut("content")?.get_mut(0)?.get_mut("text")
}

/// Validates structuredContent against the output schema and applies the summary template.
fn finish(tool: &Tool, call: &Call, reply: Reply) -> Reply {
    let Reply::Result(mut result) = reply else {
        return reply;
    };
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    if let (Some(v), Some(sc), false) = (
        &tool.output_validator,
        result.get("structuredContent"),
        is_error,
    ) && let Some(err) = v.iter_errors(sc).next()
    {
        // The deepest error of the closest anyOf/oneOf branch, not the root keyword.
        let r = crate::util::schema_error::describe(&err);
        let (path, rule) = (r.at, r.rule);
        // Neither the log nor the answer carries the instance: it may hold personal data.
        tracing::error!(tool = %tool.name, at = %path, schema = %rule, why = %r.why, "structuredContent does not match outputSchema");
        let binding = &tool.business.binding;
        let f = Failure::new(
            FailureKind::Internal,
            format!(
                "the backend answer, as mapped, does not fit the tool's output schema (at `{path}`: {}; schema rule `{rule}`)",
                r.why
            ),
        );
        return binding.render_failure(f, &ToolCtx::default());
    }
    // Summaries describe successes; business outcomes keep the binding's own error text.
    let business_error = result
        .get("structuredContent")
        .and_then(|s| s.get("messages"))
        .and_then(Value::as_array)
        .is_some_and(|m| {
            m.iter()
                .any(|m| m.get("type").and_then(Value::as_str) == Some("error"))
        });
    let mut summarised = false;
    if let (Some(env), false, false) = (&tool.summary, is_error, business_error)
        && let Some(sc) = result.get_mut("structuredContent")
    {
        match summary::render(env, sc, &call.args) {
            Ok(text) => {
                if let Some(first) = first_text_mut(&mut result) {
                    *first = Value::String(text);
                    summarised = true;
                }
            }
            Err(e) => {
                tracing::warn!(tool = %tool.name, error = %e, "summary template failed; keeping the JSON text")
            }
        }
    }
    // The binding left the success text to the summary (`text_later`); without one, the text
    // is the JSON of structuredContent, as for tools that have no summary.
    let placeholder = result
        .get("content")
        .and_then(|c| c.get(0))
        .and_then(|b| b.get("text"))
        .is_some_and(|t| t.as_str() == Some(""));
    if tool.summary.is_some()
        && !summarised
        && placeholder
        && let Some(json) = result
            .get("structuredContent")
            .map(crate::json_text::to_string)
        && let Some(t) = first_text_mut(&mut result)
    {
        *t = Value::String(json);
    }
    Reply::Result(result)
}

/// `(business, tool)`: the labels of `tool`'s metrics.
fn names(tool: &Tool) -> (&str, &str) {
    (&tool.business.name, &tool.name)
}

/// Asks the HTTP edge to sign this request's response when `tool` is configured for it.
fn sign_response_if_asked(tool: &Tool) {
    if let Some(rs) = &tool.business.response_signing
        && rs.tools.contains(&tool.name)
    {
        crate::auth::transport::sign_response_with(rs.key.clone());
    }
}
