//! `portico check`: loads and compiles mapping files and OpenRPC documents and reports every
//! problem with file, line or pointer and a fix hint. It never starts servers or calls backends.

use crate::config::diag::Diagnostic;
use crate::config::schema::{Bundler, Sources};
use crate::config::{self, openrpc};
use std::path::PathBuf;

/// Result of a check: the report lines and whether any error was found.
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub tools: usize,
    pub files: usize,
    /// What the served surface changes of the published files (request variants), one line each.
    pub overrides: Vec<String>,
}

impl Report {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

fn is_openrpc(p: &std::path::Path) -> bool {
    p.is_file() && p.extension().and_then(|e| e.to_str()) == Some("json")
}

/// Checks OpenRPC documents on their own: structure and every schema reference.
fn check_openrpc(path: &std::path::Path, diags: &mut Vec<Diagnostic>) -> usize {
    let mut sources = Sources::default();
    let doc = match openrpc::load(path, &mut sources) {
        Ok(d) => d,
        Err(ds) => {
            diags.extend(ds);
            return 0;
        }
    };
    for m in &doc.methods {
        let mut nodes: Vec<(&serde_json::Value, &str)> = m
            .params
            .iter()
            .map(|p| (&p.schema, p.pointer.as_str()))
            .collect();
        if let Some((s, p)) = &m.result {
            nodes.push((s, p.as_str()));
        }
        for (node, pointer) in nodes {
            let (schema, unresolved) = Bundler::new(&mut sources).bundle(node, &doc.uri, pointer);
            for u in unresolved {
                diags.push(
                    Diagnostic::error(
                        path,
                        format!("unresolvable `$ref: {}` ({})", u.reference, u.reason),
                    )
                    .line(doc.line_of(Some(&m.name), &u.pointer))
                    .at(u.pointer)
                    .hint(
                        "fix the reference, or check it through a mapping file with `schema_ids`",
                    ),
                );
            }
            if let Err(e) = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&schema)
            {
                diags.push(
                    Diagnostic::error(path, format!("schema does not compile: {e}"))
                        .line(doc.line_of(Some(&m.name), pointer))
                        .at(pointer.to_string()),
                );
            }
        }
    }
    doc.methods.len()
}

/// Checks every path (mapping files, folders of them, or OpenRPC `.json` documents).
pub fn run(paths: &[PathBuf]) -> Report {
    let (docs, mappings): (Vec<PathBuf>, Vec<PathBuf>) =
        paths.iter().cloned().partition(|p| is_openrpc(p));
    let (facades, mappings): (Vec<PathBuf>, Vec<PathBuf>) = mappings
        .into_iter()
        .partition(|p| p.is_file() && crate::facade::config::is_facade_file(p));
    let mut diagnostics = Vec::new();
    let mut overrides = Vec::new();
    let mut tools = 0;
    let mut files = docs.len();
    // Facade mappings (reverse path), given or inside the given folders.
    let facades_seen = files;
    for f in facades.into_iter().chain(
        mappings
            .iter()
            .flat_map(|m| crate::facade::config::in_folder(m)),
    ) {
        files += 1;
        if let Err(ds) = crate::facade::config::load(&f) {
            diagnostics.extend(ds);
        }
    }
    for d in &docs {
        tools += check_openrpc(d, &mut diagnostics);
    }
    let found = config::compile::mapping_files(&mappings).map_or(0, |f| f.len());
    // Folders that hold only facade mappings have no business mapping to load.
    let only_facades = found == 0 && files > facades_seen;
    if !mappings.is_empty() && !only_facades {
        files += found;
        match config::load(&mappings) {
            Ok(g) => {
                tools += g.tools.len();
                diagnostics.extend(g.warnings);
                let mut names: Vec<&String> = g.tools.keys().collect();
                names.sort();
                for name in names {
                    if let Some((op, changed)) =
                        g.tools.get(name).and_then(|t| t.request_variant.as_ref())
                    {
                        overrides.push(format!(
                            "tool `{name}` serves the `{op}` request variant of its params ({changed} propert{} changed by `ucp_request`; `request_variant: none` serves them as published)",
                            if *changed == 1 { "y" } else { "ies" }
                        ));
                    }
                    if let Some(t) = g.tools.get(name) {
                        overrides.extend(t.schema_patches.iter().cloned());
                    }
                }
            }
            Err(ds) => diagnostics.extend(ds),
        }
    }
    Report {
        diagnostics,
        tools,
        files,
        overrides,
    }
}
