//! What every `init` path shares: its options, report and error, the backend document's
//! business name, credentials and URL. A leaf: it never plans tools or writes files.

use crate::init::operations::Filter;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `init` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub openapi: PathBuf,
    /// A protocol's published OpenRPC document: its methods are paired with the operations.
    pub openrpc: Option<PathBuf>,
    /// `plain`, `usp`, `ucp` or `autonym`; default: inferred from the OpenRPC (else `plain`).
    pub binding: Option<String>,
    /// The protocol version results announce, when the OpenRPC names none.
    pub protocol_version: Option<String>,
    pub backend: Option<String>,
    pub filter: Filter,
    pub out: PathBuf,
}

/// What `init` wrote, and what it left out.
#[derive(Debug, Clone)]
pub struct Report {
    pub mapping: PathBuf,
    pub openrpc: PathBuf,
    pub tools: Vec<String>,
    /// `METHOD /path (file#pointer): reason`.
    pub skipped: Vec<String>,
    /// `file#pointer: message`.
    pub warnings: Vec<String>,
    /// `tool: what was left out of it` (optional cookies, callbacks, credential headers).
    pub notes: Vec<String>,
    /// The environment variable the backend URL needs, when the document gave none.
    pub backend_env: Option<String>,
    /// The binding written, and why (`--binding`, or what in the OpenRPC named it).
    pub binding: (String, String),
    /// With `--openrpc`: `method -> METHOD /path (why)` for every paired method.
    pub paired: Vec<String>,
    /// With `--openrpc`: `method: reason; candidates` for every method left as a TODO.
    pub todos: Vec<String>,
}

/// Why nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", pointer.as_deref().map(|p| format!(" ({p})")).unwrap_or_default())]
pub struct InitError {
    pub file: PathBuf,
    pub pointer: Option<String>,
    pub message: String,
}

pub(crate) fn fail(file: &Path, pointer: Option<&str>, message: impl Into<String>) -> InitError {
    InitError {
        file: file.to_path_buf(),
        pointer: pointer.map(str::to_string),
        message: message.into(),
    }
}

/// A business name from a title: lower case, words joined by `-`.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(40).collect();
    out.trim_end_matches('-').to_string()
}

/// An environment variable name: upper case letters, digits and single `_`s.
pub(crate) fn env_name(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// The first server URL with its variables filled by their defaults.
pub(crate) fn server_url(doc: &Value) -> Option<String> {
    let s = doc.get("servers")?.as_array()?.first()?;
    let mut url = s.get("url")?.as_str()?.to_string();
    if let Some(vars) = s.get("variables").and_then(Value::as_object) {
        for (k, v) in vars {
            if let Some(d) = v.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{k}}}"), d);
            }
        }
    }
    Some(url)
}

/// Credential header names (lower case), credential query names, and the headers the mapping
/// would send: (header, value with `${VAR}`, which scheme).
pub(crate) type Credentials = (
    BTreeSet<String>,
    BTreeSet<String>,
    Vec<(String, String, String)>,
);

/// Credential headers named by the security schemes, and what the mapping would send.
pub(crate) fn credentials(doc: &Value, env_prefix: &str) -> Credentials {
    let mut headers = BTreeSet::new();
    let mut query = BTreeSet::new();
    let mut out: Vec<(String, String, String)> = Vec::new();
    let Some(schemes) = doc
        .pointer("/components/securitySchemes")
        .and_then(Value::as_object)
    else {
        return (headers, query, out);
    };
    for (name, s) in schemes {
        let kind = s.get("type").and_then(Value::as_str).unwrap_or("");
        let (header, value) = match kind {
            "apiKey" => {
                let n = s
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match s.get("in").and_then(Value::as_str) {
                    Some("header") => {
                        headers.insert(n.to_ascii_lowercase());
                        let var = env_name(&format!("{env_prefix}_{n}"));
                        (n, format!("${{{var}}}"))
                    }
                    Some("query") => {
                        query.insert(n);
                        continue;
                    }
                    _ => continue,
                }
            }
            "http" => {
                headers.insert("authorization".into());
                match s
                    .get("scheme")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase)
                    .as_deref()
                {
                    Some("basic") => (
                        "Authorization".into(),
                        format!("Basic ${{{env_prefix}_BASIC_AUTH}}"),
                    ),
                    _ => (
                        "Authorization".into(),
                        format!("Bearer ${{{env_prefix}_TOKEN}}"),
                    ),
                }
            }
            "oauth2" | "openIdConnect" => {
                headers.insert("authorization".into());
                (
                    "Authorization".into(),
                    format!("Bearer ${{{env_prefix}_TOKEN}}"),
                )
            }
            _ => continue,
        };
        if !out.iter().any(|(h, _, _)| h.eq_ignore_ascii_case(&header)) {
            out.push((header, value, format!("security scheme `{name}` ({kind})")));
        }
    }
    (headers, query, out)
}

/// The backend's OpenAPI document, read and checked for its version.
pub(crate) struct Backend {
    pub file: PathBuf,
    pub doc: std::sync::Arc<Value>,
    pub version: String,
    pub title: String,
    pub api_version: String,
    pub business: String,
    pub env_prefix: String,
}

/// The backend URL: --backend, else the first server, else an environment variable; with a
/// note for the mapping file and the variable to export.
pub(crate) fn backend_url(
    opts: &Options,
    doc: &Value,
    env_prefix: &str,
) -> (String, Option<String>, Option<String>) {
    let server = server_url(doc);
    match (&opts.backend, &server) {
        (Some(b), _) => (b.trim_end_matches('/').to_string(), None, None),
        (None, Some(s)) if s.starts_with("http://") || s.starts_with("https://") => (
            s.trim_end_matches('/').to_string(),
            Some("the document's first server; change it to reach another one".to_string()),
            None,
        ),
        (None, other) => {
            let var = format!("{env_prefix}_URL");
            let why = match other {
                Some(s) => format!("the document's server `{s}` is relative"),
                None => "the document names no server".to_string(),
            };
            (
                format!("${{{var}}}"),
                Some(format!(
                    "{why}: export {var} (or run init with --backend URL)"
                )),
                Some(var),
            )
        }
    }
}
