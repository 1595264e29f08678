//! The last few `tools/call`s of the process (business, tool, outcome, statuses, error reason,
//! latency) for the status page, in a fixed ring of atomically swapped slots. It must never lock
//! on the request path nor keep arguments, results, headers or configuration objects (only
//! names, numbers and the first words of an error).

use crate::config::Tool;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Calls kept.
pub const SIZE: usize = 64;

/// One finished call.
#[derive(Debug)]
pub struct RecentCall {
    /// Order of recording (process-wide).
    pub seq: u64,
    /// Milliseconds since the epoch when it finished.
    pub at_ms: u64,
    /// The business's name.
    pub business: String,
    /// The tool's name. Names, not the `Arc<Tool>`: a tool holds its business (backend client,
    /// connection pool, validators), which a hot reload must be able to free.
    pub tool: String,
    pub outcome: &'static str,
    /// The HTTP status portico answered with.
    pub status: u16,
    /// JSON-RPC error code, 0 for a result.
    pub rpc_code: i64,
    /// The backend's HTTP status, 0 when no answer came (refused, reset, timeout, not called).
    pub backend_status: u16,
    /// For a failed call: the error's code and first words.
    pub reason: Option<String>,
    pub latency: Duration,
}

/// What `forward` knows about a finished call.
pub struct Finished {
    pub outcome: &'static str,
    pub status: u16,
    pub rpc_code: i64,
    pub backend_status: u16,
    pub reason: Option<String>,
    pub latency: Duration,
}

struct Ring {
    next: AtomicU64,
    slots: Vec<ArcSwapOption<RecentCall>>,
}

static RING: LazyLock<Ring> = LazyLock::new(|| Ring {
    next: AtomicU64::new(0),
    slots: (0..SIZE).map(|_| ArcSwapOption::empty()).collect(),
});

/// Records a finished call (small allocations, no lock).
pub fn record(tool: &Arc<Tool>, done: Finished) {
    let seq = RING.next.fetch_add(1, Ordering::Relaxed);
    let at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let call = RecentCall {
        seq,
        at_ms,
        business: tool.business.name.clone(),
        tool: tool.name.clone(),
        outcome: done.outcome,
        status: done.status,
        rpc_code: done.rpc_code,
        backend_status: done.backend_status,
        reason: done.reason,
        latency: done.latency,
    };
    RING.slots[(seq % SIZE as u64) as usize].store(Some(Arc::new(call)));
}

/// The calls in the ring, newest first.
pub fn snapshot() -> Vec<Arc<RecentCall>> {
    let mut calls: Vec<Arc<RecentCall>> = RING.slots.iter().filter_map(|s| s.load_full()).collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c.seq));
    calls
}
