//! Binding a TCP listener with a listen backlog sized for bursts of connections.
//! A leaf: it must never import from the rest of the crate, and never accept connections itself.
//!
//! `tokio::net::TcpListener::bind` (through `std`) asks the kernel for a backlog of 128. A burst
//! of new clients larger than that, arriving faster than the accept loop runs, overflows the
//! queue: the kernel drops their handshakes and the clients wait for a retransmission (a second
//! or more) or read a reset once they send. Every listener portico opens binds here instead.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpSocket};

/// The backlog asked for. Linux caps it at `net.core.somaxconn` (4096 by default since 5.4), as
/// Go's `net.Listen` does; nginx asks for 511.
pub const BACKLOG: u32 = 4096;

/// Binds `addr` (port 0 for any free port) with [`BACKLOG`] and `SO_REUSEADDR`, as `std` sets
/// it on Unix (a restart does not wait for the old sockets in TIME_WAIT).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of connections no one accepts yet completes in the kernel's queue at once: with
    /// `std`'s backlog of 128 the 129th would wait a second for its handshake to be retried.
    /// (The kernel caps the backlog at `net.core.somaxconn`, so the burst is kept under it.)
    #[tokio::test]
    async fn a_burst_of_connections_larger_than_128_is_queued_without_accepting() {
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        let burst = 300.min(somaxconn.saturating_sub(1));
        assert!(
            burst > 128,
            "net.core.somaxconn is {somaxconn}: no backlog over 128 here"
        );
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        // Nothing accepts: every connection must complete in the kernel's queue alone.
        let mut held = Vec::new();
        for _ in 0..burst {
            let c = tokio::time::timeout(
                std::time::Duration::from_millis(500),
                tokio::net::TcpStream::connect(addr),
            )
            .await;
            held.push(
                c.expect("connected without waiting for a retransmission")
                    .unwrap(),
            );
        }
        // And each is then accepted.
        for _ in 0..burst {
            l.accept().await.unwrap();
        }
    }
}
