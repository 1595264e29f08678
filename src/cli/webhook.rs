//! `portico webhook-sign` and `portico webhook-verify`: signing helpers for webhook senders.
//! It prints what the library computes; it never holds signing logic.

use super::args::{WebhookSignArgs, WebhookVerifyArgs};
use super::common::cli_result;
use std::process::ExitCode;

/// Runs `portico webhook-sign`.
pub fn webhook_sign(args: WebhookSignArgs) -> ExitCode {
    let WebhookSignArgs {
        key,
        url,
        body_file,
        body,
        created,
    } = args;
    cli_result(
        portico::webhook::cli::Body::from_flags(body_file, body)
            .and_then(|body| portico::webhook::cli::sign(&key, &url, &body, created)),
    )
}

/// Runs `portico webhook-verify`.
pub fn webhook_verify(args: WebhookVerifyArgs) -> ExitCode {
    let WebhookVerifyArgs {
        jwks,
        url,
        headers,
        body_file,
        body,
        max_age,
    } = args;
    cli_result(
        portico::webhook::cli::Body::from_flags(body_file, body)
            .and_then(|body| portico::webhook::cli::verify(&jwks, &url, &headers, &body, max_age)),
    )
}
