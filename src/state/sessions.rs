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
    let mut cmd = redis::cmd("SET");
    cmd.arg(key(state, id))
        .arg(version)
        .arg("EX")
        .arg(ttl.as_secs().max(1));
    state.query(&cmd).await
}

/// The version of session `id`, when some replica made it (and refreshes its lifetime).
pub async fn find(state: &Shared, id: &str, ttl: Duration) -> Result<Option<String>, StateError> {
    let mut cmd = redis::cmd("GETEX");
    cmd.arg(key(state, id)).arg("EX").arg(ttl.as_secs().max(1));
    state.query(&cmd).await
}

/// Forgets session `id` (DELETE on any replica ends it everywhere).
pub async fn forget(state: &Shared, id: &str) -> Result<bool, StateError> {
    let n: i64 = state.query(redis::cmd("DEL").arg(key(state, id))).await?;
    Ok(n > 0)
}
