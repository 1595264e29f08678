//! Resource URI templates such as `test://template/{id}/data` (RFC 6570 level 1), compiled at load.
//! Matching never lets a variable span `/`, `?` or `#`; values are percent-decoded here and must
//! then go through `translate::path`, never straight into a backend URL.

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var(String),
}

/// A compiled URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `scheme://literal/{var}/literal`. Two variables must be separated by a literal.
    pub fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let (lit, after) = rest.split_at(open);
            if !lit.is_empty() {
                parts.push(Part::Literal(lit.to_string()));
            } else if matches!(parts.last(), Some(Part::Var(_))) {
                return Err(format!(
                    "URI template `{template}`: two variables need a literal between them"
                ));
            }
            let close = after
                .find('}')
                .ok_or_else(|| format!("URI template `{template}` has an unclosed `{{`"))?;
            let name = &after[1..close];
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "URI template `{template}` has an invalid variable `{{{name}}}`: use `{{name}}` (letters, digits, `_`, `-`)"
                ));
            }
            if parts.iter().any(|p| matches!(p, Part::Var(v) if v == name)) {
                return Err(format!("URI template `{template}` uses `{{{name}}}` twice"));
            }
            parts.push(Part::Var(name.to_string()));
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("URI template `{template}` has a stray `}}`"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(UriTemplate { parts })
    }

    /// True when the template has at least one variable.
    pub fn is_template(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Var(_)))
    }

    /// Variable names, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Matches a concrete URI: each variable takes a non-empty run without `/`, `?` or `#`,
    /// percent-decoded (invalid UTF-8 does not match). Returns variable -> string value.
    pub fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        let mut vars = Map::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var(name) => {
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let raw = &rest[..end];
                    if raw.is_empty() || raw.contains(['/', '?', '#']) {
                        return None;
                    }
                    let value = percent_decode_str(raw).decode_utf8().ok()?;
                    vars.insert(name.clone(), Value::String(value.into_owned()));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> UriTemplate {
        UriTemplate::parse(s).expect("template parses")
    }

    #[test]
    fn matches_and_decodes_one_run_per_variable() {
        let tpl = t("test://template/{id}/data");
        assert!(tpl.is_template());
        assert_eq!(
            Value::Object(tpl.matches("test://template/123/data").expect("match")),
            json!({"id": "123"})
        );
        assert_eq!(
            Value::Object(
                tpl.matches("test://template/..%2F..%2Fadmin/data")
                    .expect("match")
            ),
            json!({"id": "../../admin"})
        );
        assert_eq!(tpl.matches("test://template/a/b/data"), None);
        assert_eq!(tpl.matches("test://template//data"), None);
        assert_eq!(tpl.matches("test://template/1/data/more"), None);
        assert_eq!(tpl.matches("test://template/%FF/data"), None);
        let last = t("x://{a}-{b}");
        assert_eq!(
            Value::Object(last.matches("x://1-2").expect("match")),
            json!({"a": "1", "b": "2"})
        );
    }

    #[test]
    fn static_uris_match_exactly() {
        let s = t("test://static-text");
        assert!(!s.is_template());
        assert!(s.matches("test://static-text").is_some());
        assert!(s.matches("test://static-text2").is_none());
    }

    #[test]
    fn rejects_bad_templates() {
        for bad in [
            "x://{a}{b}",
            "x://{a",
            "x://{}",
            "x://{a b}",
            "x://{a}/{a}",
            "x://a}",
        ] {
            assert!(UriTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
