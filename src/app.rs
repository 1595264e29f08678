//! Assembles a running gateway from a compiled configuration: the MCP HTTP listener, the admin
//! listener, the reloader and their shared state. It owns process wiring only; it never parses
//! configuration or protocol data.

use crate::config::Gateway;
use crate::mcp::handler::{Core, ServerInfo};
use crate::mcp::http::{self, HttpOptions, Server};
use crate::ops::admin::{self, Admin, AdminOptions};
use crate::ops::reload::{self, ReloadStatus, Watch};
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Operations around the MCP listener; `Ops::default()` runs none of them.
#[derive(Debug, Clone, Default)]
pub struct Ops {
    /// Address of the admin listener (`/healthz`, `/readyz`, `/metrics`).
    pub admin: Option<SocketAddr>,
    pub admin_opts: AdminOptions,
    /// Hot reload of the configuration.
    pub watch: Option<Watch>,
}

/// A gateway listening on a socket.
pub struct Running {
    pub addr: SocketAddr,
    pub server: Arc<Server>,
    pub task: JoinHandle<std::io::Result<()>>,
    /// Where the admin listener listens, if it runs.
    pub admin_addr: Option<SocketAddr>,
    /// What the reloader last did.
    pub reload: Arc<ReloadStatus>,
    shutdown: Option<oneshot::Sender<()>>,
    admin_stop: watch::Sender<bool>,
    admin_task: Option<JoinHandle<()>>,
    reloader: Option<JoinHandle<()>>,
    /// Reloads the TLS certificate when its files change.
    tls_watch: Option<JoinHandle<()>>,
}

impl Running {
    /// URL of the MCP endpoint.
    pub fn mcp_url(&self) -> String {
        let scheme = if self.server.opts.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{}", self.addr, self.server.opts.path)
    }

    /// Base URL of the admin listener (with a trailing `/`).
    pub fn admin_url(&self) -> Option<String> {
        self.admin_addr.map(|a| format!("http://{a}/"))
    }

    /// Stops accepting, lets in-flight requests finish (up to the shutdown timeout), ends SSE
    /// streams, then stops the reloader and the admin listener.
    pub async fn stop(mut self) -> std::io::Result<()> {
        for task in [self.reloader.take(), self.tls_watch.take()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let served = match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        };
        self.admin_stop.send_replace(true);
        if let Some(t) = self.admin_task.take() {
            let _ = t.await;
        }
        served
    }
}

/// Binds `addr` and serves `gateway` over MCP Streamable HTTP (no admin listener, no reload).
pub async fn start(
    gateway: Gateway,
    addr: SocketAddr,
    opts: HttpOptions,
    info: ServerInfo,
) -> std::io::Result<Running> {
    start_with(gateway, addr, opts, info, Ops::default()).await
}

/// Binds `addr` (and the admin address, if any) and serves `gateway` with the given operations.
pub async fn start_with(
    gateway: Gateway,
    addr: SocketAddr,
    opts: HttpOptions,
    info: ServerInfo,
    ops: Ops,
) -> std::io::Result<Running> {
    crate::ops::metrics::install();
    crate::ops::metrics::started(gateway.tools.len());
    if crate::translate::minted::is_seeded() {
        tracing::warn!(
            "PORTICO_SEED is set: `$meta.request_id`, `$meta.uuid` and `$meta.now` are predictable; use it for tests and dry runs only"
        );
    }
    let listener = crate::util::listen::bind(addr)?;
    let addr = listener.local_addr()?;
    let admin_listener = match ops.admin {
        Some(a) => Some(crate::util::listen::bind(a)?),
        None => None,
    };
    let core = Arc::new(Core {
        gateway: ArcSwap::from_pointee(gateway),
        info,
    });
    let status = Arc::new(ReloadStatus::default());
    let server = Server::new(core.clone(), opts)?;
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(http::serve(listener, server.clone(), async move {
        let _ = rx.await;
    }));
    let (admin_stop, stop_rx) = watch::channel(false);
    let (admin_addr, admin_task) = match admin_listener {
        Some(l) => {
            let bound = l.local_addr()?;
            let closing = server.closing.subscribe();
            let a = Admin::new(
                core.clone(),
                status.clone(),
                closing,
                ops.admin_opts,
                Some(server.webhooks.clone()),
            );
            (Some(bound), Some(tokio::spawn(admin::serve(l, a, stop_rx))))
        }
        None => (None, None),
    };
    // The certificate is checked as often as the configuration (default 2 s).
    let tls_every = ops
        .watch
        .as_ref()
        .and_then(|w| w.interval)
        .unwrap_or(std::time::Duration::from_secs(2));
    let tls_watch = server.opts.tls.clone().map(|t| t.watch(tls_every));
    let reloader = ops
        .watch
        .map(|w| reload::spawn(core.clone(), w, status.clone()));
    Ok(Running {
        addr,
        server,
        task,
        admin_addr,
        reload: status,
        shutdown: Some(tx),
        admin_stop,
        admin_task,
        reloader,
        tls_watch,
    })
}
