//! Load-time check that a UCP tool's result envelope (`ucp`: version and registries) satisfies
//! the `ucp` member of the tool's own output schema, so a configuration that could never answer
//! validly is refused by `check` instead of failing every call.
//! It never changes a schema or an envelope; it only reads them.

use super::diag::Diagnostic;
use serde_json::{Value, json};

/// The schema of the `ucp` member of successful results, found from `start` (the success branch
/// of the bundled output schema `root`) through local `$ref`s and `allOf`/`anyOf`/`oneOf`, with
/// the root's `$defs`.
fn ucp_member_schema(root: &Value, start: &Value) -> Option<Value> {
    fn find<'a>(root: &'a Value, node: &'a Value, depth: usize) -> Option<&'a Value> {
        if depth > 32 {
            return None;
        }
        if let Some(ucp) = node.get("properties").and_then(|p| p.get("ucp")) {
            return Some(ucp);
        }
        if let Some(target) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| root.pointer(p))
            && let Some(found) = find(root, target, depth + 1)
        {
            return Some(found);
        }
        ["allOf", "anyOf", "oneOf"]
            .iter()
            .filter_map(|k| node.get(*k).and_then(Value::as_array))
            .flatten()
            .find_map(|n| find(root, n, depth + 1))
    }
    let node = find(root, start, 0)?;
    let mut schema = match node {
        Value::Object(m) => m.clone(),
        Value::Bool(b) => return Some(Value::Bool(*b)),
        _ => return None,
    };
    if let Some(defs) = root.get("$defs") {
        schema.insert("$defs".into(), defs.clone());
    }
    Some(Value::Object(schema))
}

/// Why `envelope` does not fit the `ucp` member of `output_schema`'s success branch (at
/// `success`, a JSON pointer: the binding adds its error shape as a second `anyOf` branch): one
/// line per violation (at most five), or nothing when it fits or the schema says nothing of `ucp`.
pub fn violations(output_schema: &Value, success: &str, envelope: &Value) -> Vec<String> {
    let Some(start) = output_schema.pointer(success) else {
        return Vec::new();
    };
    let Some(schema) = ucp_member_schema(output_schema, start) else {
        return Vec::new();
    };
    let Ok(validator) = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
    else {
        return Vec::new();
    };
    validator
        .iter_errors(envelope)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("{e} (at `ucp{}`)", at.trim_end_matches('/'))
        })
        .collect()
}

/// The diagnostic for a tool whose envelope does not fit, pointing at `protocol`.
pub fn diagnostic(
    file: &std::path::Path,
    line: Option<usize>,
    tool: &str,
    problems: &[String],
) -> Diagnostic {
    Diagnostic::error(
        file,
        format!(
            "the `ucp` envelope of `{tool}` results does not satisfy the tool's output schema: {}",
            problems.join("; ")
        ),
    )
    .line(line)
    .at("protocol.ucp")
    .hint(format!(
        "declare the business's registries under `protocol.ucp` as its /.well-known/ucp profile does, e.g. {}",
        json!({"payment_handlers": {"com.example.pay": [{"id": "handler_1", "version": "2026-01-11"}]}})
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ucp_member_is_found_through_refs_and_combinators() {
        let out = json!({
            "type": "object",
            "anyOf": [{"$ref": "#/$defs/checkout"}, {"type": "object"}],
            "$defs": {
                "checkout": {"allOf": [{"properties": {"ucp": {"$ref": "#/$defs/meta"}}}]},
                "meta": {"type": "object", "required": ["version", "payment_handlers"]}
            }
        });
        let ok = json!({"version": "v", "payment_handlers": {}});
        assert!(violations(&out, "/anyOf/0", &ok).is_empty());
        let v = violations(&out, "/anyOf/0", &json!({"version": "v"}));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("payment_handlers"), "{v:?}");
        // Only the success branch counts: an error branch's `ucp` is not the success envelope.
        let errors_only = json!({"anyOf": [{"type": "object"},
            {"properties": {"ucp": {"required": ["status"]}}}]});
        assert!(violations(&errors_only, "/anyOf/0", &ok).is_empty());
        assert!(violations(&json!({"type": "object"}), "", &json!(1)).is_empty());
    }
}
