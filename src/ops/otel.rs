//! OpenTelemetry trace export (`--otlp-endpoint`): the per-call `request` span and its log events
//! go to an OTLP/HTTP collector, a caller's W3C `traceparent` makes that span its child, and
//! backend (REST and MCP upstream) calls carry the span's `traceparent`. It must never block the
//! request path (spans leave on the batch exporter's own thread) and never read or add a header
//! when export is off.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::registry::LookupSpan;

/// True once export is set up: only then do backend requests get a `traceparent`.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error("--otlp-endpoint `{0}` is not an http(s) URL")]
    BadEndpoint(String),
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
}

/// The running export; `shutdown` flushes the spans still queued.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// Sends what is queued and stops the exporter (at process exit).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "OTLP exporter shutdown failed; queued spans may be lost");
        }
    }
}

/// The traces URL for an endpoint: a bare `http://host:4318` gets OTLP's `/v1/traces`.
fn traces_url(endpoint: &str) -> Result<String, OtelError> {
    let url =
        url::Url::parse(endpoint).map_err(|_| OtelError::BadEndpoint(endpoint.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(OtelError::BadEndpoint(endpoint.to_string()));
    }
    Ok(if url.path() == "/" || url.path().is_empty() {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    } else {
        endpoint.to_string()
    })
}

/// A `tracing` layer exporting spans to `endpoint` (OTLP/HTTP, JSON bodies), service name
/// `portico`. Batch settings follow the standard `OTEL_BSP_*` variables.
pub fn layer<S>(endpoint: &str) -> Result<(OpenTelemetryLayer<S, SdkTracer>, Otel), OtelError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(traces_url(endpoint)?)
        .build()
        .map_err(|e| OtelError::Exporter(e.to_string()))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("portico").build())
        .build();
    let tracer = provider.tracer("portico");
    ENABLED.store(true, Ordering::Release);
    Ok((
        tracing_opentelemetry::layer().with_tracer(tracer),
        Otel { provider },
    ))
}

struct Headers<'a>(&'a mut http::HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct Incoming<'a>(&'a http::HeaderMap);

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

tokio::task_local! {
    /// The caller's trace context of the request being served (from its `traceparent`).
    static PARENT: Option<Context>;
}

/// The caller's trace context in an incoming request's `traceparent` (and `tracestate`), when
/// export is on and the header is a valid W3C trace context; a malformed one is ignored.
pub fn extract(headers: &http::HeaderMap) -> Option<Context> {
    if !ENABLED.load(Ordering::Relaxed) || !headers.contains_key("traceparent") {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&Incoming(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Runs `f` (the handling of one incoming request) with the caller's trace context (from
/// [`extract`]), so the call spans it opens become children of the caller's span. A plain
/// function returning the wrapper (an `async fn` would hold `f` twice).
pub fn scope<F: std::future::Future>(
    parent: Option<Context>,
    f: F,
) -> impl std::future::Future<Output = F::Output> {
    PARENT.scope(parent, f)
}

/// Wraps `f` so it keeps the current caller trace context when polled outside the request's
/// scope (a streamed response body).
pub fn carry<F: std::future::Future>(f: F) -> impl std::future::Future<Output = F::Output> {
    PARENT.scope(PARENT.try_with(Clone::clone).ok().flatten(), f)
}

/// Makes `span` (just created, not yet entered) a child of the caller's trace, when the
/// request being served carried one.
pub fn adopt(span: &tracing::Span) {
    if let Ok(Some(cx)) = PARENT.try_with(Clone::clone)
        && let Err(e) = span.set_parent(cx)
    {
        tracing::debug!(error = %e, "cannot parent the call span on the caller's trace");
    }
}

/// Adds the current span's W3C `traceparent` (and `tracestate`) to a backend request's headers,
/// when export is on.
pub fn inject(headers: &mut http::HeaderMap) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut Headers(headers));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://c:4318/").unwrap(),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://c/otlp/v1/traces").unwrap(),
            "https://c/otlp/v1/traces"
        );
        assert!(traces_url("ftp://c").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
