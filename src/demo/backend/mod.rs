//! The embedded demo "legacy booking API" (Seaside Spa, Harbour Hotel): owns its listener and wiring.
//! Must never read the wall clock or randomness, depend on the gateway, or panic on request input.

mod answer;
mod calendar;
mod handler;
mod hotel;
mod reports;
mod routes;
mod spa;
mod state;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use handler::handle;
use state::State;

/// The demo backend: shared, seeded state plus the accept loop that serves it.
pub struct Backend {
    shared: Arc<Mutex<State>>,
    /// The UCP shop under `/shop/v1` (`crate::demo::shop`).
    shop: Arc<Mutex<crate::demo::shop::ShopState>>,
    /// Legacy webhook events (`{kind, appointment}`), in change order, when someone listens.
    outbox: Option<mpsc::Sender<Value>>,
}

impl Backend {
    /// A backend holding the fixed seed data.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Mutex::new(State::seeded())),
            shop: Arc::default(),
            outbox: None,
        }
    }

    /// Also emits a legacy webhook event on `outbox` for every appointment booked, cancelled or
    /// moved (dropped when the outbox is full; signing and sending is the caller's job).
    pub fn with_outbox(mut self, outbox: mpsc::Sender<Value>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Accepts connections until this future is dropped or its task aborted; one task per
    /// connection (HTTP/1.1 or h2), all of them ended when the loop is dropped.
    pub async fn serve(self, listener: TcpListener) -> io::Result<()> {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        let shared = Arc::clone(&self.shared);
                        let shop = Arc::clone(&self.shop);
                        let outbox = self.outbox.clone();
                        conns.spawn(async move {
                            let _ = stream.set_nodelay(true);
                            let svc = service_fn(move |req| {
                                handle(Arc::clone(&shared), Arc::clone(&shop), outbox.clone(), req)
                            });
                            let _ = auto::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                    Err(e) if is_transient(&e) => {}
                    // e.g. out of file descriptors: back off instead of spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }
}

impl Default for Backend {
    fn default() -> Self {
        Self::new()
    }
}

/// Binds `addr` (port 0 allowed), starts a seeded backend on it and returns the bound address.
pub async fn spawn(addr: SocketAddr) -> io::Result<(SocketAddr, JoinHandle<io::Result<()>>)> {
    let listener = crate::util::listen::bind(addr)?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(Backend::new().serve(listener))))
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests;
