//! RFC 9421 signatures on backend requests (`backend.sign_requests`) with portico's own key: the
//! key its webhook egress signs with and `/.well-known/jwks.json` publishes. It never sends a
//! request it was asked to sign unsigned, and signs the body bytes exactly as they are sent.

use crate::model::{Failure, FailureKind};
use crate::translate::rest::RestRequest;
use crate::util::names;
use crate::webhook::keys::SigningKey;
use crate::webhook::sig::{self, RequestParts};
use arc_swap::ArcSwapOption;
use http::HeaderValue;
use std::sync::Arc;

static KEY: ArcSwapOption<SigningKey> = ArcSwapOption::const_empty();

/// Makes `key` the process's backend-signing key unless one is installed already (the first
/// HTTP server installs its webhook key).
pub fn install(key: Arc<SigningKey>) {
    KEY.compare_and_swap(&None::<Arc<SigningKey>>, Some(key));
}

/// The key for the current call: the serving listener's, else the installed one.
pub fn key() -> Option<Arc<SigningKey>> {
    crate::auth::transport::backend_key().or_else(|| KEY.load_full())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The `@authority` a backend sees: the `Host` portico's clients send (plain http: always with
/// the port, as `upstream::pool` sends it; https: the port only when it is not 443).
fn authority(url: &url::Url) -> Option<String> {
    let host = url.host_str()?;
    let port = if url.scheme() == "http" {
        url.port_or_known_default()
    } else {
        url.port()
    };
    Some(match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    })
}

/// Adds `Content-Digest` (with a body), `Signature-Input` and `Signature` to `req`, covering
/// `@method @authority @path`, `@query` and `idempotency-key` when present, and
/// `content-digest content-type` with a body; `created` now, `keyid` and `alg` of the key.
pub fn sign(req: &mut RestRequest) -> Result<(), Failure> {
    let fail = |m: String| Failure::new(FailureKind::Internal, m);
    let key = key().ok_or_else(|| {
        fail("backend.sign_requests is set but portico has no signing key (serve over HTTP, --webhook-key)".into())
    })?;
    let url = url::Url::parse(&req.url).map_err(|e| fail(format!("backend URL: {e}")))?;
    let authority = authority(&url).ok_or_else(|| fail("backend URL has no host".into()))?;
    let mut components = vec!["@method", "@authority", "@path"];
    if url.query().is_some() {
        components.push("@query");
    }
    if req.headers.contains_key(names::IDEMPOTENCY_KEY) {
        components.push("idempotency-key");
    }
    if let Some(body) = &req.body {
        let digest = HeaderValue::from_str(&sig::content_digest(body))
            .map_err(|e| fail(format!("Content-Digest: {e}")))?;
        req.headers.insert("content-digest", digest);
        if !req.headers.contains_key(http::header::CONTENT_TYPE) {
            req.headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        components.extend(["content-digest", "content-type"]);
    }
    let parts = RequestParts {
        method: req.method.as_str(),
        authority: &authority,
        path: url.path(),
        query: url.query(),
        headers: &req.headers,
    };
    let signed = sig::sign(&parts, &components, &key, now())
        .map_err(|e| fail(format!("signing the backend request: {e}")))?;
    for (name, value) in [
        ("signature-input", signed.signature_input),
        ("signature", signed.signature),
    ] {
        let v = HeaderValue::from_str(&value).map_err(|e| fail(format!("{name}: {e}")))?;
        req.headers.insert(name, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_matches_what_the_clients_send_as_host() {
        let a = |u: &str| authority(&url::Url::parse(u).unwrap()).unwrap();
        assert_eq!(a("http://127.0.0.1:9101/t"), "127.0.0.1:9101");
        assert_eq!(a("http://backend/t"), "backend:80");
        assert_eq!(a("https://backend/t"), "backend");
        assert_eq!(a("https://backend:8443/t"), "backend:8443");
    }
}
