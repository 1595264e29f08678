//! Turns the backend's HTTP answer into an `Outcome` using the tool's rules and the binding's
//! status table. It never throws away a backend problem body or a `Retry-After`.

use super::content::{self, ContentRule};
pub use super::rest::RestResponse;
use super::transform::Vars3;
use crate::binding::Rule;
use crate::config::Tool;
use crate::json_doc::Doc;
use crate::model::{Call, Failure, FailureKind, Outcome};
use http::HeaderMap;
use serde_json::{Map, Value, json};

/// The failure of a non-2xx answer read outside a tool (a resource): its status, its Problem
/// Details body when it is one, its `Retry-After`.
pub fn failure_of(resp: &RestResponse) -> Failure {
    let problem = is_problem(&resp.headers)
        .then(|| crate::json_text::from_slice(&resp.body).ok())
        .flatten()
        .filter(Value::is_object)
        .map(Box::new);
    Failure {
        status: Some(resp.status),
        problem,
        retry_after: retry_after(&resp.headers),
        ..Failure::new(
            kind_for(resp.status),
            format!("the backend answered HTTP {}", resp.status),
        )
    }
}

/// The failure kind an HTTP error status stands for (also used by the REST facade).
pub(crate) fn kind_for(status: u16) -> FailureKind {
    match status {
        400 | 405..=408 | 410..=411 | 413..=418 | 422 => FailureKind::InvalidRequest,
        401 => FailureKind::Unauthenticated,
        403 => FailureKind::Forbidden,
        404 => FailureKind::NotFound,
        409 => FailureKind::Conflict,
        412 => FailureKind::PreconditionFailed,
        429 => FailureKind::RateLimited,
        502..=504 => FailureKind::Unavailable,
        500..=599 => FailureKind::UpstreamError,
        _ => FailureKind::InvalidRequest,
    }
}

/// A text for humans from a backend error body.
fn backend_text(body: &Value, status: u16) -> String {
    for key in [
        "detail",
        "message",
        "error_description",
        "title",
        "error",
        "msg",
    ] {
        if let Some(s) = body.get(key).and_then(Value::as_str)
            && !s.is_empty()
        {
            return s.to_string();
        }
    }
    format!("the backend answered HTTP {status}")
}

fn retry_after(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            let ct = ct.to_ascii_lowercase();
            ct.contains("json")
        })
        .unwrap_or(false)
}

fn is_problem(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.to_ascii_lowercase()
                .starts_with("application/problem+json")
        })
}

/// A backend body as read: in place for the tool's programs, or as a tree.
enum Body<'b> {
    Doc(Doc<'b>),
    Tree(Value),
}

impl Body<'_> {
    fn run(
        &self,
        t: &super::transform::Transform,
        narrow: bool,
        vars: Vars3<'_>,
    ) -> Result<Option<Value>, super::transform::RunError> {
        match self {
            Body::Doc(d) => t.run_doc(d, narrow, vars),
            Body::Tree(v) => t.run_read(v, narrow, vars),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Body::Doc(d) => d.into_value(),
            Body::Tree(v) => v,
        }
    }
}

/// Interprets a backend answer.
pub fn outcome(tool: &Tool, call: &Call, resp: RestResponse) -> Outcome {
    let status = resp.status;
    let meta = super::request::meta_for(tool, call);
    let vars = Vars3 {
        args: &call.args,
        status,
        meta: &meta,
    };
    // A rule with a `when` reads the body first, so that body is read as a tree.
    let decided = (!tool.rules_read_body(status)).then(|| tool.rule_for(status, None));
    // A body the tool's programs read is read in place (its strings stay slices of it); one
    // that goes on unchanged (no programs, or an error status) is read as a tree at once.
    // `narrow`: the reader met no integer past i64 in it, so a program's answer is looked at
    // for one only when a global holds one.
    let in_place = matches!(decided.as_ref().map(|r| &r.rule), Some(Rule::Success))
        && (tool.result.is_some() || tool.business_messages.is_some());
    let (parsed, narrow): (Result<Body<'_>, String>, bool) =
        if resp.body.iter().all(u8::is_ascii_whitespace) {
            (Ok(Body::Tree(Value::Null)), true)
        } else {
            let read = if in_place {
                crate::json_text::read_borrowed(&resp.body).map(|(d, n)| (Body::Doc(d), n))
            } else {
                crate::json_text::from_slice_narrow(&resp.body).map(|(v, n)| (Body::Tree(v), n))
            };
            match read {
                Ok((value, narrow)) => (Ok(value), narrow),
                Err(e) => {
                    let kind = if is_json(&resp.headers) {
                        "malformed JSON"
                    } else {
                        "a body that is not JSON"
                    };
                    let msg = format!("the backend answered HTTP {status} with {kind} ({e})");
                    (Err(msg), false)
                }
            }
        };
    let mapping_failure = |e: String| {
        Outcome::Failure(Failure {
            status: Some(status),
            ..Failure::new(FailureKind::Internal, format!("mapping error: {e}"))
        })
    };
    let rule = match decided {
        Some(rule) => rule,
        None => {
            let tree = match &parsed {
                Ok(Body::Tree(v)) => Some(v),
                _ => None,
            };
            tool.rule_for(status, tree.map(|b| (b, vars)))
        }
    };
    match rule.rule {
        Rule::Success => {
            let body = match parsed {
                Ok(b) => b,
                Err(msg) => {
                    return Outcome::Failure(Failure {
                        status: Some(status),
                        ..Failure::new(FailureKind::BadUpstreamResponse, msg)
                    });
                }
            };
            if let Some(t) = &tool.business_messages {
                match body.run(t, narrow, vars) {
                    Ok(Some(Value::Array(messages))) if !messages.is_empty() => {
                        return Outcome::Business {
                            body: Map::new(),
                            messages,
                        };
                    }
                    Ok(Some(Value::Array(_)))
                    | Ok(Some(Value::Null))
                    | Ok(None)
                    | Ok(Some(Value::Bool(false))) => {}
                    Ok(Some(other)) => {
                        return mapping_failure(format!(
                            "`business` must yield an array of messages, got {other}"
                        ));
                    }
                    Err(e) => return mapping_failure(e.to_string()),
                }
            }
            let mut payload = match &tool.result {
                Some(t) => match body.run(t, narrow, vars) {
                    Ok(v) => v.unwrap_or(Value::Null),
                    Err(e) => return mapping_failure(e.to_string()),
                },
                None => body.into_value(),
            };
            if tool.drop_nulls {
                crate::json_doc::drop_null_members(&mut payload);
            }
            Outcome::Success { body: payload }
        }
        other => {
            let parsed = parsed.map(Body::into_value);
            let body = parsed.clone().unwrap_or(Value::Null);
            let content = rule
                .content_from
                .as_ref()
                .and_then(|t| t.run(&body, vars).ok().flatten())
                .and_then(|v| v.as_str().map(str::to_string))
                .or_else(|| rule.content.clone())
                .unwrap_or_else(|| match &parsed {
                    Ok(b) => backend_text(b, status),
                    Err(msg) => msg.clone(),
                });
            let text_from = |t: &Option<super::transform::Transform>| {
                t.as_ref()
                    .and_then(|t| t.run(&body, vars).ok().flatten())
                    .and_then(|v| v.as_str().map(str::to_string))
            };
            match other {
                Rule::Business(fallback) => Outcome::Business {
                    body: carried(tool, rule.with_result, &body, vars),
                    messages: vec![json!({
                        "type": "error",
                        "code": text_from(&rule.code_from).unwrap_or(fallback),
                        "content": content,
                        "severity": text_from(&rule.severity_from).unwrap_or(rule.severity),
                    })],
                },
                Rule::Error(slug) => Outcome::Failure(Failure {
                    kind: kind_for(status),
                    code: Some(slug),
                    message: content,
                    status: Some(status),
                    problem: is_problem(&resp.headers)
                        .then_some(body)
                        .filter(|b| b.is_object())
                        .map(Box::new),
                    retry_after: retry_after(&resp.headers),
                    as_tool_error: false,
                    explain: false,
                }),
                _ => Outcome::Failure(Failure {
                    status: Some(status),
                    retry_after: retry_after(&resp.headers),
                    as_tool_error: true,
                    ..Failure::new(kind_for(status), content)
                }),
            }
        }
    }
}

/// The resource a business outcome carries beside its messages (`with_result`): the tool's
/// `result` over the backend body, or the body itself when the tool has none. Empty when the
/// rule does not ask for it or that is not an object (the binding then answers its error shape).
pub fn carried(
    tool: &Tool,
    with_result: bool,
    body: &Value,
    vars: Vars3<'_>,
) -> Map<String, Value> {
    if !with_result {
        return Map::new();
    }
    let value = match &tool.result {
        Some(t) => t.run(body, vars).ok().flatten(),
        None => Some(body.clone()),
    };
    match value {
        Some(Value::Object(mut m)) => {
            if tool.drop_nulls {
                m.retain(|_, v| !v.is_null());
                m.values_mut().for_each(crate::json_doc::drop_null_members);
            }
            m
        }
        _ => Map::new(),
    }
}

/// The `content[]` of a tool with a `content` rule, for a success status. `None` when the
/// normal path applies: the status is not a success by the tool's rules, or `media` met JSON.
pub fn content_blocks(
    tool: &Tool,
    rule: &ContentRule,
    call: &Call,
    resp: &RestResponse,
) -> Option<Result<Vec<Value>, Failure>> {
    let meta = super::request::meta_for(tool, call);
    let vars = Vars3 {
        args: &call.args,
        status: resp.status,
        meta: &meta,
    };
    let read = tool
        .rules_read_body(resp.status)
        .then(|| crate::json_text::from_slice(&resp.body).ok())
        .flatten();
    if !matches!(
        tool.rule_for(resp.status, read.as_ref().map(|b| (b, vars)))
            .rule,
        Rule::Success
    ) {
        return None;
    }
    let media = content::media_type(&resp.headers);
    if matches!(rule, ContentRule::Media) && content::is_json(&media) {
        return None;
    }
    let status = resp.status;
    let fail = |kind: FailureKind, msg: String| Failure {
        status: Some(status),
        ..Failure::new(kind, msg)
    };
    let json_body = || {
        content::is_json(&media)
            .then(|| crate::json_text::from_slice(&resp.body).ok())
            .flatten()
    };
    let render_uri = |t: &content::TextTemplate| {
        let location = resp
            .headers
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok());
        let ctx = json!({ "args": call.args, "body": json_body(), "location": location });
        match t.render(&ctx) {
            Ok(uri) if !uri.is_empty() && !uri.chars().any(char::is_control) => Ok(uri),
            Ok(uri) => Err(fail(
                FailureKind::Internal,
                format!(
                    "mapping error: content URI `{}` is empty or has control characters",
                    uri.escape_debug()
                ),
            )),
            Err(e) => Err(fail(
                FailureKind::Internal,
                format!("mapping error: content URI: {e}"),
            )),
        }
    };
    Some(match rule {
        ContentRule::Media => content::media_block(&media, &resp.body)
            .map(|b| vec![b])
            .ok_or_else(|| {
                fail(
                    FailureKind::BadUpstreamResponse,
                    format!("the backend answered `{media}`, which has no MCP content type of its own"),
                )
            }),
        ContentRule::Embedded(uri) => render_uri(uri).map(|u| {
            vec![json!({ "type": "resource", "resource": content::resource_contents(&u, &media, &resp.body) })]
        }),
        ContentRule::Link { uri, name } => render_uri(uri).map(|u| {
            let name = name.clone().unwrap_or_else(|| u.clone());
            vec![json!({ "type": "resource_link", "uri": u, "name": name })]
        }),
        ContentRule::Blocks(t) => match json_body() {
            None => Err(fail(
                FailureKind::BadUpstreamResponse,
                format!("the backend answered HTTP {status} with `{media}`, not JSON"),
            )),
            Some(body) => {
                let meta = super::request::meta_for(tool, call);
                let vars = Vars3 { args: &call.args, status, meta: &meta };
                t.run(&body, vars)
                    .map_err(|e| e.message)
                    .and_then(|v| content::check_blocks(v.unwrap_or(Value::Null)))
                    .map_err(|e| fail(FailureKind::Internal, format!("mapping error: {e}")))
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_text_prefers_detail() {
        assert_eq!(
            backend_text(&json!({"error": "SLOT_TAKEN", "detail": "taken"}), 409),
            "taken"
        );
        assert_eq!(backend_text(&json!({"error": "NO"}), 401), "NO");
        assert_eq!(
            backend_text(&json!([1]), 500),
            "the backend answered HTTP 500"
        );
    }

    #[test]
    fn status_kinds_cover_every_status() {
        for s in 100..=599u16 {
            let _ = kind_for(s);
        }
        assert_eq!(kind_for(503), FailureKind::Unavailable);
        assert_eq!(kind_for(500), FailureKind::UpstreamError);
    }
}
