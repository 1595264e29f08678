//! Schema patches (`schema_patches:`): RFC 6902-like `add`/`replace`/`remove` operations, by JSON
//! pointer, on a tool's bundled param or result schema at load. It never edits a published file.
//!
//! Hand-written rather than `json-patch`: a pointer here is relative to one param's (or the
//! result's) schema and crosses `$ref`s into the tool's bundled `$defs` (a published param is
//! usually nothing but a `$ref`), which a plain RFC 6902 document patch cannot express. Once the
//! pointer is resolved to a concrete location in the bundled schema, the operation itself is
//! RFC 6902's: `add` sets an object member or inserts into an array (`-` appends), `replace`
//! needs the location to exist, `remove` deletes it.

use std::path::Path;

use serde_json::Value;

use super::diag::{Diagnostic, locate_yaml, locate_yaml_item};
pub use super::mapping::PatchOp;
use super::mapping::SchemaPatchSpec;

/// Where the patches of one tool are written.
pub struct PatchCtx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub tool: &'a str,
    /// The tool's `input_schema:` is written (served as written, never patched).
    pub written_input: bool,
}

/// What a patch applies to: the input schema's params, or the output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Params,
    Result,
}

/// Applies, in order, the patches of `specs` that target `side` to `schema` (`result_base`: the
/// pointer of the result's own schema within the output schema). Returns one note per applied
/// patch; a patch that does not apply (or names no param) is an error diagnostic. `Null` for
/// `schema` on the result side: the method has no result.
pub fn apply_all(
    cx: &PatchCtx<'_>,
    specs: &[SchemaPatchSpec],
    side: Side,
    schema: &mut Value,
    result_base: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let key_line = locate_yaml(cx.text, &["tools", cx.tool, "schema_patches"]);
    let here = |i: usize| format!("tools.{}.schema_patches[{i}]", cx.tool);
    let mut notes = Vec::new();
    for (i, p) in specs.iter().enumerate() {
        let line = key_line.map(|l| locate_yaml_item(cx.text, l, i));
        let base = match (side, p.target.as_str()) {
            (Side::Result, "result") if !schema.is_null() => result_base.to_string(),
            (Side::Params, t) if t.starts_with("params.") && cx.written_input => {
                diags.push(
                    Diagnostic::error(
                        cx.file,
                        format!(
                            "schema patch of `{}`: `{t}` with a written `input_schema`",
                            cx.tool
                        ),
                    )
                    .line(line)
                    .at(here(i))
                    .hint("a written `input_schema` is served as written: change it there"),
                );
                continue;
            }
            (Side::Result, "result") => {
                diags.push(
                    Diagnostic::error(
                        cx.file,
                        format!("schema patch of `{}`: the method has no result", cx.tool),
                    )
                    .line(line)
                    .at(here(i))
                    .hint("target `params.<name>`, or drop the patch"),
                );
                continue;
            }
            (Side::Params, t) if t.starts_with("params.") => {
                let name = &t["params.".len()..];
                let base = format!("/properties/{}", escape(name));
                if schema.pointer(&base).is_none() {
                    let names: Vec<&str> = schema
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    diags.push(
                        Diagnostic::error(
                            cx.file,
                            format!("schema patch of `{}`: no param `{name}`", cx.tool),
                        )
                        .line(line)
                        .at(here(i))
                        .hint(format!("the params are: {}", names.join(", "))),
                    );
                    continue;
                }
                base
            }
            (Side::Params, "result") | (Side::Result, _) => continue,
            (Side::Params, t) => {
                diags.push(
                    Diagnostic::error(
                        cx.file,
                        format!("schema patch of `{}`: unknown target `{t}`", cx.tool),
                    )
                    .line(line)
                    .at(here(i))
                    .hint("write `params.<name>` or `result`"),
                );
                continue;
            }
        };
        match apply(schema, &base, p.op, &p.pointer, p.value.as_ref()) {
            Ok(()) => notes.push(format!(
                "tool `{}` patches its `{}` schema: {} `{}` (schema_patches[{i}])",
                cx.tool,
                p.target,
                op_word(p.op),
                if p.pointer.is_empty() { "" } else { &p.pointer }
            )),
            Err(e) => diags.push(
                Diagnostic::error(
                    cx.file,
                    format!(
                        "schema patch of `{}`: pointer `{}` into `{}` {e}",
                        cx.tool, p.pointer, p.target
                    ),
                )
                .line(line)
                .at(here(i))
                .hint(
                    "the pointer is read from the target's schema as the OpenRPC file (and its \
                     `$ref`s) gives it: a `$ref` is followed where the next token is not beside it",
                ),
            ),
        }
    }
    notes
}

fn op_word(op: PatchOp) -> &'static str {
    match op {
        PatchOp::Add => "add",
        PatchOp::Replace => "replace",
        PatchOp::Remove => "remove",
    }
}

/// Why a patch does not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// The pointer is not a JSON pointer (`""` or `/...`).
    Syntax,
    /// The prefix `resolved` of the pointer resolves; `missing` (the next token) does not.
    Unresolved { resolved: String, missing: String },
    /// `add`/`replace` without `value`.
    NoValue,
    /// `remove` of the whole schema.
    WholeSchema,
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatchError::Syntax => write!(f, "is not a JSON pointer (it must start with `/`)"),
            PatchError::Unresolved { resolved, missing } => write!(
                f,
                "does not resolve: `{}` has no `{missing}`",
                if resolved.is_empty() { "/" } else { resolved }
            ),
            PatchError::NoValue => write!(f, "needs a `value` for this op"),
            PatchError::WholeSchema => write!(f, "cannot `remove` the whole schema"),
        }
    }
}

/// Unescapes one reference token (`~1` -> `/`, `~0` -> `~`).
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The concrete pointer (from the root of `root`) of `pointer` read from `base`, following a
/// local `$ref` (`#/...`) whenever the current node lacks the next token. With `parent_only`,
/// the last token need not exist (an `add`).
fn resolve(
    root: &Value,
    base: &str,
    pointer: &str,
    parent_only: bool,
) -> Result<String, PatchError> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(PatchError::Syntax);
    }
    let tokens: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    let mut at = base.to_string();
    let mut walked = String::new();
    for (i, token) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        // Hop through `$ref`s until the node has the token (bounded: a ref cycle ends it).
        for _ in 0..32 {
            let node = root.pointer(&at);
            let has = match node {
                Some(Value::Object(m)) => m.contains_key(token),
                Some(Value::Array(a)) => token.parse::<usize>().is_ok_and(|n| n < a.len()),
                _ => false,
            };
            if has || (last && parent_only && node.is_some_and(|n| n.is_object() || n.is_array())) {
                break;
            }
            match node
                .and_then(|n| n.get("$ref"))
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
            {
                Some(target) if root.pointer(target).is_some() => at = target.to_string(),
                _ => {
                    return Err(PatchError::Unresolved {
                        resolved: walked,
                        missing: token.clone(),
                    });
                }
            }
        }
        at = format!("{at}/{}", escape(token));
        walked = format!("{walked}/{}", escape(token));
    }
    Ok(at)
}

/// Applies one operation to `root` at `pointer`, read from `base` (the pointer of the param's or
/// result's schema within `root`).
pub fn apply(
    root: &mut Value,
    base: &str,
    op: PatchOp,
    pointer: &str,
    value: Option<&Value>,
) -> Result<(), PatchError> {
    let value = match (op, value) {
        (PatchOp::Remove, _) => None,
        (_, Some(v)) => Some(v.clone()),
        (_, None) => return Err(PatchError::NoValue),
    };
    let at = resolve(root, base, pointer, op == PatchOp::Add)?;
    if at == base || at.is_empty() {
        return match (op, value) {
            (PatchOp::Remove, _) => Err(PatchError::WholeSchema),
            (_, Some(v)) => {
                if let Some(slot) = root.pointer_mut(&at) {
                    *slot = v;
                }
                Ok(())
            }
            (_, None) => Err(PatchError::NoValue),
        };
    }
    let (parent, last) = match at.rsplit_once('/') {
        Some((p, l)) => (p.to_string(), unescape(l)),
        None => return Err(PatchError::Syntax),
    };
    let unresolved = || PatchError::Unresolved {
        resolved: pointer
            .rsplit_once('/')
            .map(|(p, _)| p)
            .unwrap_or("")
            .into(),
        missing: last.clone(),
    };
    match root.pointer_mut(&parent) {
        Some(Value::Object(m)) => match (op, value) {
            (PatchOp::Remove, _) => m.remove(&last).map(|_| ()).ok_or_else(unresolved),
            (PatchOp::Replace, Some(v)) if m.contains_key(&last) => {
                m.insert(last.clone(), v);
                Ok(())
            }
            (PatchOp::Add, Some(v)) => {
                m.insert(last.clone(), v);
                Ok(())
            }
            _ => Err(unresolved()),
        },
        Some(Value::Array(a)) => {
            let index = if last == "-" && op == PatchOp::Add {
                Some(a.len())
            } else {
                last.parse::<usize>().ok()
            };
            match (op, value, index) {
                (PatchOp::Add, Some(v), Some(n)) if n <= a.len() => {
                    a.insert(n, v);
                    Ok(())
                }
                (PatchOp::Replace, Some(v), Some(n)) if n < a.len() => {
                    a[n] = v;
                    Ok(())
                }
                (PatchOp::Remove, _, Some(n)) if n < a.len() => {
                    a.remove(n);
                    Ok(())
                }
                _ => Err(unresolved()),
            }
        }
        _ => Err(unresolved()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {"checkout": {"$ref": "#/$defs/c", "description": "d"}},
            "$defs": {"c": {"type": "object", "required": ["id", "note"],
                            "properties": {"id": {"type": "string"}, "note": {"type": "string"}}}}
        })
    }

    #[test]
    fn a_pointer_crosses_refs_into_the_bundled_defs() {
        let mut s = schema();
        let base = "/properties/checkout";
        apply(
            &mut s,
            base,
            PatchOp::Replace,
            "/properties/note",
            Some(&json!({"type": "integer"})),
        )
        .unwrap();
        assert_eq!(
            s["$defs"]["c"]["properties"]["note"],
            json!({"type": "integer"})
        );
        apply(
            &mut s,
            base,
            PatchOp::Add,
            "/properties/gift",
            Some(&json!({"type": "boolean"})),
        )
        .unwrap();
        assert_eq!(s["$defs"]["c"]["properties"]["gift"]["type"], "boolean");
        apply(&mut s, base, PatchOp::Remove, "/required/1", None).unwrap();
        assert_eq!(s["$defs"]["c"]["required"], json!(["id"]));
        apply(
            &mut s,
            base,
            PatchOp::Add,
            "/required/-",
            Some(&json!("gift")),
        )
        .unwrap();
        assert_eq!(s["$defs"]["c"]["required"], json!(["id", "gift"]));
        // A member of the node itself is found before the `$ref` is followed.
        apply(
            &mut s,
            base,
            PatchOp::Replace,
            "/description",
            Some(&json!("new")),
        )
        .unwrap();
        assert_eq!(s["properties"]["checkout"]["description"], "new");
    }

    #[test]
    fn what_does_not_resolve_says_where_it_stops() {
        let mut s = schema();
        let before = s.clone();
        let base = "/properties/checkout";
        let e = apply(
            &mut s,
            base,
            PatchOp::Replace,
            "/properties/nope/type",
            Some(&json!(1)),
        );
        assert_eq!(
            e,
            Err(PatchError::Unresolved {
                resolved: "/properties".into(),
                missing: "nope".into()
            })
        );
        assert_eq!(
            apply(
                &mut s,
                base,
                PatchOp::Replace,
                "/properties/gift",
                Some(&json!(1))
            )
            .map_err(|e| e.to_string()),
            Err("does not resolve: `/properties` has no `gift`".into())
        );
        assert!(apply(&mut s, base, PatchOp::Remove, "/required/7", None).is_err());
        assert_eq!(
            apply(&mut s, base, PatchOp::Add, "properties", Some(&json!(1))),
            Err(PatchError::Syntax)
        );
        assert_eq!(
            apply(&mut s, base, PatchOp::Add, "/x", None),
            Err(PatchError::NoValue)
        );
        assert_eq!(
            apply(&mut s, base, PatchOp::Remove, "", None),
            Err(PatchError::WholeSchema)
        );
        assert_eq!(s, before, "a failed patch changes nothing");
    }

    #[test]
    fn an_empty_pointer_replaces_the_whole_schema() {
        let mut s = schema();
        apply(
            &mut s,
            "/properties/checkout",
            PatchOp::Replace,
            "",
            Some(&json!({"type": "string"})),
        )
        .unwrap();
        assert_eq!(s["properties"]["checkout"], json!({"type": "string"}));
    }
}
