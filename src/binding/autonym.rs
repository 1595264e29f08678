//! The autonym rulebook (B3 MCP binding, spec 1.0-draft-1): its error registry as a table, the
//! form each code reaches an agent in, and the Problem Details object. It must never put a
//! submitted value or validation detail into an error message or a Problem Details object.

use serde_json::{Map, Value, json};

/// How a registered code reaches an agent (B3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// An HTTP response on the MCP endpoint with the registered status and the Problem Details
    /// body (401 adds the challenge, 429 `Retry-After`).
    Http,
    /// JSON-RPC `-32603` with the Problem Details object as `data`.
    Internal,
    /// `tools/call`: an `isError` result whose only content is the Problem Details JSON as text;
    /// other methods: JSON-RPC `-32602` with the Problem Details object as `data`.
    Params,
    /// No agent operation raises it.
    None,
}

/// One registry row: code, title (the only text a JSON-RPC error message carries), HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub slug: &'static str,
    pub title: &'static str,
    pub status: u16,
    pub form: Form,
}

const fn c(slug: &'static str, title: &'static str, status: u16, form: Form) -> Code {
    Code {
        slug,
        title,
        status,
        form,
    }
}

/// The registry, one row per code of B3.4's table. The titles and statuses of B4.3 are not
/// published; these are portico's, kept in this one table so the registry can replace them.
pub const CODES: &[Code] = &[
    c("dpop_required", "DPoP proof required", 401, Form::Http),
    c("dpop_invalid", "DPoP proof invalid", 401, Form::Http),
    c("payload_too_large", "Payload too large", 413, Form::Http),
    c("rate_limited", "Rate limited", 429, Form::Http),
    c("not_ready", "Not ready", 503, Form::Http),
    c("internal_error", "Internal error", 500, Form::Internal),
    c("invalid_scope", "Invalid scope", 403, Form::Params),
    c("purpose_missing", "Purpose missing", 400, Form::Params),
    c("invalid_request", "Invalid request", 400, Form::Params),
    c("not_found", "Not found", 404, Form::Params),
    c(
        "idempotency_conflict",
        "Idempotency conflict",
        409,
        Form::Params,
    ),
    c(
        "domain_not_granted",
        "Domain not granted",
        403,
        Form::Params,
    ),
    c("grant_revoked", "Grant revoked", 403, Form::Params),
    c("grant_expired", "Grant expired", 403, Form::Params),
    c("grant_exhausted", "Grant exhausted", 403, Form::Params),
    c(
        "safety_write_forbidden",
        "Safety write forbidden",
        403,
        Form::Params,
    ),
    c(
        "inference_forbidden",
        "Inference forbidden",
        403,
        Form::Params,
    ),
    c(
        "proposal_not_found",
        "Proposal not found",
        404,
        Form::Params,
    ),
    c(
        "proposal_decided",
        "Proposal already decided",
        409,
        Form::Params,
    ),
    c("value_rejected", "Value rejected", 422, Form::Params),
    c(
        "capability_not_granted",
        "Capability not granted",
        403,
        Form::Params,
    ),
    c(
        "advertising_ineligible",
        "Advertising ineligible",
        403,
        Form::Params,
    ),
    c("client_suspended", "Client suspended", 403, Form::Params),
    c(
        "entry_limit_reached",
        "Entry limit reached",
        409,
        Form::None,
    ),
    c("session_required", "Session required", 401, Form::None),
    c("csrf_invalid", "CSRF token invalid", 403, Form::None),
    c(
        "reauthentication_required",
        "Re-authentication required",
        401,
        Form::None,
    ),
    c("sign_in_failed", "Sign-in failed", 401, Form::None),
    c("signup_unavailable", "Sign-up unavailable", 403, Form::None),
];

/// The row every unexpected failure falls back to.
pub const INTERNAL: Code = c("internal_error", "Internal error", 500, Form::Internal);

/// The `type` URI prefix of portico-built Problem Details.
pub const PROBLEM_TYPE: &str = "urn:autonym:problem:";

pub fn code(slug: &str) -> Option<Code> {
    CODES.iter().copied().find(|c| c.slug == slug)
}

/// The code a backend status means when its body names none.
pub fn slug_for_status(status: u16) -> &'static str {
    match status {
        400 | 405..=408 | 410..=412 | 414..=418 => "invalid_request",
        404 => "not_found",
        409 => "idempotency_conflict",
        413 => "payload_too_large",
        422 => "value_rejected",
        429 => "rate_limited",
        401 | 403 => "invalid_scope",
        503 => "not_ready",
        _ => "internal_error",
    }
}

/// The Problem Details object for `code`: the backend's own when it names a registered code
/// (it is the same object B4.3 defines), else `type`, `title`, `status`, `code` only.
pub fn problem(code: Code, backend: Option<&Value>, retry_after: Option<u64>) -> Value {
    if let Some(Value::Object(p)) = backend
        && p.get("code").and_then(Value::as_str) == Some(code.slug)
    {
        return Value::Object(p.clone());
    }
    let mut p = Map::new();
    p.insert("type".into(), json!(format!("{PROBLEM_TYPE}{}", code.slug)));
    p.insert("title".into(), json!(code.title));
    p.insert("status".into(), json!(code.status));
    p.insert("code".into(), json!(code.slug));
    if let Some(r) = retry_after {
        p.insert("retry_after".into(), json!(r));
    }
    Value::Object(p)
}

/// The registered code a backend Problem Details body names, if any.
pub fn backend_code(problem: Option<&Value>) -> Option<Code> {
    problem
        .and_then(|p| p.get("code"))
        .and_then(Value::as_str)
        .and_then(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_row_and_a_form() {
        let mut slugs: Vec<&str> = CODES.iter().map(|c| c.slug).collect();
        let n = slugs.len();
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), n, "one row per code");
        assert_eq!(n, 29);
        for http in [
            "dpop_required",
            "dpop_invalid",
            "payload_too_large",
            "rate_limited",
            "not_ready",
        ] {
            assert_eq!(code(http).map(|c| c.form), Some(Form::Http));
        }
        assert_eq!(code("internal_error").map(|c| c.form), Some(Form::Internal));
    }

    #[test]
    fn problems_carry_no_submitted_values() {
        let p = problem(code("not_found").unwrap(), None, None);
        assert_eq!(
            p,
            json!({"type": "urn:autonym:problem:not_found", "title": "Not found", "status": 404, "code": "not_found"})
        );
        // A backend problem naming a registered code is passed on as is.
        let b = json!({"type": "https://autonym.example/p/grant_expired", "title": "Grant expired", "status": 403, "code": "grant_expired"});
        assert_eq!(problem(code("grant_expired").unwrap(), Some(&b), None), b);
        assert_eq!(
            backend_code(Some(&b)).map(|c| c.slug),
            Some("grant_expired")
        );
        assert_eq!(backend_code(Some(&json!({"code": "made_up"}))), None);
    }
}
