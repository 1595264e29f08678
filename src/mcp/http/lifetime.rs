//! Session lifetimes on the MCP endpoint: why a lookup failed, renewal periods, the expiry
//! sweeper and the watch that ends a GET stream with its session.
//! It never answers requests beyond the error for a failed lookup.

use super::respond::{Body, rpc_error, unavailable};
use crate::mcp::jsonrpc::INVALID_REQUEST;
use crate::mcp::session::{Session, Sessions};
use http::{Response, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Why a request's `Mcp-Session-Id` names no session this replica can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Never made, ended (DELETE on any replica) or expired: 404.
    NotFound,
    /// The shared state cannot say (Redis unreachable) and this replica does not hold it: 503.
    Unavailable,
    /// It exists, but this replica is full of busy sessions and cannot take it in: 503 with
    /// the seconds to wait.
    Full(u64),
}

/// How often a replica using a session renews its shared record: a quarter of the idle time
/// (at least 250 ms), so the record outlives the use by at least three quarters of it.
pub(super) fn renewal_period(idle: Duration) -> Duration {
    (idle / 4).max(Duration::from_millis(250))
}

/// Ends idle sessions (a quarter of the idle time after they expire at the latest), and their
/// resource subscriptions with them; with shared state, renews the records of sessions with a
/// call in flight (an open GET stream renews its own).
pub(super) async fn expire_sessions(
    sessions: Sessions,
    webhooks: Arc<crate::webhook::ingress::Ingress>,
) {
    let idle = sessions.idle();
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for sid in sessions.sweep() {
            webhooks.hub.end_session(&sid);
        }
        let Some(state) = crate::state::shared() else {
            continue;
        };
        for sid in sessions.busy_renewals(renewal_period(idle)) {
            if let Err(e) = crate::state::sessions::find(state, &sid, Some(idle)).await {
                tracing::warn!(error = %e, "cannot renew a busy session in the shared state");
            }
        }
    }
}

/// The JSON-RPC error for a session lookup that found none.
pub(super) fn no_session(id: &Value, why: Lookup) -> Response<Body> {
    match why {
        Lookup::NotFound => rpc_error(
            StatusCode::NOT_FOUND,
            id,
            INVALID_REQUEST,
            "Session not found",
            None,
        ),
        Lookup::Unavailable => unavailable(
            id,
            1,
            "the session cannot be checked now (shared state unreachable); try again shortly",
        ),
        Lookup::Full(retry_after_s) => unavailable(
            id,
            retry_after_s,
            "this replica holds its maximum of busy sessions; try again shortly",
        ),
    }
}

/// Resolves when `session` (with an open GET stream) ends: at once on this replica (DELETE,
/// expiry), or, with shared state, at the first check that finds its record gone. The checks
/// (one read per `keep_alive` or renewal period, whichever is shorter) renew the record when
/// due: an open stream keeps its session alive on every replica.
pub(super) async fn session_gone(session: Arc<Session>, keep_alive: Duration, idle: Duration) {
    let Some(state) = crate::state::shared() else {
        return session.ended().await;
    };
    let every = keep_alive.min(renewal_period(idle));
    let checks = async {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tick.tick().await;
            let renew = session.renewal_due(renewal_period(idle)).then_some(idle);
            if let Ok(None) = crate::state::sessions::find(state, &session.id, renew).await {
                return;
            }
        }
    };
    tokio::select! {
        _ = session.ended() => {}
        _ = checks => {}
    }
}
