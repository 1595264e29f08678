//! RFC 9421 response signatures for configured tools (UCP recommends them for
//! `complete_booking_session`): `Content-Digest` plus a signature over `@status content-digest
//! content-type`, with portico's key. It must never sign bytes other than the body sent.

use crate::webhook::keys::SigningKey;
use crate::webhook::sig::content_digest;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The covered components of a response signature.
pub const COMPONENTS: [&str; 3] = ["@status", "content-digest", "content-type"];

/// A mapping's `response_signing:` section.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseSigningSpec {
    /// Private JWK (EC P-256 or Ed25519, with `kid`), relative to the mapping file.
    pub key: String,
    /// Tools whose JSON responses are signed.
    pub tools: Vec<String>,
}

/// The compiled section.
#[derive(Debug)]
pub struct ResponseSigning {
    pub key: Arc<SigningKey>,
    pub tools: Vec<String>,
}

/// Compiles `spec` of `file` (YAML `text`).
pub fn compile(
    spec: &ResponseSigningSpec,
    file: &Path,
    text: &str,
    tools: &[&String],
) -> Result<ResponseSigning, Vec<crate::config::diag::Diagnostic>> {
    use crate::config::diag::{Diagnostic, locate_yaml};
    let err = |key: &str, msg: String, hint: &str| {
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &["response_signing", key]))
            .at(format!("response_signing.{key}"))
            .hint(hint.to_string())
    };
    let mut diags = Vec::new();
    let key = SigningKey::read(&file.parent().unwrap_or(Path::new(".")).join(&spec.key));
    let key = match key {
        Ok(k) => Some(k),
        Err(e) => {
            diags.push(err(
                "key",
                e,
                "a private EC P-256 or OKP Ed25519 JWK with `kid`",
            ));
            None
        }
    };
    for t in &spec.tools {
        if !tools.contains(&t) {
            diags.push(err(
                "tools",
                format!("`{t}` is not a tool of this mapping"),
                "name a tool under `tools:`",
            ));
        }
    }
    match key {
        Some(key) if diags.is_empty() => Ok(ResponseSigning {
            key: Arc::new(key),
            tools: spec.tools.clone(),
        }),
        _ => Err(diags),
    }
}

/// The signature base of a response (RFC 9421 §2.5) with the serialised parameters.
pub fn base(status: u16, digest: &str, content_type: &str, params_line: &str) -> String {
    format!(
        "\"@status\": {status}\n\"content-digest\": {digest}\n\"content-type\": {content_type}\n\"@signature-params\": {params_line}"
    )
}

/// The headers that sign a response: `(Content-Digest, Signature-Input, Signature)`.
pub fn sign(
    status: u16,
    content_type: &str,
    body: &[u8],
    key: &SigningKey,
    created: i64,
) -> Option<(String, String, String)> {
    let digest = content_digest(body);
    let line = crate::webhook::sig::params_line(&COMPONENTS, key, created);
    let sig = key
        .sign(base(status, &digest, content_type, &line).as_bytes())
        .ok()?;
    Some((
        digest,
        format!("sig1={line}"),
        format!("sig1=:{}:", STANDARD.encode(sig)),
    ))
}
