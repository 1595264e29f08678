//! A tool result written on the hot path ([`Written`]): its JSON text, as one buffer or as
//! chunks that lend its two large texts. It must never build a `serde_json` tree to be written.

use bytes::Bytes;
use serde_json::{Map, Value};

/// A successful `CallToolResult` whose `content` and `structuredContent` are JSON text, written
/// without a `serde_json` tree; `_meta` stays a map so the MCP layer can add to it. Never an
/// error result (`isError` is absent).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Written {
    pub meta: Map<String, Value>,
    /// The JSON text of `content` (UTF-8, as `json_text` writes).
    pub content: Vec<u8>,
    /// The JSON text of `structuredContent`, when there is one: as `json_text` writes it, or
    /// the backend's own text of an object passed through unchanged (the same value).
    pub structured: Option<Bytes>,
    /// Carries the 2026-07-28 `resultType: "complete"`.
    pub complete: bool,
}

impl Written {
    /// Appends the result object's JSON text: the value [`Written::to_value`] gives (members in
    /// key order, but for a `structuredContent` passed through in the backend's own text).
    pub fn write(&self, out: &mut Vec<u8>) {
        self.open(out);
        // Room for the two texts at once: a large answer would otherwise grow `out` by
        // doubling, copying what it holds each time. A new buffer takes only the text written
        // so far, where `reserve` has the allocator copy the whole old buffer, used or not
        // (the caller's buffer is sized from earlier answers, up to 64 KiB).
        let structured = self.structured.as_ref().map_or(0, |s| s.len());
        let need = self.content.len() + structured + 64;
        if out.capacity() - out.len() < need {
            let mut grown = Vec::with_capacity(out.len() + need);
            grown.extend_from_slice(out);
            *out = grown;
        }
        out.extend_from_slice(b"\"content\":");
        out.extend_from_slice(&self.content);
        if self.complete {
            out.extend_from_slice(b",\"resultType\":\"complete\"");
        }
        if let Some(s) = &self.structured {
            out.extend_from_slice(b",\"structuredContent\":");
            out.extend_from_slice(s);
        }
        out.push(b'}');
    }

    /// The result object's JSON text, after `head` and followed by `tail`, in chunks that lend
    /// `structuredContent`'s text and carry `content`'s own buffer on: nothing is copied but a
    /// few framing bytes. The same value as [`Written::write`] writes, `content` last: the
    /// text portico wrote then carries the closing bytes, so the last chunk is never a few
    /// bytes of its own (hyper flushes its write queue once it holds `max_buf_size` bytes, and
    /// a lone tail after a large text would go out in a second write and TCP segment).
    pub fn into_chunks(mut self, mut head: Vec<u8>, tail: &[u8]) -> Vec<Bytes> {
        self.open(&mut head);
        if self.complete {
            head.extend_from_slice(b"\"resultType\":\"complete\",");
        }
        let mut chunks = Vec::with_capacity(4);
        match self.structured {
            Some(s) => {
                head.extend_from_slice(b"\"structuredContent\":");
                chunks.push(Bytes::from(head));
                chunks.push(s);
                chunks.push(Bytes::from_static(b",\"content\":"));
            }
            None => {
                head.extend_from_slice(b"\"content\":");
                chunks.push(Bytes::from(head));
            }
        }
        self.content.push(b'}');
        self.content.extend_from_slice(tail);
        chunks.push(Bytes::from(self.content));
        chunks
    }

    /// The object's opening: `{` and the `_meta` member when there is one.
    fn open(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        if !self.meta.is_empty() {
            out.extend_from_slice(b"\"_meta\":");
            crate::json_text::write_map(&self.meta, out);
            out.push(b',');
        }
    }

    /// The length of its two texts, which [`Written::write`] writes and more.
    pub fn texts_len(&self) -> usize {
        self.content.len() + self.structured.as_ref().map_or(0, |s| s.len())
    }

    /// The result as a value (its texts read back).
    pub fn to_value(&self) -> Value {
        let read = |text: &[u8]| crate::json_text::from_slice(text).unwrap_or(Value::Null);
        let mut r = Map::new();
        if !self.meta.is_empty() {
            r.insert("_meta".into(), Value::Object(self.meta.clone()));
        }
        r.insert("content".into(), read(&self.content));
        if self.complete {
            r.insert("resultType".into(), Value::String("complete".into()));
        }
        if let Some(s) = &self.structured {
            r.insert("structuredContent".into(), read(s));
        }
        Value::Object(r)
    }
}

#[cfg(test)]
mod tests {
    use super::Written;
    use serde_json::json;

    /// Every shape of result: with and without `_meta`, `resultType` and `structuredContent`.
    fn shapes() -> Vec<Written> {
        let mut out = Vec::new();
        for meta in [false, true] {
            for complete in [false, true] {
                for structured in [None, Some(&b"{\"a\":[1,\"x\"]}"[..])] {
                    let mut w = Written {
                        content: br#"[{"type":"text","text":"{\"a\":1}"}]"#.to_vec(),
                        structured: structured.map(bytes::Bytes::from_static),
                        complete,
                        ..Written::default()
                    };
                    if meta {
                        w.meta.insert("k".into(), json!({"v": "é\n"}));
                    }
                    out.push(w);
                }
            }
        }
        out
    }

    #[test]
    fn chunks_hold_the_written_value_and_lend_the_texts() {
        for w in shapes() {
            let (content, structured) = (w.content.clone(), w.structured.clone());
            let chunks = w.clone().into_chunks(b"HEAD".to_vec(), b"TAIL");
            let all = chunks.concat();
            let text = all
                .strip_prefix(b"HEAD")
                .and_then(|t| t.strip_suffix(b"TAIL"))
                .expect("head and tail around the result");
            let value: serde_json::Value = serde_json::from_slice(text).expect("JSON");
            assert_eq!(value, w.to_value(), "{w:?}");
            // The last chunk is the text block's own buffer, the closing bytes after it.
            let last = chunks.last().expect("chunks");
            assert_eq!(last[..content.len()], content[..]);
            assert_eq!(&last[content.len()..], b"}TAIL");
            // The structured text is lent: the very same bytes, not a copy.
            if let Some(s) = structured {
                let lent = chunks.iter().find(|c| c.as_ptr() == s.as_ptr());
                assert_eq!(lent.map(|c| c.len()), Some(s.len()), "{w:?}");
            }
        }
    }
}
