//! MCP Streamable HTTP on one endpoint for both eras: POST/GET/DELETE, JSON or SSE replies,
//! sessions (2025 era), header rules (2026-07-28), Origin/Host checks, body and depth limits.
//! It never interprets tools: requests go to `handler`.

use super::handler::{self, Answer, Core, Era};
use super::jsonrpc::{
    self, HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    Message, UNSUPPORTED_VERSION,
};
use super::notify;
use super::session::{Session, Sessions};
use super::{LEGACY_VERSIONS, MODERN_VERSIONS};
use base64::Engine;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Response body type of the MCP endpoint.
pub type Body = BoxBody<Bytes, Infallible>;

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

/// Why a request's `Mcp-Session-Id` names no session this replica can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// Never made, ended (DELETE on any replica) or expired: 404.
    NotFound,
    /// The shared state cannot say (Redis unreachable) and this replica does not hold it: 503.
    Unavailable,
    /// It exists, but this replica is full of busy sessions and cannot take it in: 503 with
    /// the seconds to wait.
    Full(u64),
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
        Ok(Arc::new(Server {
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

    /// Session `sid`: this replica's, or (with shared state) one that another replica created.
    /// With shared state, the record in Redis decides: one read per request (so a session
    /// ended on another replica is refused here at once), and a renewal of its lifetime at most
    /// once per [`renewal_period`] (so use on this replica keeps it alive everywhere).
    async fn find_session(&self, sid: &str) -> Result<Arc<Session>, Lookup> {
        let local = self.sessions.get(sid);
        let Some(state) = crate::state::shared() else {
            return local.ok_or(Lookup::NotFound);
        };
        // Ids portico makes are 32 hex digits; anything else is no session of ours.
        if sid.len() > 64 || !sid.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(Lookup::NotFound);
        }
        let idle = self.opts.session_idle;
        let renew = match &local {
            Some(s) => s.renewal_due(renewal_period(idle)),
            None => true,
        };
        match crate::state::sessions::find(state, sid, renew.then_some(idle)).await {
            Ok(Some(version)) => match local {
                Some(s) => Ok(s),
                None => self.sessions.adopt(sid, &version).map_err(|full| {
                    tracing::warn!(error = %full, "cannot take in a session of another replica");
                    Lookup::Full(full.retry_after_s)
                }),
            },
            Ok(None) => {
                // Ended on another replica (or expired there): end this replica's copy too.
                if local.is_some() && self.sessions.remove(sid) {
                    self.webhooks.hub.end_session(sid);
                }
                Err(Lookup::NotFound)
            }
            Err(e) => {
                // Redis cannot say; a session this replica holds is served (it cannot have
                // been ended elsewhere without Redis), another one cannot be vouched for.
                tracing::warn!(error = %e, "cannot look the session up in the shared state");
                local.ok_or(Lookup::Unavailable)
            }
        }
    }
}

/// How often a replica using a session renews its shared record: a quarter of the idle time
/// (at least 250 ms), so the record outlives the use by at least three quarters of it.
fn renewal_period(idle: Duration) -> Duration {
    (idle / 4).max(Duration::from_millis(250))
}

/// Ends idle sessions (a quarter of the idle time after they expire at the latest), and their
/// resource subscriptions with them; with shared state, renews the records of sessions with a
/// call in flight (an open GET stream renews its own).
async fn expire_sessions(sessions: Sessions, webhooks: Arc<crate::webhook::ingress::Ingress>) {
    let idle = sessions.idle();
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for sid in sessions.sweep() {
            webhooks.hub.end_session(&sid);
        }
        let Some(state) = crate::state::shared() else {
            continue;
        };
        for sid in sessions.busy_renewals(renewal_period(idle)) {
            if let Err(e) = crate::state::sessions::find(state, &sid, Some(idle)).await {
                tracing::warn!(error = %e, "cannot renew a busy session in the shared state");
            }
        }
    }
}

/// The JSON-RPC error for a session lookup that found none.
fn no_session(id: &Value, why: Lookup) -> Response<Body> {
    match why {
        Lookup::NotFound => rpc_error(
            StatusCode::NOT_FOUND,
            id,
            INVALID_REQUEST,
            "Session not found",
            None,
        ),
        Lookup::Unavailable => unavailable(
            id,
            1,
            "the session cannot be checked now (shared state unreachable); try again shortly",
        ),
        Lookup::Full(retry_after_s) => unavailable(
            id,
            retry_after_s,
            "this replica holds its maximum of busy sessions; try again shortly",
        ),
    }
}

/// 503 with `Retry-After` and a JSON-RPC error.
fn unavailable(id: &Value, retry_after_s: u64, message: &str) -> Response<Body> {
    let mut r = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        INTERNAL_ERROR,
        message,
        Some(json!({"retry_after": retry_after_s})),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    r
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

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// `make()`'s future, boxed: the box is allocated first and the future built into it, where
/// `Box::pin(make())` builds it on the stack and copies all of it (about 9 KiB for a POST).
fn boxed_in_place<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

thread_local! {
    /// Room the next answer written on this thread starts with: about the size of the answers
    /// written before it, so a typical answer is written without growing its buffer.
    static ANSWER_ROOM: std::cell::Cell<usize> = const { std::cell::Cell::new(1024) };
}

/// `prefix`, the JSON text of `value`, then `suffix`, in a buffer sized from the answers
/// before it (growing a 256-byte buffer to a 2 KiB answer copied it three times).
fn answer_bytes(prefix: &[u8], value: &Value, suffix: &[u8]) -> Vec<u8> {
    answer_with(prefix, |out| crate::json_text::write(value, out), suffix)
}

/// [`answer_bytes`] with the JSON written by `write`.
fn answer_with(prefix: &[u8], write: impl FnOnce(&mut Vec<u8>), suffix: &[u8]) -> Vec<u8> {
    let room = ANSWER_ROOM.with(std::cell::Cell::get);
    let mut out = Vec::with_capacity(room);
    out.extend_from_slice(prefix);
    write(&mut out);
    out.extend_from_slice(suffix);
    // Follows larger answers at once and smaller ones slowly; bounded either way.
    let next = out.len().max(room - room / 8).clamp(256, 64 * 1024);
    ANSWER_ROOM.with(|r| r.set(next));
    out
}

/// A JSON-RPC answer as JSON, or as one SSE event when the client takes only
/// `text/event-stream`; `write` writes the message.
fn framed(
    status: StatusCode,
    json_ok: bool,
    sse_ok: bool,
    write: impl FnOnce(&mut Vec<u8>),
) -> Response<Body> {
    if json_ok || !sse_ok {
        return json_written(status, write);
    }
    let frame = answer_with(b"event: message\ndata: ", write, b"\n\n");
    let mut r = Response::new(full(Bytes::from(frame)));
    *r.status_mut() = status;
    sse_headers(&mut r);
    r
}

/// The JSON-RPC response for request `id` whose result was written on the hot path: the bytes
/// `jsonrpc::result` of its value writes.
fn write_written(id: &Value, w: &crate::binding::Written, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"id\":");
    crate::json_text::write(id, out);
    out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
    w.write(out);
    out.push(b'}');
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    json_written(status, |out| crate::json_text::write(value, out))
}

/// A JSON response whose body `write` writes.
fn json_written(status: StatusCode, write: impl FnOnce(&mut Vec<u8>)) -> Response<Body> {
    let mut r = Response::new(full(answer_with(b"", write, b"")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Adds RFC 9421 response-signature headers over the JSON body `json_response` sent.
fn sign_response(
    r: &mut Response<Body>,
    status: StatusCode,
    body: &Value,
    key: &crate::webhook::keys::SigningKey,
) {
    let ct = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    if ct != "application/json" {
        return; // an SSE frame is not the signed body
    }
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let bytes = crate::json_text::to_vec(body);
    if let Some((digest, input, sig)) =
        crate::auth::respsig::sign(status.as_u16(), &ct, &bytes, key, created)
    {
        for (name, value) in [
            ("content-digest", digest),
            ("signature-input", input),
            ("signature", sig),
        ] {
            if let Ok(v) = HeaderValue::from_str(&value) {
                r.headers_mut().insert(name, v);
            }
        }
    }
}

fn rpc_error(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<Body> {
    json_response(status, &jsonrpc::error(id, code, message, data))
}

/// 400 with the JSON-RPC error for a body that is not one acceptable message.
fn rejected(rej: &jsonrpc::Rejection) -> Response<Body> {
    rpc_error(
        StatusCode::BAD_REQUEST,
        &rej.id,
        rej.code,
        &rej.message,
        None,
    )
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

fn sse_frame(value: &Value) -> Bytes {
    Bytes::from(answer_bytes(b"event: message\ndata: ", value, b"\n\n"))
}

fn sse_headers(r: &mut Response<Body>) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// Which media types the client accepts: (json, sse).
fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let mut values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    if values.peek().is_none() {
        return (true, true);
    }
    let mut json = false;
    let mut sse = false;
    for v in values {
        for part in v.split(',') {
            let mt = part.split(';').next().unwrap_or("").trim();
            let is = |name: &str| mt.eq_ignore_ascii_case(name);
            if is("*/*") {
                json = true;
                sse = true;
            } else if is("application/*") || is("application/json") {
                json = true;
            } else if is("text/*") || is("text/event-stream") {
                sse = true;
            }
        }
    }
    (json, sse)
}

/// The `Host` header, else the URI's authority (HTTP/2's `:authority`), as sent.
pub(crate) fn request_host<B>(req: &Request<B>) -> Option<String> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
}

/// The host of a `Host` header or URI authority, lower-cased, without port or IPv6 brackets.
pub(crate) fn host_of(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_string();
    }
    a.rsplit_once(':')
        .map(|(h, p)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                h.to_string()
            } else {
                a.clone()
            }
        })
        .unwrap_or(a)
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
        let host = request_host(req);
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
                .is_some_and(|h| self.host_allowed(&host_of(h)))
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
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
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

    fn session_id(req_headers: &HeaderMap) -> Option<String> {
        req_headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    async fn get(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(sid) = Self::session_id(req.headers()) else {
            let mut r = rpc_error(
                StatusCode::METHOD_NOT_ALLOWED,
                &Value::Null,
                INVALID_REQUEST,
                "GET needs an Mcp-Session-Id (2026-07-28 has no GET stream: use subscriptions/listen)",
                None,
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        };
        if !accepts(req.headers()).1 {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &Value::Null,
                INVALID_REQUEST,
                "Not Acceptable: GET must accept text/event-stream",
                None,
            );
        }
        let session = match self.find_session(&sid).await {
            Ok(s) => s,
            Err(why) => return no_session(&Value::Null, why),
        };
        let (tx, rx) = mpsc::channel::<Bytes>(256);
        session.attach_stream(tx);
        let last_event_id = req
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let filter = crate::webhook::hub::Filter::from_query(req.uri().query());
        // Events reach this stream only as far as its own credentials allow (`auth::access`);
        // the request is kept when a policy may read its signature.
        let keep = self.core.gateway.load().reads_http_request;
        let creds = crate::auth::transport::HttpCredentials::from_request(&req, keep);
        let gate = self.stream_gate(&creds).await;
        self.events_loaded().await;
        let events = self.webhooks.hub.listen(&sid, filter, last_event_id, gate);
        // The stream ends with its session: DELETE or expiry here, or its shared record gone
        // because another replica ended it (checked once per keep-alive or renewal period,
        // whichever is shorter; the open stream renews the record).
        let idle = self.opts.session_idle;
        let ended = EndsWith(tokio::spawn(session_gone(
            session,
            self.opts.keep_alive,
            idle,
        )));
        self.stream_response(
            futures_util::stream::select(tokio_stream_receiver(rx), events).take_until(ended),
        )
    }

    /// The delivery gate of a stream opened with `creds` (`None`: no business has a policy).
    async fn stream_gate(
        &self,
        creds: &crate::auth::transport::HttpCredentials,
    ) -> Option<Arc<dyn crate::webhook::hub::Gate>> {
        let core = self.core.clone();
        let gate = crate::auth::access::StreamGate::open(move || core.gateway.load_full(), creds);
        gate.await.map(|g| g as Arc<dyn crate::webhook::hub::Gate>)
    }

    /// A `resources/list` answer that also names the booking resources the caller owns
    /// (`webhook::edge::owned_resources`); such a list is the caller's own (`private`).
    async fn with_owned(&self, answer: Answer) -> Answer {
        let Answer::Result(mut r) = answer else {
            return answer;
        };
        let gateway = self.core.gateway.load_full();
        if !gateway
            .businesses
            .iter()
            .any(|b| b.webhooks.is_some() && b.auth.is_some())
        {
            return Answer::Result(r);
        }
        let Some(audience) = crate::auth::access::Audience::current(&gateway).await else {
            return Answer::Result(r);
        };
        let owned = crate::webhook::edge::owned_resources(&self.webhooks, &gateway, &audience);
        let owned = owned.await;
        if let (false, Some(Value::Array(list))) = (owned.is_empty(), r.get_mut("resources")) {
            list.extend(owned);
            if r.get("cacheScope").is_some() {
                r["cacheScope"] = json!("private");
            }
        }
        Answer::Result(r)
    }

    /// A long-lived SSE response: `source` plus keep-alive comments, ended by shutdown.
    fn stream_response(
        &self,
        source: impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static,
    ) -> Response<Body> {
        let keep_alive = self.opts.keep_alive;
        let ticks = tokio_stream_interval(keep_alive);
        let open = crate::ops::metrics::SseClient::open();
        let mut closing = self.closing.subscribe();
        // The response ends when `source` does (a `None` after its last frame), not only at
        // shutdown: the keep-alive ticks alone would hold it open.
        let source = source
            .map(Some)
            .chain(futures_util::stream::once(std::future::ready(None)));
        let frames = futures_util::stream::select(
            source,
            ticks.map(|_| Some(Bytes::from_static(b": keep-alive\n\n"))),
        )
        .take_while(|frame| std::future::ready(frame.is_some()))
        .filter_map(std::future::ready)
        .take_until(async move {
            let _ = closing.wait_for(|c| *c).await;
        })
        .map(move |b| {
            let _ = &open;
            Ok::<_, Infallible>(Frame::data(b))
        });
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        sse_headers(&mut r);
        r
    }

    async fn delete(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(sid) = Self::session_id(req.headers()) else {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        };
        // The shared record first: a session ended here but not there would live on elsewhere.
        let mut ended = false;
        if let Some(state) = crate::state::shared() {
            match crate::state::sessions::forget(state, &sid).await {
                Ok(found) => ended = found,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot end the session in the shared state");
                    return unavailable(
                        &Value::Null,
                        1,
                        "the session cannot be ended now (shared state unreachable); try again shortly",
                    );
                }
            }
        }
        ended |= self.sessions.remove(&sid);
        if ended {
            self.webhooks.hub.end_session(&sid);
            empty(StatusCode::OK)
        } else {
            rpc_error(
                StatusCode::NOT_FOUND,
                &Value::Null,
                INVALID_REQUEST,
                "Session not found",
                None,
            )
        }
    }

    async fn post(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let (json_ok, sse_ok) = accepts(req.headers());
        if !json_ok && !sse_ok {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &Value::Null,
                INVALID_REQUEST,
                "Not Acceptable: accept application/json or text/event-stream",
                None,
            );
        }
        let ct_ok = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("application/json")
            });
        if !ct_ok {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &Value::Null,
                INVALID_REQUEST,
                "Unsupported Media Type: Content-Type must be application/json",
                None,
            );
        }
        let max = self.opts.max_body_bytes;
        // `drained`: the rest of the body was read and dropped, so the connection can carry
        // the next request; otherwise the answer says the connection closes (RFC 9112 §9.6).
        let too_big = |drained: bool| {
            let mut r = match autonym_only_problem(&self.core, "payload_too_large") {
                Some(problem) => problem_response(Some(413), &problem),
                None => rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!("request body exceeds {max} bytes"),
                    None,
                ),
            };
            if !drained {
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            r
        };
        let (parts, mut body) = req.into_parts();
        if let Some(len) = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok())
            && len > max as u64
        {
            // A body at most DRAIN_BYTES over the limit is read and dropped, so the client
            // (still sending) gets the answer instead of a reset; a larger one is not read.
            let drained = len <= max as u64 + DRAIN_BYTES && drain(&mut body).await;
            return too_big(drained);
        }
        let read = Limited::new(&mut body, max).collect();
        let read = crate::ops::limits::within_body_deadline(&parts.extensions, read).await;
        let bytes = match read {
            Err(timed_out) => {
                let mut r = rpc_error(
                    StatusCode::REQUEST_TIMEOUT,
                    &Value::Null,
                    INVALID_REQUEST,
                    &timed_out.to_string(),
                    None,
                );
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return r;
            }
            Ok(Ok(c)) => c.to_bytes(),
            Ok(Err(e)) => {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    return too_big(drain(&mut body).await);
                }
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &Value::Null,
                    INVALID_REQUEST,
                    "could not read the request body",
                    None,
                );
            }
        };
        crate::auth::transport::record_body(&bytes);
        let value = match jsonrpc::parse_value(&bytes, self.opts.max_depth) {
            Ok(Value::Array(items)) => {
                return self.post_batch(&parts.headers, items, json_ok).await;
            }
            Ok(v) => v,
            Err(rej) => return rejected(&rej),
        };
        let msg = match jsonrpc::classify(value) {
            Ok(m) => m,
            Err(rej) => return rejected(&rej),
        };
        let headers = &parts.headers;
        let session_hdr = Self::session_id(headers);
        let version_hdr = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let params = match &msg {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref()
            }
            Message::Response { .. } => None,
        };
        let meta = params.and_then(|p| p.get("_meta"));
        let meta_version = meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
        let header_is_legacy = version_hdr
            .as_deref()
            .is_some_and(|v| LEGACY_VERSIONS.contains(&v) || v == "2024-11-05");
        // The reference dual-era rule: no session, and a modern marker (`_meta` version, or a
        // version header that is not a handshake-era one). `initialize` sent that way is a
        // removed method (404), which is what modern clients probing a server expect.
        let modern = session_hdr.is_none()
            && (meta_version.is_some() || version_hdr.is_some())
            && !(meta_version.is_none() && header_is_legacy);
        // A request other than `tools/call` is a read: its params carry the credentials reads
        // judge besides the headers (`auth::access`). Tool calls take their own path.
        let read = match &msg {
            Message::Request { method, params, .. } if method != "tools/call" => {
                Some((method.clone(), params.clone()))
            }
            _ => None,
        };
        let parts = &parts;
        let dispatch = |msg| async move {
            if modern {
                self.post_modern(headers, msg, json_ok, sse_ok).await
            } else {
                self.post_legacy(parts, msg, session_hdr, version_hdr, json_ok, sse_ok)
                    .await
            }
        };
        match read {
            Some((method, params)) => {
                crate::auth::access::reading(&method, params, dispatch(msg)).await
            }
            None => dispatch(msg).await,
        }
    }

    /// JSON-RPC batches: only sessions negotiated at 2025-03-26 may send them (the revision
    /// that had batching); everyone else gets -32600.
    async fn post_batch(
        &self,
        headers: &HeaderMap,
        items: Vec<Value>,
        json_ok: bool,
    ) -> Response<Body> {
        let refuse = |m: &str| {
            rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                INVALID_REQUEST,
                m,
                None,
            )
        };
        let session = match Self::session_id(headers) {
            Some(sid) => self.find_session(&sid).await.ok(),
            None => None,
        };
        let Some(session) = session.filter(|s| s.version == "2025-03-26") else {
            return refuse(
                "JSON-RPC batches are not supported: send one message per request (batching exists only in MCP 2025-03-26 sessions)",
            );
        };
        if items.is_empty() {
            return refuse("an empty JSON-RPC batch is invalid");
        }
        let era = Era::Legacy(session.version.clone());
        let mut replies = Vec::new();
        for item in items {
            match jsonrpc::classify(item) {
                Err(rej) => replies.push(jsonrpc::error(&rej.id, rej.code, &rej.message, None)),
                Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                    replies.push(jsonrpc::error(
                        &id,
                        INVALID_REQUEST,
                        "initialize must not be part of a batch",
                        None,
                    ))
                }
                Ok(Message::Request { id, method, params }) => {
                    let answer = handler::handle(&self.core, &era, &method, params).await;
                    replies.push(answer.into_message(&id));
                }
                Ok(_) => {}
            }
        }
        if replies.is_empty() {
            return empty(StatusCode::ACCEPTED);
        }
        let body = Value::Array(replies);
        // JSON unless the client takes only SSE (a batch answers SSE whenever JSON is not
        // accepted).
        framed(StatusCode::OK, json_ok, true, |out| {
            crate::json_text::write(&body, out)
        })
    }

    /// Frames a final answer as JSON or a one-event SSE stream, per `Accept`.
    fn reply(
        &self,
        id: &Value,
        answer: Answer,
        json_ok: bool,
        sse_ok: bool,
        extra: Option<(&'static str, String)>,
    ) -> Response<Body> {
        if let Answer::Error {
            code: crate::binding::HTTP_PROBLEM,
            data: Some(problem),
            http_status,
            ..
        } = &answer
        {
            return problem_response(*http_status, problem);
        }
        let add_extra = |r: &mut Response<Body>| {
            if let Some((name, value)) = extra
                && let Ok(v) = HeaderValue::from_str(&value)
            {
                r.headers_mut().insert(name, v);
            }
        };
        // A written result goes out as written; a signed answer is signed over its value.
        let answer = match answer {
            Answer::Written(w) if crate::auth::transport::response_signer().is_none() => {
                let mut r = framed(StatusCode::OK, json_ok, sse_ok, |out| {
                    write_written(id, &w, out)
                });
                add_extra(&mut r);
                return r;
            }
            a => a,
        };
        let (status, body) = match answer {
            Answer::Result(r) => (StatusCode::OK, jsonrpc::result(id, r)),
            Answer::Written(w) => (StatusCode::OK, jsonrpc::result(id, w.to_value())),
            Answer::Error {
                code,
                message,
                data,
                http_status,
            } => (
                http_status
                    .and_then(|s| StatusCode::from_u16(s).ok())
                    .unwrap_or(StatusCode::OK),
                jsonrpc::error(id, code, &message, data),
            ),
        };
        let mut r = framed(status, json_ok, sse_ok, |out| {
            crate::json_text::write(&body, out)
        });
        add_extra(&mut r);
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(key) = crate::auth::transport::response_signer() {
            sign_response(&mut r, status, &body, &key);
        }
        if status == StatusCode::TOO_MANY_REQUESTS
            && let Some(secs) = body
                .pointer("/error/data/retry_after")
                .and_then(Value::as_u64)
        {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        r
    }

    /// A new session for `initialize` (request `id`) from `client`, stored (in this replica's
    /// table and, with shared state, in Redis) before its id is handed out; or the refusal:
    /// 429 past the client address's creation rate, 503 when the table is full or the shared
    /// state cannot record it.
    async fn new_session(
        &self,
        id: &Value,
        client: Option<ClientAddr>,
        version: &str,
    ) -> Result<Arc<Session>, Response<Body>> {
        if let (Some(shape), Some(client)) = (self.opts.session_rate, client)
            && let Err(wait) = crate::auth::limit::take_keyed("session", &client.bucket(), shape)
        {
            crate::ops::metrics::session_refused("rate_limited");
            let mut r = rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                id,
                INTERNAL_ERROR,
                "too many new sessions from this address; try again later",
                Some(json!({"retry_after": wait})),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait));
            return Err(r);
        }
        let session = self.sessions.create(version).map_err(|full| {
            crate::ops::metrics::session_refused("full");
            unavailable(id, full.retry_after_s, &full.to_string())
        })?;
        if let Some(state) = crate::state::shared()
            && let Err(e) =
                crate::state::sessions::record(state, &session.id, version, self.opts.session_idle)
                    .await
        {
            // Another replica would not know it, and this one would refuse it once Redis answers.
            tracing::warn!(error = %e, "cannot record the session in the shared state");
            self.sessions.remove(&session.id);
            crate::ops::metrics::session_refused("state_unavailable");
            return Err(unavailable(
                id,
                1,
                "no session can be made now (shared state unreachable); try again shortly",
            ));
        }
        Ok(session)
    }

    async fn post_legacy(
        &self,
        parts: &http::request::Parts,
        msg: Message,
        session_hdr: Option<String>,
        version_hdr: Option<String>,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        if let Message::Request { id, method, params } = &msg
            && method == "initialize"
        {
            let requested = params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            let version = handler::negotiate(requested);
            let client = parts.extensions.get::<ClientAddr>().copied();
            let session = match self.new_session(id, client, version).await {
                Ok(s) => s,
                Err(refused) => return refused,
            };
            let caps = params.as_ref().and_then(|p| p.get("capabilities"));
            session
                .asks
                .set_capabilities(caps.cloned().unwrap_or_else(|| json!({})));
            let result = handler::initialize_result(&self.core.info, version);
            return self.reply(
                id,
                Answer::Result(result),
                json_ok,
                sse_ok,
                Some(("mcp-session-id", session.id.clone())),
            );
        }
        let id = match &msg {
            Message::Request { id, .. } => id.clone(),
            _ => Value::Null,
        };
        let Some(sid) = session_hdr else {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                INVALID_REQUEST,
                "Bad Request: missing Mcp-Session-Id (send initialize first)",
                None,
            );
        };
        let session = match self.find_session(&sid).await {
            Ok(s) => s,
            Err(why) => return no_session(&id, why),
        };
        if let Some(v) = &version_hdr
            && !LEGACY_VERSIONS.contains(&v.as_str())
        {
            let supported = LEGACY_VERSIONS.join(", ");
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                INVALID_REQUEST,
                &format!(
                    "Bad Request: unsupported MCP-Protocol-Version `{v}` (supported: {supported})"
                ),
                None,
            );
        }
        match msg {
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                // A finished or unknown request is ignored: the cancellation raced the answer.
                if let Some(rid) = params.as_ref().and_then(|p| p.get("requestId")) {
                    session.calls.cancel(rid);
                }
                empty(StatusCode::ACCEPTED)
            }
            Message::Notification { .. } => empty(StatusCode::ACCEPTED),
            // An answer to a server->client request (`mcp::input`) goes to the waiting call.
            Message::Response { id, body } => match session.asks.deliver(&id, body) {
                Ok(()) => empty(StatusCode::ACCEPTED),
                Err(e) => rpc_error(
                    StatusCode::BAD_REQUEST,
                    &Value::Null,
                    INVALID_REQUEST,
                    &e.to_string(),
                    None,
                ),
            },
            Message::Request { id, method, params } => {
                if method.starts_with("resources/") {
                    self.events_loaded().await;
                }
                if method.starts_with("resources/") {
                    let gateway = self.core.gateway.load_full();
                    let intercepted = crate::webhook::edge::intercept(
                        &self.webhooks,
                        &gateway,
                        &session.id,
                        &method,
                        params.as_ref(),
                    );
                    if let Some(answer) = intercepted.await {
                        return self.reply(&id, answer, json_ok, sse_ok, None);
                    }
                }
                let era = Era::Legacy(session.version.clone());
                if method == "tools/call" {
                    let level = session.calls.level();
                    let token = notify::progress_token(params.as_ref());
                    let (reg, cancel) = match session.calls.register(&id, token.as_ref()) {
                        Ok(r) => r,
                        Err(e) => {
                            let answer = Answer::Error {
                                code: INVALID_PARAMS,
                                message: e.to_string(),
                                data: None,
                                http_status: None,
                            };
                            return self.reply(&id, answer, json_ok, sse_ok, None);
                        }
                    };
                    let asks = params
                        .as_ref()
                        .and_then(|p| p.get("name"))
                        .and_then(Value::as_str)
                        .is_some_and(|n| {
                            self.core
                                .gateway
                                .load()
                                .tools
                                .get(n)
                                .is_some_and(|t| t.ask.is_some())
                        })
                        .then(|| session.asks.clone());
                    let call = CallReport {
                        token,
                        level,
                        cancel: Some((reg, cancel)),
                        asks,
                    };
                    return self
                        .observed_call(id, era, params, call, json_ok, sse_ok)
                        .await;
                }
                let mut answer = handler::handle(&self.core, &era, &method, params.clone()).await;
                if method == "resources/list" {
                    answer = self.with_owned(answer).await;
                }
                if method == "logging/setLevel"
                    && matches!(answer, Answer::Result(_))
                    && let Some(l) = params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str)
                        .and_then(notify::Level::parse)
                {
                    session.calls.set_level(l);
                }
                self.reply(&id, answer, json_ok, sse_ok, None)
            }
        }
    }

    async fn post_modern(
        &self,
        headers: &HeaderMap,
        msg: Message,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        let (id, method, params) = match msg {
            Message::Request { id, method, params } => (id, method, params),
            Message::Notification { .. } => return empty(StatusCode::ACCEPTED),
            Message::Response { id, .. } => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &id,
                    INVALID_REQUEST,
                    "clients must not send responses in 2026-07-28",
                    None,
                );
            }
        };
        let bad = |code: i64, message: String, data: Option<Value>| {
            rpc_error(StatusCode::BAD_REQUEST, &id, code, &message, data)
        };
        let meta = params.as_ref().and_then(|p| p.get("_meta"));
        let Some(version) = meta
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
        else {
            return bad(
                INVALID_PARAMS,
                "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is required".into(),
                None,
            );
        };
        // Field values are compared without optional whitespace (RFC 9110 §5.5).
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        match header("mcp-protocol-version") {
            Some(v) if v == version => {}
            Some(v) => {
                return bad(
                    HEADER_MISMATCH,
                    format!(
                        "MCP-Protocol-Version header `{v}` does not match _meta protocolVersion `{version}`"
                    ),
                    None,
                );
            }
            None => {
                return bad(
                    HEADER_MISMATCH,
                    "missing MCP-Protocol-Version header".into(),
                    None,
                );
            }
        }
        // Only a version both places agree on can be unsupported.
        if !MODERN_VERSIONS.contains(&version) {
            return bad(
                UNSUPPORTED_VERSION,
                format!("Unsupported protocol version: {version}"),
                Some(json!({ "supported": MODERN_VERSIONS, "requested": version })),
            );
        }
        match header("mcp-method").map(decode_header_value) {
            Some(Some(m)) if m == method => {}
            Some(Some(m)) => {
                return bad(
                    HEADER_MISMATCH,
                    format!("Mcp-Method header `{m}` does not match the body method `{method}`"),
                    None,
                );
            }
            Some(None) => {
                return bad(
                    HEADER_MISMATCH,
                    "Mcp-Method header is not a valid value".into(),
                    None,
                );
            }
            None => return bad(HEADER_MISMATCH, "missing Mcp-Method header".into(), None),
        }
        let name_key = match method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        };
        if let Some(key) = name_key {
            let body_name = params
                .as_ref()
                .and_then(|p| p.get(key))
                .and_then(Value::as_str);
            match (header("mcp-name").map(decode_header_value), body_name) {
                (Some(Some(h)), Some(b)) if h == b => {}
                (None, _) => return bad(HEADER_MISMATCH, "missing Mcp-Name header".into(), None),
                (Some(None), _) => {
                    return bad(
                        HEADER_MISMATCH,
                        "Mcp-Name header is not a valid value".into(),
                        None,
                    );
                }
                (Some(Some(h)), b) => {
                    return bad(
                        HEADER_MISMATCH,
                        format!(
                            "Mcp-Name header `{h}` does not match params.{key} `{}`",
                            b.unwrap_or("")
                        ),
                        None,
                    );
                }
            }
        }
        if !meta
            .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
            .is_some_and(Value::is_object)
        {
            return bad(
                INVALID_PARAMS,
                "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required".into(),
                None,
            );
        }
        if method == "resources/read" {
            self.events_loaded().await;
        }
        if method == "resources/read" {
            let gateway = self.core.gateway.load_full();
            let intercepted = crate::webhook::edge::intercept(
                &self.webhooks,
                &gateway,
                "",
                &method,
                params.as_ref(),
            );
            match intercepted.await {
                Some(Answer::Result(mut r)) => {
                    // Booking resources fed by webhooks: event data, never cached.
                    r["resultType"] = json!("complete");
                    r["ttlMs"] = json!(0);
                    r["cacheScope"] = json!("private");
                    r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {
                        "name": self.core.info.name, "version": self.core.info.version}});
                    return self.reply(&id, Answer::Result(r), json_ok, sse_ok, None);
                }
                Some(refused) => return self.reply(&id, refused, json_ok, sse_ok, None),
                None => {}
            }
        }
        if method == "subscriptions/listen" {
            let gateway = self.core.gateway.load_full();
            let creds = crate::auth::transport::current().unwrap_or_default();
            let gate = self.stream_gate(&creds).await;
            let listened =
                crate::webhook::edge::listen(&self.webhooks, &gateway, &id, params.as_ref(), gate);
            return match listened.await {
                Ok(frames) if sse_ok => self.stream_response(frames),
                Ok(_) => rpc_error(
                    StatusCode::NOT_ACCEPTABLE,
                    &id,
                    INVALID_REQUEST,
                    "Not Acceptable: subscriptions/listen answers with text/event-stream",
                    None,
                ),
                Err(answer) => self.reply(&id, answer, json_ok, sse_ok, None),
            };
        }
        let era = Era::Modern(version.to_string());
        let token = notify::progress_token(params.as_ref());
        let level = notify::request_level(params.as_ref());
        if method == "tools/call" && sse_ok && (token.is_some() || level.is_some()) {
            // Closing this response stream drops the call, which cancels the backend request.
            let call = CallReport {
                token,
                level,
                cancel: None,
                asks: None,
            };
            return self
                .observed_call(id, era, params, call, json_ok, sse_ok)
                .await;
        }
        let mut answer = handler::handle(&self.core, &era, &method, params).await;
        if method == "resources/list" {
            answer = self.with_owned(answer).await;
        }
        if let Answer::Error {
            code: METHOD_NOT_FOUND,
            message,
            data,
            ..
        } = &answer
        {
            return rpc_error(
                StatusCode::NOT_FOUND,
                &id,
                METHOD_NOT_FOUND,
                message,
                data.clone(),
            );
        }
        self.reply(&id, answer, json_ok, sse_ok, None)
    }
}

impl Server {
    /// `GET /.well-known/{ucp,usp}[/{business}]`: the discovery profile (`crate::discovery`).
    fn well_known(&self, req: &Request<Incoming>) -> Response<Body> {
        if !matches!(*req.method(), Method::GET | Method::HEAD) {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
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

/// For a gateway whose businesses are all autonym, the Problem Details of a registered code
/// answered before any JSON-RPC processing (B3.4's HTTP form); `None` otherwise.
fn autonym_only_problem(core: &Core, slug: &str) -> Option<Value> {
    use crate::binding::{Kind, autonym};
    let g = core.gateway.load();
    let all =
        !g.businesses.is_empty() && g.businesses.iter().all(|b| b.binding.kind == Kind::Autonym);
    all.then(|| autonym::code(slug))
        .flatten()
        .map(|c| autonym::problem(c, None, None))
}

/// How much of an oversized request body past the limit is read and dropped (so that the
/// connection stays usable and the client gets its 413), and for how long at most.
const DRAIN_BYTES: u64 = 8 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Reads and drops what is left of a request body, at most [`DRAIN_BYTES`] and for at most
/// [`DRAIN_TIME`]: true when the body ended within both.
async fn drain(body: &mut Incoming) -> bool {
    let read = async {
        let mut seen = 0u64;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                seen += data.len() as u64;
                if seen > DRAIN_BYTES {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false)
}

/// An HTTP answer whose body is a Problem Details object (autonym's pre-JSON-RPC forms): 401
/// carries a Bearer challenge naming the code, 429 and 503 `Retry-After` when known.
fn problem_response(status: Option<u16>, problem: &Value) -> Response<Body> {
    let status = status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(status, problem);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        let code = problem
            .get("code")
            .and_then(Value::as_str)
            .filter(|c| c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        if let Ok(v) = HeaderValue::from_str(&crate::auth::challenge(code)) {
            h.insert(header::WWW_AUTHENTICATE, v);
        }
    }
    if let Some(secs) = problem.get("retry_after").and_then(Value::as_u64) {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// What a `tools/call` reports while it runs, and how it can be cancelled (2025 sessions).
struct CallReport {
    token: Option<Value>,
    level: Option<notify::Level>,
    cancel: Option<(notify::Registration, tokio::sync::oneshot::Receiver<()>)>,
    /// The session's waiting table, when the tool asks its client for input (2025 era).
    asks: Option<Arc<super::input::Pending>>,
}

/// JSON-RPC code for a request answered after `notifications/cancelled` (JSON replies only:
/// an SSE reply just ends without a response).
const REQUEST_CANCELLED: i64 = -32800;

impl Server {
    /// Runs a `tools/call` with progress and log notifications. With an SSE-accepting client
    /// and something to report, the reply is an SSE stream (notifications, then the response);
    /// otherwise plain JSON. The call runs inside the response body: dropping the body drops
    /// the call and its backend request.
    async fn observed_call(
        &self,
        id: Value,
        era: Era,
        params: Option<Value>,
        report: CallReport,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        let stream =
            sse_ok && (report.token.is_some() || report.level.is_some() || report.asks.is_some());
        let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
        let notifier = if stream {
            notify::Notifier::new(tx, report.token, report.level).with_asks(report.asks)
        } else {
            notify::Notifier::none()
        };
        let core = self.core.clone();
        let work = crate::auth::transport::carry(crate::ops::otel::carry(async move {
            let call = handler::handle_with(&core, &era, "tools/call", params, &notifier);
            let answer = match report.cancel {
                Some((_registration, cancel)) => tokio::select! {
                    a = call => Some(a),
                    _ = cancel => None,
                },
                None => Some(call.await),
            };
            drop(notifier);
            answer
        }));
        if !stream {
            // Same framing (and binding HTTP status) as every other answer.
            let answer = work.await.unwrap_or_else(|| Answer::Error {
                code: REQUEST_CANCELLED,
                message: "Request cancelled".into(),
                data: None,
                http_status: None,
            });
            return self.reply(&id, answer, json_ok, sse_ok, None);
        }
        // Headers are sent before the answer exists: a binding's HTTP status cannot apply.
        let work = async move { work.await.map(|a| a.into_message(&id)) };
        let mut work = Some(Box::pin(work));
        let mut last: Option<Value> = None;
        let frames = futures_util::stream::poll_fn(move |cx| {
            use std::task::Poll;
            if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                return Poll::Ready(Some(Ok::<_, Infallible>(Frame::data(sse_frame(&n)))));
            }
            if let Some(w) = work.as_mut() {
                match w.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(answer) => {
                        work = None;
                        last = answer;
                        // Notifications queued before the answer go first.
                        if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                            return Poll::Ready(Some(Ok(Frame::data(sse_frame(&n)))));
                        }
                    }
                }
            } else if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                return Poll::Ready(Some(Ok(Frame::data(sse_frame(&n)))));
            }
            Poll::Ready(last.take().map(|v| Ok(Frame::data(sse_frame(&v)))))
        });
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        sse_headers(&mut r);
        r
    }
}

/// Decodes `=?base64?...?=` header values (SEP-2243); plain values pass through.
fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_string()),
    }
}

/// Resolves when `session` (with an open GET stream) ends: at once on this replica (DELETE,
/// expiry), or, with shared state, at the first check that finds its record gone. The checks
/// (one read per `keep_alive` or renewal period, whichever is shorter) renew the record when
/// due: an open stream keeps its session alive on every replica.
async fn session_gone(session: Arc<Session>, keep_alive: Duration, idle: Duration) {
    let Some(state) = crate::state::shared() else {
        return session.ended().await;
    };
    let every = keep_alive.min(renewal_period(idle));
    let checks = async {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tick.tick().await;
            let renew = session.renewal_due(renewal_period(idle)).then_some(idle);
            if let Ok(None) = crate::state::sessions::find(state, &session.id, renew).await {
                return;
            }
        }
    };
    tokio::select! {
        _ = session.ended() => {}
        _ = checks => {}
    }
}

/// A task the stream ends with; aborted when the stream is dropped first.
struct EndsWith(tokio::task::JoinHandle<()>);

impl Future for EndsWith {
    type Output = ();
    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl Drop for EndsWith {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn tokio_stream_receiver(mut rx: mpsc::Receiver<Bytes>) -> impl futures_util::Stream<Item = Bytes> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn tokio_stream_interval(period: Duration) -> impl futures_util::Stream<Item = ()> {
    let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    futures_util::stream::poll_fn(move |cx| iv.poll_tick(cx).map(|_| Some(())))
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
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Over a connection cap: dropping the socket closes it.
                let Ok(slot) = gate.admit(peer.ip()) else { continue };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_future_boxed_in_place_keeps_its_state_and_output() {
        // A future larger than the 9 KiB a POST's pipeline is, with state that must arrive
        // intact in the box.
        let mut state = [0u8; 16 * 1024];
        for (i, b) in state.iter_mut().enumerate() {
            *b = (i % 256) as u8;
        }
        let fut = boxed_in_place(move || async move {
            tokio::task::yield_now().await;
            state.iter().map(|&b| u64::from(b)).sum::<u64>()
        });
        assert!(std::mem::size_of_val(&*fut) >= 16 * 1024);
        assert_eq!(fut.await, 64 * (0..=255u64).sum::<u64>());
    }

    #[test]
    fn accept_header_parsing() {
        let mut h = HeaderMap::new();
        assert_eq!(accepts(&h), (true, true));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        assert_eq!(accepts(&h), (true, true));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        assert_eq!(accepts(&h), (false, true));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        assert_eq!(accepts(&h), (false, false));
    }

    #[test]
    fn session_rate_buckets_are_per_ipv4_address_and_per_ipv6_64() {
        let key = |a: &str| ClientAddr(a.parse().expect("an address")).bucket();
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2:bbbb::9"), key("2001:db8:1:2:aaaa::1"));
        assert_ne!(key("2001:db8:1:3::1"), key("2001:db8:1:2::1"));
    }

    #[test]
    fn host_parsing() {
        assert_eq!(host_of("localhost:8080"), "localhost");
        assert_eq!(host_of("[::1]:8080"), "::1");
        assert_eq!(host_of("Example.COM"), "example.com");
    }

    #[test]
    fn base64_header_values() {
        assert_eq!(
            decode_header_value("tools/call").as_deref(),
            Some("tools/call")
        );
        assert_eq!(
            decode_header_value("=?base64?Y2Fmw6k=?=").as_deref(),
            Some("café")
        );
        assert_eq!(decode_header_value("=?base64?!!?="), None);
    }
}
