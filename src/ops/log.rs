//! Request logging: the span each `tools/call` runs and logs under, carrying a request id and
//! the caller's correlation id. It must never log argument or header values.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);
static PREFIX: OnceLock<String> = OnceLock::new();

/// A process-unique request id: a random per-process prefix and a counter (no syscall per call).
pub fn request_id() -> String {
    let prefix = PREFIX.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..8].to_string());
    format!("{prefix}-{:06x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The span of one `tools/call` (or facade request); its fields appear on every log line inside
/// it (JSON: `span`), and it is a child of the caller's trace when the request carried a
/// `traceparent` (`ops::otel`). The id is only generated when the span is enabled.
pub fn call_span() -> tracing::Span {
    let span = tracing::info_span!(
        "request",
        request_id = %request_id(),
        correlation_id = tracing::field::Empty
    );
    crate::ops::otel::adopt(&span);
    span
}

/// Records the caller's correlation id (from the binding's metadata) on the current call span.
pub fn correlation(id: Option<&str>) {
    if let Some(id) = id {
        tracing::Span::current().record("correlation_id", id);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_ids_are_distinct_and_share_the_process_prefix() {
        let (a, b) = (super::request_id(), super::request_id());
        assert_ne!(a, b);
        assert_eq!(a.split('-').next(), b.split('-').next());
    }
}
