//! Idempotency records in Redis: one record per key, shared by every replica (claim, wait, replay, release).
//! It never lets two replicas run one key at once while the first holds its lease, and never stores a transient failure.
//!
//! A record is JSON: `{"args": <canonical arguments>, "owner": <lease id>}` while the first call
//! runs (expiring after `LEASE`, so a replica that dies mid-call frees the key), then
//! `{"args": ..., "reply": <stored reply>}` for `TTL`.

use super::{Shared, StateError};
use crate::binding::{Reply, RpcError};
use serde_json::{Value, json};
use std::time::Duration;

/// How long a running call holds its key before another replica may take it over.
pub const LEASE: Duration = Duration::from_secs(120);

/// How long a duplicate waits for the first call's answer before giving up.
const WAIT_LIMIT: Duration = Duration::from_secs(150);

/// What `claim` found.
pub enum SharedClaim {
    Run(Lease),
    Replay(Reply),
    Conflict,
}

/// The right to run a keyed call, held in Redis.
pub struct Lease {
    key: String,
    owner: String,
    args: String,
}

/// Releases a key only when this lease still holds it; stores or deletes.
const RELEASE: &str = r#"
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, rec = pcall(cjson.decode, cur)
if not ok or rec['owner'] ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"#;

pub(crate) fn reply_json(reply: &Reply) -> Value {
    match reply {
        Reply::Result(r) => json!({ "result": r }),
        Reply::Written(w) => json!({ "result": w.to_value() }),
        Reply::Error(e) => json!({ "error": {
            "code": e.code, "message": e.message, "data": e.data, "http_status": e.http_status,
        }}),
    }
}

pub(crate) fn reply_from(v: &Value) -> Option<Reply> {
    if let Some(r) = v.get("result") {
        return Some(Reply::Result(r.clone()));
    }
    let e = v.get("error")?;
    Some(Reply::Error(RpcError {
        code: e.get("code")?.as_i64()?,
        message: e.get("message")?.as_str()?.to_string(),
        data: e.get("data").filter(|d| !d.is_null()).cloned(),
        http_status: e
            .get("http_status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
    }))
}

/// Claims `id` (already scoped by backend, business, tool and key) for `args` (canonical).
pub async fn claim(state: &Shared, id: &str, args: &str) -> Result<SharedClaim, StateError> {
    let key = state.key(&format!("idem:{}", hex_id(id)));
    let owner = uuid::Uuid::new_v4().simple().to_string();
    let running = json!({ "args": args, "owner": owner }).to_string();
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        let mut c = state.conn();
        let set: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&running)
            .arg("NX")
            .arg("PX")
            .arg(LEASE.as_millis() as u64)
            .query_async(&mut c)
            .await
            .map_err(|e| state.err(e))?;
        if set.is_some() {
            state.ok();
            return Ok(SharedClaim::Run(Lease {
                key,
                owner,
                args: args.to_string(),
            }));
        }
        let cur: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut c)
            .await
            .map_err(|e| state.err(e))?;
        state.ok();
        // Gone between the two commands (released or expired): try again at once.
        let Some(cur) = cur else { continue };
        let rec: Value = serde_json::from_str(&cur)
            .map_err(|_| StateError::Corrupt(format!("idempotency record {key}")))?;
        if rec.get("args").and_then(Value::as_str) != Some(args) {
            return Ok(SharedClaim::Conflict);
        }
        if let Some(stored) = rec.get("reply") {
            return reply_from(stored)
                .map(SharedClaim::Replay)
                .ok_or_else(|| StateError::Corrupt(format!("idempotency record {key}")));
        }
        // The first call still runs (here or on another replica): wait for its answer.
        if started.elapsed() > WAIT_LIMIT {
            return Err(StateError::Corrupt(format!(
                "idempotency key still running after {}s",
                WAIT_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

impl Lease {
    /// Stores `reply` for replays (when `keep`), or frees the key.
    pub async fn finish(self, state: &Shared, reply: Option<&Reply>, ttl: Duration) {
        let value = match reply {
            Some(r) => json!({ "args": self.args, "reply": reply_json(r) }).to_string(),
            None => String::new(),
        };
        let mut c = state.conn();
        let r: Result<i64, _> = redis::Script::new(RELEASE)
            .key(&self.key)
            .arg(&self.owner)
            .arg(value)
            .arg(ttl.as_millis() as u64)
            .invoke_async(&mut c)
            .await;
        match r {
            Ok(_) => state.ok(),
            Err(e) => {
                // The lease expires by itself; a retry then reaches the backend again.
                let e = state.err(e);
                tracing::warn!(error = %e, "cannot store the idempotent answer");
            }
        }
    }
}

/// A fixed-length key part for an arbitrary id: hex SHA-256 (aws-lc-rs is already linked).
pub(crate) fn hex_id(id: &str) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, id.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_survive_the_round_trip() {
        let ok = Reply::Result(json!({"content": [], "structuredContent": {"a": 1}}));
        assert_eq!(reply_from(&reply_json(&ok)), Some(ok));
        let err = Reply::Error(RpcError {
            code: -32009,
            message: "unavailable".into(),
            data: Some(json!({"code": "x"})),
            http_status: Some(503),
        });
        assert_eq!(reply_from(&reply_json(&err)), Some(err));
        let bare = Reply::Error(RpcError {
            code: -32602,
            message: "bad".into(),
            data: None,
            http_status: None,
        });
        assert_eq!(reply_from(&reply_json(&bare)), Some(bare));
        assert_eq!(reply_from(&json!({"other": 1})), None);
    }
}
