//! OpenRPC 1.3 documents: parsed with `openrpc-types`, then read as the MCP tool surface
//! (methods, by-name params, result schemas). It never compiles schemas or talks to backends.

use super::diag::{Diagnostic, locate_json};
use super::schema::{Sources, parse_document};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use url::Url;

/// One by-name parameter of a method.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub required: bool,
    pub schema: Value,
    /// JSON pointer of the schema in the document.
    pub pointer: String,
    pub description: Option<String>,
}

/// One OpenRPC method: an MCP tool candidate.
#[derive(Debug, Clone)]
pub struct Method {
    pub index: usize,
    pub name: String,
    pub summary: Option<String>,
    pub description: Option<String>,
    pub params: Vec<Param>,
    /// Result schema and its pointer.
    pub result: Option<(Value, String)>,
    /// `x-usp-access` (USP access tier) when present.
    pub access: Option<String>,
}

/// A loaded OpenRPC document.
#[derive(Debug, Clone)]
pub struct Document {
    pub path: PathBuf,
    pub uri: Url,
    pub text: String,
    pub raw: Arc<Value>,
    pub title: String,
    pub version: String,
    pub methods: Vec<Method>,
    /// Non-fatal findings (leniently accepted deviations from OpenRPC 1.3).
    pub warnings: Vec<Diagnostic>,
}

impl Document {
    /// Line of a JSON pointer (best effort), starting the search at a method's name.
    pub fn line_of(&self, method: Option<&str>, pointer_tail: &str) -> Option<usize> {
        match method {
            Some(name) => {
                let anchor = format!("\"name\": \"{name}\"");
                let start = self
                    .text
                    .find(&anchor)
                    .or_else(|| self.text.find(&format!("\"name\":\"{name}\"")))?;
                let line0 = self.text[..start].matches('\n').count();
                // Pointers into this method are searched from its name onwards.
                let tail = match pointer_tail.strip_prefix("/methods/") {
                    Some(rest) => rest.find('/').map(|i| &rest[i..]).unwrap_or(""),
                    None => pointer_tail,
                };
                let rel = locate_json(&self.text[start..], tail).unwrap_or(1);
                Some(line0 + rel)
            }
            None => locate_json(&self.text, pointer_tail),
        }
    }

    pub fn method(&self, name: &str) -> Option<&Method> {
        self.methods.iter().find(|m| m.name == name)
    }
}

fn deref_local<'a>(raw: &'a Value, v: &'a Value) -> Option<&'a Value> {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => r.strip_prefix('#').and_then(|p| raw.pointer(p)),
        None => Some(v),
    }
}

/// Loads and checks an OpenRPC document (JSON or YAML) and registers it with `sources`.
pub fn load(path: &Path, sources: &mut Sources) -> Result<Document, Vec<Diagnostic>> {
    let err = |m: String| vec![Diagnostic::error(path, m)];
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("cannot read OpenRPC document: {e}")))?;
    let raw = match parse_document(path, &text) {
        Ok(v) => v,
        Err(e) => {
            // serde_json reports "at line L column C": keep it in the message.
            return Err(err(format!("not valid JSON/YAML: {e}")));
        }
    };
    // Structural check with the OpenRPC 1.3 types. Published drafts are not always strict
    // (the UCP lodging document has no `info.version`), so a deviation is a warning as long as
    // the methods are readable; a document without a `methods` array is refused.
    let mut diags = Vec::new();
    if let Err(e) = serde_json::from_value::<openrpc_types::OpenRPC>(raw.clone()) {
        let d = if raw.get("methods").is_some_and(Value::is_array) {
            Diagnostic::warning(
                path,
                format!("not a strict OpenRPC 1.3 document ({e}); loaded leniently"),
            )
        } else {
            Diagnostic::error(path, format!("not an OpenRPC 1.3 document: {e}"))
        };
        diags.push(d.hint("check `openrpc`, `info` (title, version) and `methods` against the OpenRPC 1.3 specification"));
        if diags.iter().any(Diagnostic::is_error) {
            return Err(diags);
        }
    }
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let uri = Url::from_file_path(&canonical)
        .map_err(|_| err("cannot make a file URI for this path".into()))?;
    let raw = Arc::new(raw);
    sources.insert(uri.as_str(), raw.clone());
    let mut methods = Vec::new();
    let title = raw
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let version = raw
        .pointer("/info/version")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let empty = Vec::new();
    let list = raw
        .get("methods")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for (i, m) in list.iter().enumerate() {
        let Some(m) = deref_local(&raw, m) else {
            diags.push(
                Diagnostic::error(path, "method `$ref` does not resolve inside the document")
                    .at(format!("/methods/{i}")),
            );
            continue;
        };
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if m.get("paramStructure").and_then(Value::as_str) == Some("by-position") {
            diags.push(
                Diagnostic::warning(
                    path,
                    format!(
                        "method `{name}` uses by-position params; MCP tool arguments are by name"
                    ),
                )
                .at(format!("/methods/{i}/paramStructure")),
            );
        }
        let mut params = Vec::new();
        for (j, p) in m
            .get("params")
            .and_then(Value::as_array)
            .unwrap_or(&empty)
            .iter()
            .enumerate()
        {
            let pointer = format!("/methods/{i}/params/{j}");
            let (p, pointer) = match p.get("$ref").and_then(Value::as_str) {
                Some(r) => match r
                    .strip_prefix('#')
                    .and_then(|ptr| raw.pointer(ptr).map(|v| (v, ptr.to_string())))
                {
                    Some(found) => found,
                    None => {
                        diags.push(
                            Diagnostic::error(
                                path,
                                format!("param `$ref: {r}` of method `{name}` does not resolve"),
                            )
                            .at(pointer)
                            .hint("point it at `#/components/contentDescriptors/NAME`"),
                        );
                        continue;
                    }
                },
                None => (p, pointer),
            };
            params.push(Param {
                name: p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                required: p.get("required").and_then(Value::as_bool).unwrap_or(false),
                schema: p.get("schema").cloned().unwrap_or(Value::Bool(true)),
                pointer: format!("{pointer}/schema"),
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        }
        let result = m.get("result").and_then(|r| {
            let pointer = format!("/methods/{i}/result");
            let (r, pointer) = match r.get("$ref").and_then(Value::as_str) {
                Some(rf) => rf
                    .strip_prefix('#')
                    .and_then(|ptr| raw.pointer(ptr).map(|v| (v, ptr.to_string())))?,
                None => (r, pointer),
            };
            r.get("schema")
                .map(|s| (s.clone(), format!("{pointer}/schema")))
        });
        methods.push(Method {
            index: i,
            name,
            summary: m.get("summary").and_then(Value::as_str).map(str::to_string),
            description: m
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
            params,
            result,
            access: m
                .get("x-usp-access")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    let warnings = diags;
    Ok(Document {
        path: path.to_path_buf(),
        uri,
        text,
        raw,
        title,
        version,
        methods,
        warnings,
    })
}
