//! Request variants of response-shaped schemas: UCP's `ucp_request` annotations (`omit`,
//! `optional`, `required`, or a map of operation to one of them) applied to a tool's input schema.
//! It never touches an output schema, nor a schema node that carries no annotation.
//!
//! UCP publishes one schema per resource (`checkout.json` is the checkout a business answers)
//! and marks, on each property, what a request of each operation (`create`, `update`,
//! `complete`, ...) must, may or must not send. The tool's input schema is the bundled param
//! schemas (one `$defs` of the tool's own), so the variant is made on that copy: an omitted
//! property leaves `properties` and `required`, an optional one leaves `required`, a required
//! one joins it; at every depth, through `$defs`, `allOf` and array items alike.

use serde_json::{Map, Value};

/// The annotation keyword.
const KEYWORD: &str = "ucp_request";

/// What a request of one operation does with a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    Omit,
    Optional,
    Required,
}

fn presence(word: &str) -> Option<Presence> {
    match word {
        "omit" => Some(Presence::Omit),
        "optional" => Some(Presence::Optional),
        "required" => Some(Presence::Required),
        _ => None,
    }
}

/// The presence an annotation gives `operation`: `None` when it says nothing of it.
fn decide(annotation: &Value, operation: &str) -> Option<Presence> {
    match annotation {
        Value::String(s) => presence(s),
        Value::Object(per_op) => per_op
            .get(operation)
            .and_then(Value::as_str)
            .and_then(presence),
        _ => None,
    }
}

/// The operation a tool's requests are, from its name: the word before the first `_`
/// (`create_checkout` -> `create`), when `schema` has annotations that name it.
pub fn operation_of<'n>(tool: &'n str, schema: &Value) -> Option<&'n str> {
    let word = tool.split('_').next().filter(|w| !w.is_empty())?;
    let mut named = false;
    visit(schema, &mut |a| {
        if let Value::Object(per_op) = a
            && per_op.contains_key(word)
        {
            named = true;
        }
    });
    named.then_some(word)
}

/// Whether `schema` carries any annotation.
pub fn annotated(schema: &Value) -> bool {
    let mut any = false;
    visit(schema, &mut |_| any = true);
    any
}

/// Calls `f` on every annotation in `schema`.
fn visit(schema: &Value, f: &mut impl FnMut(&Value)) {
    match schema {
        Value::Object(m) => {
            if let Some(a) = m.get(KEYWORD) {
                f(a);
            }
            m.values().for_each(|v| visit(v, f));
        }
        Value::Array(items) => items.iter().for_each(|v| visit(v, f)),
        _ => {}
    }
}

/// Makes `schema` the request variant for `operation`; returns how many properties changed.
pub fn apply(schema: &mut Value, operation: &str) -> usize {
    let mut changed = 0;
    walk(schema, operation, &mut changed);
    changed
}

fn walk(node: &mut Value, operation: &str, changed: &mut usize) {
    match node {
        Value::Object(m) => {
            adjust(m, operation, changed);
            m.values_mut().for_each(|v| walk(v, operation, changed));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, operation, changed)),
        _ => {}
    }
}

/// Applies the annotations of the properties of one object schema to it.
fn adjust(m: &mut Map<String, Value>, operation: &str, changed: &mut usize) {
    let Some(Value::Object(props)) = m.get_mut("properties") else {
        return;
    };
    let mut decided: Vec<(String, Presence)> = Vec::new();
    for (name, sub) in props.iter() {
        if let Some(p) = sub.get(KEYWORD).and_then(|a| decide(a, operation)) {
            decided.push((name.clone(), p));
        }
    }
    if decided.is_empty() {
        return;
    }
    for (name, p) in &decided {
        if *p == Presence::Omit {
            props.remove(name);
        }
    }
    let mut required: Vec<Value> = match m.remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    for (name, p) in &decided {
        let listed = required.iter().any(|r| r.as_str() == Some(name.as_str()));
        match p {
            Presence::Omit | Presence::Optional if listed => {
                required.retain(|r| r.as_str() != Some(name.as_str()));
                *changed += 1;
            }
            Presence::Required if !listed => {
                required.push(Value::String(name.clone()));
                *changed += 1;
            }
            Presence::Omit => *changed += 1,
            _ => {}
        }
    }
    if !required.is_empty() {
        m.insert("required".into(), Value::Array(required));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checkout() -> Value {
        json!({
            "type": "object",
            "required": ["id", "line_items", "status"],
            "properties": {
                "id": {"type": "string", "ucp_request": "omit"},
                "status": {"type": "string", "ucp_request": "omit"},
                "line_items": {"type": "array", "items": {"$ref": "#/$defs/line_item"},
                               "ucp_request": {"create": "required", "update": "required", "complete": "omit"}},
                "buyer": {"type": "object", "ucp_request": {"create": "optional", "complete": "required"}},
                "note": {"type": "string"}
            },
            "$defs": {"line_item": {
                "type": "object", "required": ["id", "quantity", "totals"],
                "properties": {
                    "id": {"type": "string", "ucp_request": {"create": "omit", "update": "optional"}},
                    "quantity": {"type": "integer"},
                    "totals": {"type": "array", "ucp_request": "omit"}
                }
            }}
        })
    }

    #[test]
    fn create_drops_what_the_business_assigns_at_every_depth() {
        let mut s = checkout();
        let n = apply(&mut s, "create");
        assert_eq!(s["required"], json!(["line_items"]));
        assert!(s["properties"].get("id").is_none() && s["properties"].get("status").is_none());
        assert!(s["properties"].get("buyer").is_some() && s["properties"].get("note").is_some());
        let li = &s["$defs"]["line_item"];
        assert_eq!(li["required"], json!(["quantity"]));
        assert!(li["properties"].get("id").is_none() && li["properties"].get("totals").is_none());
        assert_eq!(n, 4, "{s}");
    }

    #[test]
    fn each_operation_gets_its_own_variant() {
        let mut update = checkout();
        apply(&mut update, "update");
        let li = &update["$defs"]["line_item"];
        assert!(
            li["properties"].get("id").is_some(),
            "update may name a line"
        );
        assert_eq!(li["required"], json!(["quantity"]));
        let mut complete = checkout();
        apply(&mut complete, "complete");
        assert!(complete["properties"].get("line_items").is_none());
        assert_eq!(complete["required"], json!(["buyer"]));
        // An operation no annotation names: only the plain words apply.
        let mut cancel = checkout();
        apply(&mut cancel, "cancel");
        assert_eq!(cancel["required"], json!(["line_items"]));
        assert!(cancel["properties"].get("buyer").is_some());
    }

    #[test]
    fn the_operation_comes_from_the_tool_name_when_annotations_name_it() {
        let s = checkout();
        assert_eq!(operation_of("create_checkout", &s), Some("create"));
        assert_eq!(operation_of("complete_checkout", &s), Some("complete"));
        assert_eq!(operation_of("get_checkout", &s), None);
        assert!(annotated(&s));
        assert!(!annotated(
            &json!({"type": "object", "properties": {"a": {}}})
        ));
        let mut plain = json!({"type": "object", "required": ["a"], "properties": {"a": {}}});
        assert_eq!(apply(&mut plain, "create"), 0);
        assert_eq!(plain["required"], json!(["a"]));
    }
}
