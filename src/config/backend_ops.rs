//! The operations of a backend's OpenAPI document as `check` reads them: method, path, the
//! parameters of each location and the JSON request body's properties (schemas resolved), the
//! success response's schema. It only reads documents: it never fetches a remote `$ref`.

use crate::init::source::{Place, Sources};
use serde_json::Value;
use std::collections::BTreeSet;

pub(super) const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace", "query",
];

/// One operation of the document.
pub(super) struct Op {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) norm: Vec<String>,
    pub(super) node: Value,
    pub(super) place: Place,
    pub(super) shared: Value,
    pub(super) shared_place: Place,
}

/// Path segments with every `{name}` written `{}`, so templates compare by shape.
pub(super) fn norm(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|seg| {
            let mut out = String::new();
            let mut depth = 0;
            for c in seg.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        out.push('{');
                    }
                    '}' => {
                        depth -= 1;
                        out.push('}');
                    }
                    _ if depth > 0 => {}
                    _ => out.push(c),
                }
            }
            out
        })
        .collect()
}

pub(super) fn url_path(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u.path().trim_end_matches('/').to_string(),
        Err(_) if url.starts_with('/') => url.trim_end_matches('/').to_string(),
        Err(_) => String::new(),
    }
}

pub(super) fn operations(src: &mut Sources, doc: &Value, root: &Place) -> Vec<Op> {
    let mut ops = Vec::new();
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return ops;
    };
    for (path, item) in paths {
        let at = root.child("paths").child(path);
        let Ok((item, item_at)) = src.deref(item, &at) else {
            continue;
        };
        for m in METHODS {
            if let Some(op) = item.get(*m) {
                ops.push(Op {
                    method: m.to_ascii_uppercase(),
                    path: path.clone(),
                    norm: norm(path),
                    node: op.clone(),
                    place: item_at.child(m),
                    shared: item.get("parameters").cloned().unwrap_or(Value::Null),
                    shared_place: item_at.child("parameters"),
                });
            }
        }
    }
    ops
}

/// The parameters of `op` located `in` (`query`, `header`, `path`): name and resolved schema
/// (`Value::Null` when it has none or its `$ref` does not resolve).
pub(super) fn params_in(src: &mut Sources, op: &Op, location: &str) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let lists = [
        (
            op.node.get("parameters").cloned(),
            op.place.child("parameters"),
        ),
        (Some(op.shared.clone()), op.shared_place.clone()),
    ];
    for (list, at) in lists {
        for (i, p) in list
            .and_then(|l| l.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let p_at = at.child(&i.to_string());
            if let Ok((p, p_at)) = src.deref(p, &p_at)
                && p.get("in").and_then(Value::as_str) == Some(location)
                && let Some(n) = p.get("name").and_then(Value::as_str)
                && !out.iter().any(|(o, _)| o == n)
            {
                let schema = p
                    .get("schema")
                    .and_then(|s| src.deref(s, &p_at.child("schema")).ok())
                    .map(|(v, _)| v)
                    .unwrap_or(Value::Null);
                out.push((n.to_string(), schema));
            }
        }
    }
    out
}

pub(super) fn query_names(src: &mut Sources, op: &Op) -> BTreeSet<String> {
    params_in(src, op, "query")
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// Header names the document's `apiKey` security schemes put in headers (credentials a mapping
/// sends from `backend.headers` or a tool's `headers`).
pub(super) fn security_headers(doc: &Value) -> Vec<String> {
    doc.pointer("/components/securitySchemes")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
        .filter(|s| {
            s.get("type").and_then(Value::as_str) == Some("apiKey")
                && s.get("in").and_then(Value::as_str) == Some("header")
        })
        .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The properties of the operation's JSON request body, each schema resolved.
pub(super) fn body_properties(src: &mut Sources, op: &Op) -> Vec<(String, Value)> {
    let Some(body) = op.node.get("requestBody") else {
        return Vec::new();
    };
    let Ok((body, at)) = src.deref(body, &op.place.child("requestBody")) else {
        return Vec::new();
    };
    let Some((media, m)) = body
        .get("content")
        .and_then(Value::as_object)
        .and_then(|c| {
            c.iter().find(|(k, _)| {
                let k = k.to_ascii_lowercase();
                k.starts_with("application/json") || k.contains("+json")
            })
        })
    else {
        return Vec::new();
    };
    let Some(schema) = m.get("schema") else {
        return Vec::new();
    };
    let s_at = at.child("content").child(media).child("schema");
    let Ok((schema, s_at)) = src.deref(schema, &s_at) else {
        return Vec::new();
    };
    // The object itself and the members of a top-level `allOf`.
    let mut objects = vec![(schema.clone(), s_at.clone())];
    for (i, part) in schema
        .get("allOf")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Ok(x) = src.deref(part, &s_at.child("allOf").child(&i.to_string())) {
            objects.push(x);
        }
    }
    let mut out: Vec<(String, Value)> = Vec::new();
    for (o, o_at) in objects {
        for (name, prop) in o
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
        {
            if out.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let resolved = src
                .deref(&prop, &o_at.child("properties").child(&name))
                .map(|(v, _)| v)
                .unwrap_or(Value::Null);
            out.push((name, resolved));
        }
    }
    out
}

/// The success response's schema and its place.
pub(super) fn success_schema(src: &mut Sources, op: &Op) -> Option<(Value, Place)> {
    let responses = op.node.get("responses")?.as_object()?;
    let mut codes: Vec<&String> = responses.keys().filter(|k| k.starts_with('2')).collect();
    codes.sort();
    let code = codes.first()?;
    let (resp, at) = src
        .deref(&responses[*code], &op.place.child("responses").child(code))
        .ok()?;
    let content = resp.get("content")?.as_object()?;
    let (media, m) = content.iter().find(|(k, _)| {
        let k = k.to_ascii_lowercase();
        k.starts_with("application/json") || k.contains("+json") || k == "*/*"
    })?;
    let schema = m.get("schema")?.clone();
    Some((schema, at.child("content").child(media).child("schema")))
}
