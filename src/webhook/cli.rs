//! `portico webhook-sign` / `webhook-verify`: sign a webhook body, or check a signed request against a JWKS, from files.
//! It reads and prints only: it never sends anything or prints private key material.

use super::keys::{Alg, SigningKey, VerifyingKey};
use super::sig::{self, Policy, RequestParts, USP_COMPONENTS};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The body to sign or check: `--body-file PATH` or `--body TEXT`.
pub enum Body {
    File(std::path::PathBuf),
    Text(String),
}

impl Body {
    /// The body from the two flags; exactly one must be given.
    pub fn from_flags(
        file: Option<std::path::PathBuf>,
        text: Option<String>,
    ) -> Result<Body, String> {
        match (file, text) {
            (Some(f), None) => Ok(Body::File(f)),
            (None, Some(t)) => Ok(Body::Text(t)),
            _ => Err("give the body with exactly one of --body-file PATH or --body TEXT".into()),
        }
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            Body::File(path) => read(path),
            Body::Text(text) => Ok(text.as_bytes().to_vec()),
        }
    }
}

fn target(url: &str) -> Result<(String, String, Option<String>), String> {
    let u = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let host = u.host_str().ok_or_else(|| format!("`{url}` has no host"))?;
    let authority = match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    Ok((
        authority,
        u.path().to_string(),
        u.query().map(str::to_string),
    ))
}

/// Signs `body` for `POST url` with the private JWK in `key`; returns header lines
/// (`Content-Type`, `Content-Digest`, `Signature-Input`, `Signature`).
pub fn sign(key: &Path, url: &str, body: &Body, created: Option<i64>) -> Result<String, String> {
    let jwk: Value = serde_json::from_slice(&read(key)?)
        .map_err(|e| format!("{} is not JSON: {e}", key.display()))?;
    let key = SigningKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
    let body = body.bytes()?;
    let url = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let headers = sig::sign_webhook(&key, &url, &body, created.unwrap_or_else(now))
        .map_err(|e| e.to_string())?;
    let line = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    Ok(format!(
        "Content-Type: application/json\nContent-Digest: {}\nSignature-Input: {}\nSignature: {}\n",
        line("content-digest"),
        line("signature-input"),
        line("signature")
    ))
}

/// Verifies a `POST url` request whose header lines are in `headers` (`Name: value` per line)
/// against the JWKS in `jwks`: digest, USP components, freshness (`max_age`), signature.
pub fn verify(
    jwks: &Path,
    url: &str,
    headers: &Path,
    body: &Body,
    max_age: Duration,
) -> Result<String, String> {
    let text = String::from_utf8(read(jwks)?).map_err(|e| e.to_string())?;
    let keys = VerifyingKey::from_jwks(&text).map_err(|e| e.to_string())?;
    let body = body.bytes()?;
    let lines = String::from_utf8(read(headers)?).map_err(|e| e.to_string())?;
    let mut map = HeaderMap::new();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("`{line}` is not a `Name: value` header line"))?;
        let name = HeaderName::try_from(name.trim()).map_err(|e| e.to_string())?;
        let value = HeaderValue::from_str(value.trim()).map_err(|e| e.to_string())?;
        map.append(name, value);
    }
    let (authority, path, query) = target(url)?;
    sig::verify_content_digest(&map, &body).map_err(|e| e.to_string())?;
    let parts = RequestParts {
        method: "POST",
        authority: &authority,
        path: &path,
        query: query.as_deref(),
        headers: &map,
    };
    let policy = Policy {
        required: &USP_COMPONENTS,
        algorithms: &Alg::ALL,
        max_age,
        require_created: true,
    };
    let v = sig::verify(&parts, &keys, &policy, now()).map_err(|e| e.to_string())?;
    Ok(format!(
        "ok: label {} keyid {} alg {} created {}\n",
        v.label,
        v.keyid,
        v.alg.name(),
        v.created.unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_then_verify_through_files() {
        let dir = std::env::temp_dir().join(format!("portico-whcli-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = SigningKey::generate(Alg::Ed25519, "cli").unwrap();
        std::fs::write(dir.join("k.json"), key.private_jwk().unwrap().to_string()).unwrap();
        let jwks = serde_json::json!({"keys": [key.verifying_key().jwk()]});
        std::fs::write(dir.join("jwks.json"), jwks.to_string()).unwrap();
        std::fs::write(dir.join("body.json"), b"{\"event_id\":\"e\"}").unwrap();
        let url = "http://gw.example:8080/webhooks/spa";
        let file = Body::File(dir.join("body.json"));
        let lines = sign(&dir.join("k.json"), url, &file, None).unwrap();
        std::fs::write(dir.join("h.txt"), &lines).unwrap();
        let ok = verify(
            &dir.join("jwks.json"),
            url,
            &dir.join("h.txt"),
            &file,
            Duration::from_secs(300),
        )
        .unwrap();
        assert!(
            ok.starts_with("ok: label sig1 keyid cli alg ed25519"),
            "{ok}"
        );
        let other = verify(
            &dir.join("jwks.json"),
            "http://gw.example:8080/webhooks/other",
            &dir.join("h.txt"),
            &file,
            Duration::from_secs(300),
        );
        assert_eq!(other, Err("signature does not verify".into()));
        // The same bytes given inline verify the same way; other bytes do not.
        let inline = Body::Text("{\"event_id\":\"e\"}".into());
        let ok = verify(
            &dir.join("jwks.json"),
            url,
            &dir.join("h.txt"),
            &inline,
            Duration::from_secs(300),
        );
        assert!(ok.is_ok(), "{ok:?}");
        let changed = Body::Text("{\"event_id\":\"f\"}".into());
        let bad = verify(
            &dir.join("jwks.json"),
            url,
            &dir.join("h.txt"),
            &changed,
            Duration::from_secs(300),
        );
        assert!(bad.is_err(), "a changed body must not verify");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
