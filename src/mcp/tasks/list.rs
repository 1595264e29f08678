//! The opaque `tasks/list` cursor (2025-11-25): where the previous page ended (creation time, id).
//! A leaf: it never reads the task store and never decides who sees a task.

use crate::tasks;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The cursor after the task created at `ms` with id `id`.
pub(super) fn encode(ms: u64, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("tasks:{ms}:{id}"))
}

pub(super) fn decode(cursor: &str) -> Option<tasks::After> {
    let raw = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (ms, id) = text.strip_prefix("tasks:")?.split_once(':')?;
    Some((ms.parse().ok()?, id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_foreign_text() {
        let c = encode(1_765_000_000_123, "abc");
        assert_eq!(decode(&c), Some((1_765_000_000_123, "abc".to_string())));
        assert_eq!(decode("not base64!"), None);
        assert_eq!(decode(&URL_SAFE_NO_PAD.encode("tools:3")), None);
    }
}
