//! Client input for `ask:` (2025: requests on the call's SSE stream; 2026-07-28: MRTR with a
//! signed `requestState`) and the client-capability check. It never calls the backend itself.

use super::answer::Answer;
pub use super::client::{ClientLink, DeliverError, Pending};
use super::jsonrpc::{INVALID_PARAMS, MISSING_CAPABILITY};
use super::notify::Notifier;
use crate::config::Tool;
use crate::config::ask::{AskPlan, Step, StepKind};
use crate::config::surface::Prompt;
use aws_lc_rs::{digest, hmac};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a `requestState` stays valid.
const STATE_TTL: Duration = Duration::from_secs(600);
/// Environment variable holding the `requestState` signing key (shared by replicas); without
/// it each process makes a random key at start.
pub const STATE_KEY_ENV: &str = "PORTICO_REQUEST_STATE_KEY";

/// What gathering produced: the arguments for the backend call, or the final answer.
pub enum Gathered {
    Ready(Option<Value>),
    Done(Answer),
}

fn invalid(message: impl Into<String>) -> Answer {
    Answer::Error {
        code: INVALID_PARAMS,
        message: message.into(),
        data: None,
        http_status: None,
    }
}

/// An `isError` tool result with one text block (declined, refused or unanswered questions).
fn tool_error(text: String) -> Answer {
    Answer::Result(json!({ "content": [{ "type": "text", "text": text }], "isError": true }))
}

/// What asks: a tool (before its backend call) or a prompt (before rendering).
pub struct Asking<'a> {
    /// `tool:<name>` or `prompt:<name>`: a `requestState` is only good for its own scope.
    scope: String,
    name: &'a str,
    plan: &'a AskPlan,
    /// A tool's `inputSchema`: arguments that fail it are not worth asking anyone about.
    validator: Option<&'a jsonschema::Validator>,
}

impl<'a> Asking<'a> {
    /// `None` for tools without `ask:`.
    pub fn tool(t: &'a Tool) -> Option<Self> {
        Some(Asking {
            scope: format!("tool:{}", t.name),
            name: &t.name,
            plan: t.ask.as_deref()?,
            validator: Some(&t.input_validator),
        })
    }

    /// `None` for prompts without `ask:`.
    pub fn prompt(p: &'a Prompt) -> Option<Self> {
        Some(Asking {
            scope: format!("prompt:{}", p.name),
            name: &p.name,
            plan: p.ask.as_deref()?,
            validator: None,
        })
    }
}

/// Gathers the answers a tool or prompt asks for. Arguments that will be refused anyway (not
/// an object, or failing the tool's `inputSchema`) pass straight through, unasked.
pub async fn gather(
    asking: Asking<'_>,
    modern: bool,
    params: &Map<String, Value>,
    arguments: Option<Value>,
    notifier: &Notifier,
) -> Gathered {
    let plan = asking.plan;
    let args = arguments.unwrap_or_else(|| json!({}));
    if !args.is_object() || asking.validator.is_some_and(|v| !v.is_valid(&args)) {
        // The forward path (or the prompt) answers with its own error: ask nobody first.
        return Gathered::Ready(Some(args));
    }
    if let Some(name) = plan
        .filled()
        .into_iter()
        .find(|n| args.get(n.as_str()).is_some())
    {
        return Gathered::Done(invalid(format!(
            "argument `{name}` of `{}` is asked from the client; the caller must not send it",
            asking.name
        )));
    }
    let link = notifier.client_link();
    let caps = if modern {
        params
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
            .cloned()
            .unwrap_or_else(|| json!({}))
    } else {
        match &link {
            Some(l) => l.pending.capabilities(),
            None => {
                return Gathered::Done(invalid(format!(
                    "`{}` asks the client for input: call it over Streamable HTTP in a session, accepting text/event-stream",
                    asking.name
                )));
            }
        }
    };
    let missing: Vec<&str> = plan
        .required_capabilities()
        .into_iter()
        .filter(|c| caps.get(*c).is_none())
        .collect();
    if !missing.is_empty() {
        let mut required = Map::new();
        for c in &missing {
            required.insert((*c).to_string(), json!({}));
        }
        return Gathered::Done(Answer::Error {
            code: MISSING_CAPABILITY,
            message: format!(
                "Missing required client capability: `{}` needs {}",
                asking.name,
                missing.join(", ")
            ),
            data: Some(json!({ "requiredCapabilities": required })),
            http_status: modern.then_some(400),
        });
    }
    let outcome = match (modern, link) {
        (true, _) => mrtr(&asking.scope, plan, &caps, params, args),
        (false, Some(link)) => converse(plan, &caps, &link, args).await,
        (false, None) => Err(invalid("no client link")),
    };
    match outcome {
        Ok(args) => Gathered::Ready(Some(args)),
        Err(answer) => Gathered::Done(answer),
    }
}

/// The steps of a round this client is asked (optional ones need the capability).
fn asked<'a>(round: &'a [Step], caps: &'a Value) -> impl Iterator<Item = &'a Step> {
    round
        .iter()
        .filter(move |s| !s.optional || caps.get(s.capability()).is_some())
}

/// The request (`method`, `params`) for a step, rendered over the arguments gathered so far.
fn request(step: &Step, args: &Value) -> Result<Value, Answer> {
    let render = |t: &crate::config::ask::Template| {
        t.render(args)
            .map_err(|e| tool_error(format!("could not build the question `{}`: {e}", step.key)))
    };
    let params = match &step.kind {
        StepKind::Elicit {
            message, schema, ..
        } => json!({ "mode": "form", "message": render(message)?, "requestedSchema": schema }),
        StepKind::Sample {
            prompt,
            system,
            max_tokens,
        } => {
            let mut p = json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": render(prompt)? } }],
                "maxTokens": max_tokens,
            });
            if let Some(s) = system {
                p["systemPrompt"] = json!(render(s)?);
            }
            p
        }
        StepKind::Roots => json!({}),
    };
    Ok(json!({ "method": step.method(), "params": params }))
}

/// Applies one answer (an `ElicitResult`, `CreateMessageResult` or `ListRootsResult`) to
/// `target`. A declined or cancelled elicitation ends the call with its `on_decline` text,
/// rendered over `ctx` (the arguments so far).
fn apply(step: &Step, answer: &Value, target: &mut Value, ctx: &Value) -> Result<(), Answer> {
    let bad = |why: &str| invalid(format!("the answer to `{}` {why}", step.key));
    let Some(answer) = answer.as_object() else {
        return Err(bad("must be an object"));
    };
    let value = match &step.kind {
        StepKind::Elicit {
            validator,
            on_decline,
            ..
        } => match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {
                let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
                if let Some(e) = validator.iter_errors(&content).next() {
                    let at = e.instance_path().to_string();
                    return Err(bad(&format!(
                        "does not match its requested schema (at `{}`): {e}",
                        if at.is_empty() { "/" } else { &at }
                    )));
                }
                content
            }
            Some(action @ ("decline" | "cancel")) => {
                let text = match on_decline.as_ref().map(|t| t.render(ctx)) {
                    Some(Ok(t)) => t,
                    _ => format!(
                        "The user chose `{action}` for `{}`: nothing was done.",
                        step.key
                    ),
                };
                return Err(tool_error(text));
            }
            _ => return Err(bad("needs `action`: accept, decline or cancel")),
        },
        StepKind::Sample { .. } => {
            let content = answer.get("content");
            let block = match content {
                Some(Value::Array(blocks)) => blocks
                    .iter()
                    .find(|b| b.get("type").and_then(Value::as_str) == Some("text")),
                other => other,
            };
            match block
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .and_then(|b| b.get("text"))
                .and_then(Value::as_str)
            {
                Some(t) => json!(t),
                None => return Err(bad("needs text `content` (a CreateMessageResult)")),
            }
        }
        StepKind::Roots => match answer.get("roots") {
            Some(r @ Value::Array(_)) => r.clone(),
            _ => return Err(bad("needs a `roots` list (a ListRootsResult)")),
        },
    };
    let Some(obj) = target.as_object_mut() else {
        return Err(bad("cannot be applied"));
    };
    match (&step.into, value) {
        (Some(into), v) => {
            obj.insert(into.clone(), v);
        }
        // Only the fields the question asked for: an answer cannot replace other arguments.
        (None, Value::Object(mut fields)) => {
            for name in step.fills() {
                if let Some(v) = fields.remove(&name) {
                    obj.insert(name, v);
                }
            }
        }
        (None, _) => return Err(bad("must be an object")),
    }
    Ok(())
}

/// 2025 era: asks each step on the call's SSE stream, in order, and waits for the answers.
async fn converse(
    plan: &AskPlan,
    caps: &Value,
    link: &ClientLink,
    mut args: Value,
) -> Result<Value, Answer> {
    for round in &plan.rounds {
        for step in asked(round, caps) {
            let mut msg = request(step, &args)?;
            let (waiting, rx) = link.pending.wait();
            msg["jsonrpc"] = json!("2.0");
            msg["id"] = json!(waiting.id);
            if link.tx.send(msg).is_err() {
                return Err(tool_error("the client's response stream is closed".into()));
            }
            let reply = match tokio::time::timeout(step.timeout, rx).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(_)) => {
                    return Err(tool_error(format!(
                        "the question `{}` was abandoned",
                        step.key
                    )));
                }
                Err(_) => {
                    let _ = link.tx.send(json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": { "requestId": waiting.id, "reason": "timed out" }
                    }));
                    return Err(tool_error(format!(
                        "the client did not answer `{}` within {} ms",
                        step.key,
                        step.timeout.as_millis()
                    )));
                }
            };
            drop(waiting);
            if let Some(err) = reply.get("error") {
                let msg = err.get("message").and_then(Value::as_str).unwrap_or("");
                return Err(tool_error(format!(
                    "the client refused `{}` ({}): {msg}",
                    step.method(),
                    step.key
                )));
            }
            let result = reply.get("result").cloned().unwrap_or(Value::Null);
            let ctx = args.clone();
            apply(step, &result, &mut args, &ctx)?;
        }
    }
    Ok(args)
}

/// What a `requestState` carries between MRTR rounds.
struct State {
    round: usize,
    /// Arguments gathered by earlier rounds.
    gathered: Map<String, Value>,
}

fn state_key() -> &'static hmac::Key {
    static KEY: OnceLock<hmac::Key> = OnceLock::new();
    KEY.get_or_init(|| {
        let configured = std::env::var(STATE_KEY_ENV).ok().filter(|k| !k.is_empty());
        let mut bytes = [0u8; 32];
        match configured {
            Some(k) => {
                bytes.copy_from_slice(digest::digest(&digest::SHA256, k.as_bytes()).as_ref())
            }
            None => {
                if aws_lc_rs::rand::fill(&mut bytes).is_err() {
                    // No system randomness: fall back to a per-process value no client can see.
                    let seed = format!("{:?}{}", SystemTime::now(), std::process::id());
                    bytes
                        .copy_from_slice(digest::digest(&digest::SHA256, seed.as_bytes()).as_ref());
                }
            }
        }
        hmac::Key::new(hmac::HMAC_SHA256, &bytes)
    })
}

fn args_digest(args: &Value) -> String {
    // Keys sorted at every level: equal arguments hash equally.
    let text = crate::idempotency::canonical(args);
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, text.as_bytes()))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `base64url(payload) "." base64url(HMAC-SHA256(payload))`; the payload binds the tool, the
/// caller's arguments and an expiry.
fn seal(tool: &str, args: &Value, state: &State) -> String {
    let payload = json!({
        "tool": tool,
        "args": args_digest(args),
        "round": state.round,
        "gathered": state.gathered,
        "exp": now_secs() + STATE_TTL.as_secs(),
    });
    let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap_or_default());
    let tag = hmac::sign(state_key(), body.as_bytes());
    format!("{body}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

fn open(sealed: &str, tool: &str, args: &Value) -> Result<State, Answer> {
    let refused =
        || invalid("requestState failed its integrity check: start the call again without it");
    let (body, tag) = sealed.split_once('.').ok_or_else(refused)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| refused())?;
    hmac::verify(state_key(), body.as_bytes(), &tag).map_err(|_| refused())?;
    let payload: Value = URL_SAFE_NO_PAD
        .decode(body)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(refused)?;
    if payload.get("tool").and_then(Value::as_str) != Some(tool) {
        return Err(invalid("requestState belongs to another tool or prompt"));
    }
    if payload.get("args").and_then(Value::as_str) != Some(args_digest(args).as_str()) {
        return Err(invalid(
            "requestState belongs to other arguments: retry with the original arguments",
        ));
    }
    if payload.get("exp").and_then(Value::as_u64).unwrap_or(0) < now_secs() {
        return Err(invalid(
            "requestState expired: start the call again without it",
        ));
    }
    Ok(State {
        round: payload.get("round").and_then(Value::as_u64).unwrap_or(0) as usize,
        gathered: payload
            .get("gathered")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

/// 2026-07-28: applies the `inputResponses` of this retry; answers `input_required` with the
/// next questions, or returns the arguments once every round is answered.
fn mrtr(
    scope: &str,
    plan: &AskPlan,
    caps: &Value,
    params: &Map<String, Value>,
    args: Value,
) -> Result<Value, Answer> {
    let empty = Map::new();
    let responses = match params.get("inputResponses") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err(invalid("`inputResponses` must be an object")),
    };
    let mut state = match params.get("requestState") {
        None => State {
            round: 0,
            gathered: Map::new(),
        },
        Some(Value::String(s)) => open(s, scope, &args)?,
        Some(_) => return Err(invalid("`requestState` must be a string")),
    };
    let merge = |gathered: &Map<String, Value>| {
        let mut m = args.clone();
        if let Some(obj) = m.as_object_mut() {
            obj.extend(gathered.clone());
        }
        m
    };
    let ask = |steps: &[&Step], state: &State, merged: &Value| -> Result<Value, Answer> {
        let mut requests = Map::new();
        for s in steps {
            requests.insert(s.key.clone(), request(s, merged)?);
        }
        Ok(json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": seal(scope, &args, state),
        }))
    };
    while let Some(round) = plan.rounds.get(state.round) {
        let steps: Vec<&Step> = asked(round, caps).collect();
        let merged = merge(&state.gathered);
        if steps.iter().any(|s| !responses.contains_key(&s.key)) {
            // Ask (again) for the whole round; partial answers are not kept.
            return Err(Answer::Result(ask(&steps, &state, &merged)?));
        }
        let mut gathered = Value::Object(state.gathered.clone());
        for s in steps {
            let answer = responses.get(&s.key).unwrap_or(&Value::Null);
            apply(s, answer, &mut gathered, &merged)?;
        }
        state.gathered = match gathered {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        state.round += 1;
        let next: Vec<&Step> = plan
            .rounds
            .get(state.round)
            .map(|r| asked(r, caps).collect())
            .unwrap_or_default();
        if !next.is_empty() {
            // The next round's answers cannot be in this retry: they were never asked.
            let merged = merge(&state.gathered);
            return Err(Answer::Result(ask(&next, &state, &merged)?));
        }
    }
    Ok(merge(&state.gathered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_state_round_trips_and_refuses_tampering() {
        let args = json!({"b": 1, "a": [1, {"y": 2, "x": 1}]});
        let mut gathered = Map::new();
        gathered.insert("name".into(), json!("Alice"));
        let s = seal("t", &args, &State { round: 1, gathered });
        let reordered = json!({"a": [1, {"x": 1, "y": 2}], "b": 1});
        let back = open(&s, "t", &reordered).ok().unwrap();
        assert_eq!(back.round, 1);
        assert_eq!(back.gathered["name"], "Alice");
        assert!(open(&format!("{s}-TAMPERED"), "t", &args).is_err());
        assert!(open(&s, "other", &args).is_err());
        assert!(open(&s, "t", &json!({"b": 2})).is_err());
        assert!(open("garbage", "t", &args).is_err());
    }

    #[test]
    fn unknown_answers_are_refused() {
        let p = Pending::default();
        assert_eq!(
            p.deliver(&json!("portico-ask-9"), json!({})),
            Err(DeliverError::Unknown)
        );
        let (w, mut rx) = p.wait();
        let id = json!(w.id.clone());
        assert!(p.deliver(&id, json!({"result": {}})).is_ok());
        assert!(rx.try_recv().is_ok());
        assert_eq!(p.deliver(&id, json!({})), Err(DeliverError::Unknown));
        drop(w);
        assert_eq!(p.waiting(), 0);
    }
}
