//! What a backend status and a failure kind mean for each binding when no mapping rule says
//! otherwise. It never reads a mapping: the mapping's rules are applied before these defaults.

use super::{Binding, Kind, Rule, autonym};
use crate::model::FailureKind;

impl Binding {
    /// Default meaning of a backend HTTP status for this protocol.
    pub fn default_rule(&self, status: u16) -> Rule {
        if (200..300).contains(&status) {
            return Rule::Success;
        }
        match self.kind {
            Kind::Plain => Rule::ToolError,
            Kind::Autonym => Rule::Error(autonym::slug_for_status(status).into()),
            Kind::Usp => Rule::Error(
                match status {
                    401 => "authentication_required",
                    403 => "profile_not_trusted",
                    412 => "revision_mismatch",
                    429 => "rate_limited",
                    502..=504 => "service_unavailable",
                    500..=599 => "server_error",
                    _ => "invalid_request",
                }
                .into(),
            ),
            Kind::Ucp => match status {
                404 => Rule::Business("not_found".into()),
                401 => Rule::Error("unauthorized".into()),
                403 => Rule::Error("forbidden".into()),
                409 => Rule::Error("conflict".into()),
                429 => Rule::Error("rate_limited".into()),
                502..=504 => Rule::Error("service_unavailable".into()),
                500..=599 => Rule::Error("internal_error".into()),
                _ => Rule::Error("invalid_request".into()),
            },
        }
    }

    /// The code slug a failure gets when no mapping rule chose one.
    pub(super) fn default_slug(&self, kind: FailureKind) -> &'static str {
        use FailureKind::*;
        match self.kind {
            Kind::Usp => match kind {
                InvalidRequest | NotFound => "invalid_request",
                Unauthenticated => "authentication_required",
                Forbidden => "profile_not_trusted",
                Conflict => "idempotency_conflict",
                PreconditionFailed => "revision_mismatch",
                RateLimited => "rate_limited",
                Unavailable | Timeout | UpstreamError => "service_unavailable",
                BadUpstreamResponse | Internal => "server_error",
            },
            Kind::Ucp => match kind {
                InvalidRequest => "invalid_request",
                NotFound => "not_found",
                Unauthenticated => "unauthorized",
                Forbidden => "forbidden",
                Conflict | PreconditionFailed => "conflict",
                RateLimited => "rate_limited",
                Unavailable | Timeout | UpstreamError => "service_unavailable",
                BadUpstreamResponse | Internal => "internal_error",
            },
            Kind::Plain => match kind {
                InvalidRequest => "invalid_params",
                _ => "internal_error",
            },
            Kind::Autonym => match kind {
                InvalidRequest => "invalid_request",
                NotFound => "not_found",
                Unauthenticated | Forbidden => "invalid_scope",
                Conflict | PreconditionFailed => "idempotency_conflict",
                RateLimited => "rate_limited",
                Unavailable | Timeout | UpstreamError => "not_ready",
                BadUpstreamResponse | Internal => "internal_error",
            },
        }
    }
}
