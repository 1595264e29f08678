//! `portico schema`: the JSON Schema of mapping files. The repository's copy is current, every
//! mapping file in the repository validates against it and names it for editors, and it refuses
//! what `check` refuses at the key level (unknown keys, wrong types).

use serde_json::Value;
use std::path::{Path, PathBuf};

const BIN: &str = env!("CARGO_BIN_EXE_portico");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn printed_schema() -> Value {
    let o = std::process::Command::new(BIN)
        .arg("schema")
        .output()
        .expect("portico runs");
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).expect("the schema is JSON")
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .expect("the schema compiles")
}

fn mapping_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [
        "mappings",
        "mappings/shop",
        "benches/fixtures",
        "tests/fixtures/gateway",
        "tests/fixtures/ask",
        "tests/fixtures/upstream",
    ] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn yaml(p: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn the_repository_copy_is_what_portico_schema_prints() {
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schemas/mapping.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        committed,
        printed_schema(),
        "run `portico schema > schemas/mapping.schema.json`"
    );
}

#[test]
fn every_mapping_in_the_repository_validates_and_the_shipped_ones_name_the_schema() {
    let v = validator(&printed_schema());
    let files = mapping_files();
    assert!(files.len() >= 14, "{files:?}");
    for f in &files {
        let doc = yaml(f);
        let errors: Vec<String> = v
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", f.display());
    }
    for f in files
        .iter()
        .filter(|f| f.starts_with(root().join("mappings")) || f.ends_with("raw.yaml"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        let first = text.lines().next().unwrap_or("");
        let target = first
            .strip_prefix("# yaml-language-server: $schema=")
            .unwrap_or_else(|| panic!("{}: first line is {first}", f.display()));
        let named = f.parent().unwrap().join(target);
        assert!(
            named.ends_with("schemas/mapping.schema.json") && named.exists(),
            "{}: {target}",
            f.display()
        );
    }
}

#[test]
fn unknown_keys_and_wrong_types_are_refused_with_their_place() {
    let v = validator(&printed_schema());
    let mut doc = yaml(&root().join("mappings/demo-spa.yaml"));
    doc["tools"]["usp_services_get"]["reslt"] = Value::String(".x".into());
    let errs: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{}", e.instance_path()))
        .collect();
    assert!(
        errs.iter().any(|p| p == "/tools/usp_services_get"),
        "{errs:?}"
    );
    let mut doc = yaml(&root().join("mappings/demo-spa.yaml"));
    doc["backend"]["timeout"] = serde_json::json!(5);
    assert!(!v.is_valid(&doc));
    let mut facade = yaml(&root().join("mappings/usp-facade.yaml"));
    assert!(v.is_valid(&facade));
    facade["upstream"]["nope"] = Value::Bool(true);
    assert!(!v.is_valid(&facade));
}
