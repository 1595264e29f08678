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
