//! The idempotency-key lint of one tool: a key derived from the arguments alone is a warning.
//! It never refuses a mapping: the warning names the place and the per-call value to use.

use std::path::Path;

use super::diag::{Diagnostic, locate_yaml};
use super::mapping::ToolSpec;

/// Warns on each header, query or body of tool `name` that builds an idempotency key without
/// a per-call value (`$meta`).
pub fn derived_keys(
    file: &Path,
    text: &str,
    name: &str,
    ts: &ToolSpec,
    diags: &mut Vec<Diagnostic>,
) {
    // An idempotency key built from the arguments alone is the same for two identical calls
    // that mean two operations: the backend answers the second with the first's result.
    let keyed_places = ts
        .headers
        .iter()
        .map(|(k, src)| ("headers", k.as_str(), src.as_str()))
        .chain(
            ts.query
                .iter()
                .map(|(k, src)| ("query", k.as_str(), src.as_str())),
        )
        .filter(|(_, k, _)| names_idempotency_key(k))
        .chain(
            ts.body
                .as_deref()
                .filter(|src| names_idempotency_key(src))
                .map(|src| ("body", "", src)),
        );
    for (section, key, src) in keyed_places {
        if !src.contains("$meta") {
            let field = if key.is_empty() {
                section.to_string()
            } else {
                format!("{section}.{key}")
            };
            let mut place = vec!["tools", name, section];
            if !key.is_empty() {
                place.push(key);
            }
            diags.push(
                Diagnostic::warning(
                    file,
                    format!(
                        "`{field}` derives an idempotency key from the arguments only: two identical calls that mean two operations send the same key, and the backend answers the second with the first one's result"
                    ),
                )
                .line(locate_yaml(text, &place))
                .at(format!("tools.{name}.{field}"))
                .hint("use `$meta.idempotency_key` (the caller's key) or `$meta.uuid` (fresh per call)"),
            );
        }
    }
}

/// Whether `text` (a header or query name, or a body program) names an idempotency key.
fn names_idempotency_key(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["idempotency-key", "idempotency_key", "idempotencykey"]
        .iter()
        .any(|k| lower.contains(k))
}
