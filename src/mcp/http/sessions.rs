//! Session lookup, creation and deletion for the 2025 era (`Mcp-Session-Id`, DELETE).
//! It never runs a request's method: that is `post` and `handler`.

use super::lifetime::{Lookup, renewal_period};
use super::respond::{Body, empty, rpc_error, unavailable};
use super::{ClientAddr, Server};
use crate::mcp::jsonrpc::{INTERNAL_ERROR, INVALID_REQUEST};
use crate::mcp::session::Session;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::{Value, json};
use std::sync::Arc;

impl Server {
    /// Session `sid`: this replica's, or (with shared state) one that another replica created.
    /// With shared state, the record in Redis decides: one read per request (so a session
    /// ended on another replica is refused here at once), and a renewal of its lifetime at most
    /// once per [`renewal_period`] (so use on this replica keeps it alive everywhere).
    pub(super) async fn find_session(&self, sid: &str) -> Result<Arc<Session>, Lookup> {
        let local = self.sessions.get(sid);
        let Some(state) = crate::state::shared() else {
            return local.ok_or(Lookup::NotFound);
        };
        // Ids portico makes are 32 hex digits; anything else is no session of ours.
        if sid.len() > 64 || !sid.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(Lookup::NotFound);
        }
        let idle = self.opts.session_idle;
        let renew = match &local {
            Some(s) => s.renewal_due(renewal_period(idle)),
            None => true,
        };
        match crate::state::sessions::find(state, sid, renew.then_some(idle)).await {
            Ok(Some(version)) => match local {
                Some(s) => Ok(s),
                None => self.sessions.adopt(sid, &version).map_err(|full| {
                    tracing::warn!(error = %full, "cannot take in a session of another replica");
                    Lookup::Full(full.retry_after_s)
                }),
            },
            Ok(None) => {
                // Ended on another replica (or expired there): end this replica's copy too.
                if local.is_some() && self.sessions.remove(sid) {
                    self.webhooks.hub.end_session(sid);
                }
                Err(Lookup::NotFound)
            }
            Err(e) => {
                // Redis cannot say; a session this replica holds is served (it cannot have
                // been ended elsewhere without Redis), another one cannot be vouched for.
                tracing::warn!(error = %e, "cannot look the session up in the shared state");
                local.ok_or(Lookup::Unavailable)
            }
        }
    }

    pub(super) fn session_id(req_headers: &HeaderMap) -> Option<String> {
        req_headers
            .get(crate::util::names::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    pub(super) async fn delete(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(sid) = Self::session_id(req.headers()) else {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        };
        // The shared record first: a session ended here but not there would live on elsewhere.
        let mut ended = false;
        if let Some(state) = crate::state::shared() {
            match crate::state::sessions::forget(state, &sid).await {
                Ok(found) => ended = found,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot end the session in the shared state");
                    return unavailable(
                        &Value::Null,
                        1,
                        "the session cannot be ended now (shared state unreachable); try again shortly",
                    );
                }
            }
        }
        ended |= self.sessions.remove(&sid);
        if ended {
            self.webhooks.hub.end_session(&sid);
            empty(StatusCode::OK)
        } else {
            rpc_error(
                StatusCode::NOT_FOUND,
                &Value::Null,
                INVALID_REQUEST,
                "Session not found",
                None,
            )
        }
    }

    /// A new session for `initialize` (request `id`) from `client`, stored (in this replica's
    /// table and, with shared state, in Redis) before its id is handed out; or the refusal:
    /// 429 past the client address's creation rate, 503 when the table is full or the shared
    /// state cannot record it.
    pub(super) async fn new_session(
        &self,
        id: &Value,
        client: Option<ClientAddr>,
        version: &str,
    ) -> Result<Arc<Session>, Response<Body>> {
        if let (Some(shape), Some(client)) = (self.opts.session_rate, client)
            && let Err(wait) = crate::auth::limit::take_keyed("session", &client.bucket(), shape)
        {
            crate::ops::metrics::session_refused("rate_limited");
            let mut r = rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                id,
                INTERNAL_ERROR,
                "too many new sessions from this address; try again later",
                Some(json!({"retry_after": wait})),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait));
            return Err(r);
        }
        let session = self.sessions.create(version).map_err(|full| {
            crate::ops::metrics::session_refused("full");
            unavailable(id, full.retry_after_s, &full.to_string())
        })?;
        if let Some(state) = crate::state::shared()
            && let Err(e) =
                crate::state::sessions::record(state, &session.id, version, self.opts.session_idle)
                    .await
        {
            // Another replica would not know it, and this one would refuse it once Redis answers.
            tracing::warn!(error = %e, "cannot record the session in the shared state");
            self.sessions.remove(&session.id);
            crate::ops::metrics::session_refused("state_unavailable");
            return Err(unavailable(
                id,
                1,
                "no session can be made now (shared state unreachable); try again shortly",
            ));
        }
        Ok(session)
    }
}
