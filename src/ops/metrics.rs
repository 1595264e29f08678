//! Process-wide Prometheus metrics: names, help texts, buckets, and the hooks the request path
//! calls. It must never lock per request or panic: recording goes through the `metrics` facade
//! (atomic handles), and without an installed recorder every hook is a no-op.

use crate::binding::Reply;
use crate::model::{Failure, FailureKind};
use metrics::{
    Counter, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

/// `tools/call` requests by business, tool, outcome and the HTTP status portico answered with.
pub const REQUESTS: &str = "portico_requests_total";
/// Whole `tools/call` latency inside portico (validation, backend call, translation).
pub const REQUEST_SECONDS: &str = "portico_request_duration_seconds";
/// Backend requests by business, tool and backend status (or `timeout` / `unavailable` / `bad_response`).
pub const UPSTREAM: &str = "portico_upstream_requests_total";
/// Backend latency only (connect, send, read the body).
pub const UPSTREAM_SECONDS: &str = "portico_upstream_duration_seconds";
/// Open SSE streams (2025-era GET streams).
pub const SSE_CLIENTS: &str = "portico_sse_clients";
/// Configuration reload attempts that were applied.
pub const RELOADS: &str = "portico_config_reloads_total";
/// Configuration reload attempts that were refused (the previous configuration kept serving).
pub const RELOAD_FAILURES: &str = "portico_config_reload_failures_total";
/// 1 when the last reload attempt succeeded (or none was made), else 0.
pub const RELOAD_OK: &str = "portico_config_last_reload_success";
/// Tools in the configuration being served.
pub const TOOLS: &str = "portico_config_tools";
/// Webhooks received by business and result (`queued`, `duplicate`, or the refusal slug).
pub const WEBHOOKS: &str = "portico_webhooks_received_total";
/// Webhook frames queued to MCP client streams.
pub const WEBHOOK_DELIVERIES: &str = "portico_webhook_deliveries_total";
/// Webhook frames dropped because a client's queue was full (the oldest frame goes).
pub const WEBHOOK_DROPS: &str = "portico_webhook_drops_total";
/// Outgoing webhook attempts by result (`delivered`, `retried`, `dead_letter`).
pub const WEBHOOK_EGRESS: &str = "portico_webhook_egress_total";
/// Webhook frames re-sent from the replay buffer after a `Last-Event-ID`.
pub const WEBHOOK_REPLAYED: &str = "portico_webhook_replayed_total";
/// Upstream MCP notifications seen by a facade's relay, by result (`delivered`, `ignored`,
/// `duplicate`).
pub const FACADE_NOTIFICATIONS: &str = "portico_facade_notifications_total";
pub const STATE_ERRORS: &str = "portico_state_errors_total";
pub const STATE_EVENTS: &str = "portico_state_events_read_total";

/// Backend retries by business (an attempt after a failed one).
pub const UPSTREAM_RETRIES: &str = "portico_upstream_retries_total";
/// Retries refused by the backend's retry budget, by business.
pub const UPSTREAM_RETRIES_DENIED: &str = "portico_upstream_retries_denied_total";
/// Requests that met a reused backend connection closed before any answer byte, by backend
/// and outcome (`replayed` on a fresh connection, `outcome_unknown` when not replayable).
pub const UPSTREAM_REUSED_LOST: &str = "portico_upstream_reused_connection_lost_total";
/// Calls refused because the backend's concurrency limit was reached.
pub const UPSTREAM_SHED: &str = "portico_upstream_shed_total";
/// Circuit breaker state changes by business, route (tool or resource) and new state.
pub const BREAKER_TRANSITIONS: &str = "portico_breaker_transitions_total";
/// Circuit breaker state by business and route: 0 closed, 1 open, 2 half-open.
pub const BREAKER_STATE: &str = "portico_breaker_state";

/// Idempotency records evicted from the in-memory store for its key or byte bound (a retry of
/// an evicted key reaches the backend again).
pub const IDEMPOTENCY_EVICTIONS: &str = "portico_idempotency_evictions_total";

/// TLS certificate reloads by result (`applied`, `refused`).
pub const TLS_RELOADS: &str = "portico_tls_reloads_total";

/// `initialize` requests refused a session, by reason (`full`, `rate_limited`,
/// `state_unavailable`).
pub const SESSIONS_REFUSED: &str = "portico_sessions_refused_total";
/// Connections a listener refused or closed for one of its limits (`ops::limits`), by listener
/// and reason (`max_connections`, `per_client`, `header_timeout`, `header_too_large`, `idle`,
/// `body_timeout`).
pub const CONNECTIONS_LIMITED: &str = "portico_connections_limited_total";
/// Open connections by listener.
pub const CONNECTIONS_OPEN: &str = "portico_connections_open";

/// Latency buckets in seconds: 1 ms to 30 s.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder once (later calls return the same handle). `None` when
/// another recorder was installed first (then portico's hooks feed that one).
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = match PrometheusBuilder::new().set_buckets(BUCKETS) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(error = %e, "metrics buckets refused; metrics disabled");
                    return None;
                }
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                tracing::warn!(error = %e, "a metrics recorder is already installed; /metrics is empty");
                return None;
            }
            describe();
            // Histogram samples wait in lock-free buckets until upkeep drains them; drain on a
            // plain thread so it runs whatever runtime (or none) the process has.
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new()
                .name("portico-metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(Duration::from_secs(5));
                        upkeep.run_upkeep();
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the metrics upkeep thread");
            }
            Some(handle)
        })
        .as_ref()
}

fn describe() {
    describe_counter!(
        REQUESTS,
        "tools/call requests by business, tool, outcome (ok, tool_error, error) and the HTTP status portico answered with"
    );
    describe_histogram!(
        REQUEST_SECONDS,
        Unit::Seconds,
        "tools/call latency inside portico, backend call included"
    );
    describe_counter!(
        UPSTREAM,
        "backend requests by business, tool and backend HTTP status (or timeout, unavailable, bad_response)"
    );
    describe_histogram!(
        UPSTREAM_SECONDS,
        Unit::Seconds,
        "backend request latency (connect, send, read the body)"
    );
    describe_gauge!(SSE_CLIENTS, "open SSE streams");
    describe_counter!(
        IDEMPOTENCY_EVICTIONS,
        "idempotency records evicted from the in-memory store for its key count or byte budget (least recently used first)"
    );
    describe_counter!(RELOADS, "configuration reloads applied");
    describe_counter!(
        RELOAD_FAILURES,
        "configuration reloads refused; the previous configuration kept serving"
    );
    describe_gauge!(
        RELOAD_OK,
        "1 when the last configuration reload succeeded (or none was attempted), else 0"
    );
    describe_gauge!(TOOLS, "tools in the configuration being served");
    describe_counter!(
        WEBHOOKS,
        "webhooks received by business and result (queued, duplicate, or why it was refused)"
    );
    describe_counter!(
        WEBHOOK_DELIVERIES,
        "webhook frames queued to MCP client streams"
    );
    describe_counter!(
        WEBHOOK_DROPS,
        "webhook frames dropped because a client's queue was full (oldest first)"
    );
    describe_counter!(
        WEBHOOK_EGRESS,
        "outgoing webhook attempts by result (delivered, retried, dead_letter)"
    );
    describe_counter!(
        UPSTREAM_RETRIES,
        "backend retries by business (safe or keyed calls after a failed attempt)"
    );
    describe_counter!(
        UPSTREAM_RETRIES_DENIED,
        "backend retries refused by business because the backend's retry budget was spent"
    );
    describe_counter!(
        UPSTREAM_REUSED_LOST,
        "requests whose reused backend connection closed before any answer byte, by backend and outcome (replayed, outcome_unknown)"
    );
    describe_counter!(
        UPSTREAM_SHED,
        "calls refused by business because the backend's concurrency limit was reached"
    );
    describe_counter!(
        BREAKER_TRANSITIONS,
        "circuit breaker state changes by business, route (tool or resource) and new state (open, half_open, closed)"
    );
    describe_gauge!(
        BREAKER_STATE,
        "circuit breaker state by business and route (tool or resource): 0 closed, 1 open, 2 half-open"
    );
    describe_counter!(
        SESSIONS_REFUSED,
        "initialize requests refused a session, by reason (full: the session cap, rate_limited: the per-address creation rate, state_unavailable: Redis could not record it)"
    );
    describe_counter!(
        TLS_RELOADS,
        "TLS certificate reloads by result (applied, refused: the previous certificate stays)"
    );
    describe_counter!(
        CONNECTIONS_LIMITED,
        "connections refused or closed for a listener limit, by listener and reason (max_connections, per_client, header_timeout, header_too_large, idle, body_timeout)"
    );
    describe_gauge!(CONNECTIONS_OPEN, "open connections by listener");
    describe_counter!(
        WEBHOOK_REPLAYED,
        "webhook frames re-sent from the replay buffer after Last-Event-ID"
    );
    describe_counter!(
        FACADE_NOTIFICATIONS,
        "upstream MCP notifications seen by a facade relay, by result (delivered as signed webhooks, ignored method, duplicate event id)"
    );
    describe_counter!(
        STATE_ERRORS,
        "failed commands on the shared state (Redis, with --state)"
    );
    describe_counter!(
        STATE_EVENTS,
        "webhook events read from the shared event stream (Redis, with --state)"
    );
}

/// The Prometheus text exposition (format 0.0.4), or an empty string without a recorder.
pub fn render() -> String {
    install().map(PrometheusHandle::render).unwrap_or_default()
}

/// One tool's metric handles for the common cases (success, tool error, backend 200),
/// resolved once so a call costs a few atomic operations instead of label allocations and a
/// registry lookup. Other label sets go through the `metrics` macros.
#[derive(Default)]
pub struct ToolMetrics(OnceLock<Handles>);

struct Handles {
    ok: Counter,
    tool_error: Counter,
    took: Histogram,
    upstream_ok: Counter,
    upstream_took: Histogram,
}

impl ToolMetrics {
    fn get(&self, business: &str, tool: &str) -> &Handles {
        self.0.get_or_init(|| {
            let (b, t) = (business.to_owned(), tool.to_owned());
            Handles {
                ok: request_counter(&b, &t, "ok", 200),
                tool_error: request_counter(&b, &t, "tool_error", 200),
                took: histogram!(REQUEST_SECONDS, "business" => b.clone(), "tool" => t.clone()),
                upstream_ok: upstream_counter(&b, &t, "200".into()),
                upstream_took: histogram!(UPSTREAM_SECONDS, "business" => b, "tool" => t),
            }
        })
    }
}

fn request_counter(business: &str, tool: &str, outcome: &'static str, status: u16) -> Counter {
    counter!(REQUESTS,
        "business" => business.to_owned(),
        "tool" => tool.to_owned(),
        "outcome" => outcome,
        "status" => status_label(status),
    )
}

fn upstream_counter(business: &str, tool: &str, status: String) -> Counter {
    counter!(UPSTREAM,
        "business" => business.to_owned(),
        "tool" => tool.to_owned(),
        "status" => status,
    )
}

/// Records one finished `tools/call` of `tool` of `business`, whose handles are `m` (called by
/// `forward::call_tool`); returns the HTTP status portico answers it with, for the log line.
pub fn tool_call(
    m: &ToolMetrics,
    (business, tool): (&str, &str),
    outcome: &'static str,
    reply: &Reply,
    took: Duration,
) -> u16 {
    let status = match reply {
        Reply::Error(e) => e.http_status.unwrap_or(200),
        Reply::Result(_) | Reply::Written(_) => 200,
    };
    let h = m.get(business, tool);
    match (outcome, status) {
        ("ok", 200) => h.ok.increment(1),
        ("tool_error", 200) => h.tool_error.increment(1),
        _ => request_counter(business, tool, outcome, status).increment(1),
    }
    h.took.record(took.as_secs_f64());
    status
}

/// Counts one backend request by backend status (`out`: the answer's status or the failure) and
/// records how long it took (around an attempt, from the resilience stack's `Measure` layer; see
/// `upstream::resilience::stack`). Not a future wrapper: an `async fn`
/// taking the send future would hold it twice (as its argument and as the awaited value),
/// doubling every call's state.
pub fn upstream(
    m: &ToolMetrics,
    (business, tool): (&str, &str),
    took: Duration,
    out: Result<u16, &Failure>,
) {
    let h = m.get(business, tool);
    let other = match out {
        Ok(200) => None,
        Ok(status) => Some(status_label(status)),
        Err(f) => Some(
            match f.kind {
                FailureKind::Timeout => "timeout",
                FailureKind::Unavailable => "unavailable",
                _ => "bad_response",
            }
            .to_owned(),
        ),
    };
    match other {
        None => h.upstream_ok.increment(1),
        Some(status) => upstream_counter(business, tool, status).increment(1),
    }
    h.upstream_took.record(took.as_secs_f64());
}

fn status_label(status: u16) -> String {
    status.to_string()
}

/// Counts a retry of a backend call (rare: labels are built here).
pub fn retried(business: &str) {
    counter!(UPSTREAM_RETRIES, "business" => business.to_owned()).increment(1);
}

/// Counts a retry the backend's retry budget refused (rare: labels are built here).
pub fn retry_denied(business: &str) {
    counter!(UPSTREAM_RETRIES_DENIED, "business" => business.to_owned()).increment(1);
}

/// Counts a request whose reused backend connection closed before answering (rare: labels are
/// built here).
pub fn reused_connection_lost(backend: &str, outcome: &'static str) {
    counter!(UPSTREAM_REUSED_LOST, "backend" => backend.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// Counts a call shed by the backend's concurrency limit.
pub fn shed(business: &str) {
    counter!(UPSTREAM_SHED, "business" => business.to_owned()).increment(1);
}

/// A circuit breaker state as metrics see it: its label and its gauge value. Implemented by
/// `upstream::resilience::BreakerState`; a trait so this module stays below the breaker.
pub trait BreakerGauge: Copy {
    fn label(self) -> &'static str;
    fn value(self) -> f64;
}

/// Records a circuit breaker state change.
pub fn breaker_changed(business: &str, route: &str, to: impl BreakerGauge) {
    counter!(BREAKER_TRANSITIONS, "business" => business.to_owned(), "route" => route.to_owned(), "state" => to.label())
        .increment(1);
    breaker_state(business, route, to);
}

/// Sets the breaker state gauge (also refreshed on every scrape, since an open breaker's time
/// running out changes no counter).
pub fn breaker_state(business: &str, route: &str, state: impl BreakerGauge) {
    gauge!(BREAKER_STATE, "business" => business.to_owned(), "route" => route.to_owned())
        .set(state.value());
}

/// Counts an `initialize` refused a session (rare: refusals only).
pub fn session_refused(reason: &'static str) {
    counter!(SESSIONS_REFUSED, "reason" => reason).increment(1);
}

/// Counts a TLS certificate reload attempt.
pub fn tls_reload(applied: bool) {
    let result = if applied { "applied" } else { "refused" };
    counter!(TLS_RELOADS, "result" => result).increment(1);
}

/// Counts a connection refused or closed for a listener limit.
pub fn connection_limited(listener: &'static str, reason: &'static str) {
    counter!(CONNECTIONS_LIMITED, "listener" => listener, "reason" => reason).increment(1);
}

/// Counts a listener's connection opening (`true`) or closing.
pub fn connection_open(listener: &'static str, opened: bool) {
    let g = gauge!(CONNECTIONS_OPEN, "listener" => listener);
    if opened {
        g.increment(1.0);
    } else {
        g.decrement(1.0);
    }
}

/// Counts an open SSE stream until dropped.
pub struct SseClient(());

impl SseClient {
    pub fn open() -> Self {
        gauge!(SSE_CLIENTS).increment(1.0);
        SseClient(())
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        gauge!(SSE_CLIENTS).decrement(1.0);
    }
}

/// Records a reload attempt; `tools` is the size of the configuration now serving.
pub fn reload(ok: bool, tools: usize) {
    if ok {
        counter!(RELOADS).increment(1);
    } else {
        counter!(RELOAD_FAILURES).increment(1);
    }
    gauge!(RELOAD_OK).set(if ok { 1.0 } else { 0.0 });
    gauge!(TOOLS).set(tools as f64);
}

/// Counts one idempotency record evicted for the in-memory store's bounds.
pub fn idempotency_evicted() {
    counter!(IDEMPOTENCY_EVICTIONS).increment(1);
}

/// Counts one received webhook by business and result.
pub fn webhook_received(business: &str, result: &'static str) {
    counter!(WEBHOOKS, "business" => business.to_owned(), "result" => result).increment(1);
}

/// Counts one frame queued to a client, and the oldest frame dropped to make room.
pub fn webhook_delivery(dropped: bool) {
    counter!(WEBHOOK_DELIVERIES).increment(1);
    if dropped {
        counter!(WEBHOOK_DROPS, "reason" => "queue_full").increment(1);
    }
}

/// Counts one outgoing webhook attempt's result.
pub fn webhook_egress(result: &'static str) {
    counter!(WEBHOOK_EGRESS, "result" => result).increment(1);
}

/// Counts frames replayed after a `Last-Event-ID`.
pub fn webhook_replayed(frames: u64) {
    counter!(WEBHOOK_REPLAYED).increment(frames);
}

/// Counts one failed shared-state (Redis) command.
pub fn state_error() {
    counter!(STATE_ERRORS).increment(1);
}

/// Counts one upstream notification seen by a facade relay.
pub fn facade_notification(result: &'static str) {
    counter!(FACADE_NOTIFICATIONS, "result" => result).increment(1);
}

/// Counts events read from the shared event stream.
pub fn state_events(n: u64) {
    counter!(STATE_EVENTS).increment(n);
}

/// Sets the start-up values so every family is present from the first scrape.
pub fn started(tools: usize) {
    counter!(RELOADS).increment(0);
    counter!(RELOAD_FAILURES).increment(0);
    gauge!(RELOAD_OK).set(1.0);
    gauge!(TOOLS).set(tools as f64);
    gauge!(SSE_CLIENTS).increment(0.0);
    counter!(WEBHOOK_DELIVERIES).increment(0);
    counter!(WEBHOOK_DROPS, "reason" => "queue_full").increment(0);
    counter!(WEBHOOK_REPLAYED).increment(0);
}
