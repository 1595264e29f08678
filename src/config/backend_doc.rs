//! `backend.openapi`: a mapping checked against its backend's OpenAPI document at load, so that
//! a tool whose method and path the backend lacks, a query parameter it does not take, or a field
//! a transform reads that its answer never has is refused before any call, with a did-you-mean.
//! It only reads the documents (remote `$ref`s are never fetched) and never changes a tool.

use super::backend_fit;
use super::backend_ops::{
    Op, norm, operations, params_in, query_names, security_headers, success_schema, url_path,
};
use super::backend_place::{Tool, column, placed};
use super::diag::{Diagnostic, locate_yaml};
use super::mapping::MappingFile;
use super::openrpc::Document;
use crate::init::source::{Place, Sources};
use crate::util::similar::nearest;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

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
