//! A tool's `input_schema:` written in the mapping: the checks it must pass before it is served
//! as the tool's `inputSchema` (root `type: object`, local `$ref`s only).
//! It must never fetch or resolve a reference: a served schema names nothing outside itself.

use super::diag::Diagnostic;
use serde_json::Value;
use std::path::Path;

/// Pushes one diagnostic per problem of `schema` (at `at`, line `line` of `file`).
pub fn check(
    schema: &Value,
    file: &Path,
    line: Option<usize>,
    at: &str,
    diags: &mut Vec<Diagnostic>,
) {
    let at = format!("{at}.input_schema");
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        diags.push(
            Diagnostic::error(
                file,
                "an `input_schema` must have `type: object` at its root (MCP)",
            )
            .line(line)
            .at(at.clone())
            .hint("add `type: object` to the schema's root"),
        );
    }
    let mut refs = Vec::new();
    non_local_refs(schema, &mut refs);
    for r in refs {
        diags.push(
            Diagnostic::error(
                file,
                format!("`$ref: {r}` in an `input_schema` is not a local reference"),
            )
            .line(line)
            .at(at.clone())
            .hint("put the referenced schema under `$defs` and refer to it as `#/$defs/NAME`"),
        );
    }
}

/// Every `$ref` of `node` that does not start with `#`.
fn non_local_refs(node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(obj) => {
            for (k, v) in obj {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) if !r.starts_with('#') => out.push(r.clone()),
                    _ => non_local_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| non_local_refs(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_type_and_local_refs() {
        let mut d = Vec::new();
        let ok = json!({"type": "object", "$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}});
        check(&ok, Path::new("m.yaml"), Some(3), "tools.t", &mut d);
        assert!(d.is_empty(), "{d:?}");
        let bad = json!({"type": "array", "items": {"$ref": "https://example.com/s.json"}});
        check(&bad, Path::new("m.yaml"), Some(3), "tools.t", &mut d);
        assert_eq!(d.len(), 2, "{d:?}");
    }
}
