//! 2025-era session records in Redis, so a session made on one replica is known to the others (failover, `Last-Event-ID`).
//! It stores only the session id and its negotiated version, never what the session did.

use super::{Shared, StateError};
use std::time::Duration;

fn key(state: &Shared, id: &str) -> String {
    state.key(&format!("session:{id}"))
}

/// Records a new session for `ttl` (the idle timeout).
pub async fn record(
    state: &Shared,
    id: &str,
    version: &str,
    ttl: Duration,
) -> Result<(), StateError> {
    let mut c = state.conn();
    let r: Result<(), _> = redis::cmd("SET")
        .arg(key(state, id))
        .arg(version)
        .arg("EX")
        .arg(ttl.as_secs().max(1))
        .query_async(&mut c)
        .await;
    r.map_err(|e| state.err(e))?;
    state.ok();
    Ok(())
}

/// The version of session `id`, when some replica made it (and refreshes its lifetime).
pub async fn find(state: &Shared, id: &str, ttl: Duration) -> Result<Option<String>, StateError> {
    let mut c = state.conn();
    let r: Result<Option<String>, _> = redis::cmd("GETEX")
        .arg(key(state, id))
        .arg("EX")
        .arg(ttl.as_secs().max(1))
        .query_async(&mut c)
        .await;
    let v = r.map_err(|e| state.err(e))?;
    state.ok();
    Ok(v)
}

/// Forgets session `id` (DELETE on any replica ends it everywhere).
pub async fn forget(state: &Shared, id: &str) -> Result<bool, StateError> {
    let mut c = state.conn();
    let r: Result<i64, _> = redis::cmd("DEL")
        .arg(key(state, id))
        .query_async(&mut c)
        .await;
    let n = r.map_err(|e| state.err(e))?;
    state.ok();
    Ok(n > 0)
}
