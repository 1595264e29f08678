//! Protocol rulebooks (usp, ucp, plain): where metadata lives, which HTTP answers are business
//! outcomes, which JSON-RPC codes and envelopes each protocol uses. Tables, not pipelines: a
//! binding must never perform I/O or know about transports other than through these tables.

pub mod autonym;
mod defaults;
mod errors;
mod meta;
pub mod registries;
pub mod rest;
mod written;
pub use errors::{AUTONYM_ERRORS, ErrorCode, HTTP_PROBLEM, PLAIN_ERRORS, UCP_ERRORS, USP_ERRORS};
pub use written::Written;

use crate::json_doc::{self, Doc};
use crate::model::{Failure, FailureKind, Meta, Outcome};
use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// The protocol a business speaks over MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Universal Scheduling Protocol MCP binding.
    Usp,
    /// Universal Commerce Protocol MCP binding (lodging booking, ask).
    Ucp,
    /// Generic MCP: failures become `isError` results.
    Plain,
    /// autonym B3 MCP binding: stateless 2026-07-28 only, Problem Details errors.
    Autonym,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "usp" => Some(Kind::Usp),
            "ucp" => Some(Kind::Ucp),
            "plain" => Some(Kind::Plain),
            "autonym" => Some(Kind::Autonym),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Usp => "usp",
            Kind::Ucp => "ucp",
            Kind::Plain => "plain",
            Kind::Autonym => "autonym",
        }
    }
}

/// What a backend HTTP status means when no mapping rule says otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Success,
    Business(String),
    Error(String),
    ToolError,
}

/// A JSON-RPC error with the HTTP status a binding wants on the response (UCP requires the
/// matching status over Streamable HTTP).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    pub http_status: Option<u16>,
}

/// What a tool call answers: a `CallToolResult` object, or a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Result(Value),
    /// A successful result already written as text (`translate::answer`, the hot path): the
    /// same result as the `Result` it stands for ([`Written::to_value`]).
    Written(Written),
    Error(RpcError),
}

impl Reply {
    /// Turns a [`Reply::Written`] into the [`Reply::Result`] it stands for, for the few
    /// places that change or inspect a result (credentials, VRP attestations, the
    /// idempotency store).
    pub fn materialize(&mut self) {
        if let Reply::Written(w) = self {
            *self = Reply::Result(w.to_value());
        }
    }

    /// Whether this is a result with `isError: true`.
    pub fn is_tool_error(&self) -> bool {
        matches!(self, Reply::Result(r) if r.get("isError") == Some(&Value::Bool(true)))
    }
}

/// Per-business binding values, from the mapping's `protocol:` section.
#[derive(Debug, Clone)]
pub struct Binding {
    pub kind: Kind,
    pub version: String,
    /// USP `usp.capabilities`.
    pub capabilities: Option<Value>,
    /// UCP default capability name.
    pub capability: Option<String>,
    /// UCP: the business's declared registries (`protocol.ucp`: `capabilities`, `services`,
    /// `payment_handlers`), in their profile form; results carry their response form.
    pub ucp: Option<Map<String, Value>>,
}

/// Rendering inputs that vary per tool.
#[derive(Debug, Clone, Default)]
pub struct ToolCtx<'a> {
    pub capability: Option<&'a str>,
    /// The caller renders the success text itself (a summary template): leave it empty
    /// rather than serialise `structuredContent` for nothing.
    pub text_later: bool,
    pub correlation_id: Option<&'a str>,
}

fn header(
    name: &'static str,
    value: &str,
    what: &str,
) -> Result<(HeaderName, HeaderValue), Failure> {
    let v = HeaderValue::from_str(value).map_err(|_| {
        Failure::new(
            FailureKind::InvalidRequest,
            format!(
                "{what} contains characters not allowed in an HTTP header (CR, LF or controls)"
            ),
        )
        .with_code("invalid_request")
    })?;
    Ok((HeaderName::from_static(name), v))
}

/// Profile URIs are fetchable documents: https, or http on loopback for development.
fn profile_url_ok(p: &str) -> bool {
    match url::Url::parse(p) {
        Ok(u) => match u.scheme() {
            "https" => u.host_str().is_some(),
            "http" => matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")),
            _ => false,
        },
        Err(_) => false,
    }
}

/// Refuses a profile that is not an absolute https URL (http only on loopback).
fn check_profile(meta: &Meta) -> Result<(), Failure> {
    match &meta.profile {
        Some(p) if !profile_url_ok(p) => Err(Failure::new(
            FailureKind::InvalidRequest,
            "the profile must be an absolute https URL (http only for localhost)",
        )
        .with_code("invalid_profile_url")),
        _ => Ok(()),
    }
}

/// RFC 8941 sf-string: printable ASCII, with `"` and `\` escaped.
fn sf_string(s: &str) -> Option<String> {
    if !s.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return None;
    }
    Some(format!(
        "\"{}\"",
        s.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Result<Option<&'a str>, String> {
    let mut cur = v;
    for k in path {
        match cur.get(k) {
            Some(next) => cur = next,
            None => return Ok(None),
        }
    }
    match cur {
        Value::String(s) => Ok(Some(s)),
        Value::Null => Ok(None),
        _ => Err(path.join(".")),
    }
}

impl Binding {
    /// The binding's error table.
    pub fn errors(&self) -> &'static [ErrorCode] {
        match self.kind {
            Kind::Usp => USP_ERRORS,
            Kind::Ucp => UCP_ERRORS,
            Kind::Plain => PLAIN_ERRORS,
            Kind::Autonym => AUTONYM_ERRORS,
        }
    }

    pub fn error_code(&self, slug: &str) -> Option<ErrorCode> {
        if self.kind == Kind::Autonym {
            return autonym::code(slug).map(|c| ErrorCode {
                slug: c.slug,
                rpc: if c.form == autonym::Form::Internal {
                    -32603
                } else {
                    -32602
                },
                http: c.status,
            });
        }
        self.errors().iter().copied().find(|e| e.slug == slug)
    }

    /// Reads protocol metadata out of the arguments and removes it, so it never reaches the
    /// backend body.
    pub fn extract(&self, args: &mut Value) -> Result<Meta, Failure> {
        // `str_at` names the member that is not a string, as the binding spells its path.
        let invalid = |path: String| {
            let path = match self.kind {
                Kind::Ucp => format!("meta.{path}"),
                _ => format!("_meta.{path}"),
            };
            self.meta_not_a_string(&path)
        };
        let mut meta = Meta::default();
        let Value::Object(obj) = args else {
            return Ok(meta);
        };
        match self.kind {
            Kind::Usp => {
                if let Some(m) = obj.remove("_meta") {
                    meta.profile = str_at(&m, &["usp", "profile"])
                        .map_err(invalid)?
                        .map(str::to_string);
                    meta.idempotency_key = str_at(&m, &["usp", "idempotency_key"])
                        .map_err(invalid)?
                        .map(str::to_string);
                    meta.correlation_id = str_at(&m, &["usp", "correlation_id"])
                        .map_err(invalid)?
                        .map(str::to_string);
                    meta.if_match = str_at(&m, &["usp", "if_match"])
                        .map_err(invalid)?
                        .map(str::to_string);
                    meta.authorization = m.get("usp").and_then(|u| u.get("authorization")).cloned();
                }
            }
            Kind::Ucp => {
                if let Some(m) = obj.remove("meta") {
                    meta.profile = str_at(&m, &["ucp-agent", "profile"])
                        .map_err(invalid)?
                        .map(str::to_string);
                    meta.idempotency_key = str_at(&m, &["idempotency-key"])
                        .map_err(invalid)?
                        .map(str::to_string);
                }
                if meta.profile.is_none() {
                    return Err(Self::meta_failure(
                        "meta[\"ucp-agent\"].profile is required on every UCP request; expected at params.arguments.meta[\"ucp-agent\"].profile".into(),
                    )
                    .with_code("invalid_profile_url"));
                }
            }
            Kind::Plain | Kind::Autonym => {}
        }
        check_profile(&meta)?;
        Ok(meta)
    }

    /// HTTP headers that carry the metadata to the backend.
    pub fn headers(&self, meta: &Meta) -> Result<Vec<(HeaderName, HeaderValue)>, Failure> {
        let mut out = Vec::new();
        let bad_profile = || {
            Failure::new(
                FailureKind::InvalidRequest,
                "the profile URI must be printable ASCII",
            )
            .with_code("invalid_profile_url")
        };
        match self.kind {
            Kind::Usp | Kind::Ucp => {
                if let Some(p) = &meta.profile {
                    let value = format!("profile={}", sf_string(p).ok_or_else(bad_profile)?);
                    let name = if self.kind == Kind::Usp {
                        "usp-agent"
                    } else {
                        "ucp-agent"
                    };
                    out.push(header(name, &value, "the profile URI")?);
                }
                if let Some(k) = &meta.idempotency_key {
                    out.push(header("idempotency-key", k, "the idempotency key")?);
                }
                if let Some(c) = &meta.correlation_id {
                    out.push(header("usp-correlation-id", c, "the correlation id")?);
                }
                if let Some(r) = &meta.if_match {
                    let etag = sf_string(r).ok_or_else(|| {
                        Failure::new(
                            FailureKind::InvalidRequest,
                            "if_match must be printable ASCII",
                        )
                        .with_code("invalid_request")
                    })?;
                    out.push(header("if-match", &etag, "if_match")?);
                }
                if self.kind == Kind::Ucp {
                    let fresh;
                    let id = match &meta.minted {
                        Some(m) => m.request_id.as_str(),
                        None => {
                            fresh = uuid::Uuid::new_v4().to_string();
                            fresh.as_str()
                        }
                    };
                    out.push(header("request-id", id, "request id")?);
                }
            }
            Kind::Plain | Kind::Autonym => {}
        }
        Ok(out)
    }

    /// How schema-violating arguments are answered.
    pub fn invalid_arguments(&self, detail: String) -> Failure {
        let mut f = Failure::new(FailureKind::InvalidRequest, detail);
        match self.kind {
            // USP's own example: -32600 invalid_request with data.content.
            Kind::Usp => f.code = Some("invalid_request".into()),
            Kind::Ucp => f.code = Some("invalid_params".into()),
            // SEP-1303: input validation errors are tool execution errors.
            Kind::Plain => f.as_tool_error = true,
            // The Problem Details carry no validation detail (B3.4).
            Kind::Autonym => f.code = Some("invalid_request".into()),
        }
        f
    }

    fn envelope_meta(&self, ctx: &ToolCtx<'_>, error: bool) -> (String, Value) {
        match self.kind {
            Kind::Usp => {
                let mut usp = Map::new();
                usp.insert("version".into(), Value::String(self.version.clone()));
                if !error && let Some(c) = &self.capabilities {
                    usp.insert("capabilities".into(), c.clone());
                }
                ("usp".into(), Value::Object(usp))
            }
            _ => {
                let mut ucp = Map::new();
                ucp.insert("version".into(), Value::String(self.version.clone()));
                if error {
                    ucp.insert("status".into(), Value::String("error".into()));
                } else if let Some(declared) = &self.ucp {
                    ucp.extend(registries::response_form(declared));
                } else if let Some(cap) = ctx.capability.or(self.capability.as_deref()) {
                    ucp.insert(
                        "capabilities".into(),
                        json!({ cap: [ { "version": self.version } ] }),
                    );
                }
                ("ucp".into(), Value::Object(ucp))
            }
        }
    }

    /// Renders an outcome as the protocol's tool result or JSON-RPC error.
    pub fn render(&self, outcome: Outcome, ctx: &ToolCtx<'_>) -> Reply {
        match outcome {
            Outcome::Success { body } => self.render_success(body, ctx),
            Outcome::Business { body, messages } => self.render_business(body, messages, ctx),
            Outcome::Failure(f) => self.render_failure(f, ctx),
        }
    }

    fn result(
        &self,
        structured: Option<Value>,
        text: String,
        is_error: bool,
        ctx: &ToolCtx<'_>,
    ) -> Reply {
        let mut r = Map::new();
        // Built by hand: `json!` would copy `text` (for JSON texts, the whole answer again).
        let mut block = Map::with_capacity(2);
        block.insert("type".into(), Value::String("text".into()));
        block.insert("text".into(), Value::String(text));
        r.insert("content".into(), Value::Array(vec![Value::Object(block)]));
        if let Some(s) = structured {
            r.insert("structuredContent".into(), s);
        }
        if is_error {
            r.insert("isError".into(), Value::Bool(true));
        }
        if let Some(c) = ctx.correlation_id
            && self.kind == Kind::Usp
        {
            r.insert("_meta".into(), json!({ "usp": { "correlation_id": c } }));
        }
        Reply::Result(Value::Object(r))
    }

    /// The envelope member (`usp` or `ucp`) of a tool's successful results, which depends only
    /// on the binding and the tool's capability: built once, when the tool is compiled.
    pub fn success_envelope(&self, capability: Option<&str>) -> Option<(String, Value)> {
        let ctx = ToolCtx {
            capability,
            ..ToolCtx::default()
        };
        matches!(self.kind, Kind::Usp | Kind::Ucp).then(|| self.envelope_meta(&ctx, false))
    }

    /// True when [`Binding::structured_doc`] keeps an object body as it is (no envelope, no
    /// member added or removed): its text can then be the backend's own.
    pub fn keeps_object_body(&self) -> bool {
        matches!(self.kind, Kind::Plain | Kind::Autonym)
    }

    /// [`Binding::render`]'s `structuredContent` for a successful answer that is a [`Doc`]
    /// (`translate::answer`): the same envelope, built on the document. `envelope` is the
    /// tool's [`Binding::success_envelope`]; `None` for a USP or UCP binding without one.
    pub fn structured_doc<'a>(
        &self,
        body: Doc<'a>,
        envelope: Option<&'a (String, Value)>,
    ) -> Option<Option<Doc<'a>>> {
        match self.kind {
            Kind::Plain | Kind::Autonym => Some(match body {
                Doc::Obj(_) => Some(body),
                Doc::Null => None,
                other => Some(Doc::Obj(vec![(Cow::Borrowed("result"), other)])),
            }),
            Kind::Usp | Kind::Ucp => {
                let (key, env) = envelope?;
                let mut out = match body {
                    Doc::Obj(m) => m,
                    _ => Vec::new(),
                };
                out.retain(|(k, _)| k != "usp" && k != "ucp");
                json_doc::insert(&mut out, Cow::Borrowed(key), Doc::from_value(env));
                if self.kind == Kind::Usp && json_doc::member(&out, "messages").is_none() {
                    json_doc::insert(&mut out, Cow::Borrowed("messages"), Doc::Arr(Vec::new()));
                }
                Some(Some(Doc::Obj(out)))
            }
        }
    }

    fn render_success(&self, body: Value, ctx: &ToolCtx<'_>) -> Reply {
        let structured = match self.kind {
            Kind::Plain | Kind::Autonym => match body {
                Value::Object(_) => Some(body),
                Value::Null => None,
                other => Some(json!({ "result": other })),
            },
            Kind::Usp | Kind::Ucp => {
                let (key, env) = self.envelope_meta(ctx, false);
                let mut out = Map::new();
                out.insert(key, env);
                if let Value::Object(fields) = body {
                    for (k, v) in fields {
                        if k != "usp" && k != "ucp" {
                            out.insert(k, v);
                        }
                    }
                }
                if self.kind == Kind::Usp && !out.contains_key("messages") {
                    out.insert("messages".into(), Value::Array(vec![]));
                }
                Some(Value::Object(out))
            }
        };
        let text = match &structured {
            Some(_) if ctx.text_later => String::new(),
            Some(s) => crate::json_text::to_string(s),
            None => "OK".into(),
        };
        self.result(structured, text, false, ctx)
    }

    fn render_business(
        &self,
        body: Map<String, Value>,
        messages: Vec<Value>,
        ctx: &ToolCtx<'_>,
    ) -> Reply {
        let text_of = |messages: &[Value]| {
            let parts: Vec<String> = messages
                .iter()
                .map(|m| {
                    m.get("content")
                        .and_then(Value::as_str)
                        .or_else(|| m.get("code").and_then(Value::as_str))
                        .unwrap_or("business error")
                        .to_string()
                })
                .collect();
            format!("Error: {}", parts.join(" "))
        };
        match self.kind {
            // A tool's outputSchema describes its successful result, and clients validate any
            // `structuredContent` against it, `isError` or not (the TypeScript SDK throws
            // -32602 on a mismatch): a plain business outcome is an `isError` result with no
            // `structuredContent`, its messages as text (the sentence, then their JSON).
            Kind::Plain => {
                let text = text_of(&messages);
                let mut s = body;
                s.insert("messages".into(), Value::Array(messages));
                let detail = crate::json_text::to_string(&Value::Object(s));
                let mut reply = self.result(None, text, true, ctx);
                if let Reply::Result(Value::Object(r)) = &mut reply
                    && let Some(Value::Array(content)) = r.get_mut("content")
                {
                    content.push(json!({ "type": "text", "text": detail }));
                }
                reply
            }
            // B3.4: an `isError` result whose only content is the Problem Details JSON, with
            // the message's code when it is a registered one, else `value_rejected`.
            Kind::Autonym => {
                let first = messages.first();
                let field = |k: &str| first.and_then(|m| m.get(k)).and_then(Value::as_str);
                let code = field("code")
                    .filter(|c| autonym::code(c).is_some())
                    .unwrap_or("value_rejected");
                let f = Failure {
                    code: Some(code.to_string()),
                    ..Failure::new(
                        FailureKind::InvalidRequest,
                        field("content").unwrap_or("business error"),
                    )
                };
                render_autonym_failure(&f)
            }
            Kind::Usp | Kind::Ucp => {
                // UCP: no resource -> the error response shape (`ucp.status: "error"`).
                let error_shape = self.kind == Kind::Ucp && body.is_empty();
                let (key, env) = self.envelope_meta(ctx, error_shape);
                let mut out = Map::new();
                out.insert(key, env);
                for (k, v) in body {
                    if k != "usp" && k != "ucp" && k != "messages" {
                        out.insert(k, v);
                    }
                }
                out.insert("messages".into(), Value::Array(messages.clone()));
                let structured = Value::Object(out);
                let text = match self.kind {
                    Kind::Ucp => structured.to_string(),
                    _ => text_of(&messages),
                };
                self.result(Some(structured), text, false, ctx)
            }
        }
    }

    /// Renders a failure (also used for failures raised before any backend call).
    pub fn render_failure(&self, f: Failure, ctx: &ToolCtx<'_>) -> Reply {
        if self.kind == Kind::Autonym {
            return render_autonym_failure(&f);
        }
        if f.as_tool_error || self.kind == Kind::Plain && f.code.is_none() {
            let mut text = f.message.clone();
            if let Some(s) = f.status {
                text = format!("{text} (backend HTTP {s})");
            }
            return self.result(None, text, true, ctx);
        }
        let slug = f
            .code
            .clone()
            .unwrap_or_else(|| self.default_slug(f.kind).to_string());
        let row = self
            .error_code(&slug)
            .or_else(|| self.error_code(self.default_slug(f.kind)))
            .unwrap_or(ErrorCode {
                slug: "internal_error",
                rpc: -32603,
                http: 500,
            });
        let mut data = Map::new();
        data.insert("code".into(), Value::String(slug.clone()));
        data.insert("content".into(), Value::String(f.message.clone()));
        if let Some(p) = f.problem {
            data.insert("problem".into(), *p);
        }
        if let Some(r) = f.retry_after {
            data.insert("retry_after".into(), Value::from(r));
        }
        let http_status = match self.kind {
            Kind::Ucp => Some(row.http),
            _ => None,
        };
        let message = if f.explain {
            format!("{slug}: {}", f.message)
        } else {
            slug
        };
        Reply::Error(RpcError {
            code: row.rpc,
            message,
            data: Some(Value::Object(data)),
            http_status,
        })
    }

    /// Extra `anyOf` branch the binding's business outcomes need in a tool's output schema.
    pub fn business_schema(&self) -> Option<Value> {
        let message = json!({
            "type": "object",
            "required": ["type", "code", "content"],
            "properties": {
                "type": {"enum": ["error", "warning", "info"]},
                "code": {"type": "string"},
                "content": {"type": "string"},
                "severity": {"type": "string"}
            }
        });
        match self.kind {
            Kind::Usp => Some(json!({
                "type": "object",
                "required": ["usp", "messages"],
                "properties": {
                    "usp": {"type": "object", "required": ["version"], "properties": {"version": {"type": "string"}}},
                    "messages": {"type": "array", "minItems": 1, "items": message}
                }
            })),
            Kind::Ucp => Some(json!({
                "type": "object",
                "required": ["ucp", "messages"],
                "properties": {
                    "ucp": {"type": "object", "required": ["version", "status"], "properties": {"version": {"type": "string"}, "status": {"const": "error"}}},
                    "messages": {"type": "array", "minItems": 1, "items": message},
                    "continue_url": {"type": "string"}
                }
            })),
            Kind::Plain | Kind::Autonym => None,
        }
    }
}

/// The autonym code of a failure: the backend's registered code, the mapping's, or the
/// default for its kind.
pub fn autonym_code(f: &Failure) -> autonym::Code {
    let from_mapping = f.code.as_deref().and_then(autonym::code);
    autonym::backend_code(f.problem.as_deref())
        .or(from_mapping)
        .or_else(|| {
            f.status
                .map(autonym::slug_for_status)
                .and_then(autonym::code)
        })
        .or_else(|| {
            let b = Binding {
                kind: Kind::Autonym,
                version: String::new(),
                capabilities: None,
                capability: None,
                ucp: None,
            };
            autonym::code(b.default_slug(f.kind))
        })
        .unwrap_or(autonym::INTERNAL)
}

/// B3.4 for `tools/call`: the Problem Details as the only text content of an `isError` result;
/// `-32603` for internal errors; the HTTP form for the codes the table sends before JSON-RPC.
fn render_autonym_failure(f: &Failure) -> Reply {
    let code = autonym_code(f);
    let problem = autonym::problem(code, f.problem.as_deref(), f.retry_after);
    match code.form {
        autonym::Form::Internal | autonym::Form::None => Reply::Error(RpcError {
            code: -32603,
            message: autonym::INTERNAL.title.to_string(),
            data: Some(if code.form == autonym::Form::None {
                autonym::problem(autonym::INTERNAL, None, None)
            } else {
                problem
            }),
            http_status: None,
        }),
        autonym::Form::Http => Reply::Error(RpcError {
            code: HTTP_PROBLEM,
            message: code.title.to_string(),
            data: Some(match (problem, f.retry_after) {
                (Value::Object(mut p), Some(r)) => {
                    p.entry("retry_after").or_insert_with(|| json!(r));
                    Value::Object(p)
                }
                (p, _) => p,
            }),
            http_status: Some(code.status),
        }),
        autonym::Form::Params => Reply::Result(json!({
            "content": [{ "type": "text", "text": problem.to_string() }],
            "isError": true
        })),
    }
}

#[cfg(test)]
mod tests;
