//! Discovery profiles built from the mappings: `/.well-known/ucp` and `/.well-known/usp`
//! advertising the MCP endpoint and capabilities. Pure data; it never calls a backend.

use crate::binding::Kind;
use crate::config::Gateway;
use crate::config::compile::Business;
use crate::util::version::is_date_version;
use serde_json::{Map, Value, json};

/// One protocol's discovery document: where it is served and its fixed URLs.
struct Protocol {
    kind: Kind,
    /// Root member of the document (`ucp`, `usp`).
    root: &'static str,
}

const PROTOCOLS: [Protocol; 2] = [
    Protocol {
        kind: Kind::Ucp,
        root: "ucp",
    },
    Protocol {
        kind: Kind::Usp,
        root: "usp",
    },
];

/// USP: the one service, its specification and its MCP OpenRPC.
const USP_SERVICE: &str = "dev.usp-protocol.services";
const USP_SPEC: &str = "https://usp-protocol.dev/specification";
const USP_MCP_SCHEMA: &str = "https://usp-protocol.dev/schemas/openrpc/usp-mcp.json";

/// USP capabilities: name -> (spec anchor, schema URL), per the specification's §8.2 example.
const USP_CAPABILITIES: [(&str, &str, &str); 3] = [
    (
        "dev.usp-protocol.services.catalog",
        "https://usp-protocol.dev/specification#3-service-catalog",
        "https://usp-protocol.dev/schemas/services/catalog.json",
    ),
    (
        "dev.usp-protocol.services.availability",
        "https://usp-protocol.dev/specification#4-availability",
        "https://usp-protocol.dev/schemas/services/availability.json",
    ),
    (
        "dev.usp-protocol.services.bookings",
        "https://usp-protocol.dev/specification#5-booking-lifecycle",
        "https://usp-protocol.dev/schemas/services/booking.json",
    ),
];

/// The answer to a `GET /.well-known/...` request.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// Not a discovery path: the caller handles the request.
    NotDiscovery,
    /// A discovery path with no matching business (or one lacking what the profile needs).
    NotFound(String),
    Profile(Value),
}

/// Serves `/.well-known/ucp` and `/.well-known/usp` (the first business of that protocol, in
/// mapping order) and `/.well-known/{ucp,usp}/{business}` (that business). `mcp_url` is the
/// MCP endpoint as the client reached it, used when the mapping names no `discovery.endpoint`.
pub fn serve(gateway: &Gateway, path: &str, mcp_url: &str) -> Served {
    let Some(rest) = path.strip_prefix("/.well-known/") else {
        return Served::NotDiscovery;
    };
    let (root, name) = match rest.split_once('/') {
        Some((r, n)) => (r, Some(n)),
        None => (rest, None),
    };
    let Some(proto) = PROTOCOLS.iter().find(|p| p.root == root) else {
        return Served::NotDiscovery;
    };
    let business = gateway
        .businesses
        .iter()
        .filter(|b| b.binding.kind == proto.kind)
        .find(|b| name.is_none_or(|n| n == b.name));
    let Some(b) = business else {
        return Served::NotFound(match name {
            Some(n) => format!("no {} business named `{n}` behind this gateway", proto.root),
            None => format!("no {} business behind this gateway", proto.root),
        });
    };
    let profile = match proto.kind {
        Kind::Ucp => ucp_profile(gateway, b, mcp_url),
        _ => usp_profile(b, mcp_url),
    };
    match profile {
        Ok(p) => Served::Profile(p),
        Err(why) => Served::NotFound(why),
    }
}

fn endpoint(b: &Business, mcp_url: &str) -> String {
    b.discovery
        .endpoint
        .clone()
        .unwrap_or_else(|| mcp_url.to_string())
}

fn version(b: &Business) -> Result<String, String> {
    let v = b
        .discovery
        .version
        .clone()
        .unwrap_or_else(|| b.binding.version.clone());
    if is_date_version(&v) {
        Ok(v)
    } else {
        Err(format!(
            "business `{}`: the profile version `{v}` is not YYYY-MM-DD; set `discovery.version`",
            b.name
        ))
    }
}

fn keys(b: &Business, doc: &mut Value) {
    if !b.discovery.keys.is_empty() {
        doc["keys"] = Value::Array(b.discovery.keys.clone());
    }
}

/// The UCP business profile: one MCP service entry per service the capabilities belong to
/// (`dev.ucp.lodging.booking` -> `dev.ucp.lodging`), capabilities with versions.
fn ucp_profile(gateway: &Gateway, b: &Business, mcp_url: &str) -> Result<Value, String> {
    let v = version(b)?;
    let url_version = &b.binding.version;
    let mut caps: Vec<&str> = gateway
        .tools
        .values()
        .filter(|t| std::ptr::eq(t.business.as_ref(), b))
        .filter_map(|t| t.capability.as_deref().or(b.binding.capability.as_deref()))
        .collect();
    caps.dedup();
    let mut uniq: Vec<&str> = Vec::new();
    for c in caps {
        if !uniq.contains(&c) {
            uniq.push(c);
        }
    }
    let mut services = Map::new();
    let mut capabilities = Map::new();
    let endpoint = endpoint(b, mcp_url);
    for cap in &uniq {
        let service = cap.rsplit_once('.').map_or(*cap, |(s, _)| s);
        let short = service.strip_prefix("dev.ucp.").unwrap_or(service);
        let path = cap
            .strip_prefix("dev.ucp.")
            .unwrap_or(cap)
            .replace('.', "/");
        services.entry(service.to_string()).or_insert_with(|| {
            json!([{
                "version": v,
                "spec": format!("https://ucp.dev/{url_version}/specification/overview"),
                "transport": "mcp",
                "schema": format!("https://ucp.dev/{url_version}/services/{short}/mcp.openrpc.json"),
                "endpoint": endpoint,
            }])
        });
        capabilities.insert(
            cap.to_string(),
            json!([{
                "version": v,
                "spec": format!("https://ucp.dev/{url_version}/specification/{path}"),
                "schema": format!("https://ucp.dev/{url_version}/schemas/{path}.json"),
            }]),
        );
    }
    let mut ucp = json!({
        "version": v,
        "services": services,
        "capabilities": capabilities,
        "payment_handlers": {},
    });
    // What the business declares (`protocol.ucp`) wins, entry by entry, over what is derived
    // from its tools.
    if let (Some(declared), Value::Object(out)) = (&b.binding.ucp, &mut ucp) {
        for (registry, entries) in declared {
            match (out.get_mut(registry), entries) {
                (Some(Value::Object(have)), Value::Object(add)) => {
                    have.extend(add.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                _ => {
                    out.insert(registry.clone(), entries.clone());
                }
            }
        }
    }
    let mut doc = json!({ "ucp": ucp });
    keys(b, &mut doc);
    Ok(doc)
}

/// The USP business profile (specification §8.2): the MCP service binding, the capabilities of
/// `protocol.capabilities` (spec and schema filled in from the specification's table), the
/// business identity from `discovery.business`.
fn usp_profile(b: &Business, mcp_url: &str) -> Result<Value, String> {
    let v = version(b)?;
    let Some(identity) = &b.discovery.business else {
        return Err(format!(
            "business `{}`: a USP profile needs `discovery.business` (name, timezone, currency)",
            b.name
        ));
    };
    let mut capabilities = Map::new();
    if let Some(Value::Object(declared)) = &b.binding.capabilities {
        for (name, entries) in declared {
            let known = USP_CAPABILITIES.iter().find(|(n, _, _)| n == name);
            let entries = match entries {
                Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            let filled: Vec<Value> = entries
                .into_iter()
                .map(|mut e| {
                    if let (Value::Object(o), Some((_, spec, schema))) = (&mut e, known) {
                        o.entry("spec").or_insert_with(|| json!(spec));
                        o.entry("schema").or_insert_with(|| json!(schema));
                        o.entry("version").or_insert_with(|| json!(v));
                    }
                    e
                })
                .collect();
            capabilities.insert(name.clone(), Value::Array(filled));
        }
    }
    let mut doc = json!({
        "usp": {
            "version": v,
            "services": {
                USP_SERVICE: [{
                    "version": v,
                    "spec": USP_SPEC,
                    "transport": "mcp",
                    "endpoint": endpoint(b, mcp_url),
                    "schema": USP_MCP_SCHEMA,
                }]
            },
            "capabilities": capabilities,
            "business": identity,
        }
    });
    // Standalone mode publishes the AuthorizationPolicy top-level (USP §10.1.6).
    if let Some(policy) = &b.auth {
        doc["authorization"] = policy.published();
    }
    keys(b, &mut doc);
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_versions() {
        assert!(is_date_version("2026-08-20"));
        assert!(!is_date_version("draft"));
        assert!(!is_date_version("2026-8-20"));
        assert!(!is_date_version("2026/08/20"));
    }
}
