//! The dry run of `portico check --try`: the exact backend request one tool call would send
//! (secrets masked) and, given a sample backend answer, the MCP result or JSON-RPC error the
//! client would get, output-schema check included. It never opens a connection.

use crate::binding::Reply;
use crate::config::Gateway;
use crate::translate::rest::RestResponse;
use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;
use std::fmt::Write as _;

/// What the dry run found.
pub struct DryRun {
    /// The report, ready to print.
    pub text: String,
    /// The call would fail (arguments refused, or the answer becomes an error).
    pub failed: bool,
}

const ALWAYS_MASKED: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

fn headers_text(out: &mut String, headers: &HeaderMap) {
    for (name, value) in headers {
        let masked = value.is_sensitive() || ALWAYS_MASKED.contains(&name.as_str());
        let shown = if masked {
            "*** (masked)".to_string()
        } else {
            String::from_utf8_lossy(value.as_bytes()).into_owned()
        };
        let _ = writeln!(out, "  {name}: {shown}");
    }
}

fn reply_value(reply: &Reply) -> (Value, bool) {
    match reply {
        Reply::Result(v) => (v.clone(), v.get("isError") == Some(&Value::Bool(true))),
        Reply::Written(w) => {
            let v = w.to_value();
            let failed = v.get("isError") == Some(&Value::Bool(true));
            (v, failed)
        }
        Reply::Error(e) => {
            let mut err = serde_json::Map::new();
            err.insert("code".into(), Value::from(e.code));
            err.insert("message".into(), Value::from(e.message.clone()));
            if let Some(d) = &e.data {
                err.insert("data".into(), d.clone());
            }
            (
                Value::Object(
                    [("error".to_string(), Value::Object(err))]
                        .into_iter()
                        .collect(),
                ),
                true,
            )
        }
    }
}

/// Dry-runs `tool` with `args`; `answer` is a sample backend answer (status, JSON body).
pub fn run(
    gateway: &Gateway,
    tool: &str,
    args: Value,
    answer: Option<(u16, Vec<u8>)>,
) -> Result<DryRun, String> {
    let Some(t) = gateway.tools.get(tool) else {
        let mut names: Vec<&str> = gateway.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        let guess = crate::util::similar::nearest(tool, names.iter().copied())
            .map(|g| format!("did you mean `{g}`? "))
            .unwrap_or_default();
        return Err(format!(
            "no tool `{tool}`: {guess}tools: {}",
            names.join(", ")
        ));
    };
    let mut text = String::new();
    let call = match crate::forward::prepare(t, args) {
        Ok(c) => c,
        Err(reply) => {
            let (v, _) = reply_value(&reply);
            let _ = writeln!(
                text,
                "arguments refused before any backend call; the client gets:"
            );
            let _ = writeln!(
                text,
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
            return Ok(DryRun { text, failed: true });
        }
    };
    let req = match crate::translate::request::build(t, &call) {
        Ok(r) => r,
        Err(f) => {
            let _ = writeln!(text, "the request cannot be built: {}", f.message);
            return Ok(DryRun { text, failed: true });
        }
    };
    let _ = writeln!(text, "request (not sent):");
    let _ = writeln!(text, "  {} {}", req.method, req.url);
    headers_text(&mut text, &req.headers);
    if let Some(b) = &req.body {
        let _ = writeln!(text, "  body: {}", String::from_utf8_lossy(b));
    }
    let Some((status, body)) = answer else {
        let _ = writeln!(
            text,
            "no sample answer: add --response STATUS:FILE to see the result the client would get"
        );
        return Ok(DryRun {
            text,
            failed: false,
        });
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let resp = RestResponse {
        status,
        headers,
        body: Bytes::from(body),
    };
    let reply = crate::forward::translate_response(t, &call, resp);
    let (v, failed) = reply_value(&reply);
    let what = if failed { "an error" } else { "this result" };
    let _ = writeln!(text, "with a {status} answer, the client gets {what}:");
    let _ = writeln!(
        text,
        "{}",
        serde_json::to_string_pretty(&v).unwrap_or_default()
    );
    Ok(DryRun { text, failed })
}
