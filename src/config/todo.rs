//! The `todo:` section of a mapping file: OpenRPC methods `portico init --openrpc` could not
//! pair with a backend operation. Each entry is an error naming its candidates; it never serves one.

use super::diag::{Diagnostic, locate_yaml};
use super::mapping::MappingFile;
use super::openrpc::Document;
use std::path::Path;

/// The message every TODO diagnostic starts with (`init` counts them by it).
pub const PREFIX: &str = "TODO: method";

/// One error per `todo:` entry, at its line, with the candidates `init` considered.
pub fn check(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    doc: &Document,
    diags: &mut Vec<Diagnostic>,
) {
    for (name, t) in &spec.todo {
        let line = locate_yaml(text, &["todo", name]);
        if doc.method(name).is_none() {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("todo: `{name}` is not a method of {}", doc.path.display()),
                )
                .line(line)
                .at(format!("todo.{name}"))
                .hint("delete the entry"),
            );
            continue;
        }
        if spec.tools.contains_key(name) {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("`{name}` is both under `tools:` and under `todo:`"),
                )
                .line(line)
                .at(format!("todo.{name}"))
                .hint("delete the `todo:` entry now that the tool is mapped"),
            );
            continue;
        }
        let reason = t
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let candidates = if t.candidates.is_empty() {
            "no backend operation came close".to_string()
        } else {
            format!("candidates: {}", t.candidates.join("; "))
        };
        diags.push(
            Diagnostic::error(
                file,
                format!("{PREFIX} `{name}` is not paired with a backend operation{reason}, so it is not served"),
            )
            .line(line)
            .at(format!("todo.{name}"))
            .hint(format!(
                "{candidates}. Move it under `tools:` with `http: METHOD /path`, or delete the entry to leave the method unserved"
            )),
        );
    }
}
