//! Builds the backend HTTP request for a call: path segments, query, headers, JSON body.
//! Arguments never choose the host, never add path segments and never inject header lines.

pub use super::rest::RestRequest;
use super::transform::{Transform, Vars3};
use crate::config::Tool;
use crate::model::{Call, Failure};
use http::{HeaderMap, HeaderValue, Method};
use serde_json::{Value, json};
use std::borrow::Cow;

/// `$meta` for `tool`'s transforms: null when none of them names it (most mappings).
pub fn meta_for(tool: &Tool, call: &Call) -> Value {
    if tool.meta_used {
        meta_json(call)
    } else {
        Value::Null
    }
}

/// JSON view of the metadata for transforms (`$meta`), with the principal of the request's
/// MCP access token (never the token) when MCP authorization checked one.
pub fn meta_json(call: &Call) -> Value {
    let minted = call.meta.minted.as_ref();
    let principal = crate::auth::transport::mcp_principal().map(|m| {
        json!({
            "id": m.id(),
            "issuer": m.token.issuer,
            "subject": m.token.subject,
            "client_id": m.token.client_id,
            "scopes": m.token.scopes,
        })
    });
    json!({
        "profile": call.meta.profile,
        "idempotency_key": call.meta.idempotency_key,
        "correlation_id": call.meta.correlation_id,
        "request_id": minted.map(|m| m.request_id.as_str()),
        "uuid": minted.map(|m| m.uuid.as_str()),
        "now": minted.map(|m| m.now.as_str()),
        "principal": principal,
    })
}

/// A query or header value's text: a string is lent, not copied.
fn scalar(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        _ => None,
    }
}

/// Whether `tool`'s body may be lent from the text of the request a call came in
/// ([`super::lent`]): a `POST`, `PUT` or `PATCH` whose `body` is a path into the arguments,
/// on a tool without `ask:` (its answers are merged into the arguments).
pub fn may_lend(tool: &Tool) -> bool {
    matches!(tool.method, Method::POST | Method::PUT | Method::PATCH)
        && tool.ask.is_none()
        && tool.body.as_ref().is_some_and(|b| b.input_path().is_some())
}

/// The text of a body that is a path into the arguments, lent from the request the call came
/// in ([`super::lent`]), when the value is still among the arguments the call kept (the
/// path's first key was not metadata the binding took out).
fn lent_body(tool: &Tool, call: &Call, body: &Transform) -> Option<bytes::Bytes> {
    let text = call.text.as_ref()?;
    let path = body.input_path()?;
    path.iter()
        .try_fold(&call.args, |v, key| v.get(key.as_str()))?;
    let lent = super::lent::body(text, &tool.name, path)?;
    // A slice of the request's own buffer: nothing copied.
    Some(text.slice_ref(lent))
}

/// Builds the request for `call` on `tool`'s backend.
pub fn build(tool: &Tool, call: &Call) -> Result<RestRequest, Failure> {
    let backend = &tool.business.backend;
    let binding = &tool.business.binding;
    let meta = meta_for(tool, call);
    let vars = Vars3 {
        args: &call.args,
        status: 0,
        meta: &meta,
    };
    // A request transform fails on arguments it cannot map (jq `error("...")` included):
    // that is the caller's input, so it is answered as invalid arguments.
    let transform_err = |e: super::transform::RunError| binding.invalid_arguments(e.message);

    let path = tool
        .path
        .render(&call.args)
        .map_err(|e| binding.invalid_arguments(e.to_string()))?;
    let mut url = String::with_capacity(backend.base.len() + path.len() + 64);
    url.push_str(&backend.base);
    url.push_str(&path);

    // Each value: a path into the arguments is lent in place, any other program is run; the
    // pairs are encoded straight into the URL, whose `?` goes again when there is none.
    url.push('?');
    let start = url.len();
    let mut query = url::form_urlencoded::Serializer::for_suffix(url, start);
    for (name, t) in &tool.query {
        let value = t.run_lent(&call.args, false, vars).map_err(transform_err)?;
        match value.as_deref().unwrap_or(&Value::Null) {
            Value::Null => {}
            Value::Array(items) => {
                for item in items {
                    let s = scalar(item).ok_or_else(|| {
                        binding.invalid_arguments(format!(
                            "query parameter `{name}` must be a list of scalars"
                        ))
                    })?;
                    query.append_pair(name, &s);
                }
            }
            v => {
                let s = scalar(v).ok_or_else(|| {
                    binding.invalid_arguments(format!(
                        "query parameter `{name}` must be a scalar, not an object"
                    ))
                })?;
                query.append_pair(name, &s);
            }
        }
    }
    let mut url = query.finish();
    if url.len() == start {
        url.pop();
    }

    let mut headers = HeaderMap::new();
    // Allowlisted client headers first: the mapping's own headers below win over them.
    if !backend.forward_headers.is_empty()
        && let Some(info) = crate::auth::transport::request()
    {
        // An MCP access token is the endpoint's: it never reaches a backend (no passthrough).
        let mcp_token = crate::auth::transport::mcp_principal().is_some();
        for name in &backend.forward_headers {
            if mcp_token && name == http::header::AUTHORIZATION {
                continue;
            }
            for v in info.headers.get_all(name) {
                // Visible ASCII, space and tab only: nothing a backend could read as a new line.
                if !v
                    .as_bytes()
                    .iter()
                    .all(|b| *b == b'\t' || (0x20..0x7f).contains(b))
                {
                    return Err(binding.invalid_arguments(format!(
                        "the `{name}` header holds characters portico does not forward"
                    )));
                }
                let mut v = v.clone();
                v.set_sensitive(matches!(
                    name.as_str(),
                    "authorization" | "x-api-key" | "cookie"
                ));
                headers.append(name.clone(), v);
            }
        }
    }
    for (k, v) in &backend.headers {
        headers.insert(k.clone(), v.clone());
    }
    for (k, v) in binding.headers(&call.meta)? {
        headers.insert(k, v);
    }
    for (name, t) in &tool.headers {
        let Some(v) = t.run_lent(&call.args, false, vars).map_err(transform_err)? else {
            continue;
        };
        if v.is_null() {
            continue;
        }
        let s = scalar(&v).ok_or_else(|| {
            binding.invalid_arguments(format!("header `{name}` must be a scalar"))
        })?;
        let hv = HeaderValue::from_str(&s).map_err(|_| {
            binding.invalid_arguments(format!(
                "the value for header `{name}` contains CR, LF or other control characters"
            ))
        })?;
        headers.insert(name.clone(), hv);
    }

    // The body is written from the call's own tree: a `body` that is a path into the
    // arguments (`.document`, as `portico init` writes for a request body of its own) is lent in
    // place, a program the native evaluator runs is written from the document it makes, and the
    // default body (the arguments less the path's variables) is written member by member: no
    // `serde_json` value is built only to be written.
    let body = if matches!(tool.method, Method::POST | Method::PUT | Method::PATCH) {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Some(match &tool.body {
            Some(t) if let Some(text) = lent_body(tool, call, t) => text,
            body => {
                let mut out = Vec::with_capacity(256);
                match (body, &call.args) {
                    (Some(t), args) => {
                        t.run_written(args, vars, &mut out).map_err(transform_err)?
                    }
                    (None, Value::Object(obj)) => crate::json_text::write_object(
                        obj.iter()
                            .filter(|(k, _)| !tool.path.variables().any(|var| var == k.as_str())),
                        |_, v, out| crate::json_text::write(v, out),
                        &mut out,
                    ),
                    (None, args) => crate::json_text::write(args, &mut out),
                }
                out.into()
            }
        })
    } else {
        None
    };
    // Tools mapped by media type take any answer; the rest expect JSON.
    let accept = if tool.content.is_some() {
        "*/*"
    } else {
        "application/json"
    };
    headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    Ok(RestRequest {
        method: tool.method.clone(),
        url,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    /// A business with one tool, `q`, whose query and header programs are paths into the
    /// arguments (read in place) and other programs (run), loaded as the loader builds it.
    fn tool() -> std::sync::Arc<crate::config::Tool> {
        let dir = std::env::temp_dir().join(format!(
            "portico-request-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let openrpc = json!({"openrpc": "1.3.2", "info": {"title": "t", "version": "1"},
            "methods": [{"name": "q", "params": [
                {"name": "v", "schema": {}}, {"name": "o", "schema": {}},
                {"name": "id", "schema": {"type": "string"}}],
                "result": {"name": "r", "schema": {}}}]});
        std::fs::write(dir.join("t.openrpc.json"), openrpc.to_string()).expect("openrpc");
        std::fs::write(
            dir.join("t.yaml"),
            "business: t\nbinding: plain\nopenrpc: t.openrpc.json\nbackend:\n  url: http://127.0.0.1:9/base\n\
             tools:\n  q:\n    http: GET /items/{id}\n\
             \x20   query: { a: .v, b: .o.k, c: 'if .v == null then null else .v | tostring end', d: .missing }\n\
             \x20   headers: { X-V: .o.k, X-T: '.v | type' }\n",
        )
        .expect("mapping");
        let g = crate::config::load(&[dir.join("t.yaml")]).expect("loads");
        let _ = std::fs::remove_dir_all(&dir);
        g.tools.get("q").cloned().expect("tool q")
    }

    fn built(tool: &crate::config::Tool, args: Value) -> Result<super::RestRequest, String> {
        let call = crate::forward::prepare(tool, args).map_err(|_| "refused".to_string())?;
        super::build(tool, &call).map_err(|f| format!("{f:?}"))
    }

    /// Paths read in place and programs that run give the same query and headers: scalars
    /// as text, lists repeated, `null` and missing members left out (and the `?` with them
    /// when no pair is left), containers refused.
    #[test]
    fn paths_into_the_arguments_build_the_query_and_headers_programs_do() {
        let t = tool();
        for (args, query, x_v) in [
            (
                json!({"id": "i", "v": "a b&c", "o": {"k": "h"}}),
                "a=a+b%26c&b=h&c=a+b%26c",
                Some("h"),
            ),
            (
                json!({"id": "i", "v": 7, "o": {"k": true}}),
                "a=7&b=true&c=7",
                Some("true"),
            ),
            (
                json!({"id": "i", "v": [1, "x", false], "o": null}),
                "a=1&a=x&a=false&c=%5B1%2C%22x%22%2Cfalse%5D",
                None,
            ),
            // No pair at all: no `?` either.
            (json!({"id": "i", "v": null}), "", None),
            (json!({"id": "i"}), "", None),
        ] {
            let r = built(&t, args.clone()).expect("builds");
            let url = match query {
                "" => "http://127.0.0.1:9/base/items/i".to_string(),
                q => format!("http://127.0.0.1:9/base/items/i?{q}"),
            };
            assert_eq!(r.url, url, "{args}");
            assert_eq!(
                r.headers.get("x-v").and_then(|v| v.to_str().ok()),
                x_v,
                "{args}"
            );
            let kind = args.get("v").map_or("null", |v| match v {
                Value::String(_) => "string",
                Value::Number(_) => "number",
                Value::Array(_) => "array",
                _ => "null",
            });
            assert_eq!(
                r.headers.get("x-t").and_then(|v| v.to_str().ok()),
                Some(kind)
            );
        }
        // A container where a scalar must be, and a path through a value that is not an
        // object (jq's error): invalid arguments, for paths and programs alike.
        for args in [
            json!({"id": "i", "v": {"x": 1}}),
            json!({"id": "i", "v": [[1]]}),
            json!({"id": "i", "o": "text"}),
            json!({"id": "i", "o": {"k": [1]}}),
        ] {
            assert!(built(&t, args.clone()).is_err(), "{args}");
        }
    }

    /// Four tools with bodies: `lent` sends `.doc` (a path, lent in place), `ran` sends
    /// `.doc | .` (the same value from a program that runs), `all` sends the default body and
    /// `made` an object a program builds around `.doc`.
    fn posts() -> crate::config::Gateway {
        let dir = std::env::temp_dir().join(format!(
            "portico-request-posts-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let params = json!([{"name": "id", "schema": {"type": "string"}},
                            {"name": "doc", "schema": {}}, {"name": "n", "schema": {}}]);
        let methods: Vec<Value> = ["lent", "ran", "all", "made"]
            .iter()
            .map(|m| json!({"name": m, "params": params, "result": {"name": "r", "schema": {}}}))
            .collect();
        let openrpc = json!({"openrpc": "1.3.2", "info": {"title": "t", "version": "1"},
            "methods": methods});
        std::fs::write(dir.join("t.openrpc.json"), openrpc.to_string()).expect("openrpc");
        std::fs::write(
            dir.join("t.yaml"),
            "business: t\nbinding: plain\nopenrpc: t.openrpc.json\nbackend:\n  url: http://127.0.0.1:9/base\n\
             tools:\n  lent:\n    http: POST /items/{id}\n    body: .doc\n\
             \x20 ran:\n    http: PUT /items/{id}\n    body: '.doc | .'\n\
             \x20 all:\n    http: PATCH /items/{id}\n\
             \x20 made:\n    http: POST /made/{id}\n    body: '{z: .n, a: .doc, m: [.doc, {y: 1, b: .n}]}'\n",
        )
        .expect("mapping");
        let g = crate::config::load(&[dir.join("t.yaml")]).expect("loads");
        let _ = std::fs::remove_dir_all(&dir);
        g
    }

    /// A body lent from the arguments is the text of the value a program gives (an integer past
    /// `i64` becomes jq's float either way), and the default body is the arguments less the
    /// path's variables, as they came: byte for byte what `serde_json` writes of those values
    /// (escapes, floats, nesting, a missing member's `null`).
    #[test]
    fn bodies_written_from_the_call_are_the_values_own_text() {
        let g = posts();
        let tool = |name: &str| g.tools.get(name).cloned().expect("tool");
        let text = |v: &Value| serde_json::to_vec(v).expect("text");
        for (args, doc) in [
            (
                json!({"id": "i", "doc": {"title": "a \"b\"\n\u{1}", "sections": [{"h": 1.5, "t": [true, null]}], "z": {}}}),
                None,
            ),
            (
                json!({"id": "i", "doc": {"big": 18446744073709551615u64, "neg": -9007199254740993i64}, "n": 2}),
                Some(json!({"big": 18446744073709551615.0, "neg": -9007199254740993i64})),
            ),
            (json!({"id": "i", "doc": [1, "x", {"k": []}]}), None),
            (
                json!({"id": "i", "doc": "text", "n": {"deep": {"er": [0.1]}}}),
                None,
            ),
            (json!({"id": "i", "n": 1}), None),
        ] {
            let doc = text(&doc.unwrap_or_else(|| args.get("doc").cloned().unwrap_or(Value::Null)));
            let mut rest = args.clone();
            rest.as_object_mut().expect("object").remove("id");
            let body = |name: &str| built(&tool(name), args.clone()).expect("builds").body;
            assert_eq!(body("lent").as_deref(), Some(&doc[..]), "{args}");
            assert_eq!(body("ran").as_deref(), Some(&doc[..]), "{args}");
            assert_eq!(body("all").as_deref(), Some(&text(&rest)[..]), "{args}");
            // An object the program builds: keys in order, values as jaq gives them.
            let d: Value = serde_json::from_slice(&doc).expect("doc");
            let n = args.get("n").cloned().unwrap_or(Value::Null);
            let made = json!({"z": n, "a": d, "m": [d, {"y": 1, "b": n}]});
            assert_eq!(body("made").as_deref(), Some(&text(&made)[..]), "{args}");
        }
    }
}
