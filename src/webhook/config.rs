//! A business's compiled `webhooks:` settings: keys, algorithms, freshness window, HMAC secret, transform, pointers, egress.
//! Built at load and never changed; it never panics on user input (every problem becomes a `Diagnostic`).

use super::egress::RetryPolicy;
use super::keys::{Alg, VerifyingKey};
use crate::binding::Kind;
use crate::config::diag::{Diagnostic, jq_error_place, locate_yaml};
use crate::config::mapping::{RetrySpec, WebhookSpec};
use crate::translate::transform::Transform;
use crate::util::duration::parse_duration;
use crate::util::env::substitute_env;
use http::HeaderName;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// Default freshness window for `created` (USP: 5 minutes).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);

/// One business's webhook ingress settings.
pub struct WebhookConfig {
    pub business: String,
    pub keys: Vec<VerifyingKey>,
    pub algorithms: Vec<Alg>,
    pub max_age: Duration,
    /// Header and secret of the legacy HMAC scheme.
    pub hmac: Option<(HeaderName, Vec<u8>)>,
    pub transform: Option<Transform>,
    pub event_id: String,
    pub resource_id: String,
    /// `{id}` is replaced by the booking id.
    pub resource_uri: String,
    pub method: String,
    /// Where accepted events are re-sent, signed by portico.
    pub deliver_to: Vec<url::Url>,
    pub retry: RetryPolicy,
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("business", &self.business)
            .field("keys", &self.keys)
            .field("algorithms", &self.algorithms)
            .field("max_age", &self.max_age)
            .field("hmac", &self.hmac.as_ref().map(|(h, _)| h.as_str()))
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl WebhookConfig {
    /// The resource URI for a booking id (the id percent-encoded as one segment).
    pub fn uri_for(&self, id: &str) -> String {
        self.resource_uri
            .replace("{id}", &crate::translate::path::encode_segment(id))
    }

    /// The subject an event is about (its resource id): deliveries about one subject keep their order.
    pub fn subject(&self, event: &serde_json::Value) -> Option<String> {
        super::egress::subject_at(event, &self.resource_id)
    }

    /// The booking id a resource URI of this business names (the inverse of [`Self::uri_for`]).
    pub fn id_of(&self, uri: &str) -> Option<String> {
        let (prefix, suffix) = self.resource_uri.split_once("{id}")?;
        let segment = uri.strip_prefix(prefix)?.strip_suffix(suffix)?;
        if segment.is_empty() || segment.contains('/') {
            return None;
        }
        percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    }

    /// The URI prefix every booking resource of this business starts with.
    pub fn uri_prefix(&self) -> &str {
        self.resource_uri
            .split("{id}")
            .next()
            .unwrap_or(&self.resource_uri)
    }
}

/// The http(s) URLs of a `deliver_to:` list; every other entry is reported through `bad`.
pub fn delivery_urls(list: &[String], mut bad: impl FnMut(String)) -> Vec<url::Url> {
    let mut out = Vec::new();
    for u in list {
        match url::Url::parse(u) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
                out.push(url)
            }
            _ => bad(format!("`{u}` is not an http(s) URL")),
        }
    }
    out
}

/// The schedule a `retry:` block describes (USP's defaults for what it leaves out); every
/// value that is not a duration is reported through `bad`.
pub fn retry_policy(spec: Option<&RetrySpec>, mut bad: impl FnMut(String)) -> RetryPolicy {
    let mut retry = RetryPolicy::default();
    if let Some(r) = spec {
        let mut dur = |v: &Option<String>, slot: &mut std::time::Duration, key: &str| {
            if let Some(s) = v {
                match parse_duration(s) {
                    Some(d) => *slot = d,
                    None => bad(format!("retry.{key}: `{s}` is not a duration")),
                }
            }
        };
        dur(&r.initial, &mut retry.initial, "initial");
        dur(&r.max_total, &mut retry.max_total, "max_total");
        dur(&r.timeout, &mut retry.timeout, "timeout");
        if let Some(n) = r.retries {
            retry.retries = n;
        }
    }
    retry
}

/// Compiles `spec` of the mapping `file` (YAML `text`).
pub fn compile(
    spec: &WebhookSpec,
    business: &str,
    kind: Kind,
    file: &Path,
    text: &str,
    definitions: Option<&str>,
) -> Result<WebhookConfig, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let err = |key: &str, msg: String, hint: &str| {
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &["webhooks", key]))
            .at(format!("webhooks.{key}"))
            .hint(hint.to_string())
    };
    let mut keys = Vec::new();
    if let Some(jwks) = &spec.jwks {
        let path = file.parent().unwrap_or(Path::new(".")).join(jwks);
        match std::fs::read_to_string(&path) {
            Ok(t) => match VerifyingKey::from_jwks(&t) {
                Ok(k) => keys = k,
                Err(e) => diags.push(err(
                    "jwks",
                    format!("{}: {e}", path.display()),
                    "a JWK Set: {\"keys\": [{\"kid\", \"kty\": \"EC\", \"crv\": \"P-256\", \"x\", \"y\"}]}",
                )),
            },
            Err(e) => diags.push(err(
                "jwks",
                format!("cannot read {}: {e}", path.display()),
                "the path is relative to the mapping file",
            )),
        }
    }
    let mut algorithms = Vec::new();
    for a in &spec.algorithms {
        match Alg::parse(a) {
            Some(alg) => algorithms.push(alg),
            None => diags.push(err(
                "algorithms",
                format!("unknown algorithm `{a}`"),
                "use ecdsa-p256-sha256 or ed25519",
            )),
        }
    }
    if spec.algorithms.is_empty() {
        algorithms = Alg::ALL.to_vec();
    }
    let max_age = match &spec.max_age {
        None => DEFAULT_MAX_AGE,
        Some(s) => parse_duration(s).unwrap_or_else(|| {
            diags.push(err(
                "max_age",
                format!("`{s}` is not a duration"),
                "such as 300s or 5m",
            ));
            DEFAULT_MAX_AGE
        }),
    };
    let hmac = match &spec.hmac {
        None => None,
        Some(h) => {
            let header = h.header.as_deref().unwrap_or("x-webhook-signature");
            match (substitute_env(&h.secret), HeaderName::try_from(header)) {
                (Ok(secret), Ok(name)) if !secret.is_empty() => Some((name, secret.into_bytes())),
                (Err(e), _) => {
                    diags.push(err("hmac", e, "set the environment variable"));
                    None
                }
                _ => {
                    diags.push(err(
                        "hmac",
                        "the HMAC header name or secret is invalid".into(),
                        "a non-empty secret and a valid header name",
                    ));
                    None
                }
            }
        }
    };
    if keys.is_empty() && hmac.is_none() {
        diags.push(err(
            "jwks",
            "webhooks need verifying keys (`jwks`) or an `hmac` secret".into(),
            "unsigned webhooks are never accepted",
        ));
    }
    let transform = match &spec.transform {
        None => None,
        Some(code) => match Transform::compile_with(definitions, code) {
            Ok(t) => Some(t),
            Err(e) => {
                const WHAT: &str =
                    "a jq program turning the legacy payload into the protocol event";
                let key_line = locate_yaml(text, &["webhooks", "transform"]);
                let (line, place) = jq_error_place(text, key_line, code, e.offset);
                let hint = place.map_or(WHAT.to_string(), |p| format!("{p} ({WHAT})"));
                diags.push(err("transform", format!("transform: {}", e.message), &hint).line(line));
                None
            }
        },
    };
    let pointer = |key: &str, v: &Option<String>, default: &str, diags: &mut Vec<Diagnostic>| {
        let p = v.clone().unwrap_or_else(|| default.to_string());
        if !p.starts_with('/') {
            diags.push(err(
                key,
                format!("`{p}` is not a JSON pointer"),
                "JSON pointers start with `/`, e.g. /event_id",
            ));
        }
        p
    };
    let event_id = pointer("event_id", &spec.event_id, "/event_id", &mut diags);
    let resource_id = pointer("resource_id", &spec.resource_id, "/booking_id", &mut diags);
    let usp = kind == Kind::Usp;
    let resource_uri = spec.resource_uri.clone().unwrap_or_else(|| {
        if usp {
            "usp://bookings/{id}".into()
        } else {
            format!("webhook://{business}/{{id}}")
        }
    });
    if !resource_uri.contains("{id}") {
        diags.push(err(
            "resource_uri",
            format!("`{resource_uri}` has no `{{id}}`"),
            "e.g. usp://bookings/{id}",
        ));
    }
    let method = spec.method.clone().unwrap_or_else(|| {
        if usp {
            "usp_webhook".into()
        } else {
            "notifications/webhook".into()
        }
    });
    let deliver_to = delivery_urls(&spec.deliver_to, |m| {
        diags.push(err(
            "deliver_to",
            m,
            "e.g. https://platform.example/webhooks/usp",
        ))
    });
    let retry = retry_policy(spec.retry.as_ref(), |m| {
        diags.push(err("retry", m, "such as 30s or 15m"))
    });
    if !diags.is_empty() {
        return Err(diags);
    }
    Ok(WebhookConfig {
        business: business.to_string(),
        keys,
        algorithms,
        max_age,
        hmac,
        transform,
        event_id,
        resource_id,
        resource_uri,
        method,
        deliver_to,
        retry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booking_ids_round_trip_through_resource_uris() {
        let cfg = WebhookConfig {
            business: "spa".into(),
            keys: Vec::new(),
            algorithms: Vec::new(),
            max_age: DEFAULT_MAX_AGE,
            hmac: None,
            transform: None,
            event_id: "/event_id".into(),
            resource_id: "/booking_id".into(),
            resource_uri: "usp://bookings/{id}/state".into(),
            method: "usp_webhook".into(),
            deliver_to: Vec::new(),
            retry: RetryPolicy::default(),
        };
        for id in ["B-1", "a b/c?", "é"] {
            assert_eq!(cfg.id_of(&cfg.uri_for(id)).as_deref(), Some(id));
        }
        assert_eq!(cfg.id_of("usp://bookings//state"), None);
        assert_eq!(cfg.id_of("usp://bookings/a/b/state"), None);
        assert_eq!(cfg.id_of("usp://other/B-1/state"), None);
    }
}
