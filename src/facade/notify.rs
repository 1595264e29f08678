//! The reverse path's egress: notifications of the upstream MCP server become signed REST
//! webhooks POSTed to the facade's `deliver_to` URLs; it never sends one unsigned or twice per event id.
//!
//! A relay task listens to the upstream ([`crate::upstream::listen`]), keeps the configured
//! notification methods, and hands each event (the notification's `params`, which for USP's
//! `usp_webhook` is exactly the REST webhook body of §9.2.3) to [`Egress`], which signs it
//! (RFC 9421 + `Content-Digest` with portico's key), retries with backoff and keeps dead
//! letters. Events are deduplicated by their id (a JSON pointer, `/event_id` by default; a
//! digest of the body when absent) over the last [`RECENT_IDS`] events, so a stream replayed
//! after a reconnect is not delivered twice.

use crate::webhook::egress::{Egress, RetryPolicy};
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Event ids remembered for deduplication.
pub const RECENT_IDS: usize = 4096;

/// Compiled `notifications:` of a facade file.
#[derive(Debug, Clone)]
pub struct Notifications {
    /// Notification methods sent on as webhooks.
    pub methods: Vec<String>,
    pub deliver_to: Vec<url::Url>,
    /// JSON pointer to the event id in the notification's params.
    pub event_id: String,
    /// The 2026-07-28 `subscriptions/listen` filter.
    pub listen: Value,
    pub retry: RetryPolicy,
}

/// The running relay; dropping it stops listening (deliveries already started go on).
pub struct Relay {
    task: tokio::task::AbortHandle,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Remembers the most recent event ids.
#[derive(Default)]
struct Recent {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Recent {
    /// True when `id` is new (and now remembered).
    fn first(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() >= RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        true
    }
}

/// What to do with one upstream notification.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Deliver this body under this event id.
    Deliver { event_id: String, body: Value },
    /// Not a configured method.
    Ignored,
    /// Already delivered.
    Duplicate,
}

fn judge(n: &Notifications, recent: &mut Recent, msg: Value) -> Verdict {
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !n.methods.contains(&method) {
        return Verdict::Ignored;
    }
    let body = match msg {
        Value::Object(mut m) => m
            .remove("params")
            .unwrap_or(Value::Object(Default::default())),
        _ => Value::Object(Default::default()),
    };
    let event_id = match body.pointer(&n.event_id) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v @ Value::Number(_)) => v.to_string(),
        _ => format!(
            "sha256:{}",
            crate::auth::jws::sha256_b64(body.to_string().as_bytes())
        ),
    };
    if !recent.first(&format!("{method}\u{0}{event_id}")) {
        return Verdict::Duplicate;
    }
    Verdict::Deliver { event_id, body }
}

/// Starts relaying `upstream`'s notifications through `egress`.
pub fn start(
    upstream: Arc<crate::upstream::mcp::McpUpstream>,
    n: Notifications,
    egress: Arc<Egress>,
) -> Relay {
    let (tx, mut rx) = mpsc::channel::<Value>(256);
    let opts = crate::upstream::listen::ListenOptions {
        filter: n.listen.clone(),
    };
    let task = tokio::spawn(async move {
        let listener = upstream.listen_forever(opts, tx);
        let relay = async move {
            let mut recent = Recent::default();
            while let Some(msg) = rx.recv().await {
                match judge(&n, &mut recent, msg) {
                    Verdict::Deliver { event_id, body } => {
                        crate::ops::metrics::facade_notification("delivered");
                        let body = Arc::new(body);
                        for url in &n.deliver_to {
                            egress.deliver(
                                url.clone(),
                                body.clone(),
                                event_id.clone(),
                                n.retry,
                                None,
                            );
                        }
                    }
                    Verdict::Ignored => crate::ops::metrics::facade_notification("ignored"),
                    Verdict::Duplicate => crate::ops::metrics::facade_notification("duplicate"),
                }
            }
        };
        tokio::join!(listener, relay);
    });
    Relay {
        task: task.abort_handle(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Notifications {
        Notifications {
            methods: vec!["usp_webhook".into()],
            deliver_to: vec![],
            event_id: "/event_id".into(),
            listen: json!({}),
            retry: RetryPolicy::default(),
        }
    }

    #[test]
    fn the_params_are_the_body_and_repeats_are_dropped() {
        let n = config();
        let mut recent = Recent::default();
        let msg = json!({"jsonrpc": "2.0", "method": "usp_webhook",
                         "params": {"event": "booking.confirmed", "event_id": "evt_1"}});
        assert_eq!(
            judge(&n, &mut recent, msg.clone()),
            Verdict::Deliver {
                event_id: "evt_1".into(),
                body: json!({"event": "booking.confirmed", "event_id": "evt_1"})
            }
        );
        assert_eq!(judge(&n, &mut recent, msg), Verdict::Duplicate);
        let other = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        assert_eq!(judge(&n, &mut recent, other), Verdict::Ignored);
    }

    #[test]
    fn an_event_without_an_id_is_known_by_its_digest() {
        let n = config();
        let mut recent = Recent::default();
        let msg = json!({"jsonrpc": "2.0", "method": "usp_webhook", "params": {"event": "x"}});
        let Verdict::Deliver { event_id, .. } = judge(&n, &mut recent, msg.clone()) else {
            panic!("delivered");
        };
        assert!(event_id.starts_with("sha256:"));
        assert_eq!(judge(&n, &mut recent, msg), Verdict::Duplicate);
    }

    #[test]
    fn the_memory_of_ids_is_bounded() {
        let mut recent = Recent::default();
        for i in 0..RECENT_IDS + 10 {
            assert!(recent.first(&i.to_string()));
        }
        assert_eq!(recent.set.len(), RECENT_IDS);
        // The oldest were forgotten, the newest are remembered.
        assert!(recent.first("0"));
        assert!(!recent.first(&(RECENT_IDS + 9).to_string()));
    }
}
