//! MCP content from backend bodies by media type: image/audio as base64 blocks, text, embedded
//! resources, resource links, jq-built block lists (checked), resource `contents`. Pure: it never
//! performs I/O, and never passes a block on that the MCP schema would refuse.

use super::transform::Transform;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use serde_json::{Map, Value, json};

/// A compiled MiniJinja text template (no auto-escaping: MCP text is not HTML).
pub struct TextTemplate {
    env: minijinja::Environment<'static>,
}

impl std::fmt::Debug for TextTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextTemplate")
    }
}

impl TextTemplate {
    /// Compiles `src`; undefined variables render empty.
    pub fn compile(src: &str) -> Result<Self, String> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        // `{{ id | segment }}`: one percent-encoded URI segment (no `/`, `?`, `#` survive).
        env.add_filter("segment", |v: String| super::path::encode_segment(&v));
        env.add_template_owned("t", src.to_string())
            .map_err(|e| e.to_string())?;
        Ok(TextTemplate { env })
    }

    /// Variables the template reads that `known` does not declare.
    pub fn undeclared(&self, known: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = self
            .env
            .get_template("t")
            .map(|t| t.undeclared_variables(false).into_iter().collect())
            .unwrap_or_default();
        out.retain(|v| !known.contains(&v.as_str()));
        out.sort();
        out
    }

    /// Renders with a JSON context. Values are data, never re-parsed as templates.
    pub fn render(&self, ctx: &Value) -> Result<String, String> {
        self.env
            .get_template("t")
            .and_then(|t| t.render(minijinja::Value::from(minijinja::value::Serde(ctx))))
            .map_err(|e| e.to_string())
    }
}

/// How a tool's success body becomes content (`tools.<name>.content`).
#[derive(Debug)]
pub enum ContentRule {
    /// By media type: JSON takes the normal path (structuredContent + text); `image/*`,
    /// `audio/*` become base64 blocks; `text/*` a text block.
    Media,
    /// The body as an embedded resource with this URI.
    Embedded(TextTemplate),
    /// A `resource_link` to this URI.
    Link {
        uri: TextTemplate,
        name: Option<String>,
    },
    /// jq over the JSON body yielding `content[]`.
    Blocks(Transform),
}

/// The media type of a response, lowercased, without parameters.
pub fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "application/octet-stream".into())
}

/// `application/json`, `application/*+json`, `text/json`.
pub fn is_json(media: &str) -> bool {
    media == "application/json" || media == "text/json" || media.ends_with("+json")
}

/// Text-like media types carried as `text` rather than a base64 `blob`.
fn is_textual(media: &str) -> bool {
    media.starts_with("text/")
        || is_json(media)
        || matches!(
            media,
            "application/xml" | "application/yaml" | "application/javascript"
        )
        || media.ends_with("+xml")
}

/// One `resources/read` entry (also an embedded resource's `resource`): text when the media type
/// is textual and the body is UTF-8, else a base64 `blob`.
pub fn resource_contents(uri: &str, media: &str, body: &[u8]) -> Value {
    let mut m = Map::new();
    m.insert("uri".into(), json!(uri));
    m.insert("mimeType".into(), json!(media));
    match std::str::from_utf8(body) {
        Ok(text) if is_textual(media) => m.insert("text".into(), json!(text)),
        _ => m.insert("blob".into(), json!(STANDARD.encode(body))),
    };
    Value::Object(m)
}

/// A content block for a non-JSON body by media type: `image/*` and `audio/*` as base64 with
/// `mimeType`, textual types as text. `None` for anything else.
pub fn media_block(media: &str, body: &[u8]) -> Option<Value> {
    for kind in ["image", "audio"] {
        if media.strip_prefix(kind).is_some_and(|r| r.starts_with('/')) {
            return Some(json!({ "type": kind, "data": STANDARD.encode(body), "mimeType": media }));
        }
    }
    if is_textual(media) {
        return std::str::from_utf8(body)
            .ok()
            .map(|t| json!({ "type": "text", "text": t }));
    }
    None
}

/// A prompt-message or tool content block for a resource read: images and audio as such, the
/// rest embedded.
pub fn block_for_contents(contents: &Value) -> Value {
    let media = contents
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(blob) = contents.get("blob").and_then(Value::as_str) {
        for kind in ["image", "audio"] {
            if media.starts_with(&format!("{kind}/")) {
                return json!({ "type": kind, "data": blob, "mimeType": media });
            }
        }
    }
    json!({ "type": "resource", "resource": contents })
}

fn need_str(block: &Map<String, Value>, field: &str, i: usize) -> Result<(), String> {
    match block.get(field) {
        Some(Value::String(s)) if !s.is_empty() || field == "text" => Ok(()),
        _ => Err(format!("content[{i}] needs a string `{field}`")),
    }
}

fn base64_field(block: &Map<String, Value>, field: &str, i: usize) -> Result<(), String> {
    need_str(block, field, i)?;
    let data = block.get(field).and_then(Value::as_str).unwrap_or("");
    STANDARD
        .decode(data)
        .map(|_| ())
        .map_err(|_| format!("content[{i}].{field} is not base64"))
}

/// Checks jq-built blocks against the MCP content shapes (`text`, `image`, `audio`, `resource`,
/// `resource_link`).
pub fn check_blocks(value: Value) -> Result<Vec<Value>, String> {
    let Value::Array(items) = value else {
        return Err("`content.blocks` must yield an array of content blocks".into());
    };
    if items.is_empty() {
        return Err("`content.blocks` yielded no content blocks".into());
    }
    for (i, item) in items.iter().enumerate() {
        let Value::Object(b) = item else {
            return Err(format!("content[{i}] must be an object"));
        };
        match b.get("type").and_then(Value::as_str) {
            Some("text") => need_str(b, "text", i)?,
            Some("image") | Some("audio") => {
                base64_field(b, "data", i)?;
                need_str(b, "mimeType", i)?;
            }
            Some("resource_link") => {
                need_str(b, "uri", i)?;
                need_str(b, "name", i)?;
            }
            Some("resource") => {
                let Some(Value::Object(r)) = b.get("resource") else {
                    return Err(format!("content[{i}] needs a `resource` object"));
                };
                need_str(r, "uri", i)?;
                match (r.get("text"), r.get("blob")) {
                    (Some(Value::String(_)), None) => {}
                    (None, Some(Value::String(_))) => base64_field(r, "blob", i)?,
                    _ => {
                        return Err(format!(
                            "content[{i}].resource needs exactly one of string `text` or `blob`"
                        ));
                    }
                }
            }
            other => {
                return Err(format!(
                    "content[{i}].type {} is not text, image, audio, resource or resource_link",
                    other.map_or("(missing)".to_string(), |t| format!("`{t}`"))
                ));
            }
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CONTENT_TYPE,
            ct.parse().expect("header value"),
        );
        h
    }

    #[test]
    fn media_types_choose_the_block() {
        assert_eq!(media_type(&headers("Image/PNG; q=1")), "image/png");
        assert_eq!(media_type(&HeaderMap::new()), "application/octet-stream");
        assert_eq!(
            media_block("image/png", &[1, 2, 3]),
            Some(json!({"type": "image", "data": "AQID", "mimeType": "image/png"}))
        );
        assert_eq!(
            media_block("audio/wav", b"RIFF"),
            Some(json!({"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}))
        );
        assert_eq!(
            media_block("text/plain", b"hi"),
            Some(json!({"type": "text", "text": "hi"}))
        );
        assert_eq!(media_block("application/pdf", b"%PDF"), None);
        assert!(is_json("application/problem+json"));
    }

    #[test]
    fn resource_contents_are_text_or_blob() {
        assert_eq!(
            resource_contents("u://a", "text/plain", b"hello"),
            json!({"uri": "u://a", "mimeType": "text/plain", "text": "hello"})
        );
        assert_eq!(
            resource_contents("u://b", "image/png", &[0, 255]),
            json!({"uri": "u://b", "mimeType": "image/png", "blob": "AP8="})
        );
        // Not UTF-8 although declared text: a blob, never lossy text.
        assert_eq!(
            resource_contents("u://c", "text/plain", &[0xff]),
            json!({"uri": "u://c", "mimeType": "text/plain", "blob": "/w=="})
        );
        let img = resource_contents("u://b", "image/png", &[0, 255]);
        assert_eq!(block_for_contents(&img)["type"], "image");
        let txt = resource_contents("u://a", "text/plain", b"x");
        assert_eq!(block_for_contents(&txt)["type"], "resource");
    }

    #[test]
    fn blocks_are_checked() {
        let ok = json!([
            {"type": "text", "text": "t"},
            {"type": "image", "data": "AQID", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://r", "text": "{}"}},
            {"type": "resource_link", "uri": "x://l", "name": "l"}
        ]);
        assert_eq!(check_blocks(ok).expect("valid").len(), 4);
        for (bad, why) in [
            (json!({"type": "text"}), "array"),
            (json!([]), "no content"),
            (json!([{"type": "video"}]), "`video`"),
            (
                json!([{"type": "image", "data": "%%", "mimeType": "image/png"}]),
                "base64",
            ),
            (
                json!([{"type": "resource", "resource": {"uri": "x://r"}}]),
                "exactly one",
            ),
            (json!([{"type": "resource_link", "uri": "x://l"}]), "`name`"),
        ] {
            let err = check_blocks(bad).expect_err("invalid");
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn templates_render_values_as_data() {
        let t = TextTemplate::compile("a={{ a }}").expect("compiles");
        assert_eq!(
            t.render(&json!({"a": "{{ b }}\r\n"})).expect("renders"),
            "a={{ b }}\r\n"
        );
        assert_eq!(t.undeclared(&["b"]), vec!["a".to_string()]);
        assert!(t.undeclared(&["a"]).is_empty());
        assert!(TextTemplate::compile("{{ a").is_err());
        let seg = TextTemplate::compile("x://{{ id | segment }}/d").expect("compiles");
        assert_eq!(
            seg.render(&json!({"id": "../a b"})).expect("renders"),
            "x://..%2Fa%20b/d"
        );
    }
}
