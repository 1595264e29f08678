//! Where each binding expects its request metadata (USP `_meta.usp`, UCP `meta`), and the
//! refusals that say so in the JSON-RPC error message itself. It must never read a request.

use super::{Binding, Kind};
use crate::model::{Failure, FailureKind};
use crate::util::similar::nearest;
use jsonschema::error::ValidationErrorKind;

/// The members of `_meta.usp` the USP MCP binding defines.
const USP_MEMBERS: &[&str] = &[
    "profile",
    "idempotency_key",
    "correlation_id",
    "if_match",
    "authorization",
];

/// `expected at params.arguments.<path> (...)`: where a client puts `path` (`_meta.usp.profile`).
fn expected(kind: Kind, path: &str) -> String {
    let mut out = format!("expected at params.arguments.{path}");
    if kind == Kind::Usp {
        out.push_str(
            " (USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)",
        );
    }
    out
}

/// Dotted form of a JSON pointer into the arguments (`/_meta/usp/profile` -> `_meta.usp.profile`).
fn dotted(pointer: &str) -> String {
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

impl Binding {
    /// The argument that carries the binding's metadata (`_meta`, `meta`), if it has one.
    pub fn meta_argument(&self) -> Option<&'static str> {
        match self.kind {
            Kind::Usp => Some("_meta"),
            Kind::Ucp => Some("meta"),
            Kind::Plain | Kind::Autonym => None,
        }
    }

    /// A refusal of misplaced or malformed metadata: the binding's `invalid_request`, whose
    /// explanation is also in the JSON-RPC error message.
    pub(super) fn meta_failure(message: String) -> Failure {
        Failure::new(FailureKind::InvalidRequest, message)
            .with_code("invalid_request")
            .explained()
    }

    /// `path` (dotted, as the binding spells it: `_meta.usp.profile`) must be a string.
    pub(super) fn meta_not_a_string(&self, path: &str) -> Failure {
        Self::meta_failure(format!(
            "`{path}` must be a string; {}",
            expected(self.kind, path)
        ))
    }

    /// Why a call lacks the idempotency key its tool requires, and where the key goes.
    pub fn missing_idempotency_key(&self, tool: &str) -> String {
        let path = match self.kind {
            Kind::Ucp => "meta[\"idempotency-key\"]",
            _ => "_meta.usp.idempotency_key",
        };
        let at = match self.kind {
            Kind::Ucp => "expected at params.arguments.meta[\"idempotency-key\"]".to_string(),
            _ => expected(self.kind, "_meta.usp.idempotency_key"),
        };
        format!("`{path}` is required for `{tool}`; {at}")
    }

    /// The explanation of schema violations of the arguments when one of them is about the
    /// binding's metadata argument; `None` when none is.
    pub fn meta_mistake(
        &self,
        tool: &str,
        errors: &[jsonschema::ValidationError<'_>],
    ) -> Option<String> {
        let kind = self.kind;
        let arg = self.meta_argument()?;
        let root = format!("/{arg}");
        let mut parts = Vec::new();
        let mut others = Vec::new();
        for e in errors {
            let at = e.instance_path().to_string();
            let inside = at == root || at.starts_with(&format!("{root}/"));
            match e.kind() {
                ValidationErrorKind::Required { property } => {
                    let Some(p) = property.as_str() else { continue };
                    if !(inside || at.is_empty() && p == arg) {
                        continue;
                    }
                    let path = if at.is_empty() {
                        p.to_string()
                    } else {
                        format!("{}.{p}", dotted(&at))
                    };
                    // A missing `_meta` of USP always means its `usp` member.
                    let path = if kind == Kind::Usp && path == "_meta" {
                        "_meta.usp".to_string()
                    } else {
                        path
                    };
                    parts.push(format!(
                        "`{path}` is required for `{tool}`; {}",
                        expected(kind, &path)
                    ));
                }
                ValidationErrorKind::AdditionalProperties { unexpected } if inside => {
                    let path = dotted(&at);
                    for u in unexpected {
                        let guess = if path == "_meta.usp" {
                            nearest(u, USP_MEMBERS.iter().copied())
                                .map(|g| format!("did you mean `{g}`? "))
                                .unwrap_or_default()
                        } else {
                            String::new()
                        };
                        parts.push(format!(
                            "`{path}` of `{tool}` has no member `{u}`; {guess}{}",
                            expected(kind, &path)
                        ));
                    }
                }
                ValidationErrorKind::AdditionalProperties { unexpected }
                    if at.is_empty()
                        && kind == Kind::Usp
                        && unexpected.iter().any(|u| u == "usp") =>
                {
                    parts.push(format!(
                        "`usp` must be inside `_meta` for `{tool}`; {}",
                        expected(kind, "_meta.usp")
                    ));
                }
                // A credential's value is never repeated: only the rule it broke.
                _ if inside && dotted(&at).starts_with("_meta.usp.authorization") => {
                    let path = dotted(&at);
                    parts.push(format!(
                        "`{path}` of `{tool}` breaks its schema's `{}` rule; {}",
                        e.kind().keyword(),
                        expected(kind, &path)
                    ));
                }
                _ if inside => {
                    let path = dotted(&at);
                    parts.push(format!(
                        "`{path}` of `{tool}`: {e}; {}",
                        expected(kind, &path)
                    ));
                }
                _ => others.push(if at.is_empty() {
                    format!("arguments: {e}")
                } else {
                    format!("arguments{at}: {e}")
                }),
            }
        }
        // The other violations follow, as the binding reports them otherwise.
        (!parts.is_empty()).then(|| {
            parts
                .into_iter()
                .chain(others)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}
