//! A tool's `input_schema:` written in the mapping (root `type: object`, local `$ref`s only) and
//! its `mcp_headers:` (SEP-2243 `x-mcp-header` annotations), checked before they are served.
//! It must never fetch or resolve a reference: a served schema names nothing outside itself.

use super::diag::Diagnostic;
use indexmap::IndexMap;
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

/// Annotates the params a tool's `mcp_headers:` names with `x-mcp-header` (SEP-2243), and
/// lists every annotated top-level property of `schema` as (argument, header name).
pub fn mcp_headers(
    mut schema: Value,
    written: &IndexMap<String, String>,
    file: &Path,
    line: Option<usize>,
    at: &str,
    diags: &mut Vec<Diagnostic>,
) -> (Value, Vec<(String, String)>) {
    let at = format!("{at}.mcp_headers");
    for (param, header) in written {
        match schema.get_mut("properties").and_then(|p| p.get_mut(param)) {
            Some(Value::Object(p)) => {
                p.insert("x-mcp-header".into(), Value::String(header.clone()));
            }
            _ => diags.push(
                Diagnostic::error(file, format!("`{param}` is not a param of the tool"))
                    .line(line)
                    .at(format!("{at}.{param}"))
                    .hint("name a top-level property of the tool's inputSchema"),
            ),
        }
    }
    let list: Vec<(String, String)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter_map(|(k, v)| {
                    let h = v.get("x-mcp-header").and_then(Value::as_str)?;
                    Some((k.clone(), h.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    // SEP-2243: a header name is a token (here: ASCII letters, digits, `-`), and only integer,
    // string and boolean properties carry one (clients drop other tools).
    for (param, header) in &list {
        if header.is_empty()
            || !header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("`{header}` cannot end an `Mcp-Param-` header name"),
                )
                .line(line)
                .at(format!("{at}.{param}"))
                .hint("use ASCII letters, digits and `-`, e.g. `Region`"),
            );
        }
        let ty = schema
            .pointer(&format!(
                "/properties/{}",
                param.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        if !matches!(ty, Some("integer" | "string" | "boolean")) {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("`{param}` carries `x-mcp-header` but is not of type integer, string or boolean"),
                )
                .line(line)
                .at(format!("{at}.{param}"))
                .hint("SEP-2243 mirrors only integer, string and boolean params into headers"),
            );
        }
    }
    let mut names: Vec<String> = list.iter().map(|(_, h)| h.to_ascii_lowercase()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        diags.push(
            Diagnostic::error(
                file,
                "two params share one `Mcp-Param-` header (names are case-insensitive)",
            )
            .line(line)
            .at(at),
        );
    }
    (schema, list)
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

    #[test]
    fn mcp_headers_annotate_params_and_are_listed() {
        let mut d = Vec::new();
        let schema = json!({"type": "object", "properties": {"region": {"type": "string"}, "n": {"type": "integer", "x-mcp-header": "N"}}});
        let written: IndexMap<String, String> =
            [("region".to_string(), "Region".to_string())].into();
        let (s, list) = mcp_headers(
            schema.clone(),
            &written,
            Path::new("m.yaml"),
            None,
            "tools.t",
            &mut d,
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(s["properties"]["region"]["x-mcp-header"], "Region");
        assert_eq!(
            list,
            [("n".into(), "N".into()), ("region".into(), "Region".into())]
        );
        let bad: IndexMap<String, String> = [
            ("nope".to_string(), "X".to_string()),
            ("region".to_string(), "Bad Name".to_string()),
        ]
        .into();
        mcp_headers(schema, &bad, Path::new("m.yaml"), None, "tools.t", &mut d);
        assert_eq!(d.len(), 2, "{d:?}");
        d.clear();
        let object =
            json!({"type": "object", "properties": {"o": {"type": "object", "x-mcp-header": "O"}}});
        mcp_headers(
            object,
            &IndexMap::new(),
            Path::new("m.yaml"),
            None,
            "tools.t",
            &mut d,
        );
        assert_eq!(d.len(), 1, "{d:?}");
    }
}
