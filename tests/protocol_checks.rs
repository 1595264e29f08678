//! `portico check` on what a published protocol file leaves open: a USP or UCP business whose
//! results would carry an empty protocol version is refused with the line and the fix.

use std::path::PathBuf;

/// A folder with an OpenRPC document without `info.version` and a mapping of `binding`.
fn files(binding: &str, protocol: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "portico-protocol-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let doc = r#"{"openrpc": "1.3.2", "info": {"title": "no version"}, "methods": [
      {"name": "get_thing", "paramStructure": "by-name", "params": [],
       "result": {"name": "thing", "schema": {"type": "object"}}}]}"#;
    std::fs::write(dir.join("svc.openrpc.json"), doc).unwrap();
    let mapping = format!(
        "business: svc\nbinding: {binding}\nopenrpc: svc.openrpc.json\n{protocol}backend:\n  url: http://127.0.0.1:9/api\ntools:\n  get_thing:\n    http: GET /thing\n"
    );
    std::fs::write(dir.join("svc.yaml"), mapping).unwrap();
    dir
}

fn check(dir: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .arg(dir.join("svc.yaml"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn an_empty_result_version_is_refused_with_its_fix() {
    for (binding, root) in [("ucp", "ucp"), ("usp", "usp")] {
        let (ok, text) = check(&files(binding, ""));
        assert!(!ok, "{binding}: {text}");
        assert!(
            text.contains("svc.yaml:2")
                && text.contains(&format!(
                    "the `{root}.version` of every result would be empty"
                ))
                && text.contains("hint: set the protocol version the business speaks"),
            "{binding}: {text}"
        );
        // `protocol.version` set: the same files check clean.
        let (ok, text) = check(&files(binding, "protocol:\n  version: \"2026-01-11\"\n"));
        assert!(ok, "{binding}: {text}");
    }
    // The plain binding has no envelope: nothing to say.
    let (ok, text) = check(&files("plain", ""));
    assert!(ok, "{text}");
}
