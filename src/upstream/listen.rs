//! Listening to an upstream MCP server's notifications: the 2026-07-28 `subscriptions/listen`
//! stream or the session era's GET stream, reconnected with backoff; it never buffers past its limit.
//!
//! [`McpUpstream::listen_forever`] hands every notification (a JSON-RPC message with a
//! `method` and no `id`) to a channel, in the order the server wrote them. Era by era:
//! - 2026-07-28: a POST `subscriptions/listen` with the configured `notifications` filter; the
//!   first message, `notifications/subscriptions/acknowledged`, is logged (what the server
//!   honoured) and not handed on. A JSON-RPC error answering the listen request (the server
//!   does not offer it) ends that attempt.
//! - session era: GET with `Mcp-Session-Id`; SSE event ids are remembered and sent back as
//!   `Last-Event-ID` when the stream is reopened, so the server can replay what was missed.
//!   404 means the session expired: it is renewed (a new `initialize`) and the stream reopened.
//!   A server request on the stream is answered by POST: `ping` with an empty result, anything
//!   else with -32601 (portico offers no client features upstream).
//!
//! A stream that ends, breaks or cannot be opened is reopened after a backoff (0.5 s doubling
//! to 30 s, back to 0.5 s after a stream that delivered something). Each event is bounded by
//! `max_response_bytes`; a larger one ends the stream (it is reopened).

use super::mcp::{Era, McpUpstream, envelope, event_end, sse_data, transport_error};
use crate::util::names;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// First and largest wait before a stream is reopened.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What a listen stream asks for.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    /// The `notifications` filter of a 2026-07-28 `subscriptions/listen` request (the session
    /// era's GET stream has no filter: the server sends what it has).
    pub filter: Value,
    /// True while a stream is open (the server answered it with an event stream).
    pub connected: Arc<AtomicBool>,
}

/// How one stream ended.
#[derive(Debug)]
enum End {
    /// The receiving side is gone: stop listening.
    Closed,
    /// The stream ended or broke after `delivered` notifications.
    Ended { delivered: usize, why: String },
}

/// One SSE event: its `id:` (session era resumption) and its JSON message.
struct Event {
    id: Option<String>,
    message: Option<Value>,
}

fn parse_event(raw: &[u8]) -> Event {
    let id = std::str::from_utf8(raw).ok().and_then(|text| {
        text.split(['\n', '\r'])
            .filter_map(|l| l.strip_prefix("id:"))
            .map(|v| v.strip_prefix(' ').unwrap_or(v).to_string())
            .next_back()
    });
    Event {
        id,
        message: sse_data(raw),
    }
}

/// The SSE events of a response, one at a time.
struct Events {
    resp: reqwest::Response,
    buf: Vec<u8>,
    limit: usize,
}

impl Events {
    /// The next complete event; an event (or the bytes of an unfinished one) over `limit`,
    /// a broken stream or its end is an error.
    async fn next(&mut self) -> Result<Event, String> {
        loop {
            if let Some((len, with_blank)) = event_end(&self.buf) {
                let raw: Vec<u8> = self.buf.drain(..with_blank).take(len).collect();
                return Ok(parse_event(&raw));
            }
            if self.buf.len() > self.limit {
                return Err(format!("an event passed {} bytes", self.limit));
            }
            match self
                .resp
                .chunk()
                .await
                .map_err(|e| transport_error(e).to_string())?
            {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => return Err("the server closed the stream".into()),
            }
        }
    }
}

fn is_notification(m: &Value) -> bool {
    m.get("method").and_then(Value::as_str).is_some() && m.get("id").is_none()
}

impl McpUpstream {
    /// Listens until `out` is closed: every notification of the server goes to `out`.
    pub async fn listen_forever(&self, opts: ListenOptions, out: mpsc::Sender<Value>) {
        let mut last_event_id: Option<String> = None;
        let mut backoff = BACKOFF_FIRST;
        loop {
            let end = match self.ensure_era(&http::HeaderMap::new()).await {
                Ok(era) => {
                    self.listen_once(&era, &opts, &mut last_event_id, &out)
                        .await
                }
                Err(e) => End::Ended {
                    delivered: 0,
                    why: e.to_string(),
                },
            };
            match end {
                End::Closed => return,
                End::Ended { delivered, why } => {
                    if delivered > 0 {
                        backoff = BACKOFF_FIRST;
                    }
                    tracing::info!(url = %self.opts.url, reason = %why, retry_in_ms = backoff.as_millis() as u64, "upstream MCP notification stream ended; reopening");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = out.closed() => return,
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Opens one stream and reads it to its end.
    async fn listen_once(
        &self,
        era: &Era,
        opts: &ListenOptions,
        last_event_id: &mut Option<String>,
        out: &mpsc::Sender<Value>,
    ) -> End {
        let ended = |delivered: usize, why: String| End::Ended { delivered, why };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let rb = match era {
            Era::Modern => self
                .request(era, "subscriptions/listen", None)
                .header("accept", "text/event-stream")
                .json(&envelope(
                    era,
                    id,
                    "subscriptions/listen",
                    &json!({ "notifications": opts.filter }),
                )),
            Era::Legacy { version, session } => {
                let mut rb = self
                    .http
                    .get(&self.opts.url)
                    .header("accept", "text/event-stream")
                    .header(names::MCP_PROTOCOL_VERSION, version.as_str());
                if let Some(s) = session {
                    rb = rb.header(names::MCP_SESSION_ID, s.as_str());
                }
                if let Some(last) = last_event_id.as_deref() {
                    rb = rb.header("last-event-id", last);
                }
                rb
            }
        };
        let resp = tokio::select! {
            r = rb.send() => match r {
                Ok(r) => r,
                Err(e) => return ended(0, transport_error(e).to_string()),
            },
            _ = out.closed() => return End::Closed,
        };
        let status = resp.status().as_u16();
        if status == 404
            && let Era::Legacy {
                session: Some(_), ..
            } = era
        {
            self.forget(era);
            return ended(0, "the session expired (404); renewing it".into());
        }
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        if status != 200 || !sse {
            let what = match (era, status) {
                (Era::Legacy { .. }, 405) => "the server offers no GET stream (405)".to_string(),
                _ => format!("HTTP {status} without an event stream"),
            };
            return ended(0, what);
        }
        opts.connected.store(true, Ordering::Relaxed);
        let end = self.read_stream(era, id, resp, last_event_id, out).await;
        opts.connected.store(false, Ordering::Relaxed);
        end
    }

    /// Reads an open stream to its end, handing notifications to `out`.
    async fn read_stream(
        &self,
        era: &Era,
        id: u64,
        resp: reqwest::Response,
        last_event_id: &mut Option<String>,
        out: &mpsc::Sender<Value>,
    ) -> End {
        let ended = |delivered: usize, why: String| End::Ended { delivered, why };
        let mut events = Events {
            resp,
            buf: Vec::new(),
            limit: self.opts.max_response_bytes,
        };
        let mut delivered = 0usize;
        loop {
            let ev = tokio::select! {
                ev = events.next() => match ev {
                    Ok(ev) => ev,
                    Err(why) => return ended(delivered, why),
                },
                _ = out.closed() => return End::Closed,
            };
            if let (Some(eid), Era::Legacy { .. }) = (&ev.id, era) {
                *last_event_id = Some(eid.clone());
            }
            let Some(msg) = ev.message else {
                continue;
            };
            if msg.get("id").and_then(Value::as_u64) == Some(id)
                && let Some(err) = msg.get("error")
            {
                return ended(
                    delivered,
                    format!("subscriptions/listen was refused: {err}"),
                );
            }
            if is_notification(&msg) {
                if msg.get("method").and_then(Value::as_str)
                    == Some("notifications/subscriptions/acknowledged")
                {
                    let honoured = msg
                        .pointer("/params/notifications")
                        .cloned()
                        .unwrap_or(Value::Null);
                    tracing::info!(url = %self.opts.url, honoured = %honoured, "upstream MCP listen stream acknowledged");
                    continue;
                }
                if out.send(msg).await.is_err() {
                    return End::Closed;
                }
                delivered += 1;
            } else if let (Some(rid), Some(method)) =
                (msg.get("id"), msg.get("method").and_then(Value::as_str))
            {
                self.answer_server_request(era, rid, method).await;
            }
        }
    }

    /// Answers a request the server sent on a session-era stream (by POST, best effort).
    async fn answer_server_request(&self, era: &Era, id: &Value, method: &str) {
        let reply = if method == "ping" {
            json!({ "jsonrpc": "2.0", "id": id, "result": {} })
        } else {
            json!({ "jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("portico does not offer `{method}` to upstream servers")
            }})
        };
        let sent = self
            .request(era, method, None)
            .json(&reply)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, method, "cannot answer the upstream server's request");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_keeps_its_last_id_and_its_data() {
        let e = parse_event(
            b"id: 7\nid: 8\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}",
        );
        assert_eq!(e.id.as_deref(), Some("8"));
        assert!(is_notification(&e.message.unwrap()));
        let e = parse_event(b": comment only");
        assert!(e.id.is_none() && e.message.is_none());
    }

    #[test]
    fn requests_and_responses_are_not_notifications() {
        assert!(!is_notification(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        ));
        assert!(!is_notification(
            &json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        ));
        assert!(is_notification(
            &json!({"jsonrpc": "2.0", "method": "usp_webhook", "params": {}})
        ));
    }
}
