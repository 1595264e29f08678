//! The facade's HTTP(S) listener: route, read and check the body, build the `Call`, answer JSON or
//! RFC 9457 problem+json; it must never interpret tool results (that is the binding's job).

use super::route::{self, Found, QueryType, Route};
use super::{Answer, Body, Facade};
use crate::model::{Call, Failure, FailureKind};
use crate::ops::tls::Tls;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::{Map, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tracing::Instrument;

fn to_response(a: Answer) -> Response<Full<Bytes>> {
    let body = a
        .body
        .as_ref()
        .map(crate::json_text::to_vec)
        .unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_GATEWAY);
    if a.body.is_some() {
        let ct = if a.problem {
            "application/problem+json"
        } else {
            "application/json"
        };
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    if let Some(s) = a.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    if let Some(c) = a.challenge
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

fn problem(facade: &Facade, status: u16, message: impl Into<String>) -> Response<Full<Bytes>> {
    let kind = match status {
        404 => FailureKind::NotFound,
        _ => FailureKind::InvalidRequest,
    };
    let f = Failure::new(kind, message);
    to_response(Answer {
        status,
        problem: true,
        retry_after: None,
        body: Some(facade.binding.problem(&f, status)),
        challenge: None,
    })
}

fn convert(v: &str, t: QueryType) -> Option<Value> {
    match t {
        QueryType::String => Some(Value::String(v.to_string())),
        QueryType::Integer => v.parse::<i64>().ok().map(Value::from),
        QueryType::Number => v
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        QueryType::Boolean => match v {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
    }
}

/// Arguments from the body, then the query, then the path (path ids win).
fn arguments(
    route: &Route,
    body: Option<Value>,
    query: Option<&str>,
    params: Vec<(String, String)>,
) -> Result<Map<String, Value>, String> {
    let mut args = match (body, &route.body) {
        (None, _) => Map::new(),
        (Some(Value::Object(m)), Body::Flatten) => m,
        (Some(_), Body::Flatten) => return Err("the request body must be a JSON object".into()),
        (Some(v), Body::Argument(name)) => {
            let mut m = Map::new();
            m.insert(name.clone(), v);
            m
        }
    };
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let t = route
            .query
            .get(k.as_ref())
            .copied()
            .unwrap_or(QueryType::String);
        let value = convert(&v, t).ok_or_else(|| {
            let what = match t {
                QueryType::String => "string",
                QueryType::Integer => "an integer",
                QueryType::Number => "a number",
                QueryType::Boolean => "`true` or `false`",
            };
            format!("the query parameter `{k}` must be {what}")
        })?;
        args.insert(k.into_owned(), value);
    }
    for (k, v) in params {
        args.insert(k, Value::String(v));
    }
    Ok(args)
}

/// Answers one request; a caller's W3C `traceparent` parents its call span.
pub async fn handle(facade: &Facade, req: hyper::Request<Incoming>) -> Response<Full<Bytes>> {
    let parent = crate::ops::otel::extract(req.headers());
    crate::ops::otel::scope(parent, answer(facade, req)).await
}

async fn answer(facade: &Facade, req: hyper::Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(parts) = route::split_path(req.uri().path()) else {
        return problem(
            facade,
            400,
            "the path is not valid UTF-8 once percent-decoded",
        );
    };
    let (route, params) = match route::find(&facade.routes, req.method(), &parts) {
        Found::Route(r, p) => (r, p),
        // The facade's own OpenAPI document, unless a route claims the path.
        Found::NotFound
            if req.method() == http::Method::GET && req.uri().path() == "/openapi.json" =>
        {
            return to_response(Answer {
                status: 200,
                problem: false,
                retry_after: None,
                body: Some((*facade.openapi).clone()),
                challenge: None,
            });
        }
        // portico's public keys, which verify the webhooks the relay signs.
        Found::NotFound
            if req.method() == http::Method::GET
                && req.uri().path() == "/.well-known/jwks.json"
                && facade.egress.is_some() =>
        {
            return to_response(Answer {
                status: 200,
                problem: false,
                retry_after: None,
                body: facade.egress.as_ref().map(|e| e.jwks()),
                challenge: None,
            });
        }
        Found::NotFound => {
            return problem(facade, 404, format!("no route for {}", req.uri().path()));
        }
        Found::WrongMethod(allowed) => {
            let mut r = problem(
                facade,
                405,
                format!("{} is not allowed on this path", req.method()),
            );
            let allow = allowed
                .iter()
                .map(http::Method::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            if let Ok(v) = HeaderValue::from_str(&allow) {
                r.headers_mut().insert(header::ALLOW, v);
            }
            return r;
        }
    };
    let meta = match facade.binding.meta_from_headers(req.headers()) {
        Ok(m) => m,
        Err(f) => return to_response(facade.failure(f)),
    };
    let query = req.uri().query().map(str::to_string);
    let forwarded = facade.forwarded(req.headers());
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let (parts, body) = req.into_parts();
    let read = Limited::new(body, facade.max_body_bytes).collect();
    let bytes = match crate::ops::limits::within_body_deadline(&parts.extensions, read).await {
        Err(timed_out) => return problem(facade, 408, timed_out.to_string()),
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return problem(
                facade,
                413,
                format!("the body is larger than {} bytes", facade.max_body_bytes),
            );
        }
        Ok(Err(_)) => return problem(facade, 400, "the request body could not be read"),
    };
    let body = if bytes.is_empty() {
        None
    } else {
        let json = content_type.as_deref().is_some_and(|ct| {
            let essence = ct.split(';').next().unwrap_or("").trim();
            essence == "application/json" || essence.ends_with("+json")
        });
        if !json {
            return problem(facade, 415, "the request body must be application/json");
        }
        match crate::json_text::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(e) => return problem(facade, 400, format!("the body is not JSON: {e}")),
        }
    };
    let args = match arguments(route, body, query.as_deref(), params) {
        Ok(a) => a,
        Err(m) => {
            let f = Failure::new(FailureKind::InvalidRequest, m).with_code("invalid_request");
            return to_response(facade.failure(f));
        }
    };
    let call = Call {
        tool: route.tool.clone(),
        args: Value::Object(args),
        meta,
        text: None,
    };
    let started = Instant::now();
    // The call's span (a child of the caller's `traceparent`, when tracing is exported): the
    // upstream MCP request carries its trace context.
    let span = crate::ops::log::call_span();
    let (outcome, challenge) = facade.call(call, &forwarded).instrument(span.clone()).await;
    let mut answer = facade.answer(route, outcome);
    if matches!(answer.status, 401 | 403) {
        answer.challenge = challenge;
    }
    span.in_scope(|| {
        tracing::info!(
            facade = %facade.name,
            tool = %route.tool,
            status = answer.status,
            latency_us = started.elapsed().as_micros() as u64,
            "facade call"
        )
    });
    to_response(answer)
}

/// Serves the facade until `shutdown` resolves; in-flight requests then get `drain` to finish.
/// With `tls`, every connection is a TLS one (`ops::tls`; the certificate reloads on change).
pub async fn serve(
    listener: TcpListener,
    facade: Arc<Facade>,
    tls: Option<Arc<Tls>>,
    shutdown: impl std::future::Future<Output = ()>,
    drain: Duration,
    limits: crate::ops::limits::Limits,
) -> std::io::Result<()> {
    use hyper_util::rt::TokioIo;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let gate = crate::ops::limits::Gate::new("facade", limits);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = gate.accept(&listener) => {
                let (stream, _, slot) = accepted;
                let _ = stream.set_nodelay(true);
                let (stream, slot) = gate.watch(stream, slot);
                let facade = facade.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let facade = facade.clone();
                    // Boxed, as on the MCP listener: an idle keep-alive connection does not
                    // carry the size of a request's future.
                    Box::pin(async move { Ok::<_, Infallible>(handle(&facade, req).await) })
                });
                let svc = gate.service(slot, svc);
                let builder = gate.limits.auto();
                let Some(tls) = tls.clone() else {
                    let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), svc).into_owned());
                    let gate = gate.clone();
                    tokio::spawn(async move {
                        if let Err(e) = conn.await {
                            gate.ended(&*e);
                            tracing::debug!(error = %e, "facade connection ended with an error");
                        }
                    });
                    continue;
                };
                // The handshake runs in the connection's task; the watcher holds shutdown until
                // the connection is done.
                let watcher = graceful.watcher();
                let gate = gate.clone();
                tokio::spawn(async move {
                    let stream = match tls.accept(stream).await {
                        Ok(s) => s,
                        Err(e) => return tracing::debug!(error = %e, "facade TLS handshake failed"),
                    };
                    let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                    if let Err(e) = watcher.watch(conn).await {
                        gate.ended(&*e);
                        tracing::debug!(error = %e, "facade connection ended with an error");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(drain) => tracing::warn!("facade shutdown deadline reached"),
    }
    Ok(())
}

/// A facade listening on a socket.
pub struct Running {
    pub addr: std::net::SocketAddr,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    tls: bool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The notification relay (`notifications:`), stopped with the facade.
    relay: Option<super::notify::Relay>,
    /// Reloads the TLS certificate when its files change.
    tls_watch: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// True while the notification relay's stream to the upstream is open (false without
    /// `notifications:`).
    pub fn relay_connected(&self) -> bool {
        self.relay.as_ref().is_some_and(|r| r.connected())
    }

    /// Base URL (no trailing `/`): `https` when the listener serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(t) = self.tls_watch.take() {
            t.abort();
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// How a facade listener runs besides its address.
#[derive(Debug, Clone)]
pub struct Listen {
    /// TLS for the listener; `None`: plain HTTP.
    pub tls: Option<Arc<Tls>>,
    /// How often the TLS files are checked for a new certificate.
    pub tls_reload: Duration,
    /// How long in-flight requests may run after `stop`.
    pub drain: Duration,
    /// Connection limits (`ops::limits`).
    pub limits: crate::ops::limits::Limits,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            tls: None,
            tls_reload: Duration::from_secs(2),
            drain: Duration::from_secs(10),
            limits: Default::default(),
        }
    }
}

/// Binds `addr` and serves `facade` over plain HTTP.
pub async fn start(facade: Facade, addr: std::net::SocketAddr) -> std::io::Result<Running> {
    start_with(facade, addr, Listen::default()).await
}

/// Binds `addr` and serves `facade` as `listen` says (TLS, drain deadline).
pub async fn start_with(
    facade: Facade,
    addr: std::net::SocketAddr,
    listen: Listen,
) -> std::io::Result<Running> {
    let listener = crate::util::listen::bind(addr)?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let relay = match (&facade.notifications, &facade.egress) {
        (Some(n), Some(egress)) => Some(super::notify::start(
            facade.upstream.clone(),
            n.clone(),
            egress.clone(),
        )),
        _ => None,
    };
    let tls_watch = listen.tls.clone().map(|t| t.watch(listen.tls_reload));
    let task = tokio::spawn(serve(
        listener,
        Arc::new(facade),
        listen.tls.clone(),
        async move {
            let _ = rx.await;
        },
        listen.drain,
        listen.limits,
    ));
    Ok(Running {
        addr,
        task,
        tls: listen.tls.is_some(),
        stop: Some(tx),
        relay,
        tls_watch,
    })
}
