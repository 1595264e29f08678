//! Outgoing webhook deliveries (`deliver_to`) in Redis: each pending delivery is leased to the replica running it, and taken over by another when that replica dies.
//! It never drops a pending delivery before it is delivered or dead-lettered, and never runs one twice while its lease holds.
//!
//! A delivery is a hash field `<seq>|<url>` in `{p}:deliveries` (what to send) plus a score in
//! the sorted set `{p}:delivery-due`: the time its lease ends. The running replica's lease
//! outlasts the longest its retry schedule can take; every replica sweeps for ended leases,
//! re-leases them atomically and runs them from the first attempt (at-least-once, with the
//! event id for the receiver's dedupe).

use super::{Shared, StateError};
use crate::webhook::retry::RetryPolicy;
use serde_json::{Value, json};
use std::time::Duration;

/// A delivery taken over from a replica whose lease ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub field: String,
    pub policy: RetryPolicy,
    pub url: String,
    pub event_id: String,
    pub event: Value,
}

/// How long the replica running a delivery holds it: the whole retry schedule plus one attempt
/// timeout per try, and a margin.
pub fn lease(policy: &RetryPolicy) -> Duration {
    policy.max_total + policy.timeout * (policy.retries + 1) + Duration::from_secs(2)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

const RECORD: &str = r#"
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"#;

const TAKE: &str = r#"
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 16)
local out = {}
for _, f in ipairs(due) do
  local v = redis.call('HGET', KEYS[1], f)
  if v then
    local ok, rec = pcall(cjson.decode, v)
    local lease = 60000
    if ok and tonumber(rec['lease_ms']) then lease = tonumber(rec['lease_ms']) end
    redis.call('ZADD', KEYS[2], ARGV[1] + lease, f)
    table.insert(out, f)
    table.insert(out, v)
  else
    redis.call('ZREM', KEYS[2], f)
  end
end
return out
"#;

/// Records a delivery this replica starts now, leased for `lease(policy)`. Returns its field.
pub async fn record(
    state: &Shared,
    seq: u64,
    url: &str,
    event_id: &str,
    event: &Value,
    policy: &RetryPolicy,
) -> Result<String, StateError> {
    let field = format!("{seq}|{url}");
    let lease = lease(policy);
    let value = json!({
        "url": url, "event_id": event_id, "event": event, "lease_ms": lease.as_millis() as u64,
        "policy": {
            "initial_ms": policy.initial.as_millis() as u64, "retries": policy.retries,
            "max_total_ms": policy.max_total.as_millis() as u64,
            "timeout_ms": policy.timeout.as_millis() as u64,
        },
    });
    let mut c = state.conn();
    let r: Result<i64, _> = redis::Script::new(RECORD)
        .key(state.key("deliveries"))
        .key(state.key("delivery-due"))
        .arg(&field)
        .arg(value.to_string())
        .arg(now_ms() + lease.as_millis() as u64)
        .invoke_async(&mut c)
        .await;
    r.map_err(|e| state.err(e))?;
    state.ok();
    Ok(field)
}

/// Forgets a delivery that ended (delivered or dead-lettered).
pub async fn finish(state: &Shared, field: &str) -> Result<(), StateError> {
    let mut c = state.conn();
    let r: Result<(i64, i64), _> = redis::pipe()
        .atomic()
        .cmd("HDEL")
        .arg(state.key("deliveries"))
        .arg(field)
        .cmd("ZREM")
        .arg(state.key("delivery-due"))
        .arg(field)
        .query_async(&mut c)
        .await;
    r.map_err(|e| state.err(e))?;
    state.ok();
    Ok(())
}

fn policy_from(v: &Value) -> Option<RetryPolicy> {
    let ms = |k: &str| v.get(k).and_then(Value::as_u64).map(Duration::from_millis);
    Some(RetryPolicy {
        initial: ms("initial_ms")?,
        retries: u32::try_from(v.get("retries")?.as_u64()?).ok()?,
        max_total: ms("max_total_ms")?,
        timeout: ms("timeout_ms")?,
    })
}

/// Takes over up to 16 deliveries whose lease has ended, leasing each to this replica anew.
pub async fn take_over(state: &Shared) -> Result<Vec<Pending>, StateError> {
    let mut c = state.conn();
    let r: Result<Vec<String>, _> = redis::Script::new(TAKE)
        .key(state.key("deliveries"))
        .key(state.key("delivery-due"))
        .arg(now_ms())
        .invoke_async(&mut c)
        .await;
    let flat = r.map_err(|e| state.err(e))?;
    state.ok();
    let mut out = Vec::new();
    for pair in flat.chunks(2) {
        let [field, text] = pair else { continue };
        let parsed = serde_json::from_str::<Value>(text).ok().and_then(|v| {
            Some(Pending {
                field: field.clone(),
                policy: policy_from(v.get("policy")?)?,
                url: v.get("url")?.as_str()?.to_string(),
                event_id: v.get("event_id")?.as_str()?.to_string(),
                event: v.get("event")?.clone(),
            })
        });
        match parsed {
            Some(p) => out.push(p),
            None => {
                tracing::warn!(field = %field, "unreadable pending delivery; dropped");
                let _ = finish(state, field).await;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_survive_the_round_trip() {
        let p = RetryPolicy {
            initial: Duration::from_millis(250),
            retries: 2,
            max_total: Duration::from_secs(3),
            timeout: Duration::from_millis(500),
        };
        let v = json!({"initial_ms": 250, "retries": 2, "max_total_ms": 3000, "timeout_ms": 500});
        assert_eq!(policy_from(&v), Some(p));
        assert_eq!(policy_from(&json!({"retries": 2})), None);
    }

    #[test]
    fn a_lease_outlasts_the_whole_retry_schedule() {
        let p = RetryPolicy::default();
        // 15 min budget + 4 attempts of 10 s + margin.
        assert_eq!(lease(&p), Duration::from_secs(15 * 60 + 40 + 2));
    }
}
