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
    let mut diagnostics = Vec::new();
    let mut tools = 0;
    let mut files = docs.len();
    for d in &docs {
        tools += check_openrpc(d, &mut diagnostics);
    }
    if !mappings.is_empty() {
        files += config::compile::mapping_files(&mappings)
            .map(|f| f.len())
            .unwrap_or(0);
        match config::load(&mappings) {
            Ok(g) => {
                tools += g.tools.len();
                diagnostics.extend(g.warnings);
            }
            Err(ds) => diagnostics.extend(ds),
        }
    }
    Report {
        diagnostics,
        tools,
        files,
    }
}
