//! The breaker's sliding window: per-route call and failure counts in atomic buckets, and the
//! clock they are read against. A leaf of `resilience`: it must never lock or allocate.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Buckets of a route's window: the window slides by a tenth of its length.
pub(super) const BUCKETS: usize = 10;

/// Milliseconds since the first use of the clock, so instants fit in an atomic.
pub(super) fn now_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    EPOCH.elapsed().as_millis() as u64
}

/// A sliding window of call counts: `BUCKETS` buckets, each one atomic word holding the
/// bucket's period number (high 32 bits), its calls (16 bits) and failures (16 bits, both
/// saturating). A bucket whose period has passed is reset by the first call that reuses it.
#[derive(Debug, Default)]
pub(super) struct Window {
    buckets: [AtomicU64; BUCKETS],
}

pub(super) fn pack(period: u32, calls: u64, failures: u64) -> u64 {
    (u64::from(period) << 32) | (calls.min(0xFFFF) << 16) | failures.min(0xFFFF)
}

pub(super) fn unpack(word: u64) -> (u32, u64, u64) {
    ((word >> 32) as u32, (word >> 16) & 0xFFFF, word & 0xFFFF)
}

impl Window {
    /// Counts one call (`failed` or not) in the bucket of period `now / width`.
    pub(super) fn record(&self, width_ms: u64, now: u64, failed: bool) {
        let period = (now / width_ms.max(1)) as u32;
        let bucket = &self.buckets[period as usize % BUCKETS];
        let mut cur = bucket.load(Ordering::Relaxed);
        loop {
            let (p, calls, failures) = unpack(cur);
            let (calls, failures) = if p == period {
                (calls, failures)
            } else {
                (0, 0)
            };
            let next = pack(period, calls + 1, failures + u64::from(failed));
            match bucket.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// (calls, failures) over the buckets still in the window at `now`.
    pub(super) fn totals(&self, width_ms: u64, now: u64) -> (u64, u64) {
        let period = (now / width_ms.max(1)) as u32;
        self.buckets
            .iter()
            .map(|b| unpack(b.load(Ordering::Relaxed)))
            .filter(|(p, _, _)| (period.wrapping_sub(*p) as usize) < BUCKETS)
            .fold((0, 0), |(c, f), (_, calls, fails)| (c + calls, f + fails))
    }

    pub(super) fn clear(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }
}
