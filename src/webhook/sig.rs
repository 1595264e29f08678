//! RFC 9421 signatures (`ecdsa-p256-sha256`, `ed25519`), RFC 9530 `Content-Digest` (sha-256), the legacy HMAC scheme.
//! It never re-serialises a body, nor accepts a signature whose algorithm, key, freshness or components it cannot check.
//!
//! Why hand-written: the Rust RFC 9421 crate (`httpsig`, with `httpsig-hyper`) is at 0.0.x and
//! signs and verifies with RustCrypto (`p256`, `ecdsa`, `ed25519-compact`, `hmac`, `sha2`), a
//! second crypto stack beside the aws-lc-rs that rustls already compiles in; and the legacy HMAC
//! scheme and the USP §10.1.1 component and freshness rules sit outside RFC 9421 and would stay
//! here anyway. Keys, digests and signatures go through aws-lc-rs; the structured fields through
//! `sfv.rs` (itself tested against the `sfv` crate). Interoperability is tested against the
//! independent Python `http-message-signatures` implementation, in both directions, by
//! `tests/e2e/test_webhook_interop.py` and `tests/e2e/test_request_signature_interop.py`.

use super::keys::{Alg, KeyError, SigningKey, VerifyingKey};
use super::sfv::{self, Bare, Item, Member, Params};
use aws_lc_rs::{digest, hmac};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use std::time::Duration;

/// The components USP §10.1.1 requires every webhook signature to cover.
pub const USP_COMPONENTS: [&str; 5] = [
    "@method",
    "@authority",
    "@path",
    "content-digest",
    "content-type",
];

/// The parts of a request a signature can cover.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    pub method: &'a str,
    /// `host[:port]` as sent (the `Host` header or the URI authority).
    pub authority: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
}

/// Why a signature or digest is refused. Each variant is one documented refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigError {
    #[error("the request carries no Content-Digest")]
    DigestMissing,
    #[error("Content-Digest has no sha-256 member or is malformed: {0}")]
    DigestMalformed(String),
    #[error("Content-Digest does not match the body")]
    DigestMismatch,
    #[error("the request is not signed (no Signature-Input / Signature)")]
    Unsigned,
    #[error("malformed signature: {0}")]
    Malformed(String),
    #[error("signature does not cover `{0}`")]
    MissingComponent(String),
    #[error("covered component `{0}` is not in the request")]
    AbsentComponent(String),
    #[error("unknown key `{0}`")]
    UnknownKey(String),
    #[error("algorithm `{0}` is not accepted for this key")]
    WrongAlgorithm(String),
    #[error("signature is stale: `created` is {0} s away from now")]
    Stale(i64),
    #[error("signature has expired")]
    Expired,
    #[error("signature does not verify")]
    Forged,
    #[error("signing failed: {0}")]
    Key(#[from] KeyError),
}

impl SigError {
    /// A short slug for metrics, logs and problem types.
    pub fn slug(&self) -> &'static str {
        match self {
            SigError::DigestMissing => "digest_missing",
            SigError::DigestMalformed(_) => "digest_malformed",
            SigError::DigestMismatch => "digest_mismatch",
            SigError::Unsigned => "unsigned",
            SigError::Malformed(_) => "signature_malformed",
            SigError::MissingComponent(_) | SigError::AbsentComponent(_) => "components",
            SigError::UnknownKey(_) => "unknown_key",
            SigError::WrongAlgorithm(_) => "wrong_algorithm",
            SigError::Stale(_) | SigError::Expired => "stale",
            SigError::Forged => "forged",
            SigError::Key(_) => "internal",
        }
    }
}

/// `sha-256=:<base64>:` over `body`.
pub fn content_digest(body: &[u8]) -> String {
    let d = digest::digest(&digest::SHA256, body);
    format!("sha-256=:{}:", STANDARD.encode(d.as_ref()))
}

/// Checks `Content-Digest` (all field lines) against the raw body; sha-256 is required.
pub fn verify_content_digest(headers: &HeaderMap, body: &[u8]) -> Result<(), SigError> {
    let value = joined(headers, "content-digest").ok_or(SigError::DigestMissing)?;
    let dict = sfv::dictionary(&value).map_err(|e| SigError::DigestMalformed(e.to_string()))?;
    let expected = dict
        .iter()
        .find(|(k, _)| k == "sha-256")
        .and_then(|(_, m)| match m {
            Member::Item(Item {
                bare: Bare::Bytes(b),
                ..
            }) => Some(b),
            _ => None,
        })
        .ok_or_else(|| SigError::DigestMalformed("no sha-256 byte sequence".into()))?;
    let actual = digest::digest(&digest::SHA256, body);
    if aws_lc_rs::constant_time::verify_slices_are_equal(actual.as_ref(), expected).is_ok() {
        Ok(())
    } else {
        Err(SigError::DigestMismatch)
    }
}

/// All field lines of `name`, each trimmed, joined with `, ` (RFC 9421 §2.1).
fn joined(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut values = headers.get_all(name).iter().peekable();
    values.peek()?;
    let parts: Vec<String> = values
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
        .collect();
    Some(parts.join(", "))
}

/// The value of one covered component.
fn component(req: &RequestParts<'_>, name: &str) -> Result<String, SigError> {
    Ok(match name {
        "@method" => req.method.to_string(),
        "@authority" => req.authority.trim().to_ascii_lowercase(),
        "@path" => {
            if req.path.is_empty() {
                "/".into()
            } else {
                req.path.to_string()
            }
        }
        "@query" => format!("?{}", req.query.unwrap_or("")),
        "@request-target" => match req.query {
            Some(q) => format!("{}?{q}", req.path),
            None => req.path.to_string(),
        },
        n if n.starts_with('@') => {
            return Err(SigError::Malformed(format!(
                "derived component `{n}` is not supported"
            )));
        }
        n => joined(req.headers, n).ok_or_else(|| SigError::AbsentComponent(n.into()))?,
    })
}

/// The signature base (RFC 9421 §2.5) for `components` with the serialised `params_line`.
pub fn signature_base(
    req: &RequestParts<'_>,
    components: &[String],
    params_line: &str,
) -> Result<String, SigError> {
    let mut base = String::new();
    for c in components {
        base.push('"');
        base.push_str(c);
        base.push_str("\": ");
        let value = component(req, c)?;
        if value.contains(['\n', '\r']) {
            return Err(SigError::Malformed(format!("`{c}` holds a line break")));
        }
        base.push_str(&value);
        base.push('\n');
    }
    base.push_str("\"@signature-params\": ");
    base.push_str(params_line);
    Ok(base)
}

/// The headers a signer adds: `Signature-Input` and `Signature` values (label `sig1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub signature_input: String,
    pub signature: String,
}

/// The `@signature-params` inner list: `components` with `created`, `keyid` and `alg`.
pub fn params_line(components: &[&str], key: &SigningKey, created: i64) -> String {
    let items: Vec<Item> = components
        .iter()
        .map(|c| Item {
            bare: Bare::String((*c).to_string()),
            params: Vec::new(),
        })
        .collect();
    let params: Params = vec![
        ("created".into(), Bare::Integer(created)),
        ("keyid".into(), Bare::String(key.kid.clone())),
        ("alg".into(), Bare::String(key.alg.name().into())),
    ];
    sfv::write_inner_list(&items, &params)
}

/// Signs `components` of `req` with `key`, `created` (Unix seconds) and `keyid`; adds `alg`.
pub fn sign(
    req: &RequestParts<'_>,
    components: &[&str],
    key: &SigningKey,
    created: i64,
) -> Result<Signed, SigError> {
    let line = params_line(components, key, created);
    let names: Vec<String> = components.iter().map(|c| (*c).to_string()).collect();
    let base = signature_base(req, &names, &line)?;
    let sig = key.sign(base.as_bytes())?;
    Ok(Signed {
        signature_input: format!("sig1={line}"),
        signature: format!("sig1=:{}:", STANDARD.encode(sig)),
    })
}

/// The headers of a signed JSON webhook `POST url` with `body`: `Content-Type`,
/// `Content-Digest` (sha-256) and an RFC 9421 signature over the USP components, `created` now.
pub fn sign_webhook(
    key: &SigningKey,
    url: &url::Url,
    body: &[u8],
    created: i64,
) -> Result<HeaderMap, SigError> {
    let host = url
        .host_str()
        .ok_or_else(|| SigError::Malformed(format!("`{url}` has no host")))?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let value = |v: &str| {
        http::HeaderValue::from_str(v).map_err(|_| SigError::Malformed("header value".into()))
    };
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, value("application/json")?);
    headers.insert("content-digest", value(&content_digest(body))?);
    let parts = RequestParts {
        method: "POST",
        authority: &authority,
        path: url.path(),
        query: url.query(),
        headers: &headers,
    };
    let s = sign(&parts, &USP_COMPONENTS, key, created)?;
    headers.insert("signature-input", value(&s.signature_input)?);
    headers.insert("signature", value(&s.signature)?);
    Ok(headers)
}

/// What a verifier accepts.
#[derive(Debug, Clone)]
pub struct Policy<'a> {
    /// Components every accepted signature must cover.
    pub required: &'a [&'a str],
    pub algorithms: &'a [Alg],
    /// Largest distance between `created` and now.
    pub max_age: Duration,
    /// A signature without `created` is refused (webhooks); request signatures may omit it
    /// (USP §9.1.4), and are then checked for freshness only when they carry it.
    pub require_created: bool,
}

/// An accepted signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub label: String,
    pub keyid: String,
    pub alg: Alg,
    /// `created`, when the signature carries it.
    pub created: Option<i64>,
    /// The signature bytes as sent. Replay detection must not key on them: an ECDSA signature
    /// has a second valid form (s -> n - s) for the same message. It keys on [`Verified::replay_key`].
    pub signature: Vec<u8>,
    /// What was signed, by whom: [`replay_key`] of the key and the signature base (which ends
    /// with `@signature-params`: `keyid`, `created`, `nonce`...). Every valid signature of one
    /// message by one key has the same replay key, whatever its byte form.
    pub replay_key: [u8; 32],
}

/// How long an accepted signature must be remembered to refuse its replay: it verifies while
/// `created` is within `max_age` of now, so the last instant it could be replayed is at most
/// `2 × max_age` after it was accepted (`created` up to `max_age` in the future), plus one
/// second for the whole-second clock.
pub fn replay_window(max_age: Duration) -> Duration {
    max_age
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(1))
}

/// SHA-256 over the algorithm, the verifying key's public bytes and the signature base: the
/// identity of a signed message, independent of the signature's encoding (ECDSA's high-S
/// twin, a relabelled `Signature-Input`).
pub fn replay_key(key: &VerifyingKey, base: &str) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(key.alg.name().as_bytes());
    ctx.update(b"\n");
    ctx.update(key.public_bytes());
    ctx.update(b"\n");
    ctx.update(base.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn param<'p>(params: &'p Params, name: &str) -> Option<&'p Bare> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// Verifies the request's signatures: the first label that covers every required component is
/// checked (key, algorithm, freshness, then the signature itself); `now` is Unix seconds.
pub fn verify(
    req: &RequestParts<'_>,
    keys: &[VerifyingKey],
    policy: &Policy<'_>,
    now: i64,
) -> Result<Verified, SigError> {
    let input = joined(req.headers, "signature-input");
    let sigs = joined(req.headers, "signature");
    let (Some(input), Some(sigs)) = (input, sigs) else {
        return Err(SigError::Unsigned);
    };
    let inputs = sfv::dictionary(&input).map_err(|e| SigError::Malformed(e.to_string()))?;
    let sigs = sfv::dictionary(&sigs).map_err(|e| SigError::Malformed(e.to_string()))?;
    let mut first_missing = None;
    for (label, member) in &inputs {
        let Member::InnerList(items, params) = member else {
            return Err(SigError::Malformed(format!(
                "`{label}` in Signature-Input is not an inner list"
            )));
        };
        let mut names = Vec::with_capacity(items.len());
        for it in items {
            match &it.bare {
                Bare::String(s) if it.params.is_empty() => names.push(s.clone()),
                Bare::String(s) => {
                    return Err(SigError::Malformed(format!(
                        "component parameters on `{s}` are not supported"
                    )));
                }
                _ => {
                    return Err(SigError::Malformed(
                        "component identifiers must be strings".into(),
                    ));
                }
            }
        }
        if let Some(m) = policy
            .required
            .iter()
            .find(|r| !names.iter().any(|n| n == *r))
        {
            first_missing.get_or_insert_with(|| (*m).to_string());
            continue;
        }
        let signature = match sigs.iter().find(|(k, _)| k == label) {
            Some((
                _,
                Member::Item(Item {
                    bare: Bare::Bytes(b),
                    ..
                }),
            )) => b.clone(),
            _ => {
                return Err(SigError::Malformed(format!(
                    "no Signature byte sequence for `{label}`"
                )));
            }
        };
        let keyid = match param(params, "keyid") {
            Some(Bare::String(k)) => k.clone(),
            _ => return Err(SigError::Malformed("`keyid` is required".into())),
        };
        let key = keys
            .iter()
            .find(|k| k.kid == keyid)
            .ok_or_else(|| SigError::UnknownKey(keyid.clone()))?;
        match param(params, "alg") {
            None => {}
            Some(Bare::String(a)) if Alg::parse(a) == Some(key.alg) => {}
            Some(Bare::String(a)) => return Err(SigError::WrongAlgorithm(a.clone())),
            Some(_) => return Err(SigError::Malformed("`alg` must be a string".into())),
        }
        if !policy.algorithms.contains(&key.alg) {
            return Err(SigError::WrongAlgorithm(key.alg.name().into()));
        }
        let created = match param(params, "created") {
            Some(Bare::Integer(c)) => Some(*c),
            None if !policy.require_created => None,
            _ => return Err(SigError::Malformed("`created` is required".into())),
        };
        if let Some(created) = created {
            let age = now - created;
            let window = i64::try_from(policy.max_age.as_secs()).unwrap_or(i64::MAX);
            if age.abs() > window {
                return Err(SigError::Stale(age));
            }
        }
        if let Some(Bare::Integer(expires)) = param(params, "expires")
            && *expires <= now
        {
            return Err(SigError::Expired);
        }
        let base = signature_base(req, &names, &sfv::write_inner_list(items, params))?;
        if !key.verify(base.as_bytes(), &signature) {
            return Err(SigError::Forged);
        }
        return Ok(Verified {
            label: label.clone(),
            keyid,
            alg: key.alg,
            created,
            signature,
            replay_key: replay_key(key, &base),
        });
    }
    Err(match first_missing {
        Some(m) => SigError::MissingComponent(m),
        None => SigError::Unsigned,
    })
}

/// The legacy HMAC-SHA256 scheme: `<header>: t=<unix seconds>,v1=<hex>` where the MAC is over
/// `<t>.<raw body>`. Returns the MAC bytes (for replay detection).
pub fn verify_hmac(
    header: Option<&str>,
    secret: &[u8],
    body: &[u8],
    max_age: Duration,
    now: i64,
) -> Result<Vec<u8>, SigError> {
    let header = header.ok_or(SigError::Unsigned)?;
    let mut t = None;
    let mut macs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => macs.push(v.to_string()),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| SigError::Malformed("HMAC header needs t=<unix seconds>".into()))?;
    if macs.is_empty() {
        return Err(SigError::Malformed("HMAC header needs v1=<hex>".into()));
    }
    let age = now - t;
    if age.abs() > i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX) {
        return Err(SigError::Stale(age));
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut msg = format!("{t}.").into_bytes();
    msg.extend_from_slice(body);
    for m in macs {
        let Some(tag) = hex(&m) else { continue };
        if hmac::verify(&key, &msg, &tag).is_ok() {
            return Ok(tag);
        }
    }
    Err(SigError::Forged)
}

/// The HMAC header value a legacy sender would send.
pub fn hmac_header(secret: &[u8], body: &[u8], t: i64) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut msg = format!("{t}.").into_bytes();
    msg.extend_from_slice(body);
    let tag = hmac::sign(&key, &msg);
    let hexed: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("t={t},v1={hexed}")
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// RFC 9421 Appendix B.1.4 (`test-key-ed25519`), public part.
    fn rfc_ed25519() -> VerifyingKey {
        VerifyingKey::from_jwk(
            &json!({"kid": "test-key-ed25519", "kty": "OKP", "crv": "Ed25519",
            "x": "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"}),
        )
        .unwrap()
        .unwrap()
    }

    /// RFC 9421 Appendix B.2.6: the base is rebuilt from the test request and the signature verifies.
    #[test]
    fn rfc9421_b26_ed25519_vector() {
        let h = headers(&[
            ("date", "Tue, 20 Apr 2021 02:07:55 GMT"),
            ("content-type", "application/json"),
            ("content-length", "18"),
            (
                "signature-input",
                r#"sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519""#,
            ),
            (
                "signature",
                "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:",
            ),
        ]);
        let req = RequestParts {
            method: "POST",
            authority: "example.com",
            path: "/foo",
            query: Some("param=Value&Pet=dog"),
            headers: &h,
        };
        let names: Vec<String> = [
            "date",
            "@method",
            "@path",
            "@authority",
            "content-type",
            "content-length",
        ]
        .map(String::from)
        .to_vec();
        let base = signature_base(
            &req,
            &names,
            r#"("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519""#,
        )
        .unwrap();
        assert_eq!(
            base,
            "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n\"@method\": POST\n\"@path\": /foo\n\"@authority\": example.com\n\"content-type\": application/json\n\"content-length\": 18\n\"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\""
        );
        let policy = Policy {
            required: &["@method", "@path", "@authority"],
            algorithms: &Alg::ALL,
            max_age: Duration::from_secs(300),
            require_created: true,
        };
        let v = verify(&req, &[rfc_ed25519()], &policy, 1618884473 + 10).unwrap();
        assert_eq!(v.label, "sig-b26");
        assert_eq!(v.alg, Alg::Ed25519);
        // The same vector, outside the freshness window.
        assert_eq!(
            verify(&req, &[rfc_ed25519()], &policy, 1618884473 + 301),
            Err(SigError::Stale(301))
        );
        // A changed method no longer verifies.
        let moved = RequestParts {
            method: "PUT",
            ..req
        };
        assert_eq!(
            verify(&moved, &[rfc_ed25519()], &policy, 1618884473),
            Err(SigError::Forged)
        );
    }

    /// RFC 9421 Appendix B.2.4 (`test-key-ecc-p256`, a response): the transcribed signature
    /// base verifies with the B.1.3 public key.
    #[test]
    fn rfc9421_b24_ecdsa_vector_verifies() {
        let key = VerifyingKey::from_jwk(&json!({"kid": "test-key-ecc-p256", "kty": "EC",
            "crv": "P-256", "x": "qIVYZVLCrPZHGHjP17CTW0_-D9Lfw0EkjqF7xB4FivA",
            "y": "Mc4nN9LTDOBhfoUeg8Ye9WedFRhnZXZJA12Qp0zZ6F0"}))
        .unwrap()
        .unwrap();
        let input = r#"sig-b24=("@status" "content-type" "content-digest" "content-length");created=1618884473;keyid="test-key-ecc-p256""#;
        let dict = sfv::dictionary(input).unwrap();
        let Member::InnerList(items, params) = &dict[0].1 else {
            panic!("inner list expected")
        };
        let base = format!(
            "\"@status\": 200\n\"content-type\": application/json\n\"content-digest\": sha-512=:mEWXIS7MaLRuGgxOBdODa3xqM1XdEvxoYhvlCFJ41QJgJc4GTsPp29l5oGX69wWdXymyU0rjJuahq4l5aGgfLQ==:\n\"content-length\": 23\n\"@signature-params\": {}",
            sfv::write_inner_list(items, params)
        );
        let sig = STANDARD
            .decode("wNmSUAhwb5LxtOtOpNa6W5xj067m5hFrj0XQ4fvpaCLx0NKocgPquLgyahnzDnDAUy5eCdlYUEkLIj+32oiasw==")
            .unwrap();
        assert!(key.verify(base.as_bytes(), &sig));
        assert!(!key.verify(base.replace("200", "201").as_bytes(), &sig));
    }

    fn usp_request(h: &HeaderMap) -> RequestParts<'_> {
        RequestParts {
            method: "POST",
            authority: "gw.example:8443",
            path: "/webhooks/spa",
            query: None,
            headers: h,
        }
    }

    #[test]
    fn sign_then_verify_each_algorithm_and_refusals() {
        let body = br#"{"event":"booking.confirmed"}"#;
        for alg in Alg::ALL {
            let key = SigningKey::generate(alg, "k-1").unwrap();
            let mut h = headers(&[
                ("content-type", "application/json"),
                ("content-digest", &content_digest(body)),
            ]);
            let s = sign(&usp_request(&h), &USP_COMPONENTS, &key, 1_800_000_000).unwrap();
            h.insert("signature-input", s.signature_input.parse().unwrap());
            h.insert("signature", s.signature.parse().unwrap());
            let keys = [key.verifying_key()];
            let policy = Policy {
                required: &USP_COMPONENTS,
                algorithms: &Alg::ALL,
                max_age: Duration::from_secs(300),
                require_created: true,
            };
            let req = usp_request(&h);
            assert!(verify_content_digest(&h, body).is_ok());
            assert_eq!(
                verify_content_digest(&h, b"{}"),
                Err(SigError::DigestMismatch)
            );
            assert_eq!(
                verify(&req, &keys, &policy, 1_800_000_100).unwrap().alg,
                alg
            );
            // Unknown key.
            let other = SigningKey::generate(alg, "k-2").unwrap().verifying_key();
            assert_eq!(
                verify(&req, &[other], &policy, 1_800_000_000),
                Err(SigError::UnknownKey("k-1".into()))
            );
            // Algorithm not accepted.
            let only_other: Vec<Alg> = Alg::ALL.into_iter().filter(|a| *a != alg).collect();
            let strict = Policy {
                algorithms: &only_other,
                ..policy.clone()
            };
            assert!(matches!(
                verify(&req, &keys, &strict, 1_800_000_000),
                Err(SigError::WrongAlgorithm(_))
            ));
            // Stale, both directions.
            assert!(matches!(
                verify(&req, &keys, &policy, 1_800_000_301),
                Err(SigError::Stale(_))
            ));
            assert!(matches!(
                verify(&req, &keys, &policy, 1_799_999_000),
                Err(SigError::Stale(_))
            ));
            // Another host.
            let relayed = RequestParts {
                authority: "evil.example",
                ..req
            };
            assert_eq!(
                verify(&relayed, &keys, &policy, 1_800_000_000),
                Err(SigError::Forged)
            );
        }
    }

    #[test]
    fn refuses_signatures_missing_required_components_or_mislabelled_alg() {
        let key = SigningKey::generate(Alg::Ed25519, "k").unwrap();
        let mut h = headers(&[("content-type", "application/json")]);
        let s = sign(&usp_request(&h), &["@method", "@path"], &key, 100).unwrap();
        h.insert("signature-input", s.signature_input.parse().unwrap());
        h.insert("signature", s.signature.parse().unwrap());
        let policy = Policy {
            required: &USP_COMPONENTS,
            algorithms: &Alg::ALL,
            max_age: Duration::from_secs(300),
            require_created: true,
        };
        assert_eq!(
            verify(&usp_request(&h), &[key.verifying_key()], &policy, 100),
            Err(SigError::MissingComponent("@authority".into()))
        );
        let lying = s
            .signature_input
            .replace("\"ed25519\"", "\"ecdsa-p256-sha256\"");
        h.insert("signature-input", lying.parse().unwrap());
        let loose = Policy {
            required: &["@method"],
            ..policy
        };
        assert_eq!(
            verify(&usp_request(&h), &[key.verifying_key()], &loose, 100),
            Err(SigError::WrongAlgorithm("ecdsa-p256-sha256".into()))
        );
        assert_eq!(
            verify(&usp_request(&HeaderMap::new()), &[], &loose, 100),
            Err(SigError::Unsigned)
        );
    }

    #[test]
    fn a_signature_is_remembered_as_long_as_it_could_verify() {
        // Accepted with `created` up to max_age ahead, it verifies until created + max_age.
        assert_eq!(
            replay_window(Duration::from_secs(300)),
            Duration::from_secs(601)
        );
        assert_eq!(replay_window(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn digest_must_be_present_and_sha256() {
        assert_eq!(
            verify_content_digest(&HeaderMap::new(), b"x"),
            Err(SigError::DigestMissing)
        );
        let h = headers(&[("content-digest", "sha-512=:AAAA:")]);
        assert!(matches!(
            verify_content_digest(&h, b"x"),
            Err(SigError::DigestMalformed(_))
        ));
        // RFC 9530 Appendix B.1's `{"hello": "world"}` example.
        assert_eq!(
            content_digest(b"{\"hello\": \"world\"}"),
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
        );
    }

    #[test]
    fn hmac_scheme() {
        let body = b"{\"id\":1}";
        let h = hmac_header(b"s3cret", body, 1000);
        assert!(verify_hmac(Some(&h), b"s3cret", body, Duration::from_secs(300), 1100).is_ok());
        assert_eq!(
            verify_hmac(Some(&h), b"other", body, Duration::from_secs(300), 1100),
            Err(SigError::Forged)
        );
        assert!(matches!(
            verify_hmac(Some(&h), b"s3cret", body, Duration::from_secs(300), 2000),
            Err(SigError::Stale(_))
        ));
        assert_eq!(
            verify_hmac(None, b"s3cret", body, Duration::from_secs(300), 1100),
            Err(SigError::Unsigned)
        );
        assert!(verify_hmac(Some("v1=00"), b"s", body, Duration::from_secs(1), 0).is_err());
    }
}
