//! Follow-up reads of outcome rules (`follow_up:`), compiled: a `GET`/`HEAD` and a path
//! template whose placeholders are the tool's params. It never performs a read (see `forward`).

use std::collections::HashMap;
use std::path::Path;

use http::Method;

use super::diag::Diagnostic;
use super::mapping::FollowUpSpec;
use super::tool::{FollowUp, OutcomeRule, StatusKey};
use crate::translate::path::PathTemplate;

/// A `follow_up:` read: `GET` or `HEAD`, and a path template.
pub(super) fn compile(
    file: &Path,
    line: Option<usize>,
    at: &str,
    spec: &FollowUpSpec,
    diags: &mut Vec<Diagnostic>,
) -> Option<FollowUp> {
    let method = match spec
        .method
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("GET") => Method::GET,
        Some("HEAD") => Method::HEAD,
        Some(other) => {
            diags.push(
                Diagnostic::error(file, format!("a follow-up read cannot be `{other}`"))
                    .line(line)
                    .at(format!("{at}.follow_up.method"))
                    .hint("a follow-up only reads: use `GET` or `HEAD`"),
            );
            return None;
        }
    };
    match PathTemplate::parse(&spec.path) {
        Ok(path) => Some(FollowUp { method, path }),
        Err(e) => {
            diags.push(
                Diagnostic::error(file, format!("follow_up.path: {e}"))
                    .line(line)
                    .at(format!("{at}.follow_up.path"))
                    .hint("write e.g. `/checkout-sessions/{id}`"),
            );
            None
        }
    }
}

/// Refuses a follow-up placeholder that names no param of tool `name` (`line`: its `outcomes:`).
pub(super) fn check_params(
    file: &Path,
    line: Option<usize>,
    name: &str,
    param_names: &[&str],
    outcomes: &HashMap<StatusKey, Vec<OutcomeRule>>,
    diags: &mut Vec<Diagnostic>,
) {
    for rule in outcomes.values().flatten() {
        for var in rule.follow_up.iter().flat_map(|f| f.path.variables()) {
            if !param_names.contains(&var) {
                diags.push(
                    Diagnostic::error(
                        file,
                        format!("the follow-up read's `{{{var}}}` is no param of `{name}`"),
                    )
                    .line(line)
                    .at(format!("tools.{name}.outcomes"))
                    .hint(format!("params of `{name}`: {}", param_names.join(", "))),
                );
            }
        }
    }
}
