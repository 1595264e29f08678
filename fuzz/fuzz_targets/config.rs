//! The mapping-file + OpenRPC loader and compiler (`portico::config::load`), from bytes.
//! Input: a mapping file (YAML), a NUL byte, then an OpenRPC document; they are written as
//! `mapping.yaml` and `api.openrpc.json` into a private temporary folder and loaded. Loading
//! never panics: every problem is a diagnostic, and every tool it loads has a `tools/list`
//! entry with its name and an object `inputSchema`. (Seeds name `openrpc: api.openrpc.json`.)
#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;

static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
    let d = std::env::temp_dir().join(format!("portico-fuzz-config-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&d);
    d
});

fuzz_target!(|data: &[u8]| {
    let (mapping, openrpc) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let dir = &*DIR;
    let file = dir.join("mapping.yaml");
    if std::fs::write(&file, mapping).is_err()
        || std::fs::write(dir.join("api.openrpc.json"), openrpc).is_err()
    {
        return;
    }
    match portico::config::load(std::slice::from_ref(&file)) {
        Ok(g) => {
            // A loaded tool is servable: `tools/list` names it and carries an object schema.
            // Its descriptor text reads back (load checks it).
            for (name, tool) in &g.tools {
                let descriptor = tool.descriptor.value();
                assert_eq!(
                    descriptor.get("name").and_then(|n| n.as_str()),
                    Some(name.as_str())
                );
                assert!(descriptor.get("inputSchema").is_some_and(|s| s.is_object()));
            }
        }
        Err(diags) => assert!(
            !diags.is_empty(),
            "a refused configuration with no diagnostic"
        ),
    }
});
