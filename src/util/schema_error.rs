//! The place a JSON Schema refusal is really about: for `anyOf` / `oneOf` failures, the deepest
//! error of the closest branch rather than the root keyword. A leaf: it must never import from
//! the rest of the crate, and it never quotes the instance (it may hold personal data).

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;

/// Where a refusal is, and why, in words safe to log and to return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// JSON pointer into the instance (`/` for the root).
    pub at: String,
    /// JSON pointer into the schema.
    pub rule: String,
    /// The failing keyword, with the missing property for `required`.
    pub why: String,
}

fn depth(e: &ValidationError<'_>) -> usize {
    let own = e.instance_path().to_string().matches('/').count();
    match e.kind() {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            context
                .iter()
                .flat_map(|b| b.iter().map(depth))
                .max()
                .unwrap_or(own)
                .max(own)
        }
        _ => own,
    }
}

/// The deepest error below `e`: through the branch of each `anyOf` / `oneOf` that got furthest
/// (deepest instance path; fewest errors on a tie).
pub fn deepest<'a, 'b>(e: &'a ValidationError<'b>) -> &'a ValidationError<'b> {
    match e.kind() {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            let best = context.iter().filter(|b| !b.is_empty()).max_by(|a, b| {
                let da = a.iter().map(depth).max().unwrap_or(0);
                let db = b.iter().map(depth).max().unwrap_or(0);
                da.cmp(&db).then(b.len().cmp(&a.len()))
            });
            match best.and_then(|b| b.iter().max_by_key(|x| depth(x))) {
                Some(inner) => deepest(inner),
                None => e,
            }
        }
        _ => e,
    }
}

/// The refusal `e` stands for, described from its deepest error.
pub fn describe(e: &ValidationError<'_>) -> Refusal {
    let d = deepest(e);
    let at = d.instance_path().to_string();
    let why = match d.kind() {
        ValidationErrorKind::Required { property } => {
            format!("required property {property} is missing")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("unexpected properties {}", unexpected.join(", "))
        }
        k => format!("`{}` does not hold", k.keyword()),
    };
    Refusal {
        at: if at.is_empty() { "/".into() } else { at },
        rule: d.schema_path().to_string(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_any_of_refusal_names_the_closest_branch_s_deepest_error() {
        let schema = json!({
            "type": "object",
            "anyOf": [
                { "properties": { "ucp": { "type": "object", "required": ["payment_handlers"] } }, "required": ["ucp"] },
                { "required": ["messages"] }
            ]
        });
        let v = jsonschema::validator_for(&schema).unwrap();
        let inst = json!({ "ucp": { "version": "1" } });
        let err = v.iter_errors(&inst).next().unwrap();
        let r = describe(&err);
        assert_eq!(r.at, "/ucp");
        assert_eq!(r.why, "required property \"payment_handlers\" is missing");
        assert!(r.rule.ends_with("/required"), "{}", r.rule);
    }
}
