//! Per-call values a mapping's transforms can read (`$meta.request_id`, `$meta.uuid`,
//! `$meta.now`): minted once per call. It never reads anything but the clock and the OS
//! random source, and only while no seed is set.
//!
//! A seed (`PORTICO_SEED`, or [`seed`] for a dry run) makes the values repeatable: UUIDs come
//! from a SplitMix64 stream over the seed and the time is fixed at 2026-01-01T00:00:00Z. That
//! makes them predictable, so a seeded server logs a warning at start; it is for tests and dry
//! runs only.

use crate::model::Minted;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The time every seeded call reads: 2026-01-01T00:00:00Z.
const SEEDED_NOW: i64 = 1_767_225_600;

static SEEDED: AtomicBool = AtomicBool::new(false);
static STATE: AtomicU64 = AtomicU64::new(0);
static FROM_ENV: Once = Once::new();

/// Seeds the values from `PORTICO_SEED` the first time anything is minted.
fn init_from_env() {
    FROM_ENV.call_once(|| {
        if let Some(n) = std::env::var("PORTICO_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            STATE.store(n, Ordering::Relaxed);
            SEEDED.store(true, Ordering::Release);
        }
    });
}

/// Makes every value minted from now on repeatable: the same seed gives the same sequence.
pub fn seed(n: u64) {
    FROM_ENV.call_once(|| {});
    STATE.store(n, Ordering::Relaxed);
    SEEDED.store(true, Ordering::Release);
}

/// Whether values are seeded (then they are predictable).
pub fn is_seeded() -> bool {
    init_from_env();
    SEEDED.load(Ordering::Acquire)
}

/// The next SplitMix64 output of the seeded stream.
fn next_u64() -> u64 {
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A version 4 UUID, hyphenated lower case.
pub fn uuid() -> String {
    if is_seeded() {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&next_u64().to_be_bytes());
        return uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string();
    }
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// The current time as RFC 3339 text in UTC, to the second.
pub fn now() -> String {
    if is_seeded() {
        return crate::clock::rfc3339(SEEDED_NOW);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::clock::rfc3339(i64::try_from(secs).unwrap_or(i64::MAX))
}

/// The values of one call.
pub fn mint() -> Minted {
    Minted {
        request_id: uuid(),
        uuid: uuid(),
        now: now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_well_formed_and_fresh() {
        let (a, b) = (mint(), mint());
        for id in [&a.request_id, &a.uuid, &b.request_id, &b.uuid] {
            let parsed = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(parsed.get_version_num(), 4, "{id}");
            assert_eq!(id.len(), 36);
        }
        assert_ne!(a.request_id, a.uuid);
        assert_ne!(a.uuid, b.uuid);
        assert_eq!(a.now.len(), "2026-01-01T00:00:00Z".len());
        assert!(
            a.now.ends_with('Z') && a.now.as_bytes()[10] == b'T',
            "{}",
            a.now
        );
    }
}
