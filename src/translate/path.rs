//! Path templates such as `/services/{service_id}/slots`, compiled at load.
//! An argument always becomes exactly one percent-encoded segment: it must never add `/`, `?`,
//! `#`, a dot-segment or an empty segment to the backend path.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use std::borrow::Cow;

/// Everything but RFC 3986 unreserved characters is encoded inside a segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes `raw` as one path segment (everything but RFC 3986 unreserved characters).
pub fn encode_segment(raw: &str) -> String {
    utf8_percent_encode(raw, SEGMENT).to_string()
}

/// Longest value accepted for one path segment.
pub const MAX_SEGMENT_LEN: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// A placeholder: a dotted path into the arguments (`booking_id`, `booking.id`).
    Var(Vec<String>),
}

/// A compiled path template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    parts: Vec<Part>,
}

/// Why an argument cannot fill a placeholder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("argument `{0}` is required to build the backend path")]
    Missing(String),
    #[error("argument `{0}` must be a string or an integer to be used in a path")]
    NotScalar(String),
    #[error("argument `{0}` must not be empty, `.` or `..` when used in a path")]
    DotOrEmpty(String),
    #[error("argument `{0}` is longer than {MAX_SEGMENT_LEN} bytes")]
    TooLong(String),
    #[error(
        "argument `{0}` must not contain control characters (NUL, CR, LF, ...) when used in a path"
    )]
    Control(String),
}

impl PathTemplate {
    /// Parses a template; placeholders are `{name}` or `{dotted.name}` and fill whole segments,
    /// or part of a segment next to fixed text (`/calls/{sid}.json`).
    pub fn parse(template: &str) -> Result<Self, String> {
        if !template.starts_with('/') {
            return Err(format!("path `{template}` must start with `/`"));
        }
        if template.contains(['?', '#']) {
            return Err(format!(
                "path `{template}` must not contain `?` or `#`: put query parameters under `query:`"
            ));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let (lit, after) = rest.split_at(open);
            let close = after
                .find('}')
                .ok_or_else(|| format!("path `{template}` has an unclosed `{{`"))?;
            let name = &after[1..close];
            if name.is_empty()
                || !name.split('.').all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                })
            {
                return Err(format!(
                    "path `{template}` has an invalid placeholder `{{{name}}}`: use `{{argument_name}}`"
                ));
            }
            let seg_start = lit.is_empty() && parts.is_empty() || lit.ends_with('/');
            let next = &after[close + 1..];
            let seg_end = next.is_empty() || next.starts_with('/');
            if !seg_start || !seg_end {
                // A placeholder sharing its segment with fixed text (`{sid}.json`): the text
                // must hold something besides dots, so that no value makes the segment empty
                // or a dot-segment, and two placeholders never touch.
                let before = lit.rsplit('/').next().unwrap_or("");
                let after_lit = next.split('/').next().unwrap_or("");
                let literal: String = before
                    .chars()
                    .chain(after_lit.chars())
                    .filter(|c| *c != '{' && *c != '}')
                    .collect();
                let touches = (!seg_start && before.is_empty()) || after_lit.starts_with('{');
                if touches || literal.chars().all(|c| c == '.') {
                    return Err(format!(
                        "path `{template}`: placeholder `{{{name}}}` must be a whole segment (between `/`s), or share it with fixed text other than dots"
                    ));
                }
            }
            if !lit.is_empty() {
                parts.push(Part::Literal(lit.to_string()));
            }
            parts.push(Part::Var(name.split('.').map(str::to_string).collect()));
            rest = next;
        }
        if rest.contains('}') {
            return Err(format!("path `{template}` has an unmatched `}}`"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(PathTemplate { parts })
    }

    /// Top-level argument names used by placeholders.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(path) => path.first().map(String::as_str),
            Part::Literal(_) => None,
        })
    }

    /// Renders the path with each placeholder as one encoded segment.
    pub fn render(&self, args: &Value) -> Result<String, PathError> {
        let mut out = String::with_capacity(64);
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Var(path) => {
                    // The variable's name, for an error only.
                    let name = || path.join(".");
                    let mut v = args;
                    for key in path {
                        v = v.get(key).ok_or_else(|| PathError::Missing(name()))?;
                    }
                    let raw = match v {
                        Value::String(s) => Cow::Borrowed(s.as_str()),
                        Value::Number(n) if n.is_i64() || n.is_u64() => Cow::Owned(n.to_string()),
                        Value::Null => return Err(PathError::Missing(name())),
                        _ => return Err(PathError::NotScalar(name())),
                    };
                    if raw.is_empty() || raw == "." || raw == ".." {
                        return Err(PathError::DotOrEmpty(name()));
                    }
                    if raw.len() > MAX_SEGMENT_LEN {
                        return Err(PathError::TooLong(name()));
                    }
                    // Encoded, a NUL (`%00`) or CR/LF would still reach the backend, whose
                    // framework may cut or split the path there.
                    if raw.bytes().any(|b| b.is_ascii_control()) {
                        return Err(PathError::Control(name()));
                    }
                    out.extend(utf8_percent_encode(&raw, SEGMENT));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> PathTemplate {
        PathTemplate::parse(s).expect("parses")
    }

    #[test]
    fn a_placeholder_may_share_its_segment_with_fixed_text() {
        let p = t("/Calls/{sid}.json");
        assert_eq!(
            p.render(&json!({"sid": "CA1/.."})).unwrap(),
            "/Calls/CA1%2F...json"
        );
        assert!(p.render(&json!({"sid": ".."})).is_err());
        assert!(PathTemplate::parse("/a/{x}{y}").is_err());
        assert!(PathTemplate::parse("/a/{x}..").is_err());
        assert!(PathTemplate::parse("/a/v{x}").is_ok());
    }

    #[test]
    fn renders_each_argument_as_one_segment() {
        let p = t("/bookings/{booking_id}/cancel");
        assert_eq!(
            p.render(&json!({"booking_id": "b-1"})).unwrap(),
            "/bookings/b-1/cancel"
        );
        assert_eq!(
            p.render(&json!({"booking_id": "../../admin"})).unwrap(),
            "/bookings/..%2F..%2Fadmin/cancel"
        );
        assert_eq!(
            p.render(&json!({"booking_id": "a/b?c#d%2F"})).unwrap(),
            "/bookings/a%2Fb%3Fc%23d%252F/cancel"
        );
        assert_eq!(
            p.render(&json!({"booking_id": 42})).unwrap(),
            "/bookings/42/cancel"
        );
        assert_eq!(
            p.render(&json!({"booking_id": "MASSAGE-60@2026-12-01T09:00"}))
                .unwrap(),
            "/bookings/MASSAGE-60%402026-12-01T09%3A00/cancel"
        );
    }

    #[test]
    fn refuses_dot_segments_and_missing_values() {
        let p = t("/x/{id}");
        for bad in [json!({"id": ".."}), json!({"id": "."}), json!({"id": ""})] {
            assert_eq!(p.render(&bad), Err(PathError::DotOrEmpty("id".into())));
        }
        assert_eq!(p.render(&json!({})), Err(PathError::Missing("id".into())));
        assert_eq!(
            p.render(&json!({"id": {"a": 1}})),
            Err(PathError::NotScalar("id".into()))
        );
        assert_eq!(
            p.render(&json!({"id": 1.5})),
            Err(PathError::NotScalar("id".into()))
        );
    }

    #[test]
    fn refuses_control_characters() {
        let p = t("/x/{id}");
        for bad in ["a\u{0}b", "\u{0}", "a\r\nb", "tab\there", "del\u{7f}"] {
            assert_eq!(
                p.render(&json!({ "id": bad })),
                Err(PathError::Control("id".into())),
                "{bad:?}"
            );
        }
        // Non-ASCII text is still one encoded segment.
        assert_eq!(p.render(&json!({"id": "café"})).unwrap(), "/x/caf%C3%A9");
    }

    #[test]
    fn dotted_placeholders_reach_into_objects() {
        let p = t("/hotels/{stay.hotel}/rooms");
        assert_eq!(
            p.render(&json!({"stay": {"hotel": "H 1"}})).unwrap(),
            "/hotels/H%201/rooms"
        );
        assert_eq!(p.variables().collect::<Vec<_>>(), vec!["stay"]);
    }

    #[test]
    fn rejects_bad_templates() {
        for bad in [
            "no-slash",
            "/a/{x",
            "/a/x}",
            "/a/{x}{y}",
            "/a/.{x}",
            "/a/{x}..",
            "/a?q=1",
            "/a/{}",
        ] {
            assert!(PathTemplate::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
