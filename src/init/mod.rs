//! `portico init --openapi`: a backend's OpenAPI 3.x document turned into an OpenRPC document
//! and a plain-binding mapping file that `portico check` accepts and `serve` serves as written.
//! It never fetches anything over the network, never crashes on a document, and never leaves a
//! half-written output folder: unmappable operations are skipped and listed with their pointer.

pub mod convert;
pub mod operations;
pub mod source;
pub mod write;

use convert::Schemas;
use operations::{Context, Filter, ToolPlan};
use serde_json::Value;
use source::{Place, Sources};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// What `init` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub openapi: PathBuf,
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
}

/// Why nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", pointer.as_deref().map(|p| format!(" ({p})")).unwrap_or_default())]
pub struct InitError {
    pub file: PathBuf,
    pub pointer: Option<String>,
    pub message: String,
}

fn fail(file: &Path, pointer: Option<&str>, message: impl Into<String>) -> InitError {
    InitError {
        file: file.to_path_buf(),
        pointer: pointer.map(str::to_string),
        message: message.into(),
    }
}

/// A business name from a title: lower case, words joined by `-`.
fn slug(s: &str) -> String {
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
fn env_name(raw: &str) -> String {
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
fn server_url(doc: &Value) -> Option<String> {
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
type Credentials = (
    BTreeSet<String>,
    BTreeSet<String>,
    Vec<(String, String, String)>,
);

/// Credential headers named by the security schemes, and what the mapping would send.
fn credentials(doc: &Value, env_prefix: &str) -> Credentials {
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

/// Runs `init`: reads the document, plans the tools, writes the folder.
pub fn run(opts: &Options) -> Result<Report, InitError> {
    let path = &opts.openapi;
    let mut sources = Sources::default();
    let (file, doc) = sources.open(path).map_err(|e| {
        fail(
            path,
            None,
            format!("not a readable JSON or YAML document: {e}"),
        )
    })?;
    if let Some(v) = doc.get("swagger") {
        return Err(fail(
            path,
            Some("/swagger"),
            format!(
                "this is a Swagger {} document; portico reads OpenAPI 3.0 and later: convert it first (e.g. `npx swagger2openapi`)",
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            ),
        ));
    }
    let version = match doc.get("openapi") {
        Some(Value::String(v)) if v.starts_with("3.") => v.clone(),
        Some(v) => {
            return Err(fail(
                path,
                Some("/openapi"),
                format!("unsupported OpenAPI version {v}; portico reads 3.0, 3.1 and 3.2"),
            ));
        }
        None => {
            return Err(fail(
                path,
                None,
                "not an OpenAPI document: it has no `openapi` version field",
            ));
        }
    };
    if !doc.is_object() || doc.get("paths").is_some_and(|p| !p.is_object()) {
        return Err(fail(path, Some("/paths"), "`paths` must be an object"));
    }
    let title = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let api_version = doc
        .pointer("/info/version")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("api")
        .to_string();
    let business = match slug(&title) {
        s if s.is_empty() => slug(&stem),
        s => s,
    };
    let business = if business.is_empty() {
        "api".to_string()
    } else {
        business
    };
    let env_prefix = env_name(&business);
    let (cred_headers, cred_query, creds) = credentials(&doc, &env_prefix);

    let root = Place {
        file: file.clone(),
        pointer: String::new(),
    };
    let mut schemas = Schemas::new(&mut sources);
    let mut cx = Context {
        schemas: &mut schemas,
        credential_headers: cred_headers,
        credential_query: cred_query,
        filter: opts.filter.clone(),
        names: HashSet::new(),
    };
    let (tools, skipped) = operations::read_all(&mut cx, &doc, &root);
    schemas.finish();
    let webhooks = doc
        .get("webhooks")
        .and_then(Value::as_object)
        .map_or(0, |w| w.len());
    let shown = |p: &Place| {
        let f = p
            .file
            .strip_prefix(file.parent().unwrap_or(Path::new("")))
            .unwrap_or(&p.file);
        let ptr = if p.pointer.is_empty() {
            "/"
        } else {
            &p.pointer
        };
        format!("{}#{ptr}", f.display())
    };
    let mut skipped_lines: Vec<String> = skipped
        .iter()
        .map(|s| format!("{} ({}): {}", s.what, shown(&s.place), s.reason))
        .collect();
    if webhooks > 0 {
        skipped_lines.push(format!(
            "{webhooks} webhook(s) (#/webhooks): requests the API sends, not tools"
        ));
    }
    let warnings: Vec<String> = schemas
        .findings
        .iter()
        .map(|f| format!("{}: {}", shown(&f.place), f.message))
        .collect();
    if tools.is_empty() {
        let why = if skipped_lines.is_empty() {
            "the document has no operation under `paths` (or none passed --include/--exclude)"
                .to_string()
        } else {
            format!(
                "no operation can become a tool: {}",
                skipped_lines.join("; ")
            )
        };
        return Err(fail(path, Some("/paths"), why));
    }

    // The backend URL: --backend, else the first server, else an environment variable.
    let server = server_url(&doc);
    let (backend, note, backend_env) = match (&opts.backend, &server) {
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
    };

    let openrpc_file = format!("{business}.openrpc.json");
    let mapping_file = format!("{business}.yaml");
    let rpc = write::openrpc(
        if title.is_empty() { &business } else { &title },
        &api_version,
        &tools,
        &schemas.defs,
    );
    let source_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("openapi")
        .to_string();
    let head = write::MappingHead {
        business: &business,
        source: &source_name,
        openapi_version: &version,
        title: &title,
        openrpc_file: &openrpc_file,
        backend: &backend,
        backend_note: note,
        credentials: creds,
        skipped: skipped_lines.clone(),
    };
    let yaml = write::mapping(&head, &tools);
    let files = vec![
        (mapping_file.clone(), yaml),
        (openrpc_file.clone(), rpc),
        (
            write::SCHEMA_FILE.to_string(),
            crate::mapping_schema::text(),
        ),
    ];
    write::publish(&opts.out, &files).map_err(|e| fail(&opts.out, None, e))?;
    Ok(Report {
        mapping: opts.out.join(mapping_file),
        openrpc: opts.out.join(openrpc_file),
        tools: tools.iter().map(|t: &ToolPlan| t.name.clone()).collect(),
        skipped: skipped_lines,
        warnings,
        notes: tools
            .iter()
            .flat_map(|t| t.notes.iter().map(move |n| format!("{}: {n}", t.name)))
            .collect(),
        backend_env,
    })
}
