//! The protocol error tables: each binding's error slugs with their JSON-RPC code and HTTP status.
//! A leaf of `binding`: data only, it must never decide which row a failure takes.

/// One row of a protocol error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    pub slug: &'static str,
    pub rpc: i64,
    pub http: u16,
}

const fn ec(slug: &'static str, rpc: i64, http: u16) -> ErrorCode {
    ErrorCode { slug, rpc, http }
}

/// USP §9.4 protocol errors. `idempotency_conflict` and the signature / proof codes have no
/// JSON-RPC number of their own: they ride in `data.code` under -32600 (USPProtocolError).
pub const USP_ERRORS: &[ErrorCode] = &[
    ec("invalid_request", -32600, 400),
    ec("invalid_profile_url", -32602, 400),
    ec("profile_unreachable", -32003, 424),
    ec("profile_malformed", -32004, 422),
    ec("profile_not_trusted", -32005, 403),
    ec("authentication_required", -32006, 401),
    ec("rate_limited", -32007, 429),
    ec("version_unsupported", -32008, 400),
    ec("service_unavailable", -32009, 503),
    ec("pop_proof_required", -32001, 401),
    ec("revision_mismatch", -32002, 412),
    ec("server_error", -32603, 500),
    ec("idempotency_conflict", -32600, 409),
    ec("signature_missing", -32600, 401),
    ec("signature_invalid", -32600, 401),
    ec("key_not_found", -32600, 401),
    ec("signature_expired", -32600, 401),
    ec("digest_mismatch", -32600, 400),
    ec("algorithm_unsupported", -32600, 400),
    ec("pop_proof_missing", -32600, 401),
    ec("pop_proof_invalid", -32600, 401),
    ec("pop_key_mismatch", -32600, 401),
    ec("pop_proof_replayed", -32600, 401),
    ec("proof_nonce_required", -32600, 401),
];

/// UCP core error codes (overview "Error Codes"): transport/protocol failures are -32000,
/// discovery/profile failures -32001, malformed requests -32600, internal errors -32603.
pub const UCP_ERRORS: &[ErrorCode] = &[
    ec("invalid_request", -32600, 400),
    ec("invalid_params", -32602, 400),
    ec("invalid_profile_url", -32001, 400),
    ec("profile_unreachable", -32001, 424),
    ec("profile_malformed", -32001, 422),
    ec("version_unsupported", -32001, 422),
    ec("signature_missing", -32000, 401),
    ec("signature_invalid", -32000, 401),
    ec("key_not_found", -32000, 401),
    ec("digest_mismatch", -32600, 400),
    ec("algorithm_unsupported", -32600, 400),
    ec("unauthorized", -32000, 401),
    ec("profile_not_trusted", -32000, 403),
    ec("forbidden", -32000, 403),
    ec("not_found", -32000, 404),
    ec("idempotency_conflict", -32000, 409),
    ec("conflict", -32000, 409),
    ec("rate_limited", -32000, 429),
    ec("service_unavailable", -32000, 503),
    ec("internal_error", -32603, 500),
];

/// Protocol-neutral fallbacks for `plain` (only used if a mapping asks for `error:`).
pub const PLAIN_ERRORS: &[ErrorCode] = &[
    ec("invalid_request", -32600, 400),
    ec("invalid_params", -32602, 400),
    ec("internal_error", -32603, 500),
];

/// autonym codes as an error table (JSON-RPC code by form).
pub const AUTONYM_ERRORS: &[ErrorCode] = &[
    ec("invalid_request", -32602, 400),
    ec("internal_error", -32603, 500),
];

/// JSON-RPC code of an [`RpcError`] that is not a JSON-RPC error at all: the HTTP edge answers
/// it with `http_status` and the Problem Details in `data` as the body (autonym's
/// pre-JSON-RPC forms). Never sent as a JSON-RPC code.
pub const HTTP_PROBLEM: i64 = 0;
