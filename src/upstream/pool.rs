//! Keep-alive HTTP/1.1 connections to one plain-`http` backend, each driven inline by its caller.
//! It never retries a request the backend may have seen, nor keeps a connection it cannot vouch for.
//!
//! Driving the connection in the calling task (no connection task, no channel hop per request)
//! is what makes it cheaper than a general-purpose client on the sidecar's loopback hop.

use bytes::{Bytes, BytesMut};
use http::header::{HOST, HeaderValue};
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::net::TcpStream;

type Body = Full<Bytes>;

/// One connection: the request handle and the connection state machine it needs polled.
struct Conn {
    tx: SendRequest<Body>,
    io: Pin<Box<Connection<TokioIo<TcpStream>, Body>>>,
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
}

/// Polls `conn` (the socket I/O) and `fut` together until `fut` is ready. Returns the output
/// and whether the connection ended meanwhile (then it must not be polled or reused).
async fn drive<F: Future + Unpin>(
    conn: &mut Pin<Box<Connection<TokioIo<TcpStream>, Body>>>,
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
        let (tx, io) = http1::handshake(TokioIo::new(stream)).await?;
        Ok(Conn {
            tx,
            io: Box::pin(io),
        })
    }

    /// A ready connection: an idle one that is still open, else a new one.
    async fn ready(&self) -> Result<Conn, PoolError> {
        while let Some(mut c) = self.take() {
            // An idle connection the backend closed shows it now (EOF); skip it.
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
    /// connection; one that may have reached the backend is never repeated.
    pub async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        max_body: usize,
    ) -> Result<Answer, PoolError> {
        let uri: Uri = url
            .parse()
            .map_err(|_| PoolError::BadUrl(url.to_string()))?;
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_string();
        let mut req = Request::new(Full::new(Bytes::from(body.unwrap_or_default())));
        *req.method_mut() = method;
        *req.uri_mut() = Uri::try_from(path).map_err(|_| PoolError::BadUrl(url.to_string()))?;
        *req.headers_mut() = headers;
        req.headers_mut()
            .entry(HOST)
            .or_insert_with(|| self.host_header.clone());
        let mut pending = Some(req);
        let mut last_err = PoolError::Closed;
        for _ in 0..2 {
            let Some(req) = pending.take() else { break };
            let mut c = self.ready().await?;
            let mut sent = Box::pin(c.tx.try_send_request(req));
            let (out, ended) = drive(&mut c.io, &mut sent).await;
            drop(sent);
            let resp: hyper::Response<Incoming> = match out {
                Some(Ok(resp)) => resp,
                Some(Err(mut e)) => {
                    // Not written at all: safe to send again on a fresh connection.
                    pending = e.take_message();
                    last_err = PoolError::Http(e.into_error());
                    continue;
                }
                None => {
                    last_err = PoolError::Closed;
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
            let mut buf = BytesMut::new();
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
                            if buf.len() + data.len() > max_body {
                                return Err(PoolError::TooLarge {
                                    status,
                                    limit: max_body,
                                });
                            }
                            buf.extend_from_slice(&data);
                        }
                    }
                    Some(None) => break,
                    Some(Some(Err(source))) => return Err(PoolError::Body { status, source }),
                    None => return Err(PoolError::Closed),
                }
            }
            // Keep the connection only if it is open and can take another request now.
            if !ended && settle(&mut c) {
                self.give_back(c);
            }
            return Ok(Answer {
                status,
                headers: parts.headers,
                body: buf.freeze(),
            });
        }
        Err(last_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

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
