//! `backend.openapi`, the placed params of one tool: gathers each placement (path placeholder,
//! `query:` and `headers:` value, default body) with both schemas resolved and reports what
//! `backend_fit` finds at the placement's line and column. It never changes a tool.

use super::backend_fit::{self, Placement, Wire};
use super::backend_ops::{Op, body_properties, params_in};
use super::diag::{Diagnostic, locate_yaml};
use super::mapping::ToolSpec;
use super::openrpc::Document;
use crate::init::source::Sources;
use serde_json::Value;
use std::path::Path;

/// The schema of tool param `name`: the mapping's own `input_schema`, else the OpenRPC
/// method's param, with the document's local `$ref`s followed.
pub(super) fn tool_param(
    doc: Option<&Document>,
    ts: &ToolSpec,
    tool: &str,
    name: &str,
) -> Option<Value> {
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
pub(super) fn simple_read(program: &str) -> Option<&str> {
    let p = program.trim();
    let name = p.strip_prefix("$args.").or_else(|| p.strip_prefix('.'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(name)
}

/// 1-based column of `needle` on line `line` of `text`, where it starts a word (not preceded by
/// a letter, digit, `_` or `-`).
pub(super) fn column(text: &str, line: Option<usize>, needle: &str) -> Option<u16> {
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

/// One tool as `placed` reads it.
pub(super) struct Tool<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) name: &'a str,
    pub(super) spec: &'a ToolSpec,
    /// The path of its `http:`.
    pub(super) path: &'a str,
    pub(super) doc: Option<&'a Document>,
    /// `backend.openapi` as written.
    pub(super) rel: &'a str,
}

/// The headers a tool places that `op` does not declare, and every placed param whose type does
/// not fit the parameter or body property it goes into.
pub(super) fn placed(
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
