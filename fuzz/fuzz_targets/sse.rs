//! The SSE reader of the upstream MCP client (`portico::upstream::mcp::SseReader`), fed an
//! arbitrary byte stream cut at arbitrary chunk boundaries. Input: 2 bytes choose the byte limit
//! (64..=65,599), 1 byte `n` (mod 33) how many chunk lengths follow, `n` bytes of chunk lengths,
//! then the stream (past the listed lengths, the rest is one chunk).
//! It never panics; it never holds more than the limit; it refuses a stream once more than the
//! limit was read; a message it returns is the response with the awaited id; and when the whole
//! stream fits the limit, the answer does not depend on where the chunks were cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portico::upstream::mcp::{McpError, SseReader};
use serde_json::Value;

/// The JSON-RPC id the reader waits for (the seeds use it).
const ID: u64 = 1;

/// Feeds `chunks` in order; the first message or error, and whether the limit was respected.
fn run(limit: usize, chunks: &[&[u8]]) -> Option<Result<Value, McpError>> {
    let mut r = SseReader::new(ID, limit);
    let mut read = 0usize;
    for c in chunks {
        read += c.len();
        let out = r.push(c);
        assert!(
            r.buffered() <= limit,
            "the reader holds {} bytes, over its {limit}-byte limit",
            r.buffered()
        );
        match out {
            Ok(None) => assert!(
                read <= limit,
                "{read} bytes read past the {limit}-byte limit"
            ),
            Ok(Some(msg)) => return Some(Ok(msg)),
            Err(e) => {
                assert!(read > limit, "refused within the limit: {e}");
                return Some(Err(e));
            }
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let limit = 64 + usize::from(u16::from_le_bytes([data[0], data[1]]));
    let n = usize::from(data[2] % 33).min(data.len() - 3);
    let (lens, mut stream) = data[3..].split_at(n);
    let whole = stream;
    let mut chunks: Vec<&[u8]> = Vec::new();
    for &l in lens {
        let take = usize::from(l).min(stream.len());
        let (c, rest) = stream.split_at(take);
        chunks.push(c);
        stream = rest;
    }
    chunks.push(stream);

    let split = run(limit, &chunks);
    if let Some(Ok(msg)) = &split {
        assert_eq!(msg.get("id").and_then(Value::as_u64), Some(ID));
        assert!(msg.get("result").is_some() || msg.get("error").is_some());
    }
    if whole.len() <= limit {
        let one = run(limit, &[whole]);
        assert_eq!(
            split.as_ref().map(|r| r.as_ref().ok()),
            one.as_ref().map(|r| r.as_ref().ok()),
            "the answer depends on the chunk boundaries"
        );
    }
});
