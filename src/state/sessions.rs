//! 2025-era session records in Redis, so a session made on one replica is known to the others (failover, `Last-Event-ID`).
//! It stores only the session id and its negotiated version, never what the session did.
//!
//! The record is the session's authority: a replica serves a session only while its record
//! exists (one read per request), so `DELETE` on any replica ends it on every replica at once.
//! Its lifetime is the idle timeout, renewed by the replicas that use it (a write at most once
//! per renewal period per replica, not per request).

use super::{Shared, StateError};
use std::time::Duration;

fn key(state: &Shared, id: &str) -> String {
    state.key(&format!("session:{id}"))
}

fn millis(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

/// Records a new session for `ttl` (the idle timeout).
pub async fn record(
    state: &Shared,
    id: &str,
    version: &str,
    ttl: Duration,
) -> Result<(), StateError> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key(state, id))
        .arg(version)
        .arg("PX")
        .arg(millis(ttl));
    state.query(&cmd).await
}

/// The version of session `id`, when it exists; with `renew`, its lifetime starts again
/// (`GETEX`), else it is only read (`GET`).
pub async fn find(
    state: &Shared,
    id: &str,
    renew: Option<Duration>,
) -> Result<Option<String>, StateError> {
    let cmd = match renew {
        Some(ttl) => {
            let mut c = redis::cmd("GETEX");
            c.arg(key(state, id)).arg("PX").arg(millis(ttl));
            c
        }
        None => {
            let mut c = redis::cmd("GET");
            c.arg(key(state, id));
            c
        }
    };
    state.query(&cmd).await
}

/// Forgets session `id` (DELETE on any replica ends it everywhere).
pub async fn forget(state: &Shared, id: &str) -> Result<bool, StateError> {
    let n: i64 = state.query(redis::cmd("DEL").arg(key(state, id))).await?;
    Ok(n > 0)
}
