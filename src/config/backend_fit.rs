//! `backend.openapi`, the placed params: whether a tool param's JSON Schema type fits the backend
//! parameter or body property it is placed into, and whether a placed header is one the operation
//! declares (did-you-mean, case-insensitive). It judges the schemas it is handed: it must never
//! open a document or resolve a `$ref`.

use crate::util::similar::nearest;
use serde_json::Value;
use std::collections::BTreeSet;

/// Where a placed value goes: in the URL or a header it travels as text, in a JSON body as itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Path,
    Query,
    Header,
    Body,
}

impl Wire {
    fn noun(self) -> &'static str {
        match self {
            Wire::Path => "path parameter",
            Wire::Query => "query parameter",
            Wire::Header => "header",
            Wire::Body => "body property",
        }
    }
}

/// One tool param placed into one backend parameter or body property, both schemas resolved.
pub struct Placement<'a> {
    /// The tool param.
    pub param: &'a str,
    pub tool: &'a Value,
    /// The backend parameter or body property.
    pub target: &'a str,
    pub backend: &'a Value,
    pub wire: Wire,
}

/// What is wrong, and the fix.
#[derive(Debug, PartialEq, Eq)]
pub struct Finding {
    pub error: bool,
    pub message: String,
    pub hint: String,
}

/// The JSON types a schema admits (`type`, else those of its `enum` or `const` values); `None`
/// when it does not say, so nothing can be judged. `null` is left out.
fn types(schema: &Value) -> Option<BTreeSet<&'static str>> {
    let name = |t: &str| -> Option<&'static str> {
        ["string", "integer", "number", "boolean", "object", "array"]
            .into_iter()
            .find(|k| *k == t)
    };
    let of_value = |v: &Value| -> Option<&'static str> {
        match v {
            Value::String(_) => Some("string"),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
            Value::Number(_) => Some("number"),
            Value::Bool(_) => Some("boolean"),
            Value::Object(_) => Some("object"),
            Value::Array(_) => Some("array"),
            Value::Null => None,
        }
    };
    let set: BTreeSet<&'static str> = match schema.get("type") {
        Some(Value::String(t)) => name(t).into_iter().collect(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter_map(name)
            .collect(),
        _ => match (schema.get("enum"), schema.get("const")) {
            (Some(Value::Array(vs)), _) => vs.iter().filter_map(of_value).collect(),
            (_, Some(v)) => of_value(v).into_iter().collect(),
            _ => BTreeSet::new(),
        },
    };
    (!set.is_empty()).then_some(set)
}

fn enum_of(schema: &Value) -> Option<&Vec<Value>> {
    schema.get("enum").and_then(Value::as_array)
}

fn format_of(schema: &Value) -> Option<&str> {
    schema.get("format").and_then(Value::as_str)
}

/// `a string (format date)`, `an integer`, `a string, one of BOOKED, CANCELLED`.
fn describe(schema: &Value, t: &BTreeSet<&str>) -> String {
    let mut out = t
        .iter()
        .map(|t| match *t {
            "integer" | "array" | "object" => format!("an {t}"),
            _ => format!("a {t}"),
        })
        .collect::<Vec<_>>()
        .join(" or ");
    if let Some(f) = format_of(schema) {
        out.push_str(&format!(" (format {f})"));
    }
    if let Some(e) = enum_of(schema) {
        let values: Vec<String> = e.iter().take(6).map(text_of).collect();
        out.push_str(&format!(", one of {}", values.join(", ")));
        if e.len() > 6 {
            out.push_str(", ...");
        }
    }
    out
}

/// A value as it travels in a URL or header (a string without its quotes).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a value of JSON type `t` is accepted where the backend's schema admits `b`.
fn accepts(t: &str, b: &BTreeSet<&str>, backend: &Value, wire: Wire) -> bool {
    if b.contains(t) || (t == "integer" && b.contains("number")) {
        return true;
    }
    // In a URL or a header a number or boolean travels as its text: a free-form string takes it,
    // a string restricted to an enum or a format does not (unless the enum holds such texts).
    wire != Wire::Body
        && b.contains("string")
        && matches!(t, "integer" | "number" | "boolean")
        && format_of(backend).is_none()
        && backend.get("pattern").is_none()
        && enum_of(backend).is_none_or(|e| {
            e.iter().any(|v| {
                v.as_str().is_some_and(|s| match t {
                    "boolean" => s == "true" || s == "false",
                    _ => s.parse::<f64>().is_ok(),
                })
            })
        })
}

/// The finding for one placement, if the tool param's schema does not fit the backend's.
pub fn judge(p: &Placement<'_>, operation: &str, document: &str) -> Option<Finding> {
    let (Some(t), Some(b)) = (types(p.tool), types(p.backend)) else {
        return None;
    };
    let where_ = format!(
        "{} `{}` of `{operation}` in {document}",
        p.wire.noun(),
        p.target
    );
    let declare = format!(
        "declare `{}` as {} in the OpenRPC document (a `schema_patches` entry changes a published one), so the agent is asked for what the backend takes",
        p.param,
        describe(p.backend, &b)
    );
    let misfit: Vec<&str> = t
        .iter()
        .copied()
        .filter(|t| !accepts(t, &b, p.backend, p.wire))
        .collect();
    if !misfit.is_empty() {
        return Some(Finding {
            error: true,
            message: format!(
                "param `{}` is {}, but the {where_} takes {}",
                p.param,
                describe(p.tool, &t),
                describe(p.backend, &b)
            ),
            hint: declare,
        });
    }
    if let (Some(te), Some(be)) = (enum_of(p.tool), enum_of(p.backend)) {
        let taken: BTreeSet<String> = be.iter().map(text_of).collect();
        // `null` is a JSON value, not a text the backend's enum lists (OpenAPI 3.0 says
        // `nullable` beside it).
        let refused: Vec<String> = te
            .iter()
            .filter(|v| !v.is_null())
            .map(text_of)
            .filter(|v| !taken.contains(v))
            .collect();
        if !refused.is_empty() {
            let guesses: Vec<String> = refused
                .iter()
                .filter_map(|v| {
                    nearest(v, taken.iter().map(String::as_str))
                        .map(|g| format!("`{g}` (not `{v}`)"))
                })
                .collect();
            return Some(Finding {
                error: true,
                message: format!(
                    "param `{}` allows {}, which the {where_} does not take (it takes {})",
                    p.param,
                    refused.join(", "),
                    taken.into_iter().collect::<Vec<_>>().join(", ")
                ),
                hint: if guesses.is_empty() {
                    declare
                } else {
                    format!("did you mean {}?", guesses.join(", "))
                },
            });
        }
    }
    if let (Some(tf), Some(bf)) = (format_of(p.tool), format_of(p.backend))
        && tf != bf
        && t.contains("string")
    {
        return Some(Finding {
            error: false,
            message: format!(
                "param `{}` has format {tf}, but the {where_} takes format {bf}",
                p.param
            ),
            hint: declare,
        });
    }
    None
}

/// The finding for a header the mapping sends to an operation that does not declare it (names
/// compared case-insensitively): an error with a did-you-mean when a declared one is near, else
/// a warning. Headers HTTP itself defines are never reported.
pub fn header(name: &str, declared: &[String], operation: &str, document: &str) -> Option<Finding> {
    const HTTP_OWN: &[&str] = &[
        "accept",
        "content-type",
        "authorization",
        "user-agent",
        "if-match",
        "if-none-match",
        "cache-control",
    ];
    let lower = name.to_ascii_lowercase();
    if HTTP_OWN.contains(&lower.as_str()) || declared.iter().any(|d| d.eq_ignore_ascii_case(name)) {
        return None;
    }
    let folded: Vec<String> = declared.iter().map(|d| d.to_ascii_lowercase()).collect();
    let near = nearest(&lower, folded.iter().map(String::as_str))
        .and_then(|g| declared.iter().find(|d| d.eq_ignore_ascii_case(g)));
    let message =
        format!("header `{name}` is not a header parameter of `{operation}` in {document}");
    Some(match near {
        Some(g) => Finding {
            error: true,
            message,
            hint: format!("did you mean `{g}`?"),
        },
        None => Finding {
            error: false,
            message,
            hint: if declared.is_empty() {
                "the operation declares no header parameters; the backend may ignore it".to_string()
            } else {
                format!(
                    "its header parameters: {}; the backend may ignore this one",
                    declared.join(", ")
                )
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place<'a>(tool: &'a Value, backend: &'a Value, wire: Wire) -> Placement<'a> {
        Placement {
            param: "p",
            tool,
            target: "q",
            backend,
            wire,
        }
    }

    #[test]
    fn types_fit_by_wire() {
        let int = json!({"type": "integer"});
        let text = json!({"type": "string"});
        let day = json!({"type": "string", "format": "date"});
        let states = json!({"type": "string", "enum": ["open", "closed"]});
        let numbers = json!({"enum": ["1", "2"]});
        // A number travels as text in a URL: a free string takes it, a dated one does not.
        assert!(judge(&place(&int, &text, Wire::Query), "GET /x", "d").is_none());
        assert!(judge(&place(&int, &day, Wire::Query), "GET /x", "d").is_some_and(|f| f.error));
        assert!(judge(&place(&int, &states, Wire::Path), "GET /x", "d").is_some_and(|f| f.error));
        assert!(judge(&place(&int, &numbers, Wire::Query), "GET /x", "d").is_none());
        // A JSON body keeps types.
        assert!(judge(&place(&int, &text, Wire::Body), "POST /x", "d").is_some_and(|f| f.error));
        assert!(judge(&place(&text, &int, Wire::Path), "GET /x", "d").is_some_and(|f| f.error));
        assert!(
            judge(
                &place(&int, &json!({"type": "number"}), Wire::Body),
                "POST /x",
                "d"
            )
            .is_none()
        );
        // Unknown types judge nothing.
        assert!(judge(&place(&json!({}), &int, Wire::Body), "POST /x", "d").is_none());
    }

    #[test]
    fn enums_and_formats() {
        let tool = json!({"type": "string", "enum": ["open", "closd"]});
        let backend = json!({"type": "string", "enum": ["open", "closed"]});
        let f = judge(&place(&tool, &backend, Wire::Query), "GET /x", "d").unwrap();
        assert!(f.error);
        assert_eq!(f.hint, "did you mean `closed` (not `closd`)?");
        // A nullable param's `null` is no enum text.
        let nullable = json!({"type": ["string", "null"], "enum": ["open", null]});
        assert!(judge(&place(&nullable, &backend, Wire::Body), "POST /x", "d").is_none());
        let f = judge(
            &place(
                &json!({"type": "string", "format": "date"}),
                &json!({"type": "string", "format": "date-time"}),
                Wire::Query,
            ),
            "GET /x",
            "d",
        )
        .unwrap();
        assert!(!f.error);
    }

    #[test]
    fn headers_compare_case_insensitively() {
        let declared = vec!["X-Api-Version".to_string()];
        assert!(header("x-api-version", &declared, "GET /x", "d").is_none());
        assert!(header("Accept", &declared, "GET /x", "d").is_none());
        let f = header("X-Api-Versoin", &declared, "GET /x", "d").unwrap();
        assert!(f.error);
        assert_eq!(f.hint, "did you mean `X-Api-Version`?");
        let f = header("X-Trace", &declared, "GET /x", "d").unwrap();
        assert!(!f.error);
    }
}
