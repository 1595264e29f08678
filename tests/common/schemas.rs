//! The protocols' own JSON Schemas, read from the fetched upstream folder, as a validator's
//! retriever: tests validate what portico serves against the published schemas with it.

use super::upstream;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Resolves `https://<authority>/schemas/<file>` to `<folder>/<file>`. Files the upstream
/// folder does not hold are replaced by `{}` and recorded, so the test can say which parts of
/// the schema could not be checked.
#[derive(Clone)]
pub struct Files {
    prefix: &'static str,
    folder: PathBuf,
    missing: Arc<Mutex<BTreeSet<String>>>,
}

impl jsonschema::Retrieve for Files {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let rel = uri
            .as_str()
            .strip_prefix(self.prefix)
            .ok_or_else(|| format!("unexpected schema URI {uri}"))?;
        let path = self.folder.join(rel);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(serde_json::from_str(&text)?),
            Err(_) => {
                self.missing.lock().unwrap().insert(rel.to_string());
                // Permissive stand-ins for every definition a profile schema points into.
                Ok(
                    json!({"$defs": {"base": {}, "business_schema": {}, "platform_schema": {},
                                    "response_schema": {}}}),
                )
            }
        }
    }
}

/// USP's `usp.json` restricts registry keys to `^[a-z][a-z0-9]*(\.[a-z][a-z0-9]*)+$`, which
/// rejects the hyphen of the names its own specification mandates (`dev.usp-protocol.services`,
/// §8.2 example included). Exactly that error is tolerated; any other fails the test.
fn upstream_usp_pattern_defect(e: &str) -> bool {
    e.starts_with("\"dev.usp-protocol.")
        && e.contains("does not match \"^[a-z][a-z0-9]*(\\.[a-z][a-z0-9]*)+$\"")
        && (e.ends_with(" at /usp/services") || e.ends_with(" at /usp/capabilities"))
}

/// Validates `doc` against `<entry>` of the upstream schemas; returns the files that were absent.
pub fn validate(files: &Files, entry: &str, doc: &Value) -> BTreeSet<String> {
    let schema = json!({ "$ref": format!("{}{entry}", files.prefix) });
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .with_retriever(files.clone())
        .build(&schema)
        .unwrap_or_else(|e| panic!("the upstream profile schema does not compile: {e}"));
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .filter(|e| !upstream_usp_pattern_defect(e))
        .collect();
    assert!(errors.is_empty(), "{doc:#}\n{}", errors.join("\n"));
    files.missing.lock().unwrap().clone()
}

pub fn ucp_files() -> Files {
    Files {
        prefix: "https://ucp.dev/schemas/",
        folder: upstream("ucp/source/schemas"),
        missing: Arc::default(),
    }
}

pub fn usp_files() -> Files {
    Files {
        prefix: "https://usp-protocol.dev/schemas/",
        folder: upstream("usp/schemas"),
        missing: Arc::default(),
    }
}
