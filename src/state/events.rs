//! Accepted webhook events in a Redis Stream: deduplicated and numbered atomically, then read back by every replica.
//! It never numbers an event twice, never publishes a duplicate, and never answers the sender before Redis has the event.
//!
//! One script does dedupe (`SET NX EX`), numbering (`INCR`) and `XADD` with the number as the
//! entry id (`<seq>-1`), so the stream's order is the one order every replica delivers in, and
//! SSE ids (`seq`) mean the same thing on every replica: a client that reconnects elsewhere with
//! `Last-Event-ID` resumes where it was.

use super::{Shared, StateError};
use crate::webhook::hub::Hub;
use redis::streams::{StreamId, StreamRangeReply, StreamReadReply};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Events kept in the stream (approximate trim): far more than any replay buffer.
pub const MAXLEN: usize = 100_000;

/// How long one blocking read waits before it is issued again.
const BLOCK: Duration = Duration::from_secs(5);

const APPEND: &str = r#"
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], seq .. '-1',
  'b', ARGV[3], 'm', ARGV[4], 'u', ARGV[5], 'e', ARGV[6])
return seq
"#;

fn stream_key(state: &Shared) -> String {
    state.key("events")
}

/// Records an accepted event for every replica. `Ok(None)`: `event_id` was already recorded
/// for `business` within `dedupe_ttl` (a duplicate).
pub async fn append(
    state: &Shared,
    business: &str,
    method: &str,
    event_id: &str,
    event: &Value,
    uri: Option<&str>,
    dedupe_ttl: Duration,
) -> Result<Option<u64>, StateError> {
    let dedupe = state.key(&format!(
        "dedupe:{}",
        super::idempotency::hex_id(&format!("{business}\u{0}{event_id}"))
    ));
    let mut c = state.conn();
    let seq: u64 = redis::Script::new(APPEND)
        .key(dedupe)
        .key(state.key("seq"))
        .key(stream_key(state))
        .arg(dedupe_ttl.as_secs().max(1))
        .arg(MAXLEN)
        .arg(business)
        .arg(method)
        .arg(uri.unwrap_or(""))
        .arg(event.to_string())
        .invoke_async(&mut c)
        .await
        .map_err(|e| state.err(e))?;
    state.ok();
    Ok((seq > 0).then_some(seq))
}

/// One stream entry as the hub wants it.
struct Entry {
    seq: u64,
    business: String,
    method: String,
    uri: Option<String>,
    event: Value,
}

fn entry(id: &StreamId) -> Option<Entry> {
    let seq = id.id.split('-').next()?.parse().ok()?;
    let text: String = id.get("e")?;
    let uri: String = id.get("u").unwrap_or_default();
    Some(Entry {
        seq,
        business: id.get("b")?,
        method: id.get("m")?,
        uri: (!uri.is_empty()).then_some(uri),
        event: serde_json::from_str(&text).ok()?,
    })
}

/// Feeds `hub` from the stream until the task is aborted: first the newest `replay` events
/// (into the replay buffer, not sent), then every new event as it is appended, by any replica.
/// Reconnects by itself after Redis errors, resuming after the last entry it read.
pub async fn read_into(state: Arc<Shared>, hub: Arc<Hub>, replay: usize) {
    let key = stream_key(&state);
    let mut last: Option<String> = None;
    let mut pause = Duration::from_millis(100);
    let mut conn = None;
    loop {
        let c = match &mut conn {
            Some(c) => c,
            None => match state.dedicated(BLOCK).await {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::debug!(error = %e, "event stream reader: cannot connect yet");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
        };
        let from = match &last {
            Some(id) => id.clone(),
            None => {
                let r: Result<StreamRangeReply, _> = redis::cmd("XREVRANGE")
                    .arg(&key)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(replay.max(1))
                    .query_async(c)
                    .await;
                match r {
                    Ok(range) => {
                        state.ok();
                        let newest = range.ids.first().map(|i| i.id.clone());
                        for e in range.ids.iter().rev().filter_map(entry) {
                            hub.restore(e.seq, &e.business, &e.method, e.event, e.uri);
                        }
                        let id = newest.unwrap_or_else(|| "0-0".into());
                        last = Some(id.clone());
                        id
                    }
                    Err(e) => {
                        let _ = state.err(e);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(5));
                        continue;
                    }
                }
            }
        };
        let r: Result<Option<StreamReadReply>, _> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(256)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(&key)
            .arg(&from)
            .query_async(c)
            .await;
        match r {
            Ok(reply) => {
                state.ok();
                pause = Duration::from_millis(100);
                let ids = reply.map(|r| r.keys).unwrap_or_default();
                let mut n = 0u64;
                for sk in ids {
                    for id in &sk.ids {
                        last = Some(id.id.clone());
                        match entry(id) {
                            Some(e) => {
                                hub.publish_at(e.seq, &e.business, &e.method, e.event, e.uri);
                                n += 1;
                            }
                            None => {
                                tracing::warn!(id = %id.id, "unreadable entry in the event stream; skipped")
                            }
                        }
                    }
                }
                crate::ops::metrics::state_events(n);
            }
            Err(e) => {
                let _ = state.err(e);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}
