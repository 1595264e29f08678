//! Facade mapping files (`facade:` at the top): the serde format and its compilation into a
//! `Facade` (routes, binding, upstream client); every problem becomes a `Diagnostic`, nothing here runs per request.

use super::derive::{self, DeriveSpec};
use super::route::{Route, Template};
use super::{Body, Facade};
use crate::binding::{Binding, Kind};
use crate::config::Diagnostic;
use crate::config::diag::locate_yaml;
use crate::upstream::mcp::{McpOptions, McpUpstream};
use crate::util::duration::parse_duration;
use crate::webhook::config::{delivery_urls, retry_policy};
use crate::webhook::keys::{Alg, SigningKey};
use indexmap::IndexMap;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A facade mapping file as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FacadeFile {
    /// Name of the facade (logs).
    pub facade: String,
    /// Protocol rulebook of the upstream tools: `usp`, `ucp` or `plain`.
    pub binding: String,
    /// The upstream MCP server.
    pub upstream: UpstreamSpec,
    /// HTTP status for a tool result with `isError: true` (default 502).
    #[serde(default)]
    pub tool_error_status: Option<u16>,
    /// Largest accepted request body (default 1 MiB).
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// `"METHOD /path/{param}"` -> tool name, or the full route object.
    #[serde(default)]
    pub routes: IndexMap<String, RouteSpec>,
    /// Routes derived by pairing an OpenRPC and an OpenAPI document.
    #[serde(default)]
    pub derive: Option<DeriveSpec>,
    /// The upstream server's notifications, sent on as signed webhooks.
    #[serde(default)]
    pub notifications: Option<NotificationsSpec>,
}

/// `notifications:` of a facade file: upstream MCP notifications -> signed REST webhooks.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationsSpec {
    /// Notification methods sent on (default `[usp_webhook]` for the usp binding).
    #[serde(default)]
    pub methods: Option<Vec<String>>,
    /// Webhook URLs every kept notification is POSTed to.
    #[serde(default)]
    pub deliver_to: Vec<String>,
    /// JSON pointer to the event id in the notification's params (default `/event_id`).
    #[serde(default)]
    pub event_id: Option<String>,
    /// JSON pointer to the id of the resource an event is about (default `/booking_id`):
    /// events about one resource reach each URL in the order they came (USP §9.2.3).
    #[serde(default)]
    pub resource_id: Option<String>,
    /// The `notifications` filter of the 2026-07-28 `subscriptions/listen` request (default
    /// `{"dev.portico/webhooks": true}` for usp, else `{}`).
    #[serde(default)]
    pub listen: Option<serde_json::Value>,
    /// Backoff of the deliveries (USP defaults: 30s initial, 3 retries, 15m in total).
    #[serde(default)]
    pub retry: Option<crate::config::mapping::RetrySpec>,
    /// portico's private JWK (a file, relative to this one) that signs the webhooks; default
    /// an ephemeral P-256 key. Either way the public key is at `/.well-known/jwks.json`.
    #[serde(default)]
    pub signing_key: Option<String>,
    /// Also deliver a booking's events to the `webhook_url` of the platform profile that made
    /// or read the booking through this facade (USP §9.2.3 registration; default false).
    #[serde(default)]
    pub from_profiles: bool,
    /// Hosts whose profiles and webhook URLs may be plain http on private addresses (tests,
    /// in-cluster platforms); none by default.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

/// Where the upstream MCP server is.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// MCP endpoint URL (`http` or `https`).
    pub url: String,
    /// Timeout of one call (default 10s).
    #[serde(default)]
    pub timeout: Option<String>,
    /// TCP connect timeout (default 2s).
    #[serde(default)]
    pub connect_timeout: Option<String>,
    /// Largest upstream answer read (default 4 MiB).
    #[serde(default)]
    pub max_response_bytes: Option<usize>,
    /// Request headers passed on to the upstream `tools/call` as they came (e.g.
    /// `Authorization`); none by default.
    #[serde(default)]
    pub forward_headers: Vec<String>,
}

/// One route: a tool name, or the details.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RouteSpec {
    Tool(String),
    Full(RouteDetail),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteDetail {
    pub tool: String,
    /// Success status (default 200).
    #[serde(default)]
    pub status: Option<u16>,
    /// `flatten` (default: the body's members are arguments) or the argument the whole body
    /// becomes.
    #[serde(default)]
    pub body: Option<String>,
}

/// Headers the MCP transport or HTTP itself owns: never forwarded.
const RESERVED: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-connection",
];

pub use crate::config::kind::{is_facade_file, is_facade_text};

/// Loads and compiles one facade mapping file.
pub fn load(file: &Path) -> Result<Facade, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        vec![Diagnostic::error(
            file,
            format!("cannot read facade file: {e}"),
        )]
    })?;
    let spec: FacadeFile = serde_saphyr::from_str(&text).map_err(|e| {
        let line = e.location().map(|l| l.line() as usize);
        let msg = e.to_string();
        let first = msg
            .lines()
            .next()
            .unwrap_or("invalid facade file")
            .to_string();
        vec![
            Diagnostic::error(file, first)
                .line(line)
                .hint("see docs/mapping.md, section \"REST facade\""),
        ]
    })?;
    compile(file, &text, spec)
}

fn compile(file: &Path, text: &str, spec: FacadeFile) -> Result<Facade, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let at = |path: &[&str]| locate_yaml(text, path);
    let kind = Kind::parse(&spec.binding).unwrap_or_else(|| {
        diags.push(
            Diagnostic::error(file, format!("unknown binding `{}`", spec.binding))
                .line(at(&["binding"]))
                .hint("use usp, ucp or plain"),
        );
        Kind::Plain
    });
    let binding = Binding {
        kind,
        version: String::new(),
        capabilities: None,
        capability: None,
        ucp: None,
    };
    let duration =
        |v: &Option<String>, key: &str, default: Duration, diags: &mut Vec<Diagnostic>| match v {
            None => default,
            Some(s) => parse_duration(s).unwrap_or_else(|| {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a duration"))
                        .line(at(&["upstream", key]))
                        .hint("write e.g. 10s, 500ms or 2m"),
                );
                default
            }),
        };
    let timeout = duration(
        &spec.upstream.timeout,
        "timeout",
        Duration::from_secs(10),
        &mut diags,
    );
    let connect_timeout = duration(
        &spec.upstream.connect_timeout,
        "connect_timeout",
        Duration::from_secs(2),
        &mut diags,
    );
    match url::Url::parse(&spec.upstream.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        _ => diags.push(
            Diagnostic::error(
                file,
                format!("`{}` is not an http(s) URL", spec.upstream.url),
            )
            .line(at(&["upstream", "url"]))
            .hint("the MCP endpoint, e.g. http://127.0.0.1:8080/mcp"),
        ),
    }
    let mut forward_headers = Vec::new();
    for h in &spec.upstream.forward_headers {
        match http::HeaderName::from_bytes(h.as_bytes()) {
            Ok(n) if !RESERVED.contains(&n.as_str()) && !n.as_str().starts_with("mcp-") => {
                forward_headers.push(n)
            }
            _ => diags.push(
                Diagnostic::error(file, format!("`{h}` cannot be forwarded"))
                    .line(at(&["upstream", "forward_headers"]))
                    .hint("a header name that is not part of the MCP transport (Content-Type, Accept, MCP-*, hop-by-hop)"),
            ),
        }
    }
    let tool_error_status = spec.tool_error_status.unwrap_or(502);
    if !(400..=599).contains(&tool_error_status) {
        diags.push(
            Diagnostic::error(file, "`tool_error_status` must be a 4xx or 5xx status")
                .line(at(&["tool_error_status"])),
        );
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut routes: Vec<Route> = Vec::new();
    let mut sources: Vec<PathBuf> = vec![file.to_path_buf()];
    let mut components = serde_json::Map::new();
    if let Some(d) = &spec.derive {
        match derive::routes(base, d) {
            Ok(derived) => {
                routes.extend(derived.routes);
                sources.extend(derived.files);
                components = derived.components;
            }
            Err(msgs) => {
                for m in msgs {
                    diags.push(Diagnostic::error(file, m).line(at(&["derive"])));
                }
            }
        }
    }
    for (key, r) in &spec.routes {
        let (tool, status, body) = match r {
            RouteSpec::Tool(t) => (t.clone(), None, None),
            RouteSpec::Full(d) => (d.tool.clone(), d.status, d.body.clone()),
        };
        let line = at(&["routes", key]);
        let parsed = key
            .split_once(' ')
            .ok_or_else(|| "a route is `METHOD /path`".to_string())
            .and_then(|(m, p)| {
                let method = http::Method::from_bytes(m.trim().as_bytes())
                    .map_err(|_| format!("`{m}` is not an HTTP method"))?;
                Ok((method, Template::parse(p.trim())?))
            });
        let (method, template) = match parsed {
            Ok(x) => x,
            Err(m) => {
                diags.push(
                    Diagnostic::error(file, format!("route `{key}`: {m}"))
                        .line(line)
                        .hint("write e.g. `GET /bookings/{booking_id}: usp_bookings_get`"),
                );
                continue;
            }
        };
        let status = status.unwrap_or(200);
        if !(200..=299).contains(&status) {
            diags.push(
                Diagnostic::error(file, format!("route `{key}`: `status` must be 2xx")).line(line),
            );
        }
        let body = match body.as_deref() {
            None | Some("flatten") => Body::Flatten,
            Some(arg) => Body::Argument(arg.to_string()),
        };
        // An explicit route replaces a derived one for the same method and path.
        routes.retain(|o| !(o.method == method && o.template.same_shape(&template)));
        routes.push(Route {
            method,
            template,
            tool,
            status,
            body,
            query: IndexMap::new(),
            doc: None,
        });
    }
    if routes.is_empty() && diags.is_empty() {
        diags.push(
            Diagnostic::error(file, "the facade has no routes")
                .hint("add `routes:` or `derive:` (see docs/mapping.md)"),
        );
    }
    for (i, r) in routes.iter().enumerate() {
        if routes[..i]
            .iter()
            .any(|o| o.method == r.method && o.template.same_shape(&r.template))
        {
            diags.push(Diagnostic::error(
                file,
                format!("two routes for {} {}", r.method, r.template),
            ));
        }
    }
    let notifications = spec
        .notifications
        .as_ref()
        .map(|n| notifications(file, text, base, kind, n, &mut diags));
    if !diags.is_empty() {
        return Err(diags);
    }
    let (notifications, egress) = match notifications.flatten() {
        Some((n, key)) => (
            Some(n),
            Some(crate::webhook::egress::Egress::new(Arc::new(key), None)),
        ),
        None => (None, None),
    };
    let upstream = McpUpstream::new(McpOptions {
        url: spec.upstream.url.clone(),
        timeout,
        connect_timeout,
        max_response_bytes: spec.upstream.max_response_bytes.unwrap_or(4 << 20),
    })
    .map_err(|m| vec![Diagnostic::error(file, m)])?;
    let openapi = Arc::new(super::openapi::document(
        &spec.facade,
        &binding,
        &routes,
        components,
        tool_error_status,
    ));
    Ok(Facade {
        name: spec.facade,
        binding,
        upstream: Arc::new(upstream),
        routes,
        tool_error_status,
        max_body_bytes: spec.max_body_bytes.unwrap_or(1 << 20),
        sources,
        openapi,
        forward_headers,
        notifications,
        egress,
    })
}

/// Compiles `notifications:`; `None` when a mistake was reported in `diags`.
fn notifications(
    file: &Path,
    text: &str,
    base: &Path,
    kind: Kind,
    n: &NotificationsSpec,
    diags: &mut Vec<Diagnostic>,
) -> Option<(super::notify::Notifications, SigningKey)> {
    let before = diags.len();
    let err = |key: &str, msg: String, hint: &str| {
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &["notifications", key]))
            .at(format!("notifications.{key}"))
            .hint(hint.to_string())
    };
    let methods = match (&n.methods, kind) {
        (Some(m), _) if !m.is_empty() => m.clone(),
        (None, Kind::Usp) => vec!["usp_webhook".to_string()],
        _ => {
            diags.push(err(
                "methods",
                "`notifications` needs the notification methods to send on".into(),
                "e.g. methods: [usp_webhook]",
            ));
            Vec::new()
        }
    };
    let deliver_to = delivery_urls(&n.deliver_to, |m| {
        diags.push(err(
            "deliver_to",
            m,
            "e.g. https://platform.example/webhooks/usp",
        ))
    });
    if n.deliver_to.is_empty() && !n.from_profiles {
        diags.push(err(
            "deliver_to",
            "`notifications` needs at least one `deliver_to` URL, or `from_profiles: true`".into(),
            "e.g. deliver_to: [https://platform.example/webhooks/usp]",
        ));
    }
    let mut pointer = |key: &str, value: &Option<String>, default: &str| {
        let p = value.clone().unwrap_or_else(|| default.to_string());
        if !p.is_empty() && !p.starts_with('/') {
            diags.push(err(
                key,
                format!("`{p}` is not a JSON pointer"),
                &format!("e.g. {default}"),
            ));
        }
        p
    };
    let event_id = pointer("event_id", &n.event_id, "/event_id");
    let resource_id = pointer("resource_id", &n.resource_id, "/booking_id");
    let listen = match &n.listen {
        Some(v @ serde_json::Value::Object(_)) => v.clone(),
        Some(_) => {
            diags.push(err(
                "listen",
                "`listen` must be an object (the `notifications` filter of subscriptions/listen)"
                    .into(),
                "e.g. listen: {\"dev.portico/webhooks\": true}",
            ));
            serde_json::Value::Null
        }
        None if kind == Kind::Usp => serde_json::json!({ "dev.portico/webhooks": true }),
        None => serde_json::json!({}),
    };
    let retry = retry_policy(n.retry.as_ref(), |m| {
        diags.push(err("retry", m, "such as 30s or 15m"))
    });
    let key = match &n.signing_key {
        Some(rel) => {
            let path = base.join(rel);
            let loaded = std::fs::read(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
                .and_then(|b| {
                    serde_json::from_slice::<serde_json::Value>(&b)
                        .map_err(|e| format!("{} is not JSON: {e}", path.display()))
                })
                .and_then(|jwk| SigningKey::from_jwk(&jwk).map_err(|e| e.to_string()));
            match loaded {
                Ok(k) => Some(k),
                Err(m) => {
                    diags.push(err(
                        "signing_key",
                        m,
                        "a private JWK file (EC P-256 with `d`, or OKP Ed25519 with `d`)",
                    ));
                    None
                }
            }
        }
        None => {
            let kid = format!("portico-{}", uuid::Uuid::new_v4().simple());
            match SigningKey::generate(Alg::EcdsaP256Sha256, &kid) {
                Ok(k) => Some(k),
                Err(e) => {
                    diags.push(Diagnostic::error(
                        file,
                        format!("cannot create a signing key: {e}"),
                    ));
                    None
                }
            }
        }
    };
    if diags.len() > before {
        return None;
    }
    let key = key?;
    Some((
        super::notify::Notifications {
            methods,
            deliver_to,
            event_id,
            resource_id,
            listen,
            retry,
            platforms: n.from_profiles.then(|| {
                Arc::new(super::notify::Platforms::new(crate::auth::fetch::Limits {
                    allow_hosts: n.allow_hosts.clone(),
                    ..Default::default()
                }))
            }),
        },
        key,
    ))
}

/// The facade mappings directly inside `folder` (`*.yaml` / `*.yml`), sorted; none if it is
/// not a folder.
pub fn in_folder(folder: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| {
            matches!(
                f.extension().and_then(|e| e.to_str()),
                Some("yaml") | Some("yml")
            ) && is_facade_file(f)
        })
        .collect();
    out.sort();
    out
}
