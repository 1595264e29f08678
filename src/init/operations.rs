//! OpenAPI operations read as tool plans: name, arguments (path, query, header, body), where
//! each argument goes, the success response's schema and examples. It never writes files, and an
//! operation it cannot serve is skipped with the reason, never half-mapped.

use super::convert::{Dir, Schemas, sanitize};
use super::source::{Place, RefError};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashSet};

/// Longest tool name most MCP clients accept.
pub const MAX_NAME: usize = 64;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace", "query",
];

/// One tool argument.
#[derive(Debug, Clone)]
pub struct Arg {
    pub name: String,
    pub schema: Value,
    pub required: bool,
    pub description: Option<String>,
}

/// One operation, ready to be written as an OpenRPC method and a mapping tool.
#[derive(Debug, Clone)]
pub struct ToolPlan {
    pub name: String,
    /// The operation's own id when the tool name had to differ from it.
    pub full_id: Option<String>,
    pub summary: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub method: String,
    /// Path template with argument names as placeholders.
    pub path: String,
    pub args: Vec<Arg>,
    /// Query parameter -> jq program.
    pub query: Vec<(String, String)>,
    /// Header -> jq program (arguments, or a fixed value).
    pub headers: Vec<(String, String)>,
    /// jq program building the body, when the default would be wrong.
    pub body: Option<String>,
    /// Result schema (output direction) and whether the answer is wrapped as `{result: ...}`.
    pub result: Option<Value>,
    pub wrap_result: bool,
    pub result_example: Option<Value>,
    pub place: Place,
    /// What was left out of this operation (optional cookies, callbacks, credential headers).
    pub notes: Vec<String>,
}

/// An operation that is not served, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub what: String,
    pub place: Place,
    pub reason: String,
}

/// `--include` / `--exclude`: a tag, an operationId, a path glob (`/pets/*`), or `METHOD /glob`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == t[ti] || p[pi] == '?') {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

impl Filter {
    fn hit(pattern: &str, method: &str, path: &str, id: Option<&str>, tags: &[String]) -> bool {
        if let Some((m, g)) = pattern.split_once(' ')
            && m.eq_ignore_ascii_case(method)
        {
            return glob(g.trim(), path);
        }
        if pattern.starts_with('/') {
            return glob(pattern, path);
        }
        id == Some(pattern) || tags.iter().any(|t| t == pattern)
    }

    pub fn admits(&self, method: &str, path: &str, id: Option<&str>, tags: &[String]) -> bool {
        (self.include.is_empty()
            || self
                .include
                .iter()
                .any(|p| Self::hit(p, method, path, id, tags)))
            && !self
                .exclude
                .iter()
                .any(|p| Self::hit(p, method, path, id, tags))
    }
}

/// Whether `name` can be written as `.name` in jq.
fn is_ident(name: &str) -> bool {
    let mut c = name.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// The jq path of a top-level argument.
pub fn jq_arg(name: &str) -> String {
    if is_ident(name) {
        format!(".{name}")
    } else {
        format!(".[{}]", json!(name))
    }
}

/// An argument name from a parameter name: letters, digits and `_` only.
fn arg_name(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_matches('_').to_string();
    match s.chars().next() {
        None => "arg".into(),
        Some(c) if c.is_ascii_digit() => format!("_{s}"),
        _ => s,
    }
}

/// A stable, short hash (FNV-1a, 32 bits) for names that must be cut.
fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// A tool name within `MAX_NAME` characters of `[A-Za-z0-9_.-]`; a cut name ends in a hash of
/// the whole id, so two long ids with one prefix stay apart.
pub fn tool_name(id: &str) -> String {
    let clean = sanitize(id);
    if clean.len() <= MAX_NAME {
        return clean;
    }
    format!("{}_{}", &clean[..MAX_NAME - 9], short_hash(id))
}

/// The name of an operation without `operationId`: method and path, `{x}` read as `by_x`.
pub fn derived_id(method: &str, path: &str) -> String {
    let mut parts = vec![method.to_ascii_lowercase()];
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        if let Some(v) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            parts.push(format!("by_{}", arg_name(v)));
        } else {
            parts.push(arg_name(seg));
        }
    }
    parts.join("_")
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Media types portico sends and reads as JSON.
fn is_json(media: &str) -> bool {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    m == "application/json" || m.ends_with("+json") || m == "*/*" || m == "application/*"
}

/// The JSON media entry of a `content` map, else the first media type's name.
fn json_media(content: &Value) -> Result<Option<(&String, &Value)>, String> {
    let Some(map) = content.as_object() else {
        return Ok(None);
    };
    if map.is_empty() {
        return Ok(None);
    }
    match map.iter().find(|(k, _)| is_json(k)) {
        Some(hit) => Ok(Some(hit)),
        None => Err(map.keys().next().cloned().unwrap_or_default()),
    }
}

/// What every operation shares: the schema table, the credential headers, the filter.
pub struct Context<'a, 's> {
    pub schemas: &'a mut Schemas<'s>,
    /// Lower-case header names that carry credentials.
    pub credential_headers: BTreeSet<String>,
    /// Query parameter names that carry credentials.
    pub credential_query: BTreeSet<String>,
    pub filter: Filter,
    pub names: HashSet<String>,
}

/// Reads every operation of the document at `root`.
pub fn read_all(
    cx: &mut Context<'_, '_>,
    doc: &Value,
    root: &Place,
) -> (Vec<ToolPlan>, Vec<Skipped>) {
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return (tools, skipped);
    };
    let paths_at = root.child("paths");
    for (path, item) in paths {
        let item_at = paths_at.child(path);
        let (item, item_at) = match cx.schemas.src.deref(item, &item_at) {
            Ok(x) => x,
            Err(e) => {
                skipped.push(Skipped {
                    what: path.clone(),
                    place: item_at,
                    reason: ref_reason(&e),
                });
                continue;
            }
        };
        let shared = item.get("parameters").cloned().unwrap_or(json!([]));
        let mut ops: Vec<(String, Value, Place)> = Vec::new();
        for m in METHODS {
            if let Some(op) = item.get(*m) {
                ops.push((m.to_ascii_uppercase(), op.clone(), item_at.child(m)));
            }
        }
        if let Some(extra) = item.get("additionalOperations").and_then(Value::as_object) {
            for (m, op) in extra {
                ops.push((
                    m.to_ascii_uppercase(),
                    op.clone(),
                    item_at.child("additionalOperations").child(m),
                ));
            }
        }
        for (method, op, op_at) in ops {
            let id = text(&op, "operationId");
            let tags = strings_at(&op, "tags");
            if !cx.filter.admits(&method, path, id.as_deref(), &tags) {
                continue;
            }
            match read_op(cx, &method, path, &op, &op_at, &shared, &item_at, id, tags) {
                Ok(t) => tools.push(t),
                Err(reason) => skipped.push(Skipped {
                    what: format!("{method} {path}"),
                    place: op_at,
                    reason,
                }),
            }
        }
    }
    (tools, skipped)
}

fn ref_reason(e: &RefError) -> String {
    format!("{e}")
}

#[allow(clippy::too_many_arguments)]
fn read_op(
    cx: &mut Context<'_, '_>,
    method: &str,
    path: &str,
    op: &Value,
    op_at: &Place,
    shared: &Value,
    item_at: &Place,
    id: Option<String>,
    tags: Vec<String>,
) -> Result<ToolPlan, String> {
    let mut notes = Vec::new();
    // Parameters: the operation's win over the path item's with the same name and place.
    let mut params: Vec<(Value, Place)> = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let own = op
        .get("parameters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let common = shared.as_array().cloned().unwrap_or_default();
    let lists = [
        (own, op_at.child("parameters")),
        (common, item_at.child("parameters")),
    ];
    for (list, at) in lists {
        for (i, p) in list.iter().enumerate() {
            let (p, p_at) = cx
                .schemas
                .src
                .deref(p, &at.child(&i.to_string()))
                .map_err(|e| format!("parameter {i}: {}", ref_reason(&e)))?;
            let key = (
                text(&p, "name").unwrap_or_default(),
                text(&p, "in").unwrap_or_default(),
            );
            if seen.insert(key) {
                params.push((p, p_at));
            }
        }
    }
    let mut args: Vec<Arg> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    let mut non_body: Vec<String> = Vec::new();
    let mut path_vars: Vec<(String, String)> = Vec::new(); // (template name, arg name)
    let template_vars: Vec<String> = path
        .split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(v, _)| v.to_string()))
        .collect();
    let unique = |raw: &str, suffix: &str, taken: &mut HashSet<String>| {
        let mut n = arg_name(raw);
        if taken.contains(&n) {
            n = format!("{n}_{suffix}");
        }
        while taken.contains(&n) {
            n.push('_');
        }
        taken.insert(n.clone());
        n
    };
    for (p, p_at) in &params {
        let name = text(p, "name").unwrap_or_default();
        let loc = text(p, "in").unwrap_or_default();
        let required = p.get("required").and_then(Value::as_bool).unwrap_or(false) || loc == "path";
        let schema_at = p_at.child("schema");
        let mut schema = match p.get("schema") {
            Some(s) => cx.schemas.convert(s, &schema_at, Dir::Input),
            None => match p.get("content").and_then(json_media_ok) {
                Some((k, m)) => match m.get("schema") {
                    Some(s) => cx.schemas.convert(
                        s,
                        &p_at.child("content").child(k).child("schema"),
                        Dir::Input,
                    ),
                    None => json!({}),
                },
                None => json!({"type": "string"}),
            },
        };
        if let (Some(ex), Value::Object(o)) = (p.get("example"), &mut schema)
            && !o.contains_key("examples")
        {
            o.insert("examples".into(), json!([ex]));
        }
        let description = text(p, "description");
        match loc.as_str() {
            "path" => {
                if !template_vars.contains(&name) {
                    notes.push(format!(
                        "path parameter `{name}` is not in the path template; left out"
                    ));
                    continue;
                }
                let a = unique(&name, "path", &mut taken);
                path_vars.push((name.clone(), a.clone()));
                non_body.push(a.clone());
                args.push(Arg {
                    name: a,
                    schema,
                    required: true,
                    description,
                });
            }
            "query" => {
                if cx.credential_query.contains(&name) {
                    notes.push(format!(
                        "query parameter `{name}` carries credentials; not a tool argument"
                    ));
                    continue;
                }
                if is_object_schema(cx, &schema) {
                    if required {
                        return Err(format!(
                            "required query parameter `{name}` is an object (deepObject style)"
                        ));
                    }
                    notes.push(format!("object query parameter `{name}` left out"));
                    continue;
                }
                let a = unique(&name, "query", &mut taken);
                query.push((name.clone(), jq_arg(&a)));
                non_body.push(a.clone());
                args.push(Arg {
                    name: a,
                    schema,
                    required,
                    description,
                });
            }
            "header" => {
                let lower = name.to_ascii_lowercase();
                if matches!(lower.as_str(), "accept" | "content-type") {
                    continue;
                }
                if cx.credential_headers.contains(&lower) || is_credential_header(&lower) {
                    notes.push(format!(
                        "header `{name}` carries credentials: set it under `backend.headers`, not as a tool argument"
                    ));
                    continue;
                }
                if let Some(fixed) = single_value(cx, p, &schema) {
                    headers.push((name.clone(), json!(fixed).to_string()));
                    continue;
                }
                let a = unique(&name, "header", &mut taken);
                headers.push((name.clone(), jq_arg(&a)));
                non_body.push(a.clone());
                args.push(Arg {
                    name: a,
                    schema,
                    required,
                    description,
                });
            }
            "cookie" => {
                if required {
                    return Err(format!(
                        "required cookie parameter `{name}`: portico sends no cookies"
                    ));
                }
                notes.push(format!("cookie parameter `{name}` left out"));
            }
            other => {
                return Err(format!("parameter `{name}` has an unknown `in: {other}`"));
            }
        }
    }
    // Placeholders the parameter list forgot: required string arguments.
    for v in &template_vars {
        if !path_vars.iter().any(|(t, _)| t == v) {
            let a = unique(v, "path", &mut taken);
            notes.push(format!(
                "path placeholder `{{{v}}}` has no parameter; added as a string argument"
            ));
            path_vars.push((v.clone(), a.clone()));
            non_body.push(a.clone());
            args.push(Arg {
                name: a,
                schema: json!({"type": "string"}),
                required: true,
                description: None,
            });
        }
    }
    let mut template = path.to_string();
    for (t, a) in &path_vars {
        if t != a {
            template = template.replace(&format!("{{{t}}}"), &format!("{{{a}}}"));
        }
    }
    crate::translate::path::PathTemplate::parse(&template)
        .map_err(|e| format!("path template: {e}"))?;

    // The request body.
    let mut body = None;
    if let Some(rb) = op.get("requestBody") {
        let (rb, rb_at) = cx
            .schemas
            .src
            .deref(rb, &op_at.child("requestBody"))
            .map_err(|e| format!("requestBody: {}", ref_reason(&e)))?;
        let required = rb.get("required").and_then(Value::as_bool).unwrap_or(false);
        let content = rb.get("content").cloned().unwrap_or(json!({}));
        match json_media(&content) {
            Err(media) => {
                return Err(format!(
                    "request body is `{media}`; portico sends JSON bodies"
                ));
            }
            Ok(None) => {}
            Ok(Some((media, m))) => {
                if !matches!(method, "POST" | "PUT" | "PATCH") {
                    if required {
                        return Err(format!("{method} with a required request body"));
                    }
                    notes.push(format!("optional {method} request body left out"));
                } else {
                    let s_at = rb_at.child("content").child(media).child("schema");
                    let raw = m.get("schema").cloned().unwrap_or(json!({}));
                    let schema = cx.schemas.convert(&raw, &s_at, Dir::Input);
                    let flat = flat_properties(cx, &raw, &s_at);
                    let collides = flat.as_ref().is_some_and(|(props, _)| {
                        props.iter().any(|(k, _)| taken.contains(k) || !is_ident(k))
                    });
                    match flat {
                        Some((props, req)) if !collides && !props.is_empty() => {
                            for (k, s) in props {
                                taken.insert(k.clone());
                                args.push(Arg {
                                    required: required && req.contains(&k),
                                    description: s
                                        .get("description")
                                        .and_then(Value::as_str)
                                        .map(str::to_string),
                                    name: k,
                                    schema: s,
                                });
                            }
                            if !non_body.is_empty() {
                                body = Some(format!(
                                    "del({})",
                                    non_body
                                        .iter()
                                        .map(|a| jq_arg(a))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ));
                            }
                        }
                        _ => {
                            let a = unique("body", "json", &mut taken);
                            body = Some(jq_arg(&a));
                            args.push(Arg {
                                name: a,
                                schema,
                                required,
                                description: text(&rb, "description"),
                            });
                        }
                    }
                }
            }
        }
    } else if matches!(method, "POST" | "PUT" | "PATCH") {
        body = Some("{}".into());
    }
    if op
        .get("callbacks")
        .and_then(Value::as_object)
        .is_some_and(|c| !c.is_empty())
    {
        notes.push("callbacks are not served (portico does not receive them)".into());
    }

    // The success response.
    let (result, wrap_result, result_example) = success(cx, op, op_at)?;

    let full = id.clone().unwrap_or_else(|| derived_id(method, path));
    let mut name = tool_name(&full);
    if cx.names.contains(&name) {
        let base = tool_name(&format!("{full}_{}", method.to_ascii_lowercase()));
        name = base;
        let mut n = 2;
        while cx.names.contains(&name) {
            name = tool_name(&format!("{full}_{n}"));
            n += 1;
        }
    }
    cx.names.insert(name.clone());
    let full_id = id.filter(|i| *i != name);
    let summary = text(op, "summary");
    let summary = match (&full_id, summary) {
        (Some(f), Some(s)) => Some(format!("{s} ({f})")),
        (Some(f), None) => Some(f.clone()),
        (None, s) => s,
    };
    Ok(ToolPlan {
        name,
        full_id,
        summary,
        description: text(op, "description"),
        tags,
        method: method.to_string(),
        path: template,
        args,
        query,
        headers,
        body,
        result,
        wrap_result,
        result_example,
        place: op_at.clone(),
        notes,
    })
}

fn json_media_ok(content: &Value) -> Option<(&String, &Value)> {
    json_media(content).ok().flatten()
}

/// Header names that carry credentials whatever the document says.
fn is_credential_header(lower: &str) -> bool {
    matches!(
        lower,
        "authorization" | "proxy-authorization" | "cookie" | "x-api-key" | "api-key" | "apikey"
    ) || lower.ends_with("-api-key")
        || lower.ends_with("-token")
        || lower.contains("secret")
}

/// The one value a header can take (a `const`, a one-value `enum`, or a required header's
/// `default`): the mapping sends it, the agent is not asked.
fn single_value(cx: &mut Context<'_, '_>, p: &Value, schema: &Value) -> Option<Value> {
    let resolved = resolve_converted(cx, schema);
    if let Some(c) = resolved.get("const") {
        return Some(c.clone());
    }
    if let Some(Value::Array(e)) = resolved.get("enum") {
        let vals: Vec<&Value> = e.iter().filter(|v| !v.is_null()).collect();
        if vals.len() == 1 {
            return Some(vals[0].clone());
        }
    }
    let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
    if required {
        return resolved.get("default").cloned();
    }
    None
}

/// A converted schema with a root `$ref` into the table followed.
fn resolve_converted(cx: &mut Context<'_, '_>, schema: &Value) -> Value {
    cx.schemas.finish();
    let mut cur = schema.clone();
    for _ in 0..8 {
        let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
            break;
        };
        match r
            .strip_prefix("#/components/schemas/")
            .and_then(|n| cx.schemas.defs.get(n))
        {
            Some(d) => cur = d.clone(),
            None => break,
        }
    }
    cur
}

fn is_object_schema(cx: &mut Context<'_, '_>, schema: &Value) -> bool {
    let s = resolve_converted(cx, schema);
    let t = s.get("type");
    t == Some(&json!("object")) || (t.is_none() && s.get("properties").is_some())
}

/// A flattenable body: its properties (converted) and the required ones.
type FlatBody = (Vec<(String, Value)>, Vec<String>);

/// The properties of an object body that can be flattened into arguments: a plain object
/// schema (after its root `$ref`), without composition keywords.
fn flat_properties(cx: &mut Context<'_, '_>, raw: &Value, at: &Place) -> Option<FlatBody> {
    let (node, node_at) = cx.schemas.src.deref(raw, at).ok()?;
    let obj = node.as_object()?;
    if ["oneOf", "anyOf", "allOf", "not", "if"]
        .iter()
        .any(|k| obj.contains_key(*k))
        || obj.get("nullable") == Some(&Value::Bool(true))
    {
        return None;
    }
    if obj.get("type").is_some_and(|t| t != &json!("object")) {
        return None;
    }
    let props = obj.get("properties")?.as_object()?;
    let required = strings_at(&node, "required");
    let mut out = Vec::new();
    let props_at = node_at.child("properties");
    for (k, s) in props {
        if s.get("readOnly") == Some(&Value::Bool(true)) {
            continue;
        }
        out.push((
            k.clone(),
            cx.schemas.convert(s, &props_at.child(k), Dir::Input),
        ));
    }
    Some((out, required))
}

/// The success response's schema (wrapped when it is not an object) and its example.
fn success(
    cx: &mut Context<'_, '_>,
    op: &Value,
    op_at: &Place,
) -> Result<(Option<Value>, bool, Option<Value>), String> {
    let Some(responses) = op.get("responses").and_then(Value::as_object) else {
        return Ok((None, false, None));
    };
    let mut codes: Vec<&String> = responses.keys().filter(|k| k.starts_with('2')).collect();
    codes.sort();
    let Some(code) = codes.first() else {
        return Ok((None, false, None));
    };
    let at = op_at.child("responses").child(code);
    let (resp, resp_at) = match cx.schemas.src.deref(&responses[*code], &at) {
        Ok(x) => x,
        Err(e) => {
            cx.schemas.findings.push(super::convert::Finding {
                place: at,
                message: format!("{}; the tool has no result schema", ref_reason(&e)),
            });
            return Ok((None, false, None));
        }
    };
    let content = resp.get("content").cloned().unwrap_or(json!({}));
    let Ok(Some((media, m))) = json_media(&content) else {
        return Ok((None, false, None));
    };
    let Some(raw) = m.get("schema") else {
        return Ok((None, false, None));
    };
    let s_at = resp_at.child("content").child(media).child("schema");
    let schema = cx.schemas.convert(raw, &s_at, Dir::Output);
    let example = m.get("example").cloned().or_else(|| {
        m.get("examples")
            .and_then(Value::as_object)
            .and_then(|e| e.values().next())
            .and_then(|e| {
                cx.schemas
                    .src
                    .deref(e, &s_at)
                    .ok()
                    .and_then(|(e, _)| e.get("value").cloned())
            })
    });
    let wrap = !is_object_schema(cx, &schema);
    if wrap {
        let mut props = Map::new();
        props.insert("result".into(), schema);
        return Ok((
            Some(json!({"type": "object", "properties": props, "required": ["result"]})),
            true,
            example.map(|e| json!({"result": e})),
        ));
    }
    Ok((Some(schema), false, example))
}

/// The strings of the array at `key` of `v` (an OpenAPI `tags` or `required` list); none when
/// it is absent or not an array, and non-string items are left out.
fn strings_at(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
