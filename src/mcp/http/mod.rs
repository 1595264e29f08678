//! MCP Streamable HTTP on one endpoint for both eras: POST/GET/DELETE, JSON or SSE replies,
//! sessions (2025 era), header rules (2026-07-28), Origin/Host checks, body and depth limits.
//! It never interprets tools: requests go to `handler`.

mod eras;
mod lifetime;
mod oauth;
mod params;
mod post;
mod respond;
mod sessions;
mod stream;
#[cfg(test)]
mod tests;

use super::handler::Core;
use super::jsonrpc::{INVALID_REQUEST, METHOD_NOT_FOUND};
use super::session::Sessions;
use crate::util::boxed::in_place as boxed_in_place;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use lifetime::expire_sessions;
pub use respond::Body;
use respond::{empty, json_response, rpc_error};
pub(crate) use respond::{host_of, request_host};
use respond::{host_part, request_host_str};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Default cap of 2025-era sessions per replica.
pub const DEFAULT_MAX_SESSIONS: u64 = 10_000;

/// Default idle time after which a session ends.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Default new sessions per second per client address...
pub const DEFAULT_SESSION_RATE: f64 = 10.0;

/// ...and the burst allowed above that rate.
pub const DEFAULT_SESSION_BURST: f64 = 100.0;

/// The address a request's connection comes from (a request extension set by [`serve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

impl ClientAddr {
    /// The key of its per-address limits: the IPv4 address, or the IPv6 /64 (one client
    /// usually holds a whole /64).
    fn bucket(self) -> String {
        match self.0 {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => {
                    let s = v6.segments();
                    format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
                }
            },
        }
    }
}

/// Transport limits and checks.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Path of the MCP endpoint.
    pub path: String,
    /// Accepted `Host` names (without port); `*` accepts any.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin`s besides those whose host is allowed; `*` accepts any.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    pub max_depth: usize,
    /// Most 2025-era sessions held at once; `initialize` past it is refused with 503.
    pub max_sessions: u64,
    /// A session unused (no request, no open GET stream, no call in flight) this long ends.
    pub session_idle: Duration,
    /// New sessions per client address: a token bucket (`None`: no limit); past it,
    /// `initialize` is refused with 429.
    pub session_rate: Option<crate::auth::limit::Shape>,
    pub keep_alive: Duration,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_timeout: Duration,
    /// portico's key for outgoing webhooks (`/.well-known/jwks.json`); `None`: an ephemeral
    /// P-256 key made at start.
    pub webhook_key: Option<Arc<crate::webhook::keys::SigningKey>>,
    /// The webhook journal file (accepted events and deliveries survive a restart); `None`:
    /// in memory only.
    pub webhook_journal: Option<std::path::PathBuf>,
    /// How many accepted webhooks are kept for replay, and how long event ids for dedupe.
    pub webhook_retention: crate::webhook::ingress::Retention,
    /// TLS for this listener (`ops::tls`); `None`: plain HTTP.
    pub tls: Option<Arc<crate::ops::tls::Tls>>,
    /// Connection shards (`ops::shards`): event-loop threads that each own the client
    /// connections handed to them round robin, with every request on them; 0 serves
    /// connections on the calling runtime's workers instead. Default: one per CPU.
    pub shards: usize,
    /// Connection limits (`ops::limits`): caps, timeouts, header size, HTTP/2 streams.
    pub limits: crate::ops::limits::Limits,
    /// MCP authorization from the command line (`--oauth-issuer`, `--oauth-resource`); the
    /// mapping files' `mcp_authorization` adds to it.
    pub oauth: crate::auth::resource::Options,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            path: "/mcp".into(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            max_body_bytes: 1 << 20,
            max_depth: 64,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
            session_rate: Some(crate::auth::limit::Shape {
                refill: DEFAULT_SESSION_RATE,
                burst: DEFAULT_SESSION_BURST,
            }),
            keep_alive: Duration::from_secs(15),
            shutdown_timeout: Duration::from_secs(10),
            webhook_key: None,
            webhook_journal: None,
            webhook_retention: Default::default(),
            shards: crate::ops::shards::per_cpu(),
            tls: None,
            limits: Default::default(),
            oauth: Default::default(),
        }
    }
}

/// Everything a connection needs.
pub struct Server {
    pub core: Arc<Core>,
    pub opts: HttpOptions,
    pub sessions: Sessions,
    /// Turns true when shutdown starts; SSE streams end on it.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// Webhook ingress and fan-out (`POST /webhooks/{business}`, GET stream notifications).
    pub webhooks: Arc<crate::webhook::ingress::Ingress>,
    /// The shared event stream's reader task (with `--state`).
    reader: Option<tokio::task::AbortHandle>,
    /// The sweeper that takes over deliveries of stopped replicas (with `--state`).
    sweeper: Option<tokio::task::AbortHandle>,
    /// The task that ends idle sessions.
    expiry: Option<tokio::task::AbortHandle>,
    /// True once the hub holds the shared stream's recent events (at once without `--state`).
    loaded: tokio::sync::watch::Receiver<bool>,
    /// MCP authorization: trusted issuers' metadata and keys, cached.
    resource_server: crate::auth::resource::ResourceServer,
}

impl Server {
    /// Fails only when the configured webhook journal cannot be opened or read.
    pub fn new(core: Arc<Core>, opts: HttpOptions) -> std::io::Result<Arc<Self>> {
        let sessions = Sessions::new(opts.max_sessions, opts.session_idle);
        let journal = match &opts.webhook_journal {
            Some(path) => Some(Arc::new(crate::webhook::journal::FileJournal::open(path)?)
                as Arc<dyn crate::webhook::journal::Journal>),
            None => None,
        };
        let webhooks = crate::webhook::ingress::Ingress::with_retention(
            opts.webhook_key.clone(),
            journal,
            opts.webhook_retention,
        );
        // Backend requests made outside an HTTP request (catalog refreshes) are signed with the
        // first server's key; those of a request with its own listener's.
        if let Some(egress) = &webhooks.egress {
            crate::upstream::sign::install(egress.signing_key());
        }
        let resumed = webhooks.restore(&core.gateway.load())?;
        if resumed > 0 {
            tracing::info!(resumed, "resuming webhook deliveries from the journal");
        }
        // Several replicas: every accepted event comes back through the shared stream.
        let (loaded_tx, loaded) = tokio::sync::watch::channel(crate::state::shared().is_none());
        let reader = crate::state::shared().map(|state| {
            let replay = opts.webhook_retention.replay;
            tokio::spawn(crate::state::events::read_into(
                state.clone(),
                webhooks.hub.clone(),
                replay,
                loaded_tx,
            ))
            .abort_handle()
        });
        let sweeper = match (crate::state::shared(), &webhooks.egress) {
            (Some(state), Some(egress)) => {
                Some(tokio::spawn(egress.clone().take_over_forever(state)).abort_handle())
            }
            _ => None,
        };
        let webhooks = Arc::new(webhooks);
        let expiry = tokio::runtime::Handle::try_current().ok().map(|rt| {
            rt.spawn(expire_sessions(sessions.clone(), webhooks.clone()))
                .abort_handle()
        });
        let resource_server = crate::auth::resource::ResourceServer::new(opts.oauth.clone());
        Ok(Arc::new(Server {
            resource_server,
            core,
            opts,
            sessions,
            closing: tokio::sync::watch::Sender::new(false),
            webhooks,
            reader,
            sweeper,
            expiry,
            loaded,
        }))
    }

    /// Waits (2 s at most) until the hub has the shared stream's recent events, so a replay
    /// or a booking read on a replica that just started sees what other replicas accepted.
    async fn events_loaded(&self) {
        let mut loaded = self.loaded.clone();
        let _ = tokio::time::timeout(Duration::from_secs(2), loaded.wait_for(|l| *l)).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for task in [&self.reader, &self.sweeper, &self.expiry]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}

impl Server {
    fn host_allowed(&self, host: &str) -> bool {
        self.opts
            .allowed_hosts
            .iter()
            .any(|h| h == "*" || h.eq_ignore_ascii_case(host))
    }

    /// DNS-rebinding protection: foreign Host or Origin -> 403.
    fn check_origin(&self, req: &Request<Incoming>) -> Option<Response<Body>> {
        let host = request_host_str(req);
        let forbidden = |what: &str| {
            Some(rpc_error(
                StatusCode::FORBIDDEN,
                &Value::Null,
                INVALID_REQUEST,
                &format!("Forbidden: {what} is not allowed"),
                None,
            ))
        };
        // A request without a Host (HTTP/1.0) names no host this gateway serves.
        let any_host = self.opts.allowed_hosts.iter().any(|h| h == "*");
        if !any_host
            && !host
                .as_ref()
                .is_some_and(|h| self.host_allowed(host_part(h)))
        {
            return forbidden("this Host");
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let Ok(o) = origin.to_str() else {
                return forbidden("this Origin");
            };
            let listed = self
                .opts
                .allowed_origins
                .iter()
                .any(|a| a == "*" || a.eq_ignore_ascii_case(o));
            let host_ok = url::Url::parse(o)
                .ok()
                .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
                .is_some_and(|h| self.host_allowed(&h));
            if !listed && !host_ok {
                return forbidden("this Origin");
            }
        }
        None
    }

    /// Entry point for every HTTP request.
    pub async fn handle(self: Arc<Self>, mut req: Request<Incoming>) -> Response<Body> {
        // Webhooks come from other hosts: the signature, not Host/Origin, vouches for them.
        if let Some(business) = req.uri().path().strip_prefix("/webhooks/") {
            let business = business.to_string();
            let gateway = self.core.gateway.load_full();
            let max = self.opts.max_body_bytes;
            let r = crate::webhook::edge::receive(&self.webhooks, &gateway, &business, req, max);
            let reply = r.await;
            return json_response(reply.status, &reply.body);
        }
        if req.uri().path() == "/.well-known/jwks.json" && req.method() == Method::GET {
            let keys = self.webhooks.egress.as_ref().map(|e| e.jwks());
            return json_response(StatusCode::OK, &keys.unwrap_or_else(|| json!({"keys": []})));
        }
        if req.uri().path().starts_with("/.well-known/") {
            if let Some(r) = self.check_origin(&req) {
                return r;
            }
            return self.well_known(&req);
        }
        if req.uri().path() != self.opts.path {
            return rpc_error(
                StatusCode::NOT_FOUND,
                &Value::Null,
                METHOD_NOT_FOUND,
                "Not found: the MCP endpoint is elsewhere",
                None,
            );
        }
        if let Some(r) = self.check_origin(&req) {
            return r;
        }
        // MCP authorization: every request to the endpoint carries a valid access token.
        // Its principal rides on the request, so every credential reader (a POST's call, a GET
        // stream's audience) sees it in place of the `Authorization` header.
        match self.check_token(&req).await {
            Ok(Some(p)) => {
                req.extensions_mut().insert(p);
            }
            Ok(None) => {}
            Err(refused) => return refused,
        }
        match *req.method() {
            Method::POST => {
                // The request's HTTP credentials reach `forward` (auth) without transport types.
                // The request itself is kept only when a mapping reads it (signature policies,
                // forwarded headers); a reload is seen by the requests that arrive after it.
                let keep = self.core.gateway.load().reads_http_request;
                let mut creds = crate::auth::transport::HttpCredentials::from_request(&req, keep);
                creds.backend_key = self.webhooks.egress.as_ref().map(|e| e.signing_key());
                // A caller's `traceparent` parents the call spans (when tracing is exported).
                let parent = crate::ops::otel::extract(req.headers());
                // Boxed where it is made: the call pipeline's state (several KiB) is then
                // written once, not copied again by each wrapper and by this future's own moves.
                let post = crate::auth::transport::scope(creds, boxed_in_place(|| self.post(req)));
                crate::ops::otel::scope(parent, post).await
            }
            Method::GET => self.get(req).await,
            Method::DELETE => self.delete(req).await,
            _ => {
                let mut r = rpc_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    &Value::Null,
                    INVALID_REQUEST,
                    "Method not allowed",
                    None,
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    /// `GET /.well-known/{ucp,usp}[/{business}]`: the discovery profile (`crate::discovery`).
    fn well_known(&self, req: &Request<Incoming>) -> Response<Body> {
        if !matches!(*req.method(), Method::GET | Method::HEAD) {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        if let Some(r) = self.resource_metadata(req) {
            return r;
        }
        // The Host passed `check_origin`, so it names this gateway.
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("localhost");
        let mcp_url = format!("http://{host}{}", self.opts.path);
        let gateway = self.core.gateway.load();
        match crate::discovery::serve(&gateway, req.uri().path(), &mcp_url) {
            crate::discovery::Served::Profile(doc) => {
                let mut r = json_response(StatusCode::OK, &doc);
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=300"),
                );
                r
            }
            crate::discovery::Served::NotFound(why) => {
                json_response(StatusCode::NOT_FOUND, &json!({ "error": why }))
            }
            crate::discovery::Served::NotDiscovery => {
                json_response(StatusCode::NOT_FOUND, &json!({ "error": "not found" }))
            }
        }
    }
}

/// Serves the MCP endpoint on `listener` until `shutdown` resolves; in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper_util::rt::TokioIo;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let gate = crate::ops::limits::Gate::new("mcp", server.opts.limits.clone());
    let shards = match server.opts.shards {
        0 => None,
        n => match crate::ops::shards::Shards::start(n) {
            Ok(s) => Some(s),
            Err(e) => {
                // Serving on the shared worker pool beats not serving.
                tracing::warn!(error = %e, shards = n, "cannot start connection shards; serving on the worker pool");
                None
            }
        },
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = gate.accept(&listener) => {
                let (stream, peer, slot) = accepted;
                let _ = stream.set_nodelay(true);
                let tls = server.opts.tls.clone();
                let server = server.clone();
                // One connection's requests; a client certificate rustls verified against
                // --tls-client-ca rides on each of them to auth (mtls).
                let svc = move |cert: Option<crate::auth::transport::ClientCert>| {
                    hyper::service::service_fn(move |mut req: Request<Incoming>| {
                        let server = server.clone();
                        if let Some(c) = &cert {
                            req.extensions_mut().insert(c.clone());
                        }
                        req.extensions_mut().insert(ClientAddr(peer.ip()));
                        // Boxed: the request's future (the whole call pipeline) lives on the
                        // heap only while a request runs, not inline in every connection's
                        // task, so an idle keep-alive connection or an open SSE stream does not
                        // carry its size.
                        boxed_in_place(move || async move {
                            Ok::<_, Infallible>(server.handle(req).await)
                        })
                    })
                };
                // The connection's task: the TLS handshake (if any), then HTTP until it ends.
                // The watcher holds shutdown until the connection is done.
                let watcher = graceful.watcher();
                let gate = gate.clone();
                let conn = move |stream: tokio::net::TcpStream| async move {
                    // The socket closes when idle (a stalled TLS handshake too); requests carry
                    // their body deadline; the builder holds the header and HTTP/2 limits.
                    let (stream, slot) = gate.watch(stream, slot);
                    let builder = gate.limits.auto();
                    let ended = match tls {
                        None => {
                            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), gate.service(slot, svc(None))).into_owned();
                            watcher.watch(conn).await
                        }
                        Some(tls) => {
                            let stream = match tls.accept(stream).await {
                                Ok(s) => s,
                                Err(e) => return tracing::debug!(error = %e, "TLS handshake failed"),
                            };
                            let cert = stream.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| crate::auth::transport::ClientCert::from_der(c.as_ref()));
                            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), gate.service(slot, svc(cert))).into_owned();
                            watcher.watch(conn).await
                        }
                    };
                    if let Err(e) = ended {
                        gate.ended(&*e);
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                };
                let Some(shards) = &shards else {
                    tokio::spawn(conn(stream));
                    continue;
                };
                // The connection moves to a shard thread and lives there: its socket is
                // registered anew with the shard's runtime.
                let stream = match stream.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot hand a connection to a shard");
                        continue;
                    }
                };
                let handed = shards.run(move || async move {
                    match tokio::net::TcpStream::from_std(stream) {
                        Ok(stream) => conn(stream).await,
                        Err(e) => tracing::warn!(error = %e, "a shard cannot take a connection"),
                    }
                });
                if !handed {
                    tracing::warn!("a shard thread has ended; connection dropped");
                }
            }
            _ = &mut shutdown => break,
        }
    }
    // Refuse new connections at once, end SSE streams, then drain in-flight requests.
    drop(listener);
    server.closing.send_replace(true);
    let deadline = server.opts.shutdown_timeout;
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("in-flight requests finished"),
        _ = tokio::time::sleep(deadline) => tracing::warn!(deadline_ms = deadline.as_millis() as u64, "shutdown deadline reached; abandoning open connections"),
    }
    Ok(())
}
