//! Operations around a running gateway: Prometheus metrics, the admin listener (health,
//! readiness, metrics), configuration hot reload, TLS certificates, connection limits, the status page, OTLP trace export, the log lines' buffer, the executable's resident pages. It must never sit on the MCP port or block the
//! request path: the forward path only touches lock-free metric handles.

pub mod admin;
pub mod alloc;
pub mod limits;
pub mod log;
pub mod log_line;
pub mod log_sink;
pub mod metrics;
pub mod otel;
pub mod recent;
pub mod reload;
pub mod resident;
pub mod shards;
pub mod status;
pub mod tls;

/// Gives the memory freed on this thread (and the arenas' free pages) back to the OS at once,
/// instead of after mimalloc's purge delay. Called after a configuration is loaded or
/// reloaded: compiling one allocates scratch (schema and jq compilation) several times the size
/// of what it keeps, and an idle sidecar's resident set is what its pod is sized by. Harmless
/// where mimalloc is not the global allocator (its heaps are then empty).
pub fn release_freed_memory() {
    // SAFETY: mi_collect only walks mimalloc's own heaps; it has no preconditions.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
