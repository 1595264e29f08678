//! The REST face of a binding, for the reverse path: request headers -> `Meta`, `Meta` -> the
//! MCP argument metadata, an MCP tool result or JSON-RPC error -> `Outcome`, a `Failure` -> its HTTP
//! status and RFC 9457 body. Tables only: it must never perform I/O or know the facade's routes.

use super::{Binding, ErrorCode, Kind, check_profile};
use crate::model::{Failure, FailureKind, Meta, Outcome};
use crate::translate::response::kind_for;
use crate::webhook::sfv::{self, Bare, Member};
use http::HeaderMap;
use serde_json::{Map, Value, json};

fn invalid(m: impl Into<String>) -> Failure {
    Failure::new(FailureKind::InvalidRequest, m).with_code("invalid_request")
}

fn text_header(h: &HeaderMap, name: &str) -> Result<Option<String>, Failure> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => match v.to_str().map(str::trim) {
            Ok("") => Err(invalid(format!("the `{name}` header must not be empty"))),
            Ok(s) => Ok(Some(s.to_string())),
            Err(_) => Err(invalid(format!(
                "the `{name}` header must be visible ASCII"
            ))),
        },
    }
}

/// `profile="…"` of an RFC 8941 dictionary header (`USP-Agent`, `UCP-Agent`).
fn agent_profile(h: &HeaderMap, name: &str) -> Result<Option<String>, Failure> {
    let Some(v) = text_header(h, name)? else {
        return Ok(None);
    };
    let bad = || {
        Failure::new(
            FailureKind::InvalidRequest,
            format!("the `{name}` header must be an RFC 8941 dictionary with a string `profile` member, e.g. profile=\"https://agent.example/profile.json\""),
        )
        .with_code("invalid_profile_url")
    };
    let dict = sfv::dictionary(&v).map_err(|_| bad())?;
    match dict.into_iter().find(|(k, _)| k == "profile") {
        Some((_, Member::Item(item))) => match item.bare {
            Bare::String(s) => Ok(Some(s)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// An entity tag without its quotes (`"r1"` -> `r1`); the forward path quotes it again.
fn unquote_etag(v: &str) -> String {
    let v = v.strip_prefix("W/").unwrap_or(v);
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
        .to_string()
}

impl Binding {
    /// Reads the protocol metadata a REST caller sends as headers.
    pub fn meta_from_headers(&self, h: &HeaderMap) -> Result<Meta, Failure> {
        let mut meta = Meta::default();
        match self.kind {
            Kind::Usp => {
                meta.profile = agent_profile(h, "usp-agent")?;
                meta.correlation_id = text_header(h, "usp-correlation-id")?;
                meta.if_match = text_header(h, "if-match")?.map(|v| unquote_etag(&v));
            }
            Kind::Ucp => meta.profile = agent_profile(h, "ucp-agent")?,
            Kind::Plain | Kind::Autonym => {}
        }
        if matches!(self.kind, Kind::Usp | Kind::Ucp) {
            meta.idempotency_key = text_header(h, "idempotency-key")?;
        }
        check_profile(&meta)?;
        Ok(meta)
    }

    /// Writes metadata where the protocol's MCP binding carries it in `arguments`
    /// (USP `_meta.usp.*`, UCP `meta["ucp-agent"]` and `meta["idempotency-key"]`).
    pub fn meta_into_args(&self, meta: &Meta, args: &mut Map<String, Value>) {
        let mut fields = Map::new();
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                fields.insert(k.into(), Value::String(v.clone()));
            }
        };
        match self.kind {
            Kind::Usp => {
                put("profile", &meta.profile);
                put("idempotency_key", &meta.idempotency_key);
                put("correlation_id", &meta.correlation_id);
                put("if_match", &meta.if_match);
                if !fields.is_empty() {
                    args.insert("_meta".into(), json!({ "usp": fields }));
                }
            }
            Kind::Ucp => {
                let mut m = Map::new();
                if let Some(p) = &meta.profile {
                    m.insert("ucp-agent".into(), json!({ "profile": p }));
                }
                if let Some(k) = &meta.idempotency_key {
                    m.insert("idempotency-key".into(), Value::String(k.clone()));
                }
                if !m.is_empty() {
                    args.insert("meta".into(), Value::Object(m));
                }
            }
            Kind::Plain | Kind::Autonym => {}
        }
    }

    /// What an upstream `CallToolResult` means: `isError` is a failure (rendered with the
    /// facade's tool-error status), `structuredContent` with an error message is a business
    /// outcome, anything else a success whose body is the REST shape.
    pub fn outcome_of_result(&self, mut result: Value) -> Outcome {
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        if result.get("isError") == Some(&Value::Bool(true)) {
            let mut f = Failure::new(
                FailureKind::UpstreamError,
                if text.is_empty() {
                    "the upstream tool reported an error".to_string()
                } else {
                    text
                },
            );
            f.as_tool_error = true;
            return Outcome::Failure(f);
        }
        let body = match result.get_mut("structuredContent").map(Value::take) {
            Some(s) => s,
            // No structured result: a JSON text block is the body, else the content blocks.
            None => match serde_json::from_str::<Value>(&text) {
                Ok(v @ Value::Object(_)) => v,
                _ => json!({ "content": result.get("content").cloned().unwrap_or(json!([])) }),
            },
        };
        let errors = body
            .get("messages")
            .and_then(Value::as_array)
            .is_some_and(|m| {
                m.iter()
                    .any(|m| m.get("type").and_then(Value::as_str) == Some("error"))
            });
        match body {
            Value::Object(mut obj) if errors && matches!(self.kind, Kind::Usp | Kind::Ucp) => {
                let messages = match obj.remove("messages") {
                    Some(Value::Array(m)) => m,
                    _ => Vec::new(),
                };
                Outcome::Business {
                    body: obj,
                    messages,
                }
            }
            body => Outcome::Success { body },
        }
    }

    /// The failure a JSON-RPC error of the upstream MCP server stands for: the row of the
    /// binding's table named by `data.code`, else the first row with that JSON-RPC code.
    pub fn failure_of_rpc(
        &self,
        code: i64,
        message: &str,
        data: Option<&Value>,
        retry_after: Option<u64>,
    ) -> Failure {
        let named = data
            .and_then(|d| d.get("code"))
            .and_then(Value::as_str)
            .and_then(|s| self.error_code(s))
            .filter(|row| row.rpc == code);
        let row = named.or_else(|| self.errors().iter().copied().find(|r| r.rpc == code));
        // MCP answers an unknown tool or bad arguments with JSON-RPC's generic -32602, which
        // USP's table gives to `invalid_profile_url`: without `data.code` it names no code
        // (still a 400).
        let generic =
            named.is_none() && code == -32602 && row.is_some_and(|r| r.slug != "invalid_params");
        let detail = data
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str)
            .unwrap_or(message);
        let mut f = match row {
            Some(row) if generic => Failure::new(kind_for(row.http), detail),
            Some(row) => Failure::new(kind_for(row.http), detail).with_code(row.slug),
            // A code outside the binding's table (MCP's own -32601, -32020, -32022...): the
            // exchange between portico and the server went wrong, not the caller's request.
            None => Failure::new(
                FailureKind::BadUpstreamResponse,
                format!("the upstream MCP server answered JSON-RPC error {code}: {detail}"),
            ),
        };
        f.problem = data
            .and_then(|d| d.get("problem"))
            .filter(|p| p.is_object())
            .map(|p| Box::new(p.clone()));
        f.retry_after = retry_after.or_else(|| {
            data.and_then(|d| d.get("retry_after"))
                .and_then(Value::as_u64)
        });
        f
    }

    /// The HTTP status of a failure on the REST side: the binding table's row for its code,
    /// else one for its kind.
    pub fn failure_status(&self, f: &Failure) -> u16 {
        if let Some(ErrorCode { http, .. }) = f.code.as_deref().and_then(|s| self.error_code(s)) {
            return http;
        }
        match f.kind {
            FailureKind::InvalidRequest => 400,
            FailureKind::Unauthenticated => 401,
            FailureKind::Forbidden => 403,
            FailureKind::NotFound => 404,
            FailureKind::Conflict => 409,
            FailureKind::PreconditionFailed => 412,
            FailureKind::RateLimited => 429,
            FailureKind::UpstreamError | FailureKind::BadUpstreamResponse => 502,
            FailureKind::Unavailable => 503,
            FailureKind::Timeout => 504,
            FailureKind::Internal => 500,
        }
    }

    /// The RFC 9457 Problem Details object for a failure answered with `status`; a problem the
    /// upstream carried is kept, with `status` set to the one answered.
    pub fn problem(&self, f: &Failure, status: u16) -> Value {
        let mut p = match f.problem.as_deref() {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let slug = f.code.as_deref();
        let kind = match (self.kind, slug) {
            (Kind::Usp, Some(s)) => {
                format!("https://usp-protocol.dev/errors/{}", s.replace('_', "-"))
            }
            _ => "about:blank".to_string(),
        };
        p.entry("type").or_insert_with(|| Value::String(kind));
        let title = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        p.entry("title")
            .or_insert_with(|| Value::String(title.into()));
        p.insert("status".into(), Value::from(status));
        p.entry("detail")
            .or_insert_with(|| Value::String(f.message.clone()));
        if let Some(s) = slug {
            p.entry("code").or_insert_with(|| Value::String(s.into()));
        }
        Value::Object(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usp() -> Binding {
        Binding {
            kind: Kind::Usp,
            version: "2026-08-20".into(),
            capabilities: None,
            capability: None,
            ucp: None,
        }
    }

    #[test]
    fn usp_headers_become_meta_then_arguments() {
        let mut h = HeaderMap::new();
        h.insert(
            "usp-agent",
            "profile=\"https://agent.example/p.json\"".parse().unwrap(),
        );
        h.insert("idempotency-key", "k-1".parse().unwrap());
        h.insert("usp-correlation-id", "c-9".parse().unwrap());
        h.insert("if-match", "\"r7\"".parse().unwrap());
        let meta = usp().meta_from_headers(&h).unwrap();
        let mut args = Map::new();
        usp().meta_into_args(&meta, &mut args);
        assert_eq!(
            Value::Object(args),
            json!({"_meta": {"usp": {"profile": "https://agent.example/p.json", "idempotency_key": "k-1", "correlation_id": "c-9", "if_match": "r7"}}})
        );
        // An empty value is refused, not sent on.
        h.insert("idempotency-key", "".parse().unwrap());
        assert!(usp().meta_from_headers(&h).is_err());
        h.insert("idempotency-key", "k-1".parse().unwrap());
        // A plain URL is not a dictionary member.
        h.insert("usp-agent", "https://agent.example/p.json".parse().unwrap());
        let e = usp().meta_from_headers(&h).unwrap_err();
        assert_eq!(e.code.as_deref(), Some("invalid_profile_url"));
    }

    #[test]
    fn ucp_profile_rides_in_meta() {
        let ucp = Binding {
            kind: Kind::Ucp,
            ..usp()
        };
        let mut h = HeaderMap::new();
        h.insert(
            "ucp-agent",
            "profile=\"https://p.example/x\"".parse().unwrap(),
        );
        h.insert("idempotency-key", "k".parse().unwrap());
        let mut args = Map::new();
        ucp.meta_into_args(&ucp.meta_from_headers(&h).unwrap(), &mut args);
        assert_eq!(
            Value::Object(args),
            json!({"meta": {"ucp-agent": {"profile": "https://p.example/x"}, "idempotency-key": "k"}})
        );
    }

    #[test]
    fn rpc_errors_map_through_the_table() {
        let f = usp().failure_of_rpc(-32007, "rate_limited", None, Some(9));
        assert_eq!((usp().failure_status(&f), f.retry_after), (429, Some(9)));
        let data = json!({"code": "idempotency_conflict", "content": "reused"});
        let f = usp().failure_of_rpc(-32600, "x", Some(&data), None);
        assert_eq!(usp().failure_status(&f), 409);
        assert_eq!(usp().problem(&f, 409)["detail"], "reused");
        let f = usp().failure_of_rpc(-32603, "boom", None, None);
        assert_eq!(usp().failure_status(&f), 500);
        let f = usp().failure_of_rpc(-32602, "Unknown tool: x", None, None);
        assert_eq!((usp().failure_status(&f), f.code), (400, None));
        let f = usp().failure_of_rpc(-32020, "header mismatch", None, None);
        assert_eq!(usp().failure_status(&f), 502);
    }

    #[test]
    fn results_become_outcomes() {
        let r = json!({"structuredContent": {"usp": {"version": "v"}, "messages": [{"type": "error", "code": "slot_unavailable", "content": "taken"}]}, "content": []});
        assert!(matches!(
            usp().outcome_of_result(r),
            Outcome::Business { .. }
        ));
        let r = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        let Outcome::Failure(f) = usp().outcome_of_result(r) else {
            panic!()
        };
        assert!(f.as_tool_error);
        assert_eq!(f.message, "boom");
        let r = json!({"content": [{"type": "text", "text": "{\"a\":1}"}]});
        assert_eq!(
            usp().outcome_of_result(r),
            Outcome::Success {
                body: json!({"a": 1})
            }
        );
    }
}
