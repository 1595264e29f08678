//! `backend.openapi`: a mapping checked against its backend's OpenAPI document at load, so that
//! a tool whose method and path the backend lacks, a query parameter it does not take, or a field
//! a transform reads that its answer never has is refused before any call, with a did-you-mean.
//! It only reads the documents (remote `$ref`s are never fetched) and never changes a tool.

use super::backend_fit::{self, Placement, Wire};
use super::diag::{Diagnostic, locate_yaml};
use super::mapping::{MappingFile, ToolSpec};
use super::openrpc::Document;
use crate::init::source::{Place, Sources};
use crate::util::similar::nearest;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace", "query",
];

/// One operation of the document.
struct Op {
    method: String,
    path: String,
    norm: Vec<String>,
    node: Value,
    place: Place,
    shared: Value,
    shared_place: Place,
}

/// Path segments with every `{name}` written `{}`, so templates compare by shape.
fn norm(path: &str) -> Vec<String> {
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

fn url_path(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u.path().trim_end_matches('/').to_string(),
        Err(_) if url.starts_with('/') => url.trim_end_matches('/').to_string(),
        Err(_) => String::new(),
    }
}

/// The top-level field paths a jq program reads (`.a.b`, `.a[].b` as `[a, b]`); paths behind a
/// variable (`$args.x`) and inside string literals are not the backend's answer.
pub fn read_paths(program: &str) -> Vec<Vec<String>> {
    // Blank out string literals.
    let mut text = String::with_capacity(program.len());
    let mut in_str = false;
    let mut escaped = false;
    for c in program.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            text.push(' ');
        } else if c == '"' {
            in_str = true;
            text.push(' ');
        } else {
            text.push(c);
        }
    }
    let chars: Vec<char> = text.chars().collect();
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i] == '.'
            && chars.get(i + 1).is_some_and(|c| ident_start(*c))
            && (i == 0 || {
                let p = chars[i - 1];
                !(ident(p) || matches!(p, '$' | ')' | ']' | '.' | '}' | '?'))
            });
        if !starts {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        while i < chars.len()
            && chars[i] == '.'
            && chars.get(i + 1).is_some_and(|c| ident_start(*c))
        {
            let start = i + 1;
            i = start;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            path.push(chars[start..i].iter().collect::<String>());
            // `[]` and `?` between steps keep the path going.
            while i + 1 < chars.len() && chars[i] == '[' && chars[i + 1] == ']' {
                i += 2;
            }
            while i < chars.len() && chars[i] == '?' {
                i += 1;
            }
        }
        out.push(path);
    }
    out
}

/// Every property name the schema at `node` (and what it references) declares; `None` when it
/// declares none, so nothing can be said about the fields.
fn field_names(src: &mut Sources, node: &Value, at: &Place) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    let mut seen: HashSet<Place> = HashSet::new();
    let mut stack = vec![(node.clone(), at.clone())];
    while let Some((n, p)) = stack.pop() {
        match &n {
            Value::Object(o) => {
                if let Some(r) = o.get("$ref").and_then(Value::as_str)
                    && let Ok(t) = src.target(r, &p)
                    && seen.insert(t.clone())
                    && let Ok(v) = src.node(&t)
                {
                    stack.push((v, t));
                }
                for (k, v) in o {
                    if matches!(
                        k.as_str(),
                        "example" | "examples" | "default" | "enum" | "const"
                    ) || k.starts_with("x-")
                    {
                        continue;
                    }
                    if k == "properties"
                        && let Some(props) = v.as_object()
                    {
                        names.extend(props.keys().cloned());
                    }
                    stack.push((v.clone(), p.child(k)));
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    stack.push((v.clone(), p.child(&i.to_string())));
                }
            }
            _ => {}
        }
    }
    (!names.is_empty()).then_some(names)
}

fn operations(src: &mut Sources, doc: &Value, root: &Place) -> Vec<Op> {
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
fn params_in(src: &mut Sources, op: &Op, location: &str) -> Vec<(String, Value)> {
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

fn query_names(src: &mut Sources, op: &Op) -> BTreeSet<String> {
    params_in(src, op, "query")
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// Header names the document's `apiKey` security schemes put in headers (credentials a mapping
/// sends from `backend.headers` or a tool's `headers`).
fn security_headers(doc: &Value) -> Vec<String> {
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
fn body_properties(src: &mut Sources, op: &Op) -> Vec<(String, Value)> {
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

/// The schema of tool param `name`: the mapping's own `input_schema`, else the OpenRPC
/// method's param, with the document's local `$ref`s followed.
fn tool_param(doc: Option<&Document>, ts: &ToolSpec, tool: &str, name: &str) -> Option<Value> {
    let mut schema = match &ts.input_schema {
        Some(s) => s.get("properties")?.get(name)?.clone(),
        None => doc?
            .method(tool)?
            .params
            .iter()
            .find(|p| p.name == name)?
            .schema
            .clone(),
    };
    for _ in 0..16 {
        let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
            return Some(schema);
        };
        let raw = match &ts.input_schema {
            Some(s) => s,
            None => doc?.raw.as_ref(),
        };
        schema = raw.pointer(r.strip_prefix('#')?)?.clone();
    }
    None
}

/// The argument a jq program reads when it is just `.name` (or `$args.name`).
fn simple_read(program: &str) -> Option<&str> {
    let p = program.trim();
    let name = p.strip_prefix("$args.").or_else(|| p.strip_prefix('.'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(name)
}

/// 1-based column of `needle` on line `line` of `text`, where it starts a word (not preceded by
/// a letter, digit, `_` or `-`).
fn column(text: &str, line: Option<usize>, needle: &str) -> Option<u16> {
    let l = text.lines().nth(line?.checked_sub(1)?)?;
    let mut from = 0;
    while let Some(i) = l[from..].find(needle) {
        let at = from + i;
        let before = l[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return u16::try_from(l[..at].chars().count() + 1).ok();
        }
        from = at + needle.len();
    }
    None
}

/// The success response's schema and its place.
fn success_schema(src: &mut Sources, op: &Op) -> Option<(Value, Place)> {
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

/// Checks every tool of `spec` against the OpenAPI document `backend.openapi` names; `doc` (the
/// mapping's OpenRPC document) gives the tool params' types.
pub fn check(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    doc: Option<&Document>,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(rel) = &spec.backend.openapi else {
        return;
    };
    let at = |path: &[&str]| locate_yaml(text, path);
    let doc_path = file.parent().unwrap_or(Path::new(".")).join(rel);
    let mut src = Sources::default();
    let (doc_file, api) = match src.open(&doc_path) {
        Ok(x) => x,
        Err(e) => {
            diags.push(
                Diagnostic::error(file, format!("backend.openapi: {e}"))
                    .line(at(&["backend", "openapi"]))
                    .at("backend.openapi")
                    .hint("the path is relative to this mapping file"),
            );
            return;
        }
    };
    let root = Place {
        file: doc_file,
        pointer: String::new(),
    };
    let ops = operations(&mut src, &api, &root);
    let credentials = security_headers(&api);
    // `backend.headers` go to every operation: a name no operation declares, near one that
    // some operation does, is a typo.
    let mut anywhere: Vec<String> = credentials.clone();
    for op in &ops {
        for (n, _) in params_in(&mut src, op, "header") {
            if !anywhere.iter().any(|a| a.eq_ignore_ascii_case(&n)) {
                anywhere.push(n);
            }
        }
    }
    for key in spec.backend.headers.keys() {
        if let Some(f) = backend_fit::header(key, &anywhere, "any operation", rel)
            && f.error
        {
            let line = at(&["backend", "headers", key]);
            diags.push(
                Diagnostic::error(
                    file,
                    format!("header `{key}` is not a header parameter of any operation in {rel}"),
                )
                .line(line)
                .column(column(text, line, key))
                .at(format!("backend.headers.{key}"))
                .hint(f.hint),
            );
        }
    }
    let backend_path = url_path(&spec.backend.url);
    let server_path = api
        .pointer("/servers/0/url")
        .and_then(Value::as_str)
        .map(url_path)
        .unwrap_or_default();
    for (name, ts) in &spec.tools {
        let Some((method, path)) = ts.http.split_once(' ') else {
            continue;
        };
        let method = method.trim().to_ascii_uppercase();
        let path = path.trim();
        let tool_norm = norm(path);
        let full = norm(&format!("{backend_path}{path}"));
        let same_path = |op: &Op| {
            op.norm == tool_norm
                || norm(&format!("{server_path}{}", op.path)) == full
                || (full.len() >= op.norm.len()
                    && full[full.len() - op.norm.len()..] == op.norm[..])
        };
        let here = format!("tools.{name}.http");
        let line = at(&["tools", name, "http"]);
        let Some(op) = ops.iter().find(|op| op.method == method && same_path(op)) else {
            let others: Vec<&str> = ops
                .iter()
                .filter(|op| same_path(op))
                .map(|op| op.method.as_str())
                .collect();
            let (message, hint) = if others.is_empty() {
                let guess = nearest(path, ops.iter().map(|o| o.path.as_str()));
                (
                    format!("`{method} {path}` is not an operation of {rel}"),
                    match guess {
                        Some(g) => format!("did you mean `{g}`?"),
                        None => format!(
                            "{rel} has {} operation(s); check the path against its `paths`",
                            ops.len()
                        ),
                    },
                )
            } else {
                (
                    format!("{rel} has `{path}` only for {}", others.join(", ")),
                    format!("use one of: {}", others.join(", ")),
                )
            };
            diags.push(
                Diagnostic::error(file, message)
                    .line(line)
                    .at(here)
                    .hint(hint),
            );
            continue;
        };
        let taken = query_names(&mut src, op);
        for key in ts.query.keys() {
            if !taken.contains(key) {
                let hint = match nearest(key, taken.iter().map(String::as_str)) {
                    Some(g) => format!("did you mean `{g}`?"),
                    None if taken.is_empty() => {
                        format!("`{} {}` takes no query parameters", op.method, op.path)
                    }
                    None => format!(
                        "its query parameters: {}",
                        taken.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                };
                diags.push(
                    Diagnostic::error(
                        file,
                        format!(
                            "query parameter `{key}` is not a parameter of `{} {}` in {rel}",
                            op.method, op.path
                        ),
                    )
                    .line(at(&["tools", name, "query", key]))
                    .at(format!("tools.{name}.query.{key}"))
                    .hint(hint),
                );
            }
        }
        placed(
            &mut src,
            op,
            Tool {
                file,
                text,
                name,
                spec: ts,
                path,
                doc,
                rel,
            },
            &credentials,
            diags,
        );
        let Some((schema, s_at)) = success_schema(&mut src, op) else {
            continue;
        };
        let Some(fields) = field_names(&mut src, &schema, &s_at) else {
            continue;
        };
        for (key, program) in [("result", &ts.result), ("business", &ts.business)] {
            let Some(program) = program else { continue };
            let mut reported = HashSet::new();
            for path in read_paths(program) {
                for step in &path {
                    if fields.contains(step) || !reported.insert(step.clone()) {
                        continue;
                    }
                    let hint = match nearest(step, fields.iter().map(String::as_str)) {
                        Some(g) => format!("did you mean `.{g}`?"),
                        None => {
                            "the response schema names no such property at any depth".to_string()
                        }
                    };
                    diags.push(
                        Diagnostic::error(
                            file,
                            format!(
                                "`{key}` of `{name}` reads `.{step}`, which the answer of `{} {}` never has ({rel}#{})",
                                op.method, op.path, s_at.pointer
                            ),
                        )
                        .line(at(&["tools", name, key]))
                        .at(format!("tools.{name}.{key}"))
                        .hint(hint),
                    );
                }
            }
        }
    }
}

/// One tool as `placed` reads it.
struct Tool<'a> {
    file: &'a Path,
    text: &'a str,
    name: &'a str,
    spec: &'a ToolSpec,
    /// The path of its `http:`.
    path: &'a str,
    doc: Option<&'a Document>,
    /// `backend.openapi` as written.
    rel: &'a str,
}

/// The headers a tool places that `op` does not declare, and every placed param whose type does
/// not fit the parameter or body property it goes into.
fn placed(
    src: &mut Sources,
    op: &Op,
    t: Tool<'_>,
    credentials: &[String],
    diags: &mut Vec<Diagnostic>,
) {
    let operation = format!("{} {}", op.method, op.path);
    let mut push = |f: backend_fit::Finding, keys: &[&str], needle: &str, at: String| {
        let line = locate_yaml(t.text, keys);
        let d = if f.error {
            Diagnostic::error(t.file, f.message)
        } else {
            Diagnostic::warning(t.file, f.message)
        };
        diags.push(
            d.line(line)
                .column(column(t.text, line, needle))
                .at(at)
                .hint(f.hint),
        );
    };
    let name = t.name;
    let param_schema = |p: &str| tool_param(t.doc, t.spec, name, p);

    // Headers: declared by the operation (or a security scheme), case-insensitively.
    let headers = params_in(src, op, "header");
    let mut declared: Vec<String> = headers.iter().map(|(n, _)| n.clone()).collect();
    declared.extend(credentials.iter().cloned());
    for (key, program) in &t.spec.headers {
        if let Some(f) = backend_fit::header(key, &declared, &operation, t.rel) {
            push(
                f,
                &["tools", name, "headers", key],
                key,
                format!("tools.{name}.headers.{key}"),
            );
            continue;
        }
        let Some(arg) = simple_read(program) else {
            continue;
        };
        if let (Some(tool), Some((target, backend))) = (
            param_schema(arg),
            headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(key)),
        ) && let Some(f) = backend_fit::judge(
            &Placement {
                param: arg,
                tool: &tool,
                target,
                backend,
                wire: Wire::Header,
            },
            &operation,
            t.rel,
        ) {
            push(
                f,
                &["tools", name, "headers", key],
                key,
                format!("tools.{name}.headers.{key}"),
            );
        }
    }

    // Query parameters a program fills with one argument as it is.
    let query = params_in(src, op, "query");
    for (key, program) in &t.spec.query {
        let Some(arg) = simple_read(program) else {
            continue;
        };
        if let (Some(tool), Some((target, backend))) =
            (param_schema(arg), query.iter().find(|(n, _)| n == key))
            && let Some(f) = backend_fit::judge(
                &Placement {
                    param: arg,
                    tool: &tool,
                    target,
                    backend,
                    wire: Wire::Query,
                },
                &operation,
                t.rel,
            )
        {
            push(
                f,
                &["tools", name, "query", key],
                key,
                format!("tools.{name}.query.{key}"),
            );
        }
    }

    // Path placeholders, segment by segment from the end (the backend URL may add a prefix).
    let path_params = params_in(src, op, "path");
    let placeholder = |seg: &str| {
        seg.strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .filter(|s| !s.contains(['{', '}']))
            .map(str::to_string)
    };
    let mut in_path = Vec::new();
    let tool_segs: Vec<&str> = t.path.split('/').filter(|s| !s.is_empty()).collect();
    let op_segs: Vec<&str> = op.path.split('/').filter(|s| !s.is_empty()).collect();
    for (mine, theirs) in tool_segs.iter().rev().zip(op_segs.iter().rev()) {
        let (Some(arg), Some(target)) = (placeholder(mine), placeholder(theirs)) else {
            continue;
        };
        in_path.push(arg.clone());
        if let (Some(tool), Some((target, backend))) = (
            param_schema(&arg),
            path_params.iter().find(|(n, _)| *n == target),
        ) && let Some(f) = backend_fit::judge(
            &Placement {
                param: &arg,
                tool: &tool,
                target,
                backend,
                wire: Wire::Path,
            },
            &operation,
            t.rel,
        ) {
            push(
                f,
                &["tools", name, "http"],
                mine,
                format!("tools.{name}.http"),
            );
        }
    }

    // The default body (the arguments minus path params and metadata, or `del(...)` of some):
    // each argument goes into the body property of its name.
    if !matches!(op.method.as_str(), "POST" | "PUT" | "PATCH") {
        return;
    }
    let removed: Vec<String> = match t.spec.body.as_deref().map(str::trim) {
        None => Vec::new(),
        Some(b) => match b.strip_prefix("del(").and_then(|r| r.strip_suffix(')')) {
            Some(list) => list
                .split(',')
                .filter_map(simple_read)
                .map(str::to_string)
                .collect(),
            None => return,
        },
    };
    let props = body_properties(src, op);
    let params: Vec<String> = match (&t.spec.input_schema, t.doc.and_then(|d| d.method(name))) {
        (Some(s), _) => s
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
        (None, Some(m)) => m.params.iter().map(|p| p.name.clone()).collect(),
        (None, None) => Vec::new(),
    };
    for arg in params {
        if in_path.contains(&arg) || removed.contains(&arg) || arg == "_meta" || arg == "meta" {
            continue;
        }
        if let (Some(tool), Some((target, backend))) =
            (param_schema(&arg), props.iter().find(|(n, _)| *n == arg))
            && let Some(f) = backend_fit::judge(
                &Placement {
                    param: &arg,
                    tool: &tool,
                    target,
                    backend,
                    wire: Wire::Body,
                },
                &operation,
                t.rel,
            )
        {
            push(
                f,
                &["tools", name, "http"],
                "http",
                format!("tools.{name}.http (body)"),
            );
        }
    }
}

/// The documented answer of the operation `tool` maps to, from the success response of the
/// OpenAPI document `backend.openapi` names: its status and example (`example`, or the first of
/// `examples`). `None` when there is no document, operation or example.
pub fn documented_answer(file: &Path, spec: &MappingFile, tool: &str) -> Option<(u16, Value)> {
    let rel = spec.backend.openapi.as_ref()?;
    let ts = spec.tools.get(tool)?;
    let (method, path) = ts.http.split_once(' ')?;
    let mut src = Sources::default();
    let (doc_file, doc) = src
        .open(&file.parent().unwrap_or(Path::new(".")).join(rel))
        .ok()?;
    let root = Place {
        file: doc_file,
        pointer: String::new(),
    };
    let ops = operations(&mut src, &doc, &root);
    let backend_path = url_path(&spec.backend.url);
    let full = norm(&format!("{backend_path}{}", path.trim()));
    let want = norm(path.trim());
    let op = ops.iter().find(|op| {
        op.method.eq_ignore_ascii_case(method.trim())
            && (op.norm == want
                || (full.len() >= op.norm.len()
                    && full[full.len() - op.norm.len()..] == op.norm[..]))
    })?;
    let responses = op.node.get("responses")?.as_object()?;
    let mut codes: Vec<&String> = responses.keys().filter(|k| k.starts_with('2')).collect();
    codes.sort();
    let code = codes.first()?;
    let status = code.parse::<u16>().unwrap_or(200);
    let (resp, at) = src
        .deref(&responses[*code], &op.place.child("responses").child(code))
        .ok()?;
    let content = resp.get("content")?.as_object()?;
    let (media, m) = content.iter().find(|(k, _)| {
        let k = k.to_ascii_lowercase();
        k.starts_with("application/json") || k.contains("+json")
    })?;
    if let Some(e) = m.get("example") {
        return Some((status, e.clone()));
    }
    let first = m.get("examples")?.as_object()?.values().next()?;
    let (e, _) = src
        .deref(first, &at.child("content").child(media).child("examples"))
        .ok()?;
    e.get("value").cloned().map(|v| (status, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_paths_skip_strings_variables_and_keys() {
        let p = read_paths(
            r#"{ id: .apointment.id, n: (.items[] | .name), s: "a.b", a: $args.x, d: .x?.y }"#,
        );
        assert_eq!(
            p,
            vec![
                vec!["apointment".to_string(), "id".into()],
                vec!["items".into()],
                vec!["name".into()],
                vec!["x".into(), "y".into()],
            ]
        );
    }

    #[test]
    fn templates_compare_by_shape() {
        assert_eq!(norm("/a/{id}/b.json"), norm("/a/{x}/b.json"));
        assert_ne!(norm("/a/{id}"), norm("/a/{id}.json"));
    }
}
