//! `portico init --openapi`: a backend's OpenAPI 3.x document turned into an OpenRPC document
//! and a plain-binding mapping file that `portico check` accepts and `serve` serves as written.
//! It never fetches anything over the network, never crashes on a document, and never leaves a
//! half-written output folder: unmappable operations are skipped and listed with their pointer.

pub mod common;
pub mod convert;
pub mod operations;
pub mod pair;
pub mod protocol;
pub mod schema_ids;
pub mod source;
pub mod write;

use common::{Backend, backend_url, credentials, env_name, fail, slug};
pub use common::{InitError, Options, Report};
use convert::Schemas;
use operations::{Context, ToolPlan};
use serde_json::Value;
use source::{Place, Sources};
use std::collections::HashSet;
use std::path::Path;

/// Runs `init`: reads the document, plans the tools, writes the folder.
pub fn run(opts: &Options) -> Result<Report, InitError> {
    let mut sources = Sources::default();
    let api = open_backend(&opts.openapi, &mut sources)?;
    match (&opts.openrpc, opts.binding.as_deref()) {
        (Some(rpc), _) => protocol::run(opts, rpc, &api),
        (None, None | Some("plain")) => run_plain(opts, api, sources),
        (None, Some(b)) => Err(fail(
            &opts.openapi,
            None,
            format!(
                "--binding {b} needs the protocol's OpenRPC document (--openrpc FILE): only the plain binding is generated from an OpenAPI document alone"
            ),
        )),
    }
}

/// Reads the OpenAPI document and names the business after its title.
fn open_backend(path: &Path, sources: &mut Sources) -> Result<Backend, InitError> {
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
    Ok(Backend {
        file,
        doc,
        version,
        title,
        api_version,
        business,
        env_prefix,
    })
}

/// Without `--openrpc`: one tool per operation, an OpenRPC document written for them.
fn run_plain(opts: &Options, api: Backend, mut sources: Sources) -> Result<Report, InitError> {
    let Backend {
        file,
        doc,
        version,
        title,
        api_version,
        business,
        env_prefix,
    } = api;
    let path = &opts.openapi;
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

    let (backend, note, backend_env) = backend_url(opts, &doc, &env_prefix);

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
        binding: ("plain".into(), "no --openrpc".into()),
        paired: Vec::new(),
        todos: Vec::new(),
    })
}
