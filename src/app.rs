//! Assembles a running gateway from a compiled configuration: the MCP HTTP listener and its
//! shared state. It owns process wiring only; it never parses configuration or protocol data.

use crate::config::Gateway;
use crate::mcp::handler::{Core, ServerInfo};
use crate::mcp::http::{self, HttpOptions, Server};
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A gateway listening on a socket.
pub struct Running {
    pub addr: SocketAddr,
    pub server: Arc<Server>,
    pub task: JoinHandle<std::io::Result<()>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Running {
    /// URL of the MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://{}{}", self.addr, self.server.opts.path)
    }

    /// Stops accepting, lets in-flight requests finish, and waits.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

/// Binds `addr` and serves `gateway` over MCP Streamable HTTP.
pub async fn start(
    gateway: Gateway,
    addr: SocketAddr,
    opts: HttpOptions,
    info: ServerInfo,
) -> std::io::Result<Running> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let core = Arc::new(Core {
        gateway: ArcSwap::from_pointee(gateway),
        info,
    });
    let server = Server::new(core, opts);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(http::serve(listener, server.clone(), async move {
        let _ = rx.await;
    }));
    Ok(Running {
        addr,
        server,
        task,
        shutdown: Some(tx),
    })
}
