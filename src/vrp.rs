//! VRP (HemmaBo) receipts: the v1 envelope verifier with per-attestation status (receipt-v1 §3–§7)
//! and the MCP composition profile's `vrp.mcp.transport.1` assertion, signed as a `transport`
//! attestation. It must never re-canonicalize a JWS to verify it, or report an unchecked layer as verified.

use crate::auth::jcs;
use crate::auth::jws::{Jws, JwsAlg, JwtKey};
use crate::webhook::keys::SigningKey;
use serde_json::{Value, json};

/// The only envelope version a v1 verifier accepts.
pub const RECEIPT_VERSION: &str = "1.0";
/// The MCP composition profile's version and assertion type.
pub const PROFILE_VERSION: &str = "1.0";
pub const TRANSPORT_TYPE: &str = "vrp.mcp.transport.1";

/// Unix seconds of an RFC 3339 date-time (`2026-06-24T11:00:00.000Z`, offsets allowed).
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())
            .flatten()
    };
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let (sign, hm) = match rest.as_bytes().first()? {
                b'+' => (1, &rest[1..]),
                b'-' => (-1, &rest[1..]),
                _ => return None,
            };
            let (oh, om) = hm.split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        }
    };
    // Howard Hinnant's days_from_civil.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// One attestation's verdict.
fn verdict(
    index: usize,
    layer: Value,
    status: &str,
    error: Option<&str>,
    kid: Option<&str>,
) -> Value {
    json!({"index": index, "layer": layer, "status": status, "error": error, "kid": kid})
}

fn attestation(index: usize, a: &Value, keys: &[JwtKey], now: i64) -> Value {
    let layer = a.get("layer").cloned().unwrap_or(Value::Null);
    if !a.is_object() || !layer.is_string() {
        return verdict(index, layer, "invalid", Some("malformed_attestation"), None);
    }
    let window = (
        a.get("valid_from")
            .and_then(Value::as_str)
            .and_then(parse_time),
        a.get("valid_until")
            .and_then(Value::as_str)
            .and_then(parse_time),
    );
    let (Some(from), Some(until)) = window else {
        return verdict(
            index,
            layer,
            "invalid",
            Some("missing_validity_window"),
            None,
        );
    };
    let Some(sig) = a.get("signature").and_then(Value::as_str) else {
        return verdict(
            index,
            layer,
            "unverifiable",
            Some("layer_unverifiable"),
            None,
        );
    };
    let Ok(jws) = Jws::parse(sig) else {
        return verdict(index, layer, "invalid", Some("sig_invalid"), None);
    };
    let Ok(alg) = jws.alg(&[JwsAlg::EdDsa]) else {
        return verdict(index, layer, "invalid", Some("sig_invalid"), None);
    };
    let Some(kid) = jws.kid() else {
        return verdict(index, layer, "unverifiable", Some("key_unresolvable"), None);
    };
    let Some(key) = keys.iter().find(|k| k.kid() == kid) else {
        return verdict(index, layer, "unverifiable", Some("key_unresolvable"), None);
    };
    // D5: over the JWS bytes as received; D2: the window only after the signature.
    if jws.verify(alg, key).is_err() {
        return verdict(index, layer, "invalid", Some("sig_invalid"), None);
    }
    if now < from {
        return verdict(index, layer, "expired", Some("not_yet_valid"), Some(kid));
    }
    if now > until {
        return verdict(index, layer, "expired", Some("sig_expired"), Some(kid));
    }
    verdict(index, layer, "verified", None, Some(kid))
}

/// Verifies a v1 receipt against a JWK Set at `now` (Unix seconds): partial verification, one
/// verdict per attestation (receipt-v1 §6).
pub fn verify_receipt(receipt: &Value, jwks: &Value, now: i64) -> Value {
    let refuse = |code: &str| json!({"receipt_valid": false, "fully_verified": false, "errors": [code], "attestations": []});
    let Some(r) = receipt.as_object() else {
        return refuse("malformed_receipt");
    };
    if r.get("vrp_receipt_version").and_then(Value::as_str) != Some(RECEIPT_VERSION) {
        return refuse("unsupported_version");
    }
    let atts = match r.get("attestations").and_then(Value::as_array) {
        Some(a) if !a.is_empty() && r.get("subject").is_some() && r.get("issuer").is_some() => a,
        _ => return refuse("malformed_receipt"),
    };
    let keys = JwtKey::from_jwks(jwks).unwrap_or_default();
    let verdicts: Vec<Value> = atts
        .iter()
        .enumerate()
        .map(|(i, a)| attestation(i, a, &keys, now))
        .collect();
    let all = verdicts.iter().all(|v| v["status"] == "verified");
    json!({"receipt_valid": true, "fully_verified": all, "errors": [], "attestations": verdicts})
}

/// `checkIn` -> `check_in` (the profile's normative snake_case argument keys).
fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Hex SHA-256 of the JCS form of `arguments`, top-level keys normalised to snake_case.
pub fn arguments_sha256(arguments: &Value) -> Option<String> {
    let normalised = match arguments {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (snake(k), v.clone())).collect()),
        other => other.clone(),
    };
    let text = jcs::canonical(&normalised).ok()?;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    Some(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

/// What a transport attestation says and how long it is valid.
pub struct Transport<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub issuer: &'a str,
    /// Where the verifying JWKS is published.
    pub source: &'a str,
    pub offer_ref: Option<&'a str>,
    /// Unix seconds.
    pub served_at: i64,
    pub valid_for: i64,
}

/// Signs the `vrp.mcp.transport.1` assertion (compact EdDSA JWS) and wraps it as a `transport`
/// attestation.
pub fn transport_attestation(t: &Transport<'_>, key: &SigningKey) -> Option<Value> {
    let served = crate::clock::rfc3339(t.served_at);
    let mut assertion = json!({
        "vrp_mcp_profile_version": PROFILE_VERSION,
        "type": TRANSPORT_TYPE,
        "tool": t.tool,
        "arguments_sha256": arguments_sha256(t.arguments)?,
        "served_at": served,
        "issuer": t.issuer,
    });
    if let Some(r) = t.offer_ref {
        assertion["offer_ref"] = json!(r);
    }
    let header = json!({"alg": "EdDSA", "kid": key.verifying_key().kid, "typ": "JWT"});
    let signature = crate::auth::jws::sign(&header, &assertion, key).ok()?;
    let mut a = json!({
        "layer": "transport",
        "source": t.source,
        "signature": signature,
        "valid_from": served,
        "valid_until": crate::clock::rfc3339(t.served_at + t.valid_for),
    });
    if let Some(r) = t.offer_ref {
        a["ref"] = json!(r);
    }
    Some(a)
}

/// A mapping file's `vrp:` section.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VrpSpec {
    /// The node identity put in `issuer` (e.g. the property's host).
    pub issuer: String,
    /// Private Ed25519 JWK file (relative to the mapping): the node's offer key.
    pub key: String,
    /// Where the public key is published (`source`), e.g. `https://host/.well-known/jwks.json`.
    pub source: String,
    /// Attestation lifetime (`60m`, `1h`, `1d`); default one hour.
    #[serde(default)]
    pub valid_for: Option<String>,
    /// Tools whose results carry a transport attestation -> settings.
    pub tools: indexmap::IndexMap<String, VrpToolSpec>,
}

#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VrpToolSpec {
    /// JSON pointer into `structuredContent` giving the offer reference (`offer_ref`, `ref`).
    #[serde(default)]
    pub offer_ref: Option<String>,
}

/// The compiled `vrp:` section.
pub struct VrpConfig {
    pub issuer: String,
    pub key: SigningKey,
    pub source: String,
    pub valid_for: i64,
    pub tools: std::collections::HashMap<String, Option<String>>,
}

impl std::fmt::Debug for VrpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VrpConfig")
            .field("issuer", &self.issuer)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Compiles `spec` (the `vrp:` section of `file`, YAML `text`).
pub fn compile(
    spec: &VrpSpec,
    file: &std::path::Path,
    text: &str,
    tools: &[&String],
) -> Result<VrpConfig, Vec<crate::config::diag::Diagnostic>> {
    use crate::config::diag::{Diagnostic, locate_yaml};
    let err = |key: &str, msg: String, hint: &str| {
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &["vrp", key]))
            .at(format!("vrp.{key}"))
            .hint(hint.to_string())
    };
    let mut diags = Vec::new();
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    let key = SigningKey::read(&dir.join(&spec.key)).and_then(|k| {
        (k.verifying_key().alg == crate::webhook::keys::Alg::Ed25519)
            .then_some(k)
            .ok_or_else(|| "VRP signs with Ed25519 (EdDSA) keys only".to_string())
    });
    let key = match key {
        Ok(k) => Some(k),
        Err(e) => {
            diags.push(err(
                "key",
                e,
                "a private OKP Ed25519 JWK with `kid`, relative to the mapping file",
            ));
            None
        }
    };
    let valid_for = match spec.valid_for.as_deref() {
        None => Some(3600),
        Some(v) => crate::auth::policy::long_duration(v).map(|d| d.as_secs() as i64),
    };
    if valid_for.is_none() {
        diags.push(err(
            "valid_for",
            "`valid_for` is not a duration".into(),
            "write e.g. `1h` or `30m`",
        ));
    }
    for (t, s) in &spec.tools {
        if !tools.contains(&t) {
            diags.push(err(
                "tools",
                format!("`{t}` is not a tool of this mapping"),
                "name a tool under `tools:`",
            ));
        }
        if s.offer_ref.as_deref().is_some_and(|p| !p.starts_with('/')) {
            diags.push(err(
                "tools",
                format!("`{t}`: offer_ref is not a JSON pointer"),
                "e.g. `/offer_ref`",
            ));
        }
    }
    match (key, valid_for, diags.is_empty()) {
        (Some(key), Some(valid_for), true) => Ok(VrpConfig {
            issuer: spec.issuer.clone(),
            key,
            source: spec.source.clone(),
            valid_for,
            tools: spec
                .tools
                .iter()
                .map(|(k, v)| (k.clone(), v.offer_ref.clone()))
                .collect(),
        }),
        _ => Err(diags),
    }
}

/// Adds a signed transport attestation to a successful result of VRP tool `tool` (under the
/// business's VRP configuration `cfg`), in `result._meta.vrp.attestations`.
pub fn attach(
    cfg: Option<&VrpConfig>,
    tool: &str,
    arguments: &Value,
    reply: &mut crate::binding::Reply,
) {
    let Some(cfg) = cfg else {
        return;
    };
    let Some(pointer) = cfg.tools.get(tool) else {
        return;
    };
    reply.materialize();
    let crate::binding::Reply::Result(Value::Object(result)) = reply else {
        return;
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        return;
    }
    let offer_ref = pointer.as_deref().and_then(|p| {
        result
            .get("structuredContent")
            .and_then(|sc| sc.pointer(p))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let t = Transport {
        tool,
        arguments,
        issuer: &cfg.issuer,
        source: &cfg.source,
        offer_ref: offer_ref.as_deref(),
        served_at: now,
        valid_for: cfg.valid_for,
    };
    let Some(att) = transport_attestation(&t, &cfg.key) else {
        tracing::error!(tool = %tool, "the VRP transport assertion could not be signed");
        return;
    };
    let meta = result.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(m) = meta {
        m.insert("vrp".into(), json!({ "attestations": [att] }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_with_fractions_and_offsets() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2026-09-12T09:00:00.000Z"), Some(1_789_203_600));
        assert_eq!(parse_time("2026-09-12T11:00:00+02:00"), Some(1_789_203_600));
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "yesterday",
            "2026-01-01T00:00:00",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn camel_case_arguments_hash_like_snake_case() {
        let a = arguments_sha256(
            &json!({"checkIn": "2026-09-02", "checkOut": "2026-09-05", "guests": 2}),
        );
        let b = arguments_sha256(
            &json!({"guests": 2, "check_out": "2026-09-05", "check_in": "2026-09-02"}),
        );
        assert_eq!(a, b);
        assert_eq!(a.map(|h| h.len()), Some(64));
    }

    #[test]
    fn a_signed_transport_attestation_verifies_in_a_receipt() {
        let key = SigningKey::generate(crate::webhook::keys::Alg::Ed25519, "node-1").unwrap();
        let args = json!({"checkIn": "2026-09-02", "checkOut": "2026-09-05", "guests": 2});
        let t = Transport {
            tool: "get_verified_stay_offer",
            arguments: &args,
            issuer: "villa.example",
            source: "https://villa.example/.well-known/jwks.json",
            offer_ref: Some("offer:villa.example:1"),
            served_at: 1_789_203_600,
            valid_for: 3600,
        };
        let att = transport_attestation(&t, &key).unwrap();
        let receipt = json!({"vrp_receipt_version": "1.0", "subject": {}, "issuer": {"node": "villa.example"}, "attestations": [att]});
        let jwks = json!({"keys": [key.verifying_key().jwk()]});
        let r = verify_receipt(&receipt, &jwks, 1_789_203_700);
        assert_eq!(r["fully_verified"], true, "{r}");
        assert_eq!(
            verify_receipt(&receipt, &jwks, 1_789_210_000)["attestations"][0]["error"],
            "sig_expired"
        );
    }
}
