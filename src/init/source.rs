//! The OpenAPI documents `init` reads: the entry file and every local file its `$ref`s reach,
//! parsed once, with references resolved to (file, JSON pointer). It never fetches a remote
//! reference and never follows a reference chain forever (cycles are reported, not looped).

use crate::config::schema::parse_document;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A place in one of the documents: the file and a JSON pointer inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    pub file: PathBuf,
    pub pointer: String,
}

impl Place {
    pub fn child(&self, key: &str) -> Place {
        Place {
            file: self.file.clone(),
            pointer: format!(
                "{}/{}",
                self.pointer,
                key.replace('~', "~0").replace('/', "~1")
            ),
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{}#{p}", self.file.display())
    }
}

/// Why a `$ref` did not lead to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefError {
    /// `http(s)://...`: never fetched.
    Remote(String),
    /// The file or the pointer does not exist, or the file does not parse.
    Missing(String),
    /// The chain of `$ref`s comes back to itself.
    Circular(String),
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefError::Remote(r) => write!(f, "remote `$ref: {r}` is not fetched"),
            RefError::Missing(m) => f.write_str(m),
            RefError::Circular(r) => {
                write!(f, "circular `$ref: {r}` (the chain comes back to itself)")
            }
        }
    }
}

/// Every document read so far, by canonical path.
#[derive(Default)]
pub struct Sources {
    docs: HashMap<PathBuf, Arc<Value>>,
}

/// Parses JSON or YAML: by extension, else by the first character.
pub fn parse_any(path: &Path, text: &str) -> Result<Value, String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if matches!(ext, "json" | "yaml" | "yml") {
        return parse_document(path, text);
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("{}: {e}", path.display()))
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Sources {
    /// Reads the entry document; its canonical path names it from then on.
    pub fn open(&mut self, path: &Path) -> Result<(PathBuf, Arc<Value>), String> {
        let file = canonical(path);
        let doc = self.load(&file)?;
        Ok((file, doc))
    }

    fn load(&mut self, file: &Path) -> Result<Arc<Value>, String> {
        if let Some(d) = self.docs.get(file) {
            return Ok(d.clone());
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let doc = Arc::new(parse_any(file, &text)?);
        self.docs.insert(file.to_path_buf(), doc.clone());
        Ok(doc)
    }

    /// The node at a place (the document is read when needed).
    pub fn node(&mut self, place: &Place) -> Result<Value, String> {
        let doc = self.load(&place.file)?;
        doc.pointer(&place.pointer).cloned().ok_or_else(|| {
            format!(
                "`#{}` does not exist in {}",
                place.pointer,
                place.file.display()
            )
        })
    }

    /// Where a `$ref` written at `from` points.
    pub fn target(&self, reference: &str, from: &Place) -> Result<Place, RefError> {
        let r = reference.trim();
        if r.starts_with("http://") || r.starts_with("https://") || r.starts_with("//") {
            return Err(RefError::Remote(r.to_string()));
        }
        let (file_part, frag) = match r.split_once('#') {
            Some((f, p)) => (f, p),
            None => (r, ""),
        };
        let frag = percent_encoding::percent_decode_str(frag)
            .decode_utf8_lossy()
            .into_owned();
        if !frag.is_empty() && !frag.starts_with('/') {
            return Err(RefError::Missing(format!(
                "`$ref: {r}`: only JSON pointer fragments (`#/...`) are supported"
            )));
        }
        let file = if file_part.is_empty() {
            from.file.clone()
        } else {
            let decoded = percent_encoding::percent_decode_str(file_part)
                .decode_utf8_lossy()
                .into_owned();
            let dir = from.file.parent().unwrap_or(Path::new("."));
            let joined = dir.join(&decoded);
            if joined.exists() {
                canonical(&joined)
            } else {
                dir.join(file_part)
            }
        };
        Ok(Place {
            file,
            pointer: frag,
        })
    }

    /// Follows `$ref`s from `node` (found at `at`) until a node without one: the node and its
    /// place. Used for parameters, bodies, responses and path items (not schemas).
    pub fn deref(&mut self, node: &Value, at: &Place) -> Result<(Value, Place), RefError> {
        let mut cur = node.clone();
        let mut place = at.clone();
        let mut seen = vec![place.clone()];
        while let Some(r) = cur.get("$ref").and_then(Value::as_str) {
            let r = r.to_string();
            let next = self.target(&r, &place)?;
            if seen.contains(&next) || seen.len() > 64 {
                return Err(RefError::Circular(r));
            }
            cur = self
                .node(&next)
                .map_err(|e| RefError::Missing(format!("`$ref: {r}`: {e}")))?;
            seen.push(next.clone());
            place = next;
        }
        Ok((cur, place))
    }
}
