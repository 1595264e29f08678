//! The jq body transforms on arbitrary input documents. The programs are fixed (mappings are
//! trusted configuration): every transform of the demo mappings and of
//! `mappings/conformance.yaml`, plus a list covering the native subset. Input: two bytes choose
//! the program, one byte the status, then a JSON document (`.`; its `$args` / `$meta` members,
//! when present, are the globals). A run never panics, and when the native evaluator answers
//! and jaq answers too, they agree, whether or not the reader vouched that the document holds no
//! integer past i64.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use portico::translate::transform::{Transform, Vars3};
use serde_json::json;

const EXTRA: &[&str] = &[
    ".",
    ".a.b[2].c",
    ".a.b[-1]",
    "[.a.b[]?]",
    "{x: .s, y: [1, 2.5, \"z\", null, true, false]}",
    "{(.s): 1}",
    ".a.b[1:]",
    ".s[1:4]",
    ". | length",
    "[.[]? | select(type == \"number\")]",
    "[.[]? | numbers?]",
    "with_entries(select(.value != null))",
    "to_entries",
    "from_entries",
    "\"x=\\(.t) n=\\(.n) i=\\(1 + 2)\"",
    "$args.service_id",
    "{status: $status, meta: $meta}",
    "keys",
    "has(0)",
    "has(\"a\")",
    ".x + 1",
    ".x - .y",
    ".x * .y",
    ".x / .y",
    ".x % .y",
    ".s + .t",
    ".l + .m",
    ".o + .p",
    ".x == .y",
    ".x < .y",
    ".x >= .y",
    ".x > 3 and .s == \"a\"",
    ".z or false",
    ".missing // \"d\"",
    ".x | not",
    ".l | map(. + 1)",
    ".l | add",
    ".name | split(\"-\")",
    ".name | split(\"-\")[1:] | join(\"/\")",
    ".l | join(\",\")",
    ".name | ascii_downcase",
    ".name | ascii_upcase",
    ".name | startswith(\"a\")",
    ".name | ltrimstr(\"a\") | rtrimstr(\"z\")",
    ".code | tonumber",
    ".code[1:3] | tonumber",
    ".code | .[:2] | tonumber",
    "(.s[.x:] | tonumber) * 60 + (.s[:.y] | tonumber)",
    "{a: .x, b: .s, c: {d: .y}, a2: .l}",
    ".code | tostring",
    "tostring",
    "tojson",
    ".name as $n | {n: $n, l: ($n | length)}",
    "if .t then .a elif .u then .b else .c end",
    "[.l[]? | select(. > 2)] | first // null",
    "def f: {k: .a, v: (.b // 0)}; [.items[]? | f]",
    "[.[]?] | sort",
    "[.[]?] | unique",
    "[.[]?] | min",
    "[.[]?] | max",
    "type",
    "[paths]",
    ".a |= 1",
    "[.[]? | tostring]",
    "floor",
    "(.x // 0) | . * 2 | floor",
    "[limit(3; .[]?)]",
    "any",
    "all",
    "[.[]? | strings] | join(\"\")",
    "{a: .a} + {b: .b}",
    "[.a, .b] | @base64",
    "test(\"a\")",
];

static PROGRAMS: LazyLock<Vec<Transform>> = LazyLock::new(|| {
    let mut out = Vec::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let addr = "127.0.0.1:9".parse().ok();
    let demo = addr.and_then(|a| portico::demo::write_files(a, Some(a)).ok());
    let mut dirs = vec![root.join("mappings/conformance.yaml")];
    dirs.extend(demo.iter().map(|d| d.join("mappings")));
    for d in dirs {
        if let Ok(g) = portico::config::load(&[d]) {
            for tool in g.tools.values() {
                out.extend(tool.transforms().into_iter().map(|(_, t)| t.clone()));
            }
        }
    }
    if let Some(d) = demo {
        let _ = std::fs::remove_dir_all(d);
    }
    out.extend(EXTRA.iter().filter_map(|c| Transform::compile(c).ok()));
    out
});

fuzz_target!(|data: &[u8]| {
    assert!(
        PROGRAMS.len() > EXTRA.len(),
        "the mapping transforms did not load"
    );
    if data.len() < 3 {
        return;
    }
    let pick = usize::from(u16::from_le_bytes([data[0], data[1]])) % PROGRAMS.len();
    let status = 100 + u16::from(data[2]) * 2;
    // Read as a backend body was read: `narrow` spares the answer's walk for an integer past
    // i64 (`Transform::run_read`), so both routes are checked against jaq.
    let Ok((doc, narrow)) = portico::json_text::from_slice_narrow(&data[3..]) else {
        return;
    };
    let empty = json!({});
    let args = doc.get("$args").unwrap_or(&doc);
    let meta = doc.get("$meta").unwrap_or(&empty);
    let t = &PROGRAMS[pick];
    let vars = Vars3 { args, status, meta };
    let jaq = t.run_jaq(&doc, vars);
    let got = t.run(&doc, vars);
    let read = t.run_read(&doc, narrow, vars);
    // And as the response path reads it now: in place, into a borrowed `Doc`, which must
    // stand for the same value (and the same `narrow`) as the tree read above.
    let Ok((body, body_narrow)) = portico::json_text::read_borrowed(&data[3..]) else {
        panic!("read_borrowed refused what from_slice_narrow read: {doc}");
    };
    assert_eq!(body.to_value(), doc, "read_borrowed's value");
    assert_eq!(body_narrow, narrow, "read_borrowed's narrow flag on {doc}");
    let in_place = t.run_doc(&body, body_narrow, vars);
    if let Ok(want) = &jaq {
        assert_eq!(
            in_place.as_ref().ok(),
            Some(want),
            "`{}` on {doc} (read in place)",
            t.source()
        );
        assert_eq!(got.as_ref().ok(), Some(want), "`{}` on {doc}", t.source());
        assert_eq!(
            read.as_ref().ok(),
            Some(want),
            "`{}` on {doc} (read narrow: {narrow})",
            t.source()
        );
    }
});
