//! `portico demo`: the embedded legacy booking API plus portico in front of it, on 127.0.0.1.
//! It owns the demo's files and ports; it must never listen beyond loopback.

pub mod backend;
pub mod fixtures;
pub mod jobs;
pub mod shop;
pub mod webhooks;

use crate::app::{self, Running};
use crate::config;
use crate::mcp::handler::ServerInfo;
use crate::mcp::http::HttpOptions;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// The demo's embedded configuration: file name -> text. Mappings point at `127.0.0.1:9101`,
/// which `start` rewrites to the backend's real address.
pub const FILES: &[(&str, &str)] = &[
    (
        "mappings/demo-spa.yaml",
        include_str!("../../mappings/demo-spa.yaml"),
    ),
    (
        "mappings/demo-hotel.yaml",
        include_str!("../../mappings/demo-hotel.yaml"),
    ),
    (
        "mappings/demo-concierge.yaml",
        include_str!("../../mappings/demo-concierge.yaml"),
    ),
    (
        "mappings/demo-spa-reports.yaml",
        include_str!("../../mappings/demo-spa-reports.yaml"),
    ),
    (
        "mappings/demo-spa-facade.yaml",
        include_str!("../../mappings/demo-spa-facade.yaml"),
    ),
    (
        "mappings/demo-webhook-keys.json",
        include_str!("../../mappings/demo-webhook-keys.json"),
    ),
    (
        "openrpc/usp.openrpc.json",
        include_str!("../../openrpc/usp.openrpc.json"),
    ),
    (
        "openrpc/ucp-lodging.openrpc.json",
        include_str!("../../openrpc/ucp-lodging.openrpc.json"),
    ),
    (
        "openrpc/ucp-ask.openrpc.json",
        include_str!("../../openrpc/ucp-ask.openrpc.json"),
    ),
    (
        "openrpc/demo-spa-reports.openrpc.json",
        include_str!("../../openrpc/demo-spa-reports.openrpc.json"),
    ),
];

/// The shop business (`mappings/shop/demo-shop.yaml`): the demo backend's UCP shop served through
/// UCP's published shopping OpenRPC, unchanged. That file and its schemas are not embedded (they
/// are not part of the repository): `--shop` reads them from the fetched upstream folder
/// ([`upstream_folder`]).
pub const SHOP_MAPPING: (&str, &str) = (
    "mappings/demo-shop.yaml",
    include_str!("../../mappings/shop/demo-shop.yaml"),
);

/// The published shopping OpenRPC inside the fetched upstream folder.
pub const SHOP_OPENRPC: &str = "ucp/source/services/shopping/mcp.openrpc.json";

/// The fetched upstream folder (`scripts/fetch-upstream`): `PORTICO_UPSTREAM` when set, else
/// `.upstream` in the working directory; `None` when it does not hold [`SHOP_OPENRPC`].
pub fn upstream_folder() -> Option<PathBuf> {
    let dir = std::env::var_os("PORTICO_UPSTREAM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".upstream"));
    let dir = std::fs::canonicalize(dir).ok()?;
    dir.join(SHOP_OPENRPC).is_file().then_some(dir)
}

/// Writes the shop's mapping into the demo folder, its upstream paths pointed at `upstream`.
fn shop_files(
    dir: &std::path::Path,
    upstream: &std::path::Path,
    backend: SocketAddr,
) -> std::io::Result<()> {
    let (name, text) = SHOP_MAPPING;
    let folder = format!("{}/", upstream.display());
    let text = text
        .replace("../../.upstream/", &folder)
        .replace(MAPPED_BACKEND, &backend.to_string());
    std::fs::write(dir.join(name), text)
}

/// The demo business whose backend sends webhooks.
pub const WEBHOOK_BUSINESS: &str = "seaside-spa";

/// The backend address written in the demo mappings.
pub const MAPPED_BACKEND: &str = "127.0.0.1:9101";

/// The MCP conformance fixtures (`portico demo --fixtures`): mapping and OpenRPC.
pub const FIXTURE_FILES: &[(&str, &str)] = &[
    (
        "mappings/conformance.yaml",
        include_str!("../../mappings/conformance.yaml"),
    ),
    (
        "openrpc/conformance.openrpc.json",
        include_str!("../../openrpc/conformance.openrpc.json"),
    ),
];

/// The fixture backend address written in `mappings/conformance.yaml`.
pub const MAPPED_FIXTURES: &str = "127.0.0.1:9102";

/// `portico demo --secure`: the demo agent's API key (public, like the rest of the demo).
pub const SECURE_API_KEY: &str = "demo-agent-key-7f3c1a9e4b2d8065";

/// `portico demo --secure`: the profile URI proofs of possession name as `aud`.
pub const SECURE_AUDIENCE: &str = "https://seaside-spa.example/.well-known/usp";

/// The `authorization:` sections `--secure` adds to the demo mappings (file name -> YAML).
const SECURE_POLICIES: &[(&str, &str)] = &[
    (
        "mappings/demo-spa.yaml",
        "authorization:
  privileged_operations_require_authentication: true
  accepted_mechanisms: [api_key, platform_key_pop, booking_scoped_credential]
  api_keys:
    - { name: demo-agent, value: \"demo-agent-key-7f3c1a9e4b2d8065\" }
  platform_key_pop:
    audiences: [\"https://seaside-spa.example/.well-known/usp\"]
  booking_scoped_credential:
    issue: { usp_bookings_create: /booking/id }
    ttl: 30d
",
    ),
    (
        "mappings/demo-hotel.yaml",
        "authorization:
  accepted_mechanisms: [api_key]
  api_keys:
    - { name: demo-agent, value: \"demo-agent-key-7f3c1a9e4b2d8065\" }
",
    ),
    (
        "mappings/demo-spa-reports.yaml",
        "authorization:
  accepted_mechanisms: [api_key]
  api_keys:
    - { name: demo-agent, value: \"demo-agent-key-7f3c1a9e4b2d8065\" }
",
    ),
];

/// Adds the `--secure` policies to the demo mappings written in `dir`.
pub fn secure_files(dir: &std::path::Path) -> std::io::Result<()> {
    for (name, policy) in SECURE_POLICIES {
        let path = dir.join(name);
        let mut text = std::fs::read_to_string(&path)?;
        text.push('\n');
        text.push_str(policy);
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// The `mcp_authorization:` section `--oauth-issuer` adds to every demo mapping: any call needs
/// `demo:call`; privileged tools (their USP `x-usp-access` tier, or no tier) also `demo:book`.
pub const OAUTH_SCOPES: &str = "mcp_authorization:
  scopes: [demo:call]
  tiers:
    public: [demo:call]
    privileged_platform: [demo:call, demo:book]
    privileged_scoped: [demo:call, demo:book]
";

/// Adds [`OAUTH_SCOPES`] to the demo's tool mappings written in `dir`.
fn oauth_files(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir.join("mappings"))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let mut text = std::fs::read_to_string(&path)?;
        if text.starts_with("facade:") || text.contains("\nfacade:") {
            continue;
        }
        text.push('\n');
        text.push_str(OAUTH_SCOPES);
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// A running demo.
pub struct Demo {
    pub gateway: Running,
    pub backend_addr: SocketAddr,
    pub backend_task: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The conformance fixture backend, when started with fixtures.
    pub fixtures: Option<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)>,
    pub dir: PathBuf,
    /// The backend's signed-webhook sender (to portico's `/webhooks/seaside-spa`).
    pub webhook_task: tokio::task::JoinHandle<()>,
    /// Started with `--secure`.
    pub secure: bool,
    /// The REST facade (reverse path) in front of the demo's own MCP endpoint.
    pub facade: crate::facade::http::Running,
    /// The upstream folder the shop business was loaded from (`--shop`).
    pub shop: Option<PathBuf>,
}

impl Demo {
    pub fn mcp_url(&self) -> String {
        self.gateway.mcp_url()
    }

    pub fn backend_url(&self) -> String {
        format!("http://{}", self.backend_addr)
    }

    /// Where the demo backend sends its signed webhooks.
    pub fn webhooks_url(&self) -> String {
        format!("http://{}/webhooks/{WEBHOOK_BUSINESS}", self.gateway.addr)
    }

    /// Lines printed by `portico demo`: `name: url`, then one example call.
    pub fn banner(&self) -> String {
        let mcp = self.mcp_url();
        let fixtures = self
            .fixtures
            .as_ref()
            .map(|(a, _)| format!("fixtures: http://{a}\n"))
            .unwrap_or_default();
        let secure = if self.secure {
            format!(
                "secure: privileged tools (bookings) need authentication; public ones (services, availability) do not\n\
                 auth: send the HTTP header `X-API-Key: {SECURE_API_KEY}` (or `Authorization: Bearer {SECURE_API_KEY}`), and `_meta.usp.profile` in USP arguments\n\
                 auth: or a usp-pop+jwt proof in `_meta.usp.authorization` (aud {SECURE_AUDIENCE}); usp_bookings_create then returns a booking_scoped_credential\n"
            )
        } else {
            String::new()
        };
        let shop = self
            .shop
            .as_ref()
            .map(|_| format!("shop: {}/shop/v1\n", self.backend_url()))
            .unwrap_or_default();
        format!(
            "mcp: {mcp}\nbackend: {backend}\nwebhooks: {webhooks}\nfacade: {facade}\n{shop}{admin}{fixtures}{secure}example: curl -s {mcp} -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: usp_services_list' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"usp_services_list\",\"arguments\":{{}},\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'\n",
            backend = self.backend_url(),
            webhooks = self.webhooks_url(),
            facade = self.facade.url(),
            admin = self
                .gateway
                .admin_url()
                .map(|a| format!("admin: {a}\n"))
                .unwrap_or_default(),
        )
    }

    pub async fn stop(self) {
        let _ = self.facade.stop().await;
        let _ = self.gateway.stop().await;
        self.backend_task.abort();
        self.webhook_task.abort();
        if let Some((_, task)) = self.fixtures {
            task.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes the embedded files to a private folder with the backend address filled in (and the
/// conformance fixtures with theirs, when given).
pub fn write_files(backend: SocketAddr, fixtures: Option<SocketAddr>) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "portico-demo-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let fixture_files = fixtures.map(|a| (FIXTURE_FILES, a.to_string()));
    let sets = [(FILES, backend.to_string())]
        .into_iter()
        .chain(fixture_files);
    for (files, addr) in sets {
        for (name, text) in files {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let text = text
                .replace(MAPPED_BACKEND, &addr)
                .replace(MAPPED_FIXTURES, &addr);
            std::fs::write(path, text)?;
        }
    }
    Ok(dir)
}

/// Starts the backend on `port + 1`, portico on `port`, its admin listener on `port + 2` and
/// the REST facade on `port + 3` (all 0 = any free port).
pub async fn start(port: u16) -> Result<Demo, String> {
    start_with(port, false).await
}

/// As `start`; with `fixtures`, also the conformance fixture backend on `port + 4`, served
/// through `mappings/conformance.yaml`.
pub async fn start_with(port: u16, fixtures: bool) -> Result<Demo, String> {
    start_opts(port, fixtures, false).await
}

/// As `start_with`; with `secure`, privileged tools need authentication (see `SECURE_POLICIES`).
pub async fn start_opts(port: u16, fixtures: bool, secure: bool) -> Result<Demo, String> {
    start_full(port, fixtures, secure, Default::default()).await
}

/// [`start_opts`] with MCP authorization (`portico demo --oauth-issuer`): every request to the
/// MCP endpoint then needs an access token of one of `oauth`'s issuers.
pub async fn start_full(
    port: u16,
    fixtures: bool,
    secure: bool,
    oauth: crate::auth::resource::Options,
) -> Result<Demo, String> {
    start_shop(port, fixtures, secure, oauth, false).await
}

/// [`start_full`]; with `shop`, also the UCP shop business (`portico demo --shop`), whose
/// published OpenRPC and schemas come from the fetched upstream folder ([`upstream_folder`]).
pub async fn start_shop(
    port: u16,
    fixtures: bool,
    secure: bool,
    oauth: crate::auth::resource::Options,
    shop: bool,
) -> Result<Demo, String> {
    let shop = match shop {
        false => None,
        true => Some(upstream_folder().ok_or_else(|| {
            format!(
                "--shop needs UCP's published shopping files ({SHOP_OPENRPC}) in the fetched upstream folder: \
                 run scripts/fetch-upstream, or set PORTICO_UPSTREAM to a folder laid out like it"
            )
        })?),
    };
    let next = |n: u16| -> Result<u16, String> {
        if port == 0 {
            Ok(0)
        } else {
            port.checked_add(n)
                .ok_or_else(|| "port too large".to_string())
        }
    };
    let backend_port = next(1)?;
    let fixtures = if fixtures {
        // port + 2 is the admin listener and port + 3 the facade.
        let fixture_port = next(4)?;
        Some(
            fixtures::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, fixture_port)))
                .await
                .map_err(|e| {
                    format!("cannot start the fixture backend on port {fixture_port}: {e}")
                })?,
        )
    } else {
        None
    };
    let (outbox, events) = tokio::sync::mpsc::channel(1024);
    let listener = crate::util::listen::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, backend_port)))
        .map_err(|e| format!("cannot start the demo backend on port {backend_port}: {e}"))?;
    let backend_addr = listener
        .local_addr()
        .map_err(|e| format!("demo backend address: {e}"))?;
    let backend_task = tokio::spawn(backend::Backend::new().with_outbox(outbox).serve(listener));
    let dir = write_files(backend_addr, fixtures.as_ref().map(|(a, _)| *a))
        .map_err(|e| format!("cannot write the demo files: {e}"))?;
    if secure {
        secure_files(&dir).map_err(|e| format!("cannot write the demo files: {e}"))?;
    }
    if let Some(upstream) = &shop {
        shop_files(&dir, upstream, backend_addr)
            .map_err(|e| format!("cannot write the demo files: {e}"))?;
    }
    let oauth_on = !oauth.issuers.is_empty();
    if oauth_on {
        oauth_files(&dir).map_err(|e| format!("cannot write the demo files: {e}"))?;
    }
    let gateway = config::load(&[dir.join("mappings")]).map_err(|ds| {
        ds.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    for w in &gateway.warnings {
        tracing::warn!("{w}");
    }
    let info = ServerInfo {
        name: "portico-demo".into(),
        instructions: Some(
            match shop {
                Some(_) => "Seaside Spa (USP tools usp_*), Harbour Hotel (UCP lodging *_booking_session and ask_business) and the Portico Demo Shop (UCP shopping: catalog, carts, checkouts, orders) behind one portico.",
                None => "Seaside Spa (USP tools usp_*) and Harbour Hotel (UCP lodging *_booking_session and ask_business) behind one portico.",
            }
            .into(),
        ),
        ..ServerInfo::default()
    };
    let admin_port = if port == 0 {
        0
    } else {
        port.checked_add(2).ok_or("port too large")?
    };
    let ops = app::Ops {
        admin: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, admin_port))),
        ..app::Ops::default()
    };
    let gateway = app::start_with(
        gateway,
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        HttpOptions {
            oauth,
            ..HttpOptions::default()
        },
        info,
        ops,
    )
    .await
    .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let hooks = url::Url::parse(&format!(
        "http://{}/webhooks/{WEBHOOK_BUSINESS}",
        gateway.addr
    ))
    .map_err(|e| format!("webhook URL: {e}"))?;
    let webhook_task = tokio::spawn(webhooks::run(events, hooks));
    let facade = start_facade(&dir, &gateway, next(3)?, oauth_on).await?;
    Ok(Demo {
        gateway,
        backend_addr,
        backend_task,
        fixtures,
        dir,
        webhook_task,
        secure,
        facade,
        shop,
    })
}

/// The demo facade (`mappings/demo-spa-facade.yaml`) pointed at the demo's MCP endpoint.
/// With MCP authorization (`oauth`), the facade passes each REST request's `Authorization` on
/// to the MCP endpoint, which checks it as any MCP client's token.
async fn start_facade(
    dir: &std::path::Path,
    gateway: &Running,
    port: u16,
    oauth: bool,
) -> Result<crate::facade::http::Running, String> {
    let file = dir.join("mappings/demo-spa-facade.yaml");
    let mut text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read the demo facade: {e}"))?
        .replace("http://127.0.0.1:9100/mcp", &gateway.mcp_url());
    if oauth {
        text = text.replace(
            "\n  timeout: 10s\n",
            "\n  timeout: 10s\n  forward_headers: [authorization]\n",
        );
    }
    std::fs::write(&file, text).map_err(|e| format!("cannot write the demo facade: {e}"))?;
    let facade = crate::facade::config::load(&file).map_err(|ds| {
        ds.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    crate::facade::http::start(facade, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await
        .map_err(|e| format!("cannot start the demo facade on port {port}: {e}"))
}
