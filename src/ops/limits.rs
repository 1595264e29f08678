//! What every listener (MCP, admin, webhook, facade) limits on its connections: open connections
//! in all and per client address, header read, idle and body timeouts, header size, HTTP/2 stream
//! and reset limits; each refusal and timeout counted in metrics. It must never hold a lock across
//! an await, nor know what the listener behind it serves.

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The limits of one listener's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest wait for a request's head (HTTP/1.1), from the moment the connection waits for
    /// it: a new connection, or a keep-alive one between requests.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight, and none started or finished for this long, is
    /// closed (HTTP/1.1, HTTP/2 whatever its pings, and a TLS handshake that stalls).
    pub idle_timeout: Duration,
    /// A request's whole body must arrive within this long after its head.
    pub body_timeout: Duration,
    /// Largest request head: HTTP/1.1's read buffer (at least 8 KiB), HTTP/2's header list.
    /// A larger head is answered 431.
    pub max_header_bytes: usize,
    /// Open connections the listener holds; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Open connections from one client IP address.
    pub max_connections_per_client: usize,
    /// HTTP/2 streams a client may have open at once on one connection.
    pub h2_max_streams: u32,
    /// HTTP/2 streams a client may open and reset before the server accepts them (the "rapid
    /// reset" attack); past it the connection is closed.
    pub h2_max_pending_resets: usize,
    /// HTTP/2 keep-alive ping interval; a peer that does not answer within the same time is
    /// dropped (a half-open connection).
    pub h2_keep_alive: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            max_header_bytes: 64 * 1024,
            max_connections: 10_000,
            max_connections_per_client: 1_000,
            h2_max_streams: 100,
            h2_max_pending_resets: 20,
            h2_keep_alive: Duration::from_secs(30),
        }
    }
}

/// hyper refuses an HTTP/1.1 read buffer under 8 KiB.
const MIN_BUF: usize = 8 * 1024;

impl Limits {
    /// An HTTP/1.1 connection builder with these limits.
    pub fn http1(&self) -> hyper::server::conn::http1::Builder {
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_buf_size(self.max_header_bytes.max(MIN_BUF));
        b
    }

    /// An HTTP/1.1-or-HTTP/2 connection builder with these limits.
    pub fn auto(&self) -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
        let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        b.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_buf_size(self.max_header_bytes.max(MIN_BUF));
        b.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.h2_max_streams)
            .max_pending_accept_reset_streams(self.h2_max_pending_resets)
            .keep_alive_interval(self.h2_keep_alive)
            .keep_alive_timeout(self.h2_keep_alive)
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX));
        b
    }
}

/// Why a connection was refused or closed early (the metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Refused: the listener holds `max_connections`.
    MaxConnections,
    /// Refused: the client address holds `max_connections_per_client`.
    PerClient,
    /// Closed: no request head within `header_read_timeout`.
    HeaderTimeout,
    /// Closed: a request head over `max_header_bytes` (answered 431).
    HeaderTooLarge,
    /// Closed: no request in flight, started or finished for `idle_timeout`.
    Idle,
    /// Refused: a request body still arriving at `body_timeout` (answered 408).
    BodyTimeout,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::MaxConnections => "max_connections",
            Reason::PerClient => "per_client",
            Reason::HeaderTimeout => "header_timeout",
            Reason::HeaderTooLarge => "header_too_large",
            Reason::Idle => "idle",
            Reason::BodyTimeout => "body_timeout",
        }
    }
}

/// One listener's admission: its limits and the connections it holds.
pub struct Gate {
    /// The listener's name in metrics: `mcp`, `admin`, `webhook`, `facade`.
    pub listener: &'static str,
    pub limits: Limits,
    open: AtomicUsize,
    /// Open connections per client address (entries leave at zero).
    per_client: Mutex<HashMap<IpAddr, usize>>,
    /// What connections' last-request times count from.
    epoch: Instant,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("listener", &self.listener)
            .field("open", &self.open())
            .finish_non_exhaustive()
    }
}

impl Gate {
    pub fn new(listener: &'static str, limits: Limits) -> Arc<Gate> {
        Arc::new(Gate {
            listener,
            limits,
            open: AtomicUsize::new(0),
            per_client: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
        })
    }

    /// Open connections.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Counts a refusal or an early close.
    pub fn count(&self, reason: Reason) {
        crate::ops::metrics::connection_limited(self.listener, reason.label());
    }

    /// The next connection this listener admits: accepts (pausing 50 ms after a failed accept,
    /// e.g. out of file descriptors), and closes at once any that [`Gate::admit`] refuses. Every
    /// listener accepts through this one loop. Cancel-safe, like `TcpListener::accept`.
    pub async fn accept(
        self: &Arc<Self>,
        listener: &tokio::net::TcpListener,
    ) -> (tokio::net::TcpStream, std::net::SocketAddr, Slot) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(listener = self.listener, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Over a connection cap: dropping the socket closes it.
            if let Ok(slot) = self.admit(peer.ip()) {
                return (stream, peer, slot);
            }
        }
    }

    /// Admits a connection from `peer`, or says why not (the caller drops the socket, which
    /// closes it). The slot is held until the returned [`Slot`] is dropped.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Reason> {
        let refused = {
            let mut map = self
                .per_client
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.open.load(Ordering::Relaxed) >= self.limits.max_connections {
                Some(Reason::MaxConnections)
            } else {
                let n = map.entry(peer).or_insert(0);
                if *n >= self.limits.max_connections_per_client {
                    Some(Reason::PerClient)
                } else {
                    *n += 1;
                    self.open.fetch_add(1, Ordering::Relaxed);
                    None
                }
            }
        };
        if let Some(r) = refused {
            self.count(r);
            tracing::debug!(listener = self.listener, %peer, reason = r.label(), "connection refused");
            return Err(r);
        }
        crate::ops::metrics::connection_open(self.listener, true);
        let slot = Slot {
            gate: self.clone(),
            peer,
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
        };
        slot.touch();
        Ok(slot)
    }

    /// Counts the reason a connection ended with `error`, when it is one of the limits.
    pub fn ended(&self, error: &(dyn std::error::Error + 'static)) {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(h) = e.downcast_ref::<hyper::Error>() {
                if h.is_timeout() {
                    self.count(Reason::HeaderTimeout);
                } else if h.is_parse_too_large() {
                    self.count(Reason::HeaderTooLarge);
                }
                return;
            }
            source = e.source();
        }
    }

    /// Wraps a connection's socket (after admission) so that it closes when idle.
    pub fn watch<T>(&self, io: T, slot: Slot) -> (Watched<T>, Arc<Slot>) {
        let slot = Arc::new(slot);
        let idle = self.limits.idle_timeout;
        (
            Watched {
                inner: io,
                idle,
                timer: Box::pin(tokio::time::sleep(idle)),
                slot: slot.clone(),
            },
            slot,
        )
    }

    /// Wraps a connection's service: requests in flight keep the connection from idling out,
    /// and each request carries its body deadline ([`within_body_deadline`]).
    pub fn service<S>(&self, slot: Arc<Slot>, inner: S) -> Tracked<S> {
        Tracked {
            inner,
            slot,
            body_timeout: self.limits.body_timeout,
        }
    }
}

/// A connection's place in its gate's counts, and its requests in flight.
pub struct Slot {
    gate: Arc<Gate>,
    peer: IpAddr,
    in_flight: AtomicUsize,
    /// When a request last started or finished (or the connection was admitted), in
    /// milliseconds from the gate's epoch.
    last: AtomicU64,
}

impl Slot {
    fn touch(&self) {
        let ms = u64::try_from(self.gate.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.gate.epoch + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut map = self
                .gate
                .per_client
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = map.get_mut(&self.peer) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&self.peer);
                }
            }
            self.gate.open.fetch_sub(1, Ordering::Relaxed);
        }
        crate::ops::metrics::connection_open(self.gate.listener, false);
    }
}

/// A socket that reads end-of-stream once its connection has had no request in flight, started
/// or finished for the idle timeout; hyper then closes it. Bytes do not count: HTTP/2 pings
/// would keep an idle connection forever.
pub struct Watched<T> {
    inner: T,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    slot: Arc<Slot>,
}

impl<T> Watched<T> {
    /// True when the idle timeout has passed (the timer re-armed otherwise, and registered).
    fn idled_out(&mut self, cx: &mut Context<'_>) -> bool {
        while self.timer.as_mut().poll(cx).is_ready() {
            let due = self.slot.last() + self.idle;
            if due > Instant::now() || self.slot.in_flight.load(Ordering::Relaxed) > 0 {
                let next = due.max(Instant::now() + self.idle / 4);
                self.timer.as_mut().reset(next);
                continue;
            }
            return true;
        }
        false
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => {
                if self.idled_out(cx) {
                    self.slot.gate.count(Reason::Idle);
                    // End of stream: hyper closes an idle connection quietly.
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// When a request's body must have arrived (a request extension set by [`Tracked`]).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline {
    pub at: Instant,
    gate: &'static str,
}

/// The body did not arrive within the listener's body timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request body did not arrive within the body timeout")]
pub struct BodyTimedOut;

/// Runs `read` (a body being collected) until the request's body deadline, if it has one.
pub async fn within_body_deadline<F: Future>(
    extensions: &http::Extensions,
    read: F,
) -> Result<F::Output, BodyTimedOut> {
    let Some(d) = extensions.get::<BodyDeadline>().copied() else {
        return Ok(read.await);
    };
    match tokio::time::timeout_at(d.at, read).await {
        Ok(out) => Ok(out),
        Err(_) => {
            crate::ops::metrics::connection_limited(d.gate, Reason::BodyTimeout.label());
            Err(BodyTimedOut)
        }
    }
}

/// A connection's service, wrapped by [`Gate::service`].
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    slot: Arc<Slot>,
    body_timeout: Duration,
}

/// A request in flight; the count drops when its response body is done or dropped.
struct InFlight(Arc<Slot>);

impl InFlight {
    fn new(slot: Arc<Slot>) -> InFlight {
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        slot.touch();
        InFlight(slot)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Unpin,
{
    type Response = Response<Guarded<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(BodyDeadline {
            at: Instant::now() + self.body_timeout,
            gate: self.slot.gate.listener,
        });
        let guard = InFlight::new(self.slot.clone());
        TrackedFuture {
            inner: self.inner.call(req),
            guard: Some(guard),
        }
    }
}

/// The response future of a [`Tracked`] service.
pub struct TrackedFuture<F> {
    inner: F,
    guard: Option<InFlight>,
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>> + Unpin,
{
    type Output = Result<Response<Guarded<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        let guard = self.guard.take();
        Poll::Ready(out.map(|r| {
            r.map(|inner| Guarded {
                inner,
                _guard: guard,
            })
        }))
    }
}

/// A response body that keeps its request counted as in flight until it ends.
pub struct Guarded<B> {
    inner: B,
    _guard: Option<InFlight>,
}

impl<B: Body<Data = Bytes> + Unpin> Body for Guarded<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() {
            self._guard = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_counts_in_all_and_per_client() {
        let gate = Gate::new(
            "test",
            Limits {
                max_connections: 3,
                max_connections_per_client: 2,
                ..Limits::default()
            },
        );
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = gate.admit(a).unwrap();
        let a2 = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).err(), Some(Reason::PerClient));
        let b1 = gate.admit(b).unwrap();
        assert_eq!(gate.admit(b).err(), Some(Reason::MaxConnections));
        assert_eq!(gate.open(), 3);
        drop(a1);
        assert_eq!(gate.open(), 2);
        let a3 = gate.admit(a).unwrap();
        drop((a2, a3, b1));
        assert_eq!(gate.open(), 0);
        assert!(gate.per_client.lock().unwrap().is_empty(), "no entry left");
    }

    #[tokio::test]
    async fn an_idle_socket_reads_end_of_stream_but_not_with_a_request_in_flight() {
        use tokio::io::AsyncReadExt;
        let gate = Gate::new(
            "test",
            Limits {
                idle_timeout: Duration::from_millis(100),
                ..Limits::default()
            },
        );
        let (client, server) = tokio::io::duplex(64);
        let slot = gate.admit("10.0.0.1".parse().unwrap()).unwrap();
        let (mut io, slot) = gate.watch(server, slot);
        // A request in flight: the socket stays open past the idle timeout.
        let busy = InFlight::new(slot.clone());
        let mut buf = [0u8; 8];
        let waited = tokio::time::timeout(Duration::from_millis(300), io.read(&mut buf)).await;
        assert!(waited.is_err(), "still waiting for bytes");
        drop(busy);
        let n = tokio::time::timeout(Duration::from_secs(2), io.read(&mut buf))
            .await
            .expect("the idle timeout ends the read")
            .unwrap();
        assert_eq!(n, 0, "end of stream");
        drop(client);
    }
}
