//! Keep-alive HTTP/1.1 connections to one plain-`http` backend, each driven inline by its caller.
//! It never sends a request twice unless replaying it is safe, nor keeps a connection it cannot vouch for.
//!
//! Driving the connection in the calling task (no connection task, no channel hop per request)
//! is what makes it cheaper than a general-purpose client on the sidecar's loopback hop, and why
//! it is kept rather than hyper-util's pooled client (which `reqwest`, used for `https`
//! backends, wraps). Measured with `examples/pool_cost.rs`: callgrind instruction totals of the
//! client process for 200 and 1200 keep-alive GETs to a `node:http` server on 127.0.0.1, the
//! difference over 1000, debug build: 203 k instructions per request through this pool,
//! 431 k through `reqwest` (the same ratio is expected, not measured, in the release build).
//! Of the pool's figure, the copy a replayable request keeps for a replay (its headers) is about
//! 4 k, within the 2–3 % spread between runs.
//!
//! Connection reuse follows what curl and Go's `net/http` do with servers that close idle or
//! failed connections without saying so: an idle connection is checked for EOF or reset before
//! it is handed out; one that carried a 5xx answer is dropped (a backend that failed a request
//! often resets that connection a moment later); and a request that went out on a reused
//! connection which then died before any byte of an answer is sent once more, on a fresh
//! connection, only when it is a safe method or carries an `Idempotency-Key` header.

use crate::util::names;
use bytes::{Bytes, BytesMut};
use http::header::{HOST, HeaderValue};
use http::uri::PathAndQuery;
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

type Body = Full<Bytes>;

/// The socket, counting the bytes read from it: a failure with the count unchanged since the
/// request went out happened before any byte of an answer arrived.
struct Counted {
    stream: TcpStream,
    read: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let out = Pin::new(&mut self.stream).poll_read(cx, buf);
        let got = buf.filled().len().saturating_sub(before);
        if got > 0 {
            self.read.fetch_add(got as u64, Ordering::Relaxed);
        }
        out
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// One connection: the request handle, the connection state machine it needs polled, and
/// whether it already carried an exchange (then the backend may have closed it meanwhile).
struct Conn {
    tx: SendRequest<Body>,
    io: Pin<Box<Connection<TokioIo<Counted>, Body>>>,
    read: Arc<AtomicU64>,
    reused: bool,
}

/// Why a request did not get a whole answer.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("cannot connect to {authority}: {source}")]
    Connect {
        authority: String,
        source: std::io::Error,
    },
    #[error("connecting to {0} timed out")]
    ConnectTimeout(String),
    #[error("the backend closed the connection before answering")]
    Closed,
    /// A reused connection died after the request went out and before any byte of an answer,
    /// and the request was not safe to send again: the backend may or may not have applied it.
    #[error(
        "the backend closed a reused connection before answering; the request may or may not have been applied"
    )]
    ReusedClosed,
    #[error("HTTP exchange failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("the backend body exceeds the {limit}-byte limit")]
    TooLarge { status: StatusCode, limit: usize },
    #[error("the backend connection broke while sending the body: {source}")]
    Body {
        status: StatusCode,
        source: hyper::Error,
    },
    #[error("the request URL `{0}` is not an absolute http URL")]
    BadUrl(String),
}

impl PoolError {
    /// True when no connection could be made (the backend is down or refusing).
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            PoolError::Connect { .. } | PoolError::ConnectTimeout(_)
        )
    }

    /// The backend's status, when it answered before the failure.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            PoolError::TooLarge { status, .. } | PoolError::Body { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Idle connections to one `host:port`.
pub struct Pool {
    authority: String,
    host_header: HeaderValue,
    connect_timeout: Duration,
    max_idle: usize,
    /// Idle connections per shard (`ops::shards::slot`): a connection is registered with the
    /// runtime that made it and is only ever handed to a task on that same thread.
    idle: Box<[Mutex<Vec<Conn>>]>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

/// The answer: status, headers, whole body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The request went out twice: first on a reused connection that died before answering.
    pub replayed: bool,
}

/// Polls `conn` (the socket I/O) and `fut` together until `fut` is ready. Returns the output
/// and whether the connection ended meanwhile (then it must not be polled or reused).
async fn drive<F: Future + Unpin>(
    conn: &mut Pin<Box<Connection<TokioIo<Counted>, Body>>>,
    fut: &mut F,
) -> (Option<F::Output>, bool) {
    let mut ended = false;
    poll_fn(|cx| {
        if !ended && conn.as_mut().poll(cx).is_ready() {
            ended = true;
        }
        if let Poll::Ready(out) = Pin::new(&mut *fut).poll(cx) {
            return Poll::Ready((Some(out), ended));
        }
        if ended {
            Poll::Ready((None, true))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Polls the connection once without waiting: true when it is open and ready for a request.
fn settle(c: &mut Conn) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    if c.io.as_mut().poll(&mut cx).is_ready() {
        return false;
    }
    matches!(c.tx.poll_ready(&mut cx), Poll::Ready(Ok(())))
}

impl Pool {
    /// A pool for `authority` (`host:port`).
    pub fn new(authority: &str, connect_timeout: Duration) -> Option<Pool> {
        Some(Pool {
            authority: authority.to_string(),
            host_header: HeaderValue::from_str(authority).ok()?,
            connect_timeout,
            max_idle: 256,
            idle: (0..=crate::ops::shards::MAX)
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
        })
    }

    fn idle_here(&self) -> Option<&Mutex<Vec<Conn>>> {
        self.idle.get(crate::ops::shards::slot())
    }

    fn take(&self) -> Option<Conn> {
        self.idle_here()?.lock().ok()?.pop()
    }

    fn give_back(&self, c: Conn) {
        if let Some(idle) = self.idle_here()
            && let Ok(mut idle) = idle.lock()
            && idle.len() < self.max_idle
        {
            idle.push(c);
        }
    }

    async fn connect(&self) -> Result<Conn, PoolError> {
        let stream =
            tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.authority))
                .await
                .map_err(|_| PoolError::ConnectTimeout(self.authority.clone()))?
                .map_err(|source| PoolError::Connect {
                    authority: self.authority.clone(),
                    source,
                })?;
        let _ = stream.set_nodelay(true);
        let read = Arc::new(AtomicU64::new(0));
        let io = Counted {
            stream,
            read: read.clone(),
        };
        let (tx, io) = http1::handshake(TokioIo::new(io)).await?;
        Ok(Conn {
            tx,
            io: Box::pin(io),
            read,
            reused: false,
        })
    }

    /// A ready connection: an idle one that is still open, else a new one (`fresh` skips the
    /// idle ones).
    async fn ready(&self, fresh: bool) -> Result<Conn, PoolError> {
        while !fresh && let Some(mut c) = self.take() {
            // An idle connection the backend closed shows it now (EOF or reset); drop it.
            if settle(&mut c) {
                return Ok(c);
            }
        }
        let mut c = self.connect().await?;
        if settle(&mut c) {
            Ok(c)
        } else {
            Err(PoolError::Closed)
        }
    }

    /// Sends `req` (absolute `http://` URL) and reads the whole body, up to `max_body` bytes.
    /// A request the connection refused before writing a byte is sent once more on a fresh
    /// connection. One that went out on a reused connection which then died before any byte of
    /// an answer is sent once more on a fresh connection only when it is replayable (a safe
    /// method, or an `Idempotency-Key` header the backend can deduplicate by); otherwise that
    /// failure is [`PoolError::ReusedClosed`]. Nothing else is ever repeated.
    pub async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Bytes>,
        max_body: usize,
    ) -> Result<Answer, PoolError> {
        // The request line names the path alone (origin form): the pool is the connection.
        // Taken from the URL's parts, not read again from its text.
        let uri: Uri = url
            .parse()
            .map_err(|_| PoolError::BadUrl(url.to_string()))?;
        let path = uri
            .into_parts()
            .path_and_query
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let replayable = method.is_safe()
            || headers.contains_key(names::IDEMPOTENCY_KEY)
            || headers.contains_key(names::X_IDEMPOTENCY_KEY);
        let body = body.unwrap_or_default();
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = method;
        *req.uri_mut() = Uri::from(path);
        *req.headers_mut() = headers;
        req.headers_mut()
            .entry(HOST)
            .or_insert_with(|| self.host_header.clone());
        let mut pending = Some(req);
        let mut last_err = PoolError::Closed;
        let mut fresh = false;
        let mut replayed = false;
        for _ in 0..2 {
            let Some(req) = pending.take() else { break };
            let mut c = self.ready(fresh).await?;
            // The copy a replay would send; only a reused connection can fail that way.
            let spare = (c.reused && replayable).then(|| {
                let mut copy = Request::new(Full::new(body.clone()));
                *copy.method_mut() = req.method().clone();
                *copy.uri_mut() = req.uri().clone();
                *copy.headers_mut() = req.headers().clone();
                copy
            });
            let read_before = c.read.load(Ordering::Relaxed);
            let mut sent = Box::pin(c.tx.try_send_request(req));
            let (out, ended) = drive(&mut c.io, &mut sent).await;
            drop(sent);
            let failure = match out {
                Some(Ok(resp)) => Ok(resp),
                Some(Err(mut e)) => match e.take_message() {
                    // Not written at all: safe to send again on a fresh connection.
                    Some(unsent) => {
                        pending = Some(unsent);
                        last_err = PoolError::Http(e.into_error());
                        fresh = true;
                        continue;
                    }
                    None => Err(PoolError::Http(e.into_error())),
                },
                None => Err(PoolError::Closed),
            };
            let resp: hyper::Response<Incoming> = match failure {
                Ok(resp) => resp,
                Err(e) => {
                    let silent = c.read.load(Ordering::Relaxed) == read_before;
                    if !(c.reused && silent) {
                        return Err(e);
                    }
                    // The backend closed a connection it had kept alive, before answering.
                    let Some(copy) = spare else {
                        return Err(PoolError::ReusedClosed);
                    };
                    pending = Some(copy);
                    last_err = e;
                    fresh = true;
                    replayed = true;
                    continue;
                }
            };
            let (parts, mut incoming) = resp.into_parts();
            let status = parts.status;
            let announced = parts
                .headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if announced.is_some_and(|len| len > max_body as u64) {
                return Err(PoolError::TooLarge {
                    status,
                    limit: max_body,
                });
            }
            // The body as it comes: one frame (most answers) kept as hyper read it, more
            // frames gathered into one buffer sized from `Content-Length` when it is given
            // (at most `PRESIZED`: a length announced is not yet bytes received).
            let mut body = Gathered::Empty;
            let room = announced.map_or(0, |len| {
                usize::try_from(len).map_or(PRESIZED, |len| len.min(PRESIZED))
            });
            let mut ended = ended;
            loop {
                let mut frame = incoming.frame();
                let (out, done) = if ended {
                    (Some(frame.await), true)
                } else {
                    drive(&mut c.io, &mut frame).await
                };
                ended = done;
                match out {
                    Some(Some(Ok(f))) => {
                        if let Ok(data) = f.into_data() {
                            if body.len() + data.len() > max_body {
                                return Err(PoolError::TooLarge {
                                    status,
                                    limit: max_body,
                                });
                            }
                            body.push(data, room);
                        }
                    }
                    Some(None) => break,
                    Some(Some(Err(source))) => return Err(PoolError::Body { status, source }),
                    None => return Err(PoolError::Closed),
                }
            }
            // Keep the connection only if it is open and can take another request now, and
            // did not carry a server error: a backend that failed a request often closes or
            // resets that connection a moment later, without saying so in the answer.
            if !ended && !status.is_server_error() && settle(&mut c) {
                c.reused = true;
                self.give_back(c);
            }
            return Ok(Answer {
                status,
                headers: parts.headers,
                body: body.freeze(),
                replayed,
            });
        }
        Err(last_err)
    }
}

/// The most room a body's buffer is given before its bytes arrive.
const PRESIZED: usize = 1 << 20;

/// A response body as its frames arrive: nothing, one frame as hyper handed it over (no
/// copy), or the frames gathered into one buffer.
enum Gathered {
    Empty,
    One(Bytes),
    Many(BytesMut),
}

impl Gathered {
    fn len(&self) -> usize {
        match self {
            Gathered::Empty => 0,
            Gathered::One(b) => b.len(),
            Gathered::Many(b) => b.len(),
        }
    }

    /// Adds a frame; a second one starts a buffer of at least `room` bytes (the announced
    /// length), so that a long body is not copied again each time the buffer grows.
    fn push(&mut self, data: Bytes, room: usize) {
        *self = match std::mem::replace(self, Gathered::Empty) {
            Gathered::Empty => Gathered::One(data),
            Gathered::One(first) => {
                let mut buf = BytesMut::with_capacity(room.max(first.len() + data.len()));
                buf.extend_from_slice(&first);
                buf.extend_from_slice(&data);
                Gathered::Many(buf)
            }
            Gathered::Many(mut buf) => {
                buf.extend_from_slice(&data);
                Gathered::Many(buf)
            }
        }
    }

    fn freeze(self) -> Bytes {
        match self {
            Gathered::Empty => Bytes::new(),
            Gathered::One(b) => b,
            Gathered::Many(b) => b.freeze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// One frame is the body as hyper handed it over (the same bytes, not a copy); more
    /// frames are gathered in order into a buffer with room for the announced length.
    #[test]
    fn a_body_of_one_frame_is_kept_and_more_frames_are_gathered() {
        let frame = Bytes::from_static(b"{\"a\":1}");
        let mut one = Gathered::Empty;
        assert_eq!(one.len(), 0);
        one.push(frame.clone(), 0);
        let kept = one.freeze();
        assert_eq!(kept.as_ptr(), frame.as_ptr());
        assert_eq!(kept, frame);
        let mut many = Gathered::Empty;
        for part in [&b"ab"[..], b"cd", b"ef"] {
            many.push(Bytes::copy_from_slice(part), 64);
        }
        assert_eq!(many.len(), 6);
        let Gathered::Many(buf) = &many else {
            panic!("three frames gathered")
        };
        assert!(buf.capacity() >= 64);
        assert_eq!(many.freeze(), Bytes::from_static(b"abcdef"));
        assert!(Gathered::Empty.freeze().is_empty());
    }

    /// A raw HTTP/1.1 server on 127.0.0.1: answers each request on a connection with the next
    /// canned response from `script` (then closes when the response says so). Counts accepts.
    async fn server(script: Vec<&'static str>) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let accepts = Arc::new(AtomicUsize::new(0));
        let seen = accepts.clone();
        let script = Arc::new(script);
        let next = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                let (script, next) = (script.clone(), next.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let mut got = Vec::new();
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        // HTTP/1.1 requires Host (RFC 9112 §3.2): refuse requests without it.
                        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
                        let resp = if text.contains("\r\nhost: 127.0.0.1:") {
                            script[i.min(script.len() - 1)]
                        } else {
                            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
                        };
                        if s.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                        if resp.contains("Connection: close") {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepts)
    }

    const OK: &str = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

    async fn get(pool: &Pool, addr: &str, limit: usize) -> Result<Answer, PoolError> {
        pool.send(
            http::Method::GET,
            &format!("http://{addr}/x?y=1"),
            HeaderMap::new(),
            None,
            limit,
        )
        .await
    }

    #[tokio::test]
    async fn keeps_connections_alive_across_requests() {
        let (addr, accepts) = server(vec![OK]).await;
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        for _ in 0..5 {
            let a = get(&pool, &addr, 1024).await.expect("answer");
            assert_eq!(a.status, StatusCode::OK);
            assert_eq!(&a.body[..], b"{\"ok\":true}");
        }
        assert_eq!(
            accepts.load(Ordering::SeqCst),
            1,
            "one connection served all five"
        );
    }

    #[tokio::test]
    async fn each_shard_reuses_only_its_own_connections() {
        let (addr, accepts) = server(vec![OK]).await;
        let pool = std::sync::Arc::new(Pool::new(&addr, Duration::from_secs(1)).expect("pool"));
        get(&pool, &addr, 1024)
            .await
            .expect("answer off the shards");
        let shards = crate::ops::shards::Shards::start(2).expect("shards");
        for _ in 0..4 {
            // Round robin: shard 0, 1, 0, 1. Each makes one connection, then reuses it.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (pool, addr) = (pool.clone(), addr.clone());
            assert!(shards.run(move || async move {
                let _ = tx.send(get(&pool, &addr, 1024).await.map(|a| a.status));
            }));
            assert_eq!(
                rx.await.expect("the shard ran").expect("answer"),
                StatusCode::OK
            );
        }
        get(&pool, &addr, 1024)
            .await
            .expect("answer off the shards again");
        assert_eq!(
            accepts.load(Ordering::SeqCst),
            3,
            "one connection for the test's runtime and one per shard, none shared between them"
        );
    }

    #[tokio::test]
    async fn a_connection_the_backend_closes_is_not_reused() {
        let close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi";
        let (addr, accepts) = server(vec![close]).await;
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        for _ in 0..3 {
            let a = get(&pool, &addr, 1024).await.expect("answer");
            assert_eq!(&a.body[..], b"hi");
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_idle_connection_closed_by_the_backend_is_replaced() {
        // The backend answers, then drops the idle connection before the next request.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut closed_tx = Some(closed_tx);
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(OK.as_bytes()).await;
                drop(s);
                if let Some(tx) = closed_tx.take() {
                    let _ = tx.send(());
                }
            }
        });
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        get(&pool, &addr, 1024).await.expect("first answer");
        closed_rx
            .await
            .expect("backend closed the first connection");
        // Give the FIN a moment to arrive; either the readiness check or the unsent-request
        // retry must cover it.
        tokio::task::yield_now().await;
        let a = get(&pool, &addr, 1024)
            .await
            .expect("second answer on a new connection");
        assert_eq!(a.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn chunked_bodies_are_decoded_and_limits_hold() {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let (addr, _) = server(vec![chunked]).await;
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        let a = get(&pool, &addr, 1024).await.expect("answer");
        assert_eq!(&a.body[..], b"hello world");
        let err = get(&pool, &addr, 8).await.err().expect("over the limit");
        assert!(matches!(err, PoolError::TooLarge { limit: 8, .. }), "{err}");

        let huge = "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n";
        let (addr, _) = server(vec![huge]).await;
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        let err = get(&pool, &addr, 1024)
            .await
            .err()
            .expect("announced over the limit");
        assert!(matches!(err, PoolError::TooLarge { .. }), "{err}");
        assert_eq!(err.status(), Some(StatusCode::OK));
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        drop(listener);
        let pool = Pool::new(&addr, Duration::from_secs(1)).expect("pool");
        let err = get(&pool, &addr, 1024).await.err().expect("refused");
        assert!(err.is_connect(), "{err}");
    }
}
