//! OpenTelemetry trace export (`--otlp-endpoint`): the per-call `request` span and its log events
//! go to an OTLP/HTTP collector, and backend calls carry the W3C `traceparent` of that span. It
//! must never block the request path (spans leave on the batch exporter's own thread) and never
//! add a header when export is off.

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
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
