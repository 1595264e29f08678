//! `scripts/check-deps`: the modules of src/ import each other in one direction only, and the
//! checker really finds cycles (in a small crate written here) through every kind of path.

use std::path::{Path, PathBuf};
use std::process::Command;

fn check_deps(src: Option<&Path>) -> (i32, String) {
    let mut cmd = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-deps"));
    if let Some(src) = src {
        cmd.arg("--src").arg(src);
    }
    let out = cmd.output().expect("scripts/check-deps runs (python3)");
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A throwaway crate source folder: `files` as (path under src/, text).
fn crate_src(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir()
        .join(format!("portico-layering-{name}-{}", std::process::id()))
        .join("src");
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("create folder");
        std::fs::write(&p, text).expect("write source");
    }
    dir
}

#[test]
fn src_has_no_import_cycle() {
    let (code, err) = check_deps(None);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no import cycle in src/"), "{err}");
}

#[test]
fn a_cycle_through_use_super_and_inline_paths_is_reported_with_its_loop() {
    let src = crate_src(
        "cycle",
        &[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod util;\n"),
            ("util.rs", "pub fn leaf() {}\n"),
            // a -> b through a `use` tree, b -> a through an inline path in a function body.
            (
                "a/mod.rs",
                "pub mod inner;\nuse crate::{b::{self, B}, util};\npub struct A;\n",
            ),
            ("a/inner.rs", "use super::A;\n"),
            (
                "b.rs",
                "pub struct B;\n// crate::util in a comment is no edge\npub fn f() { let _ = crate::a::A; }\n",
            ),
        ],
    );
    let (code, err) = check_deps(Some(&src));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("import cycle among 2 module files: crate::a, crate::b"),
        "{err}"
    );
    assert!(
        err.contains("crate::a -> crate::b  (src/a/mod.rs:2)"),
        "{err}"
    );
    assert!(err.contains("crate::b -> crate::a  (src/b.rs:3)"), "{err}");
    // A child using its parent, and anything using a leaf, is no cycle on its own.
    assert_eq!(err.matches("import cycle among").count(), 1, "{err}");
}

#[test]
fn unit_test_modules_and_one_way_imports_pass() {
    let src = crate_src(
        "clean",
        &[
            ("lib.rs", "pub mod high;\npub mod low;\n"),
            (
                "low.rs",
                "pub struct L;\n#[cfg(test)]\nmod tests {\n    use crate::high::H;\n}\n",
            ),
            ("high.rs", "use crate::low::L;\npub struct H(pub L);\n"),
        ],
    );
    let (code, err) = check_deps(Some(&src));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(3 module files, 1 edges)"), "{err}");
}
