//! VRP receipt v1 conformance vectors (`examples/conformance/receipt/01…06`), read in place from
//! `../shared/upstream/vrp`: each verifies to its expected per-layer result at the vector's `now`.

use portico::vrp;
use serde_json::Value;
use std::path::PathBuf;

#[test]
fn every_receipt_vector_gives_its_expected_result() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/upstream/vrp/examples/conformance/receipt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("VRP vectors missing at {} ({e}): /work/shared/upstream must sit next to the crate", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "01…06");
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let now = vrp::parse_time(v["now"].as_str().unwrap()).unwrap();
        let got = vrp::verify_receipt(&v["receipt"], &v["jwks"], now);
        assert_eq!(got, v["expected"], "{}", f.display());
    }
}
