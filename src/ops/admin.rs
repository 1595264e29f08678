//! The admin listener, on its own port: `/` (the HTML status page), `/healthz` (alive), `/readyz`
//! (configuration loaded and every backend reachable), `/metrics` (Prometheus text). It must
//! never serve MCP, never be mounted on the MCP port, and never let a slow backend probe stall
//! it (short, cached probes).

use super::reload::ReloadStatus;
pub use super::status::BackendState;
use crate::mcp::handler::Core;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, watch};

/// Admin tunables.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// Longest wait for one backend's TCP connect.
    pub probe_timeout: Duration,
    /// How long a readiness result is reused.
    pub probe_cache: Duration,
    /// Accepted `Host` names besides IP literals (`*` accepts any); others get 403, against
    /// DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Connection limits (`ops::limits`).
    pub limits: super::limits::Limits,
}

impl Default for AdminOptions {
    fn default() -> Self {
        AdminOptions {
            probe_timeout: Duration::from_millis(500),
            probe_cache: Duration::from_secs(2),
            allowed_hosts: vec!["localhost".into()],
            limits: Default::default(),
        }
    }
}

/// What the admin routes read.
pub struct Admin {
    core: Arc<Core>,
    reload: Arc<ReloadStatus>,
    /// True once the MCP listener is draining for shutdown.
    closing: watch::Receiver<bool>,
    opts: AdminOptions,
    /// Webhook ingress of the MCP listener, for the status page.
    webhooks: Option<Arc<crate::webhook::ingress::Ingress>>,
    /// Last probe result; the async mutex also makes concurrent `/readyz` calls share one probe.
    cache: Mutex<Option<(Instant, Vec<BackendState>)>>,
}

impl Admin {
    pub fn new(
        core: Arc<Core>,
        reload: Arc<ReloadStatus>,
        closing: watch::Receiver<bool>,
        opts: AdminOptions,
        webhooks: Option<Arc<crate::webhook::ingress::Ingress>>,
    ) -> Arc<Self> {
        Arc::new(Admin {
            core,
            reload,
            closing,
            opts,
            webhooks,
            cache: Mutex::new(None),
        })
    }

    /// Probes every backend of the configuration now serving (cached for `probe_cache`).
    pub async fn backends(&self) -> Vec<BackendState> {
        let mut cache = self.cache.lock().await;
        let gateway = self.core.gateway.load_full();
        if let Some((at, states)) = cache.as_ref()
            && at.elapsed() < self.opts.probe_cache
        {
            // The reachability probe is cached; the breaker is read now.
            let mut states = states.clone();
            for s in states.iter_mut() {
                if let Some(b) = gateway.businesses.iter().find(|b| b.name == s.business) {
                    s.resilience = b.backend.resilience.snapshot();
                }
            }
            return states;
        }
        let probes = gateway.businesses.iter().map(|b| {
            let base = b.backend.base.clone();
            let business = b.name.clone();
            let timeout = self.opts.probe_timeout;
            async move {
                let error = probe(&base, timeout).await.err();
                BackendState {
                    business,
                    backend: base,
                    state: if error.is_none() { "up" } else { "down" },
                    error,
                    resilience: b.backend.resilience.snapshot(),
                }
            }
        });
        let states = futures_util::future::join_all(probes).await;
        *cache = Some((Instant::now(), states.clone()));
        states
    }

    /// Ready: not draining, every backend reachable and none behind an open breaker.
    fn ready(&self, backends: &[BackendState]) -> (bool, bool) {
        let draining = *self.closing.borrow();
        let ready = !draining
            && backends
                .iter()
                .all(|b| b.state == "up" && b.resilience.breaker != "open");
        (ready, draining)
    }

    /// The HTML status page (`ops::status`), served with a policy that forbids any fetch.
    async fn status_page(&self) -> Response<Full<Bytes>> {
        let backends = self.backends().await;
        let (ready, draining) = self.ready(&backends);
        let gateway = self.core.gateway.load_full();
        let webhooks = self.webhooks.as_ref().map(|w| super::status::Webhooks {
            clients: w.hub.clients(),
            events: w.hub.recent(20),
            dead: w
                .egress
                .as_ref()
                .map(|e| e.dead_letters())
                .unwrap_or_default(),
        });
        let page = super::status::render(&super::status::StatusData {
            gateway: &gateway,
            backends: &backends,
            ready,
            draining,
            reload: self.reload.report(),
            history: self.reload.history(),
            calls: super::recent::snapshot(),
            webhooks,
        });
        let mut r = respond(StatusCode::OK, "text/html; charset=utf-8", page);
        r.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
        );
        r
    }

    async fn readyz(&self) -> Response<Full<Bytes>> {
        let backends = self.backends().await;
        let (ready, draining) = self.ready(&backends);
        // Shared state (`--state`): keyed calls and webhooks fail closed without it.
        let state = match crate::state::shared() {
            None => None,
            Some(s) => Some(match s.ping().await {
                Ok(()) => json!({"redis": s.display, "state": "up"}),
                Err(e) => json!({"redis": s.display, "state": "down", "error": e.to_string()}),
            }),
        };
        let state_up = state.as_ref().is_none_or(|s| s["state"] == "up");
        let ready = ready && state_up;
        let gateway = self.core.gateway.load();
        let body = json!({
            "ready": ready,
            "draining": draining,
            "config": {
                "loaded": true,
                "tools": gateway.tools.len(),
                "businesses": gateway.businesses.len(),
                "reload": self.reload.report(),
            },
            "backends": backends,
            "shared_state": state,
        });
        let status = if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        respond(status, "application/json", body.to_string())
    }

    /// True when the request names this listener: an IP literal (a browser that reached it
    /// by address, which DNS rebinding cannot forge) or an allowed name. A request without a
    /// Host names nothing.
    fn host_allowed<B>(&self, req: &Request<B>) -> bool {
        let host = crate::mcp::http::request_host(req);
        let Some(host) = host.map(|h| crate::mcp::http::host_of(&h)) else {
            return false;
        };
        host.parse::<std::net::IpAddr>().is_ok()
            || self
                .opts
                .allowed_hosts
                .iter()
                .any(|h| h == "*" || h.eq_ignore_ascii_case(&host))
    }

    /// Routes one admin request.
    pub async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<Full<Bytes>> {
        if !self.host_allowed(&req) {
            tracing::info!(
                path = req.uri().path(),
                "admin request refused: Host not allowed"
            );
            return respond(
                StatusCode::FORBIDDEN,
                "text/plain",
                "Forbidden: this Host is not allowed\n",
            );
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        match req.uri().path() {
            "/" => self.status_page().await,
            "/healthz" => respond(StatusCode::OK, "text/plain", "ok\n"),
            "/readyz" => self.readyz().await,
            "/metrics" => {
                for b in self.core.gateway.load().businesses.iter() {
                    for (route, state) in b.backend.resilience.route_states() {
                        super::metrics::breaker_state(&b.name, &route, state);
                    }
                }
                respond(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    super::metrics::render(),
                )
            }
            _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        }
    }
}

fn respond(status: StatusCode, ct: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A TCP connect to the backend's host and port, within `timeout`.
async fn probe(base: &str, timeout: Duration) -> Result<(), String> {
    let url = url::Url::parse(base).map_err(|e| format!("bad backend URL: {e}"))?;
    let host = url
        .host_str()
        .ok_or_else(|| "backend URL has no host".to_string())?
        .trim_matches(['[', ']'])
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| "backend URL has no port".to_string())?;
    match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("connect to {host}:{port} failed: {e}")),
        Err(_) => Err(format!(
            "connect to {host}:{port} took over {} ms",
            timeout.as_millis()
        )),
    }
}

/// Serves the admin routes on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>, mut stop: watch::Receiver<bool>) {
    use hyper_util::rt::TokioIo;
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    tokio::pin!(stopped);
    let gate = super::limits::Gate::new("admin", admin.opts.limits.clone());
    loop {
        let (stream, _, slot) = tokio::select! {
            accepted = gate.accept(&listener) => accepted,
            _ = &mut stopped => return,
        };
        let (admin, gate) = (admin.clone(), gate.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let admin = admin.clone();
                Box::pin(async move { Ok::<_, Infallible>(admin.handle(req).await) })
            });
            let (stream, slot) = gate.watch(stream, slot);
            if let Err(e) = gate
                .limits
                .http1()
                .serve_connection(TokioIo::new(stream), gate.service(slot, svc))
                .await
            {
                gate.ended(&e);
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}

/// `portico health`: one GET of `url` (an admin `/healthz`, or any loopback HTTP URL) within
/// `timeout`; `Ok` with the status line when it is 2xx. For container health checks in images
/// that have no HTTP client.
pub async fn check_url(url: &str, timeout: Duration) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url} failed: {e}"))?;
    let status = resp.status();
    if status.is_success() {
        Ok(format!("{url}: {status}"))
    } else {
        Err(format!("{url}: {status}"))
    }
}
