//! MCP task records in Redis (`--state`): one JSON record per task, shared by every replica and kept across restarts.
//! It never overwrites a finished task (completed, failed, cancelled) and never keeps a record past its TTL.

use super::{Shared, StateError};
use std::time::Duration;

/// Writes a record unless the stored one is already terminal; 1 when written.
const PUT: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and (rec['state'] == 'completed' or rec['state'] == 'failed' or rec['state'] == 'cancelled') then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#;

fn key(state: &Shared, id: &str) -> String {
    state.key(&format!("task:{id}"))
}

/// The stored JSON text of task `id`, if any.
pub async fn get(state: &Shared, id: &str) -> Result<Option<String>, StateError> {
    state.query(redis::cmd("GET").arg(key(state, id))).await
}

/// Stores `record` for `ttl` unless the stored record is terminal; whether it was written.
pub async fn put(
    state: &Shared,
    id: &str,
    record: &str,
    ttl: Duration,
) -> Result<bool, StateError> {
    let ms = ttl.as_millis().max(1) as u64;
    let script = redis::Script::new(PUT);
    let mut c = state.conn();
    match script
        .key(key(state, id))
        .arg(record)
        .arg(ms)
        .invoke_async::<i64>(&mut c)
        .await
    {
        Ok(n) => {
            state.ok();
            Ok(n == 1)
        }
        Err(e) => Err(state.err(e)),
    }
}

/// Adds task `id` to `owner`'s index (a sorted set by creation time), kept at least `ttl`.
const INDEX: &str = r#"
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"#;

fn owner_key(state: &Shared, owner: &str) -> String {
    state.key(&format!("tasks_of:{owner}"))
}

/// Records that `owner` created task `id` at `created_ms`.
pub async fn index(
    state: &Shared,
    owner: &str,
    id: &str,
    created_ms: u64,
    ttl: Duration,
) -> Result<(), StateError> {
    let ms = ttl.as_millis().max(1) as u64;
    let mut c = state.conn();
    match redis::Script::new(INDEX)
        .key(owner_key(state, owner))
        .arg(created_ms)
        .arg(id)
        .arg(ms)
        .invoke_async::<i64>(&mut c)
        .await
    {
        Ok(_) => {
            state.ok();
            Ok(())
        }
        Err(e) => Err(state.err(e)),
    }
}

/// The ids of `owner`'s tasks created at or after `from_ms`, oldest first, with their times.
pub async fn owned(
    state: &Shared,
    owner: &str,
    from_ms: u64,
) -> Result<Vec<(String, u64)>, StateError> {
    let scored: Vec<(String, f64)> = state
        .query(
            redis::cmd("ZRANGEBYSCORE")
                .arg(owner_key(state, owner))
                .arg(from_ms)
                .arg("+inf")
                .arg("WITHSCORES"),
        )
        .await?;
    Ok(scored.into_iter().map(|(id, ms)| (id, ms as u64)).collect())
}

/// Drops `ids` (expired records) from `owner`'s index.
pub async fn unindex(state: &Shared, owner: &str, ids: &[String]) -> Result<(), StateError> {
    if ids.is_empty() {
        return Ok(());
    }
    state
        .query::<i64>(redis::cmd("ZREM").arg(owner_key(state, owner)).arg(ids))
        .await
        .map(|_| ())
}
