//! Event-id deduplication behind a trait (a Redis store can replace it); the bounded, expiring in-memory store.
//! It never grows without limit and never blocks.

use moka::sync::Cache;
use std::time::Duration;

/// How long an event id is remembered by default (USP: at-least-once delivery, 24 h).
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Remembers keys for a while.
pub trait Dedupe: Send + Sync {
    /// Records `key`; true when it was not seen within the store's TTL (the first delivery).
    fn first_seen(&self, key: &str) -> bool;
    /// Forgets `key` (its event could not be recorded, so a retry must not count as a repeat).
    fn forget(&self, key: &str);
}

/// A bounded in-memory TTL store (one process; lost on restart).
pub struct MemoryDedupe {
    seen: Cache<String, ()>,
}

impl MemoryDedupe {
    /// Remembers up to `max` keys for `ttl` each.
    pub fn new(max: u64, ttl: Duration) -> Self {
        MemoryDedupe {
            seen: Cache::builder().max_capacity(max).time_to_live(ttl).build(),
        }
    }
}

impl Default for MemoryDedupe {
    fn default() -> Self {
        MemoryDedupe::new(1_000_000, DEFAULT_TTL)
    }
}

impl Dedupe for MemoryDedupe {
    fn first_seen(&self, key: &str) -> bool {
        self.seen.entry(key.to_string()).or_insert(()).is_fresh()
    }

    fn forget(&self, key: &str) {
        self.seen.invalidate(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_each_key_once() {
        let d = MemoryDedupe::new(10, DEFAULT_TTL);
        assert!(d.first_seen("spa\0evt-1"));
        assert!(!d.first_seen("spa\0evt-1"));
        assert!(d.first_seen("spa\0evt-2"));
        d.forget("spa\0evt-2");
        assert!(d.first_seen("spa\0evt-2"));
    }
}
