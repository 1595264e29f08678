//! The RFC 9421 `Signature-Input` / `Signature` and RFC 9530 `Content-Digest` parsers, through
//! the verifier a webhook request meets. Input: three header values, one per line
//! (`Signature-Input`, `Signature`, `Content-Digest`), then the body. The request is a fixed
//! `POST http://127.0.0.1:8080/webhooks/seaside-spa`, checked against the demo sender's public
//! key at a fixed clock, so seeds signed with the demo key (scripts/fuzz-seed) verify. An
//! accepted signature covers every required component (`content-digest` among them) and is
//! fresh; the body's digest is checked separately, as ingress does before verifying.
#![no_main]

use std::sync::LazyLock;
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use portico::webhook::keys::{Alg, SigningKey, VerifyingKey};
use portico::webhook::sfv::{self, Bare, Member};
use portico::webhook::sig::{self, Policy, RequestParts, USP_COMPONENTS};

/// `created` of the seeds.
const NOW: i64 = 1_790_000_000;

static KEYS: LazyLock<Vec<VerifyingKey>> = LazyLock::new(|| {
    let jwk = serde_json::from_str(portico::demo::webhooks::DEMO_KEY).unwrap_or_default();
    SigningKey::from_jwk(&jwk)
        .map(|k| vec![k.verifying_key()])
        .unwrap_or_default()
});

fn lines(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut out = Vec::new();
    let mut rest = data;
    while out.len() < 3 {
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + 1..];
            }
            None => break,
        }
    }
    (out, rest)
}

fuzz_target!(|data: &[u8]| {
    assert!(!KEYS.is_empty(), "the demo key did not load");
    let (values, body) = lines(data);
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, v) in ["signature-input", "signature", "content-digest"]
        .into_iter()
        .zip(&values)
    {
        // Every field is also parsed on its own: a dictionary the parser accepts re-parses the
        // same after its inner lists are written back.
        if let Ok(text) = std::str::from_utf8(v)
            && let Ok(dict) = sfv::dictionary(text)
        {
            for (_, m) in &dict {
                if let Member::InnerList(items, params) = m {
                    let line = sfv::write_inner_list(items, params);
                    let again = sfv::dictionary(&format!("k={line}"));
                    assert_eq!(
                        again
                            .ok()
                            .and_then(|d| d.into_iter().next())
                            .map(|(_, m)| m),
                        Some(m.clone()),
                        "inner list {line:?} does not round-trip"
                    );
                }
            }
        }
        if let Ok(hv) = HeaderValue::from_bytes(v) {
            headers.append(name, hv);
        }
    }
    let _ = sig::verify_content_digest(&headers, body);
    let parts = RequestParts {
        method: "POST",
        authority: "127.0.0.1:8080",
        path: "/webhooks/seaside-spa",
        query: None,
        headers: &headers,
    };
    let policy = Policy {
        required: &USP_COMPONENTS,
        algorithms: &Alg::ALL,
        max_age: Duration::from_secs(300),
        require_created: true,
    };
    if let Ok(v) = sig::verify(&parts, &KEYS, &policy, NOW) {
        // (The body's digest is a separate check: ingress runs `verify_content_digest` first.)
        // An accepted label covers every required component and is fresh.
        let input = headers
            .get("signature-input")
            .and_then(|h| h.to_str().ok())
            .and_then(|t| sfv::dictionary(t).ok())
            .and_then(|d| d.into_iter().find(|(k, _)| *k == v.label));
        let Some((_, Member::InnerList(items, _))) = input else {
            panic!("verified {v:?} without its Signature-Input label");
        };
        for c in USP_COMPONENTS {
            assert!(
                items.iter().any(|i| i.bare == Bare::String(c.to_string())),
                "verified {v:?} without covering `{c}`"
            );
        }
        assert!(
            v.created.is_some_and(|c| (c - NOW).abs() <= 300),
            "verified a stale {v:?}"
        );
    }
});
