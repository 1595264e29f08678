//! The values authentication passes around: who a call is (`Principal`), what it presented and
//! asks (`Presented`, `Asked`), what was granted, and why it is refused (`Refusal`). It never
//! decides anything: `authenticate` and the rest of `auth` do.

use super::policy::Mechanism;
use super::{httpsig, pop};
use crate::config::Tool;
use crate::model::{Call, FailureKind};
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};

/// Who a call was authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Stable id: `api_key:<name>`, `oauth:<iss>|<sub>`, `jkt:<thumbprint>`.
    pub id: String,
    pub mechanism: Mechanism,
    /// May call business-only tools.
    pub business: bool,
    /// The proven key's thumbprint (platform_key_pop).
    pub jkt: Option<String>,
    /// A booking-scoped credential: the one resource it reaches.
    pub only: Option<String>,
}

/// What authorization decided for a call that may proceed.
#[derive(Debug, Default)]
pub struct Grant {
    pub principal: Option<Principal>,
}

/// Inputs taken from the raw arguments before the binding strips `_meta`.
#[derive(Debug, Default)]
pub struct Presented {
    /// `usp_p` of the params, when a proof is presented.
    pub(super) usp_p: Option<Result<String, pop::PopError>>,
}

/// Why a call is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: FailureKind,
    /// USP code slug (`authentication_required`, `pop_proof_invalid`, ...).
    pub code: &'static str,
    pub message: String,
    /// A credential was presented and failed (RFC 6750 `invalid_token`).
    pub invalid_token: bool,
    /// A nonce to retry with (`proof_nonce_required`).
    pub nonce: Option<String>,
    /// The mechanism the failure relates to (`data.mechanism`, USP's RECOMMENDED discriminator).
    pub mechanism: Option<&'static str>,
    /// The message goes into the JSON-RPC error message too (`Failure::explain`): for metadata
    /// the caller misplaced.
    pub explain: bool,
}

impl Refusal {
    pub(super) fn new(
        kind: FailureKind,
        code: &'static str,
        message: impl Into<String>,
    ) -> Refusal {
        Refusal {
            kind,
            code,
            message: message.into(),
            invalid_token: false,
            nonce: None,
            mechanism: None,
            explain: false,
        }
    }

    pub(super) fn missing(message: impl Into<String>) -> Refusal {
        Refusal::new(
            FailureKind::Unauthenticated,
            "authentication_required",
            message,
        )
    }

    pub(super) fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            invalid_token: true,
            ..Refusal::missing(message)
        }
    }

    pub(super) fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::new(FailureKind::Forbidden, "profile_not_trusted", message)
    }

    /// A refused RFC 9421 request signature, with USP §10.1.1's code.
    pub(super) fn sig(e: httpsig::HttpSigError) -> Refusal {
        use crate::webhook::sig::SigError as S;
        use FailureKind::{InvalidRequest, Unauthenticated, Unavailable};
        use httpsig::HttpSigError as H;
        let (kind, code) = match &e {
            H::Sig(S::Unsigned) => (Unauthenticated, "signature_missing"),
            H::Sig(S::DigestMismatch | S::DigestMalformed(_)) => {
                (InvalidRequest, "digest_mismatch")
            }
            H::Sig(S::UnknownKey(_)) | H::NoProfile => (Unauthenticated, "key_not_found"),
            H::Sig(S::WrongAlgorithm(_)) => (InvalidRequest, "algorithm_unsupported"),
            H::Sig(S::Stale(_) | S::Expired) => (Unauthenticated, "signature_expired"),
            H::Sig(S::Key(_)) => (FailureKind::Internal, "server_error"),
            H::Sig(_) => (Unauthenticated, "signature_invalid"),
            H::Unreachable(_) => (Unavailable, "profile_unreachable"),
            H::Malformed => (InvalidRequest, "profile_malformed"),
        };
        Refusal {
            invalid_token: kind == Unauthenticated,
            mechanism: Some(Mechanism::HttpMessageSignature.name()),
            ..Refusal::new(kind, code, e.to_string())
        }
    }

    pub(super) fn pop(e: pop::PopError) -> Refusal {
        Refusal {
            invalid_token: true,
            ..Refusal::new(FailureKind::Unauthenticated, e.code(), e.to_string())
        }
    }
}

pub(super) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What presented credentials are judged for: a tool call, or a read (any other MCP request:
/// resources, prompts, completions, `subscriptions/listen`; a GET stream has no params).
pub struct Asked<'a> {
    /// The business whose policy judges.
    pub business: &'a str,
    /// The method a proof names (`usp_m`): the tool, or the JSON-RPC method of a read.
    pub method: &'a str,
    /// `_meta.usp.authorization` as presented.
    pub authorization: Option<&'a Value>,
    /// The profile URI the caller asserts (`_meta.usp.profile`; signatures look keys up there).
    pub profile: Option<&'a str>,
    /// The proof's inputs from the raw params.
    pub presented: &'a Presented,
    /// The tool call, when it is one: a booking-scoped credential's scope is checked against it.
    pub call: Option<(&'a Tool, &'a Call)>,
}
