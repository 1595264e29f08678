//! MCP method handlers shared by every transport: ping, initialize, server/discover, tools,
//! resources, prompts, completion. Era differences in result shape and error codes are applied
//! here; transport concerns (headers, sessions, SSE) are not.

pub use super::answer::Answer;
use super::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::catalog::{self, CatalogError};

/// JSON-RPC internal error.
const INTERNAL_ERROR: i64 = -32603;

/// Resource not found, 2025 revisions (removed in 2026-07-28 in favour of -32602).
const RESOURCE_NOT_FOUND: i64 = -32002;
use super::notify::Notifier;
use super::{LEGACY_VERSIONS, supported_versions};
use crate::binding::{Kind, Reply};
use crate::config::Gateway;
use crate::config::compile::Tool;
use arc_swap::ArcSwap;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Which protocol era a request is served under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// Session era, with the negotiated version.
    Legacy(String),
    /// Stateless 2026-07-28.
    Modern(String),
}

/// Server identity and tunables.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub instructions: Option<String>,
    /// `tools/list` page size.
    pub page_size: usize,
    /// Cache hint for discover and list results (2026-07-28).
    pub list_ttl_ms: u64,
}

impl Default for ServerInfo {
    fn default() -> Self {
        ServerInfo {
            name: "portico".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            page_size: 100,
            list_ttl_ms: 60_000,
        }
    }
}

/// Shared state every MCP edge reads.
pub struct Core {
    pub gateway: ArcSwap<Gateway>,
    pub info: ServerInfo,
}

fn server_info_json(info: &ServerInfo) -> Value {
    json!({ "name": info.name, "version": info.version })
}

/// Tools, resources and prompts come from the mappings. 2025-era sessions also accept
/// `resources/subscribe` and `logging/setLevel` (both removed in 2026-07-28).
fn capabilities(modern: bool) -> Value {
    let mut c = json!({
        "tools": { "listChanged": false },
        "resources": { "listChanged": false },
        "prompts": { "listChanged": false },
        "completions": {}
    });
    if !modern {
        c["resources"]["subscribe"] = json!(true);
        c["logging"] = json!({});
    }
    c
}

/// The era's "resource not found": -32602 at 2026-07-28 (SEP-2164), -32002 before.
fn resource_not_found(modern: bool, uri: &str) -> Answer {
    Answer::Error {
        code: if modern {
            INVALID_PARAMS
        } else {
            RESOURCE_NOT_FOUND
        },
        message: format!("Resource not found: {uri}"),
        data: Some(json!({ "uri": uri })),
        http_status: None,
    }
}

fn catalog_error(modern: bool, e: CatalogError) -> Answer {
    match e {
        CatalogError::ResourceNotFound(uri) => resource_not_found(modern, &uri),
        CatalogError::InvalidParams(m) => Answer::error(INVALID_PARAMS, m),
        CatalogError::Failed(m) => Answer::error(INTERNAL_ERROR, m),
        CatalogError::Refused(e) => Reply::Error(e).into(),
        CatalogError::Problem {
            title,
            problem,
            internal,
        } => Answer::Error {
            code: if internal {
                INTERNAL_ERROR
            } else {
                INVALID_PARAMS
            },
            message: title,
            data: Some(problem),
            http_status: None,
        },
    }
}

fn param_str<'a>(params: &'a Option<Value>, key: &str) -> Option<&'a str> {
    params
        .as_ref()
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
}

/// Negotiates an `initialize` version: echo it when supported, else offer the newest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| LEGACY_VERSIONS.iter().find(|v| **v == r).copied())
        .unwrap_or(LEGACY_VERSIONS[0])
}

/// The `initialize` result for a negotiated version.
pub fn initialize_result(info: &ServerInfo, version: &str) -> Value {
    let mut r = json!({
        "protocolVersion": version,
        "capabilities": capabilities(false),
        "serverInfo": server_info_json(info),
    });
    // Tasks (long-running tools) came with 2025-11-25.
    if version >= "2025-11-25" {
        r["capabilities"]["tasks"] =
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } });
    }
    if let (Some(i), Value::Object(obj)) = (&info.instructions, &mut r) {
        obj.insert("instructions".into(), Value::String(i.clone()));
    }
    r
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    if cursor.is_empty() {
        return Some(0);
    }
    let raw = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.strip_prefix("tools:")?.parse().ok()
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("tools:{offset}"))
}

/// Adds the 2026-07-28 per-result fields.
fn modern_result(info: &ServerInfo, mut result: Value, cacheable: bool) -> Value {
    if let Value::Object(obj) = &mut result {
        // An MRTR answer (`mcp::input`) already says `input_required`.
        obj.entry("resultType").or_insert_with(|| json!("complete"));
        if cacheable {
            obj.insert("ttlMs".into(), json!(info.list_ttl_ms));
            obj.insert("cacheScope".into(), json!("public"));
        }
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            m.insert(
                "io.modelcontextprotocol/serverInfo".into(),
                server_info_json(info),
            );
        }
    }
    result
}

/// [`modern_result`] on a tool result written on the hot path (never cacheable).
fn modern_written(info: &ServerInfo, mut w: crate::binding::Written) -> crate::binding::Written {
    w.complete = true;
    w.meta.insert(
        "io.modelcontextprotocol/serverInfo".into(),
        server_info_json(info),
    );
    w
}

/// autonym resources depend on the caller's grant, and so do the resources of a business with
/// an authorization policy (`auth::access`): their lists are `cacheScope: "private"`.
fn grant_dependent(gateway: &Gateway, answer: Answer) -> Answer {
    match answer {
        Answer::Result(mut r)
            if r.get("cacheScope").is_some()
                && gateway.resources.iter().any(|res| {
                    res.business.binding.kind == Kind::Autonym || res.business.auth.is_some()
                }) =>
        {
            r["cacheScope"] = json!("private");
            Answer::Result(r)
        }
        other => other,
    }
}

/// Handles one request (not `initialize`, which the transport handles because it creates a
/// session). Unknown methods answer -32601.
pub async fn handle(core: &Core, era: &Era, method: &str, params: Option<Value>) -> Answer {
    handle_with(core, era, method, params, &Notifier::none()).await
}

/// [`handle`], reporting progress and log messages of `tools/call` on `notifier`.
pub async fn handle_with(
    core: &Core,
    era: &Era,
    method: &str,
    params: Option<Value>,
    notifier: &Notifier,
) -> Answer {
    let modern = matches!(era, Era::Modern(_));
    let finish = |a: Answer, cacheable: bool| match (a, modern) {
        (Answer::Result(r), true) => Answer::Result(modern_result(&core.info, r, cacheable)),
        (Answer::Written(w), true) => Answer::Written(modern_written(&core.info, w)),
        (a, _) => a,
    };
    match method {
        "ping" if !modern => Answer::Result(json!({})),
        "server/discover" if modern => {
            let mut r = json!({
                "supportedVersions": supported_versions(),
                "capabilities": capabilities(true),
            });
            if core
                .gateway
                .load()
                .tools
                .values()
                .any(|t| t.long_running.is_some())
            {
                r["capabilities"]["extensions"] = json!({ super::tasks::EXTENSION: {} });
            }
            if let (Some(i), Value::Object(obj)) = (&core.info.instructions, &mut r) {
                obj.insert("instructions".into(), Value::String(i.clone()));
            }
            finish(Answer::Result(r), true)
        }
        "tools/list" => {
            let cursor = params.as_ref().and_then(|p| p.get("cursor"));
            let offset = match cursor {
                None | Some(Value::Null) => Some(0),
                Some(Value::String(c)) => decode_cursor(c),
                Some(_) => None,
            };
            let gateway = core.gateway.load();
            // autonym tools are 2026-07-28 only: a 2025 session does not see them.
            let visible = |t: &&Arc<Tool>| modern || t.business.binding.kind != Kind::Autonym;
            let total = gateway.tools.values().filter(visible).count();
            let Some(offset) = offset.filter(|o| *o <= total) else {
                return Answer::error(INVALID_PARAMS, "invalid cursor");
            };
            let page = core.info.page_size.max(1);
            let tools: Vec<Value> = gateway
                .tools
                .values()
                .filter(visible)
                .skip(offset)
                .take(page)
                .map(|t| t.descriptor.value())
                .collect();
            let mut r = json!({ "tools": tools });
            if offset + page < total
                && let Value::Object(obj) = &mut r
            {
                obj.insert("nextCursor".into(), json!(encode_cursor(offset + page)));
            }
            finish(Answer::Result(r), true)
        }
        "tools/call" => {
            let Some(Value::Object(mut p)) = params else {
                return Answer::error(INVALID_PARAMS, "tools/call needs params with a `name`");
            };
            // Taken, not cloned: a call's arguments can be large, and nothing after this
            // reads them from `params`.
            let arguments = match p.remove("arguments") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v),
            };
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                return Answer::error(INVALID_PARAMS, "tools/call needs a string `name`");
            };
            let gateway = core.gateway.load_full();
            if !modern
                && gateway
                    .tools
                    .get(name)
                    .is_some_and(|t| t.business.binding.kind == Kind::Autonym)
            {
                let e = crate::forward::unknown_tool(name);
                return Answer::error(e.code, e.message);
            }
            // Long-running tools become tasks for clients that ask for them.
            if let Some(tool) = gateway.tools.get(name).filter(|t| t.long_running.is_some())
                && (modern || tasks_era(era))
                && let Some(a) = super::tasks::tools_call(
                    &gateway,
                    tool,
                    modern,
                    &p,
                    arguments.clone(),
                    notifier,
                )
                .await
            {
                return finish(a, false);
            }
            // Tools with `ask:` first gather their client's answers.
            let asking = gateway
                .tools
                .get(name)
                .and_then(|t| super::input::Asking::tool(t));
            let arguments = match asking {
                Some(a) => match super::input::gather(a, modern, &p, arguments, notifier).await {
                    super::input::Gathered::Ready(a) => a,
                    super::input::Gathered::Done(a) => return finish(a, false),
                },
                None => arguments,
            };
            match super::notify::observed_call(&gateway, name, arguments, notifier).await {
                Reply::Result(r) => finish(Answer::Result(r), false),
                Reply::Written(w) => finish(Answer::Written(w), false),
                Reply::Error(e) => Answer::Error {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                    http_status: e.http_status,
                },
            }
        }
        "resources/list" => {
            let gateway = core.gateway.load_full();
            let audience = crate::auth::access::Audience::current(&gateway).await;
            let list = catalog::list_resources(&gateway, !modern, audience.as_ref());
            grant_dependent(
                &gateway,
                finish(Answer::Result(json!({ "resources": list })), true),
            )
        }
        "resources/templates/list" => {
            let gateway = core.gateway.load_full();
            let audience = crate::auth::access::Audience::current(&gateway).await;
            let list = catalog::list_templates(&gateway, !modern, audience.as_ref());
            let r = finish(Answer::Result(json!({ "resourceTemplates": list })), true);
            grant_dependent(&gateway, r)
        }
        "prompts/list" => {
            let list = catalog::list_prompts(&core.gateway.load(), !modern);
            finish(Answer::Result(json!({ "prompts": list })), true)
        }
        "resources/read" => {
            let Some(uri) = param_str(&params, "uri") else {
                return Answer::error(INVALID_PARAMS, "resources/read needs a string `uri`");
            };
            let gateway = core.gateway.load_full();
            if !modern
                && catalog::find(&gateway, uri).is_some_and(|(r, _)| !catalog::legacy_visible(r))
            {
                return resource_not_found(false, uri);
            }
            match catalog::read(&gateway, uri).await {
                // Backend data: clients must not reuse it (ttlMs 0, private).
                Ok(contents) => {
                    match finish(Answer::Result(json!({ "contents": contents })), false) {
                        Answer::Result(mut r) if modern => {
                            r["ttlMs"] = json!(0);
                            r["cacheScope"] = json!("private");
                            Answer::Result(r)
                        }
                        other => other,
                    }
                }
                Err(e) => catalog_error(modern, e),
            }
        }
        "resources/subscribe" | "resources/unsubscribe" if !modern => {
            let Some(uri) = param_str(&params, "uri") else {
                return Answer::error(INVALID_PARAMS, format!("{method} needs a string `uri`"));
            };
            // Accepted for mapped resources the caller may read; a REST backend announces no
            // changes, so no `notifications/resources/updated` is ever sent.
            let gateway = core.gateway.load_full();
            if !catalog::find(&gateway, uri).is_some_and(|(r, _)| catalog::legacy_visible(r)) {
                return resource_not_found(false, uri);
            }
            if method == "resources/subscribe"
                && let Err(e) = catalog::may_read(&gateway, uri).await
            {
                return catalog_error(false, e);
            }
            Answer::Result(json!({}))
        }
        "prompts/get" => {
            let Some(name) = param_str(&params, "name") else {
                return Answer::error(INVALID_PARAMS, "prompts/get needs a string `name`");
            };
            let arguments = params.as_ref().and_then(|p| p.get("arguments"));
            let gateway = core.gateway.load_full();
            if !modern && gateway.prompts.get(name).is_some_and(|p| p.stateless_only) {
                return Answer::error(INVALID_PARAMS, format!("Unknown prompt: {name}"));
            }
            // Prompts with `ask:` (2026-07-28 only) first gather their client's answers.
            let asking = gateway
                .prompts
                .get(name)
                .and_then(|p| super::input::Asking::prompt(p));
            let gathered;
            let arguments = match (asking, &params) {
                (Some(a), Some(Value::Object(p))) => {
                    let given = arguments.cloned();
                    match super::input::gather(a, modern, p, given, notifier).await {
                        super::input::Gathered::Ready(g) => {
                            gathered = g;
                            gathered.as_ref()
                        }
                        super::input::Gathered::Done(a) => return finish(a, false),
                    }
                }
                _ => arguments,
            };
            match catalog::get_prompt(&gateway, name, arguments).await {
                Ok(r) => finish(Answer::Result(r), false),
                Err(e) => catalog_error(modern, e),
            }
        }
        "completion/complete" => {
            let gateway = core.gateway.load_full();
            let audience = crate::auth::access::Audience::current(&gateway).await;
            match catalog::complete(&gateway, params.as_ref(), audience.as_ref()) {
                Ok(r) => finish(Answer::Result(r), false),
                Err(e) => catalog_error(modern, e),
            }
        }
        "logging/setLevel" if !modern => {
            const LEVELS: [&str; 8] = super::notify::LEVELS;
            // The transport stores the level on the session once this succeeds.
            match param_str(&params, "level") {
                Some(l) if LEVELS.contains(&l) => Answer::Result(json!({})),
                _ => Answer::error(
                    INVALID_PARAMS,
                    format!("`level` must be one of: {}", LEVELS.join(", ")),
                ),
            }
        }
        "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result" | "tasks/list"
            if modern || tasks_era(era) =>
        {
            let gateway = core.gateway.load_full();
            finish(
                super::tasks::handle_spawned(gateway, modern, method.to_string(), params).await,
                false,
            )
        }
        _ => Answer::error(METHOD_NOT_FOUND, format!("Method not found: {method}")),
    }
}

/// Session-era revisions with tasks (2025-11-25).
fn tasks_era(era: &Era) -> bool {
    matches!(era, Era::Legacy(v) if v.as_str() >= "2025-11-25")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each layer of the call pipeline may add its own few locals, never a second copy of the
    /// layer below. An `async fn` that takes a future and awaits it holds it twice; two such
    /// wrappers (credentials, trace context) and two inline `call_tool`s had grown the request
    /// future to 80 KiB, which hyper and tokio moved several times per call (200 KiB of memcpy,
    /// 40 % of a call's instructions: docs/benchmarks.md). The pipeline below `call_tool` is
    /// boxed where it is made (`util::boxed`), so the levels above it move a pointer.
    #[test]
    fn the_call_pipeline_futures_do_not_double() {
        let g =
            crate::config::load(&[std::path::PathBuf::from("mappings")]).expect("demo mappings");
        let core = Core {
            gateway: ArcSwap::from_pointee(g),
            info: ServerInfo::default(),
        };
        let gateway = core.gateway.load_full();
        let none = Notifier::none();
        let era = Era::Modern("2026-07-28".into());
        let call = crate::forward::call_tool(&gateway, "usp_availability_query", None);
        let observed = super::super::notify::observed_call(&gateway, "x", None, &none);
        let handled = handle_with(&core, &era, "tools/call", None, &none);
        let (c, o, h) = (
            std::mem::size_of_val(&call),
            std::mem::size_of_val(&observed),
            std::mem::size_of_val(&handled),
        );
        assert!(c < 512, "call_tool {c} bytes: its pipeline is not boxed");
        assert!(o < c + 1024, "observed_call {o} bytes around call_tool {c}");
        // Its other requests' states (resource reads, the caller's audience) are its largest.
        assert!(h < 4096, "handle_with {h} bytes around observed_call {o}");
    }

    #[test]
    fn cursors_round_trip_and_reject_junk() {
        assert_eq!(decode_cursor(&encode_cursor(7)), Some(7));
        assert_eq!(decode_cursor(""), Some(0));
        assert_eq!(decode_cursor("not-base64!"), None);
        assert_eq!(decode_cursor(&URL_SAFE_NO_PAD.encode("other:1")), None);
    }

    #[test]
    fn negotiation_echoes_known_versions() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn written_results_become_modern_as_their_values_do() {
        let info = ServerInfo::default();
        for meta in [json!({}), json!({"usp": {"correlation_id": "c-1"}})] {
            let w = crate::binding::Written {
                meta: meta.as_object().cloned().unwrap_or_default(),
                content: br#"[{"text":"Found 1 \"slot\".","type":"text"}]"#.to_vec(),
                structured: Some(bytes::Bytes::from_static(br#"{"messages":[],"slots":[1]}"#)),
                complete: false,
            };
            let tree = modern_result(&info, w.to_value(), false);
            let written = modern_written(&info, w);
            assert_eq!(written.to_value(), tree);
            let mut bytes = Vec::new();
            written.write(&mut bytes);
            assert_eq!(bytes, crate::json_text::to_vec(&tree));
        }
    }

    #[test]
    fn modern_results_carry_required_fields() {
        let r = modern_result(&ServerInfo::default(), json!({"tools": []}), true);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["cacheScope"], "public");
        assert!(r["ttlMs"].is_u64());
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "portico"
        );
    }
}
