//! The per-era POST paths: the 2025 era (sessions, initialize) and the 2026-07-28 era
//! (stateless, header rules).
//! It never frames bytes itself: that is `respond`.

use super::lifetime::no_session;
use super::post::CallReport;
use super::respond::{Body, decode_header_value, empty, rpc_error};
use super::{ClientAddr, Server};
use crate::mcp::handler::{self, Answer, Era};
use crate::mcp::jsonrpc::{
    HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Message,
    UNSUPPORTED_VERSION,
};
use crate::mcp::notify;
use crate::mcp::{LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::util::names;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

impl Server {
    pub(super) async fn post_legacy(
        &self,
        parts: &http::request::Parts,
        msg: Message,
        session_hdr: Option<String>,
        version_hdr: Option<String>,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        if let Message::Request { id, method, params } = &msg
            && method == "initialize"
        {
            let requested = params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            let version = handler::negotiate(requested);
            let client = parts.extensions.get::<ClientAddr>().copied();
            let session = match self.new_session(id, client, version).await {
                Ok(s) => s,
                Err(refused) => return refused,
            };
            let caps = params.as_ref().and_then(|p| p.get("capabilities"));
            session
                .asks
                .set_capabilities(caps.cloned().unwrap_or_else(|| json!({})));
            let result = handler::initialize_result(&self.core.info, version);
            return self.reply(
                id,
                Answer::Result(result),
                json_ok,
                sse_ok,
                Some(("mcp-session-id", session.id.clone())),
            );
        }
        let id = match &msg {
            Message::Request { id, .. } => id.clone(),
            _ => Value::Null,
        };
        let Some(sid) = session_hdr else {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                INVALID_REQUEST,
                "Bad Request: missing Mcp-Session-Id (send initialize first)",
                None,
            );
        };
        let session = match self.find_session(&sid).await {
            Ok(s) => s,
            Err(why) => return no_session(&id, why),
        };
        if let Some(v) = &version_hdr
            && !LEGACY_VERSIONS.contains(&v.as_str())
        {
            let supported = LEGACY_VERSIONS.join(", ");
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                INVALID_REQUEST,
                &format!(
                    "Bad Request: unsupported MCP-Protocol-Version `{v}` (supported: {supported})"
                ),
                None,
            );
        }
        match msg {
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                // A finished or unknown request is ignored: the cancellation raced the answer.
                if let Some(rid) = params.as_ref().and_then(|p| p.get("requestId")) {
                    session.calls.cancel(rid);
                }
                empty(StatusCode::ACCEPTED)
            }
            Message::Notification { .. } => empty(StatusCode::ACCEPTED),
            // An answer to a server->client request (`mcp::input`) goes to the waiting call.
            Message::Response { id, body } => match session.asks.deliver(&id, body) {
                Ok(()) => empty(StatusCode::ACCEPTED),
                Err(e) => rpc_error(
                    StatusCode::BAD_REQUEST,
                    &Value::Null,
                    INVALID_REQUEST,
                    &e.to_string(),
                    None,
                ),
            },
            Message::Request { id, method, params } => {
                if method.starts_with("resources/") {
                    self.events_loaded().await;
                }
                if method.starts_with("resources/") {
                    let gateway = self.core.gateway.load_full();
                    let intercepted = crate::webhook::edge::intercept(
                        &self.webhooks,
                        &gateway,
                        &session.id,
                        &method,
                        params.as_ref(),
                    );
                    if let Some(answer) = intercepted.await {
                        return self.reply(&id, answer, json_ok, sse_ok, None);
                    }
                }
                let era = Era::Legacy(session.version.clone());
                if method == "tools/call" {
                    let level = session.calls.level();
                    let token = notify::progress_token(params.as_ref());
                    let (reg, cancel) = match session.calls.register(&id, token.as_ref()) {
                        Ok(r) => r,
                        Err(e) => {
                            let answer = Answer::Error {
                                code: INVALID_PARAMS,
                                message: e.to_string(),
                                data: None,
                                http_status: None,
                            };
                            return self.reply(&id, answer, json_ok, sse_ok, None);
                        }
                    };
                    let asks = params
                        .as_ref()
                        .and_then(|p| p.get("name"))
                        .and_then(Value::as_str)
                        .is_some_and(|n| {
                            self.core
                                .gateway
                                .load()
                                .tools
                                .get(n)
                                .is_some_and(|t| t.ask.is_some())
                        })
                        .then(|| session.asks.clone());
                    let call = CallReport {
                        token,
                        level,
                        cancel: Some((reg, cancel)),
                        asks,
                    };
                    return self
                        .observed_call(id, era, params, call, json_ok, sse_ok)
                        .await;
                }
                let mut answer = handler::handle(&self.core, &era, &method, params.clone()).await;
                if method == "resources/list" {
                    answer = self.with_owned(answer).await;
                }
                if method == "logging/setLevel"
                    && matches!(answer, Answer::Result(_))
                    && let Some(l) = params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str)
                        .and_then(notify::Level::parse)
                {
                    session.calls.set_level(l);
                }
                self.reply(&id, answer, json_ok, sse_ok, None)
            }
        }
    }

    pub(super) async fn post_modern(
        &self,
        headers: &HeaderMap,
        msg: Message,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        let (id, method, params) = match msg {
            Message::Request { id, method, params } => (id, method, params),
            Message::Notification { .. } => return empty(StatusCode::ACCEPTED),
            Message::Response { id, .. } => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &id,
                    INVALID_REQUEST,
                    "clients must not send responses in 2026-07-28",
                    None,
                );
            }
        };
        let bad = |code: i64, message: String, data: Option<Value>| {
            rpc_error(StatusCode::BAD_REQUEST, &id, code, &message, data)
        };
        let meta = params.as_ref().and_then(|p| p.get("_meta"));
        let Some(version) = meta
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
        else {
            return bad(
                INVALID_PARAMS,
                "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is required".into(),
                None,
            );
        };
        // Field values are compared without optional whitespace (RFC 9110 §5.5).
        let header = |name: &http::HeaderName| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        match header(&names::MCP_PROTOCOL_VERSION) {
            Some(v) if v == version => {}
            Some(v) => {
                return bad(
                    HEADER_MISMATCH,
                    format!(
                        "MCP-Protocol-Version header `{v}` does not match _meta protocolVersion `{version}`"
                    ),
                    None,
                );
            }
            None => {
                return bad(
                    HEADER_MISMATCH,
                    "missing MCP-Protocol-Version header".into(),
                    None,
                );
            }
        }
        // Only a version both places agree on can be unsupported.
        if !MODERN_VERSIONS.contains(&version) {
            return bad(
                UNSUPPORTED_VERSION,
                format!("Unsupported protocol version: {version}"),
                Some(json!({ "supported": MODERN_VERSIONS, "requested": version })),
            );
        }
        match header(&names::MCP_METHOD).map(decode_header_value) {
            Some(Some(m)) if m == method => {}
            Some(Some(m)) => {
                return bad(
                    HEADER_MISMATCH,
                    format!("Mcp-Method header `{m}` does not match the body method `{method}`"),
                    None,
                );
            }
            Some(None) => {
                return bad(
                    HEADER_MISMATCH,
                    "Mcp-Method header is not a valid value".into(),
                    None,
                );
            }
            None => return bad(HEADER_MISMATCH, "missing Mcp-Method header".into(), None),
        }
        let name_key = match method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            // The tasks extension routes on the task id; a header, when sent, must match.
            "tasks/get" | "tasks/update" | "tasks/cancel" if header(&names::MCP_NAME).is_some() => {
                Some("taskId")
            }
            _ => None,
        };
        if let Some(key) = name_key {
            let body_name = params
                .as_ref()
                .and_then(|p| p.get(key))
                .and_then(Value::as_str);
            match (header(&names::MCP_NAME).map(decode_header_value), body_name) {
                (Some(Some(h)), Some(b)) if h == b => {}
                (None, _) => return bad(HEADER_MISMATCH, "missing Mcp-Name header".into(), None),
                (Some(None), _) => {
                    return bad(
                        HEADER_MISMATCH,
                        "Mcp-Name header is not a valid value".into(),
                        None,
                    );
                }
                (Some(Some(h)), b) => {
                    return bad(
                        HEADER_MISMATCH,
                        format!(
                            "Mcp-Name header `{h}` does not match params.{key} `{}`",
                            b.unwrap_or("")
                        ),
                        None,
                    );
                }
            }
        }
        if method == "tools/call"
            && let Some(name) = params
                .as_ref()
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
            && let Some(tool) = self.core.gateway.load().tools.get(name)
            && !tool.mcp_headers.is_empty()
            && let Err(m) = super::params::check(
                &tool.mcp_headers,
                params.as_ref().and_then(|p| p.get("arguments")),
                headers,
            )
        {
            return bad(HEADER_MISMATCH, m, None);
        }
        if !meta
            .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
            .is_some_and(Value::is_object)
        {
            return bad(
                INVALID_PARAMS,
                "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required".into(),
                None,
            );
        }
        if method == "resources/read" {
            self.events_loaded().await;
        }
        if method == "resources/read" {
            let gateway = self.core.gateway.load_full();
            let intercepted = crate::webhook::edge::intercept(
                &self.webhooks,
                &gateway,
                "",
                &method,
                params.as_ref(),
            );
            match intercepted.await {
                Some(Answer::Result(mut r)) => {
                    // Booking resources fed by webhooks: event data, never cached.
                    r["resultType"] = json!("complete");
                    r["ttlMs"] = json!(0);
                    r["cacheScope"] = json!("private");
                    r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {
                        "name": self.core.info.name, "version": self.core.info.version}});
                    return self.reply(&id, Answer::Result(r), json_ok, sse_ok, None);
                }
                Some(refused) => return self.reply(&id, refused, json_ok, sse_ok, None),
                None => {}
            }
        }
        if method == "subscriptions/listen" {
            let gateway = self.core.gateway.load_full();
            let creds = crate::auth::transport::current().unwrap_or_default();
            let gate = self.stream_gate(&creds).await;
            // Task status notifications for the caller's own tasks it names (`taskIds`).
            let also = match crate::mcp::tasks::listen(params.as_ref(), &id).await {
                // None agreed to: the acknowledgement leaves `taskIds` out.
                Ok(t) => t
                    .filter(|(ids, _)| !ids.is_empty())
                    .map(|(ids, frames)| ("taskIds", json!(ids), frames)),
                Err(answer) => return self.reply(&id, answer, json_ok, sse_ok, None),
            };
            let listened = crate::webhook::edge::listen(
                &self.webhooks,
                &gateway,
                &id,
                params.as_ref(),
                gate,
                also,
            );
            return match listened.await {
                Ok(frames) if sse_ok => self.stream_response(frames),
                Ok(_) => rpc_error(
                    StatusCode::NOT_ACCEPTABLE,
                    &id,
                    INVALID_REQUEST,
                    "Not Acceptable: subscriptions/listen answers with text/event-stream",
                    None,
                ),
                Err(answer) => self.reply(&id, answer, json_ok, sse_ok, None),
            };
        }
        let era = Era::Modern(version.to_string());
        let token = notify::progress_token(params.as_ref());
        let level = notify::request_level(params.as_ref());
        if method == "tools/call" && sse_ok && (token.is_some() || level.is_some()) {
            // Closing this response stream drops the call, which cancels the backend request.
            let call = CallReport {
                token,
                level,
                cancel: None,
                asks: None,
            };
            return self
                .observed_call(id, era, params, call, json_ok, sse_ok)
                .await;
        }
        let mut answer = handler::handle(&self.core, &era, &method, params).await;
        if method == "resources/list" {
            answer = self.with_owned(answer).await;
        }
        if let Answer::Error {
            code: METHOD_NOT_FOUND,
            message,
            data,
            ..
        } = &answer
        {
            return rpc_error(
                StatusCode::NOT_FOUND,
                &id,
                METHOD_NOT_FOUND,
                message,
                data.clone(),
            );
        }
        self.reply(&id, answer, json_ok, sse_ok, None)
    }
}
