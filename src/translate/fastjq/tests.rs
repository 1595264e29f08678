//! Unit and property tests of the native jq subset: every answer equals jaq's, or the run
//! falls back. Test-only code.

use super::ast::*;
use super::*;
use crate::json_text;
use crate::translate::transform::{Transform, Vars3};
use jaq_core::ops::Math;
use proptest::prelude::*;
use serde_json::json;
use std::borrow::Cow;

fn args() -> Value {
    json!({"service_id": "MASSAGE-60", "n": 3, "tags": ["a", "b"]})
}

fn meta() -> Value {
    json!({"idempotency_key": "k-1"})
}

/// jaq's answer (`Err` for a run-time error).
fn reference(code: &str, input: &Value) -> Result<Option<Value>, String> {
    let t = Transform::compile(code).expect("the reference compiles it");
    let (a, m) = (args(), meta());
    t.run_jaq(
        input,
        Vars3 {
            args: &a,
            status: 201,
            meta: &m,
        },
    )
    .map_err(|e| e.message)
}

fn native(code: &str, input: &Value) -> Result<Option<Value>, Stop> {
    let p = Program::compile(code).unwrap_or_else(|| panic!("`{code}` is in the subset"));
    p.run(input, [&args(), &Value::from(201), &meta()])
}

/// The native answer equals jaq's; when jaq fails, the native run hands over to jaq.
fn same(code: &str, input: Value) {
    match (reference(code, &input), native(code, &input)) {
        (Ok(want), got) => assert_eq!(got, Ok(want), "`{code}` on {input}"),
        (Err(e), got) => assert_eq!(
            got,
            Err(Stop::Fallback),
            "`{code}` on {input}: jaq says {e}"
        ),
    }
}

/// Literal text in an output is lent from the program, not copied (no allocation per
/// output), and the answers are jaq's.
#[test]
fn literals_in_outputs_borrow_from_the_program() {
    for code in [
        r#"{state: "available", n: 1, l: [1, "x"], o: {"k": "v"}}"#,
        r#"[.[] | {s: "t", v: .}]"#,
        r#""lit""#,
    ] {
        same(code, json!([1, 2]));
    }
    let p = Program::compile(r#"[.[] | {state: "available", v: .}]"#).expect("in the subset");
    let (a, m) = (args(), meta());
    let input = Doc::from_owned(json!([1, 2]));
    let out = p
        .run_docs(&input, [&a, &m], Doc::Null)
        .expect("runs natively")
        .expect("one output");
    let Doc::Arr(items) = &out else {
        panic!("an array: {out:?}")
    };
    assert_eq!(items.len(), 2);
    for item in items {
        assert!(
            matches!(
                item.get("state"),
                Some(Doc::Str(Cow::Borrowed("available")))
            ),
            "{item:?}"
        );
    }
}

/// Found by the `transform` fuzz target in a 10-minute run: jaq reads a negative number
/// string with a leading zero as 0, where the native `tonumber` read -1111111111151110.
/// Such strings are left to jaq, so the answer is jaq's.
#[test]
fn a_negative_number_string_with_a_leading_zero_is_left_to_jaq() {
    for s in ["-01111111111151110", "-01", "-00"] {
        let input = json!({"x": "c", "code": s});
        assert_eq!(
            native(".code | tonumber", &input),
            Err(Stop::Fallback),
            "{s}"
        );
        assert!(reference(".code | tonumber", &input).is_ok(), "{s}");
    }
    // The forms the native evaluator keeps still equal jaq.
    for s in [
        "-1",
        "09",
        "0",
        "-4",
        "-10",
        "000123",
        "123456789012345678",
        "999999999999999999",
        "-999999999999999999",
    ] {
        same(".code | tonumber", json!({"code": s}));
    }
    // Other text is jaq's to read (or to refuse).
    for s in ["+5", "1a", "-", "", " 1", "1234567890123456789", "１"] {
        let input = json!({"code": s});
        match native(".code | tonumber", &input) {
            Err(Stop::Fallback) => {}
            got => panic!("`{s}`: the native side answered {got:?}"),
        }
    }
}

/// Found by the `transform` fuzz target in its second 10-minute run: `add` over an
/// integer past i64::MAX kept it exact natively, jaq answers a float. Left to jaq now.
#[test]
fn adding_an_integer_past_i64_is_left_to_jaq() {
    let input = json!({"l": [11111111111111111111u64], "n": 11111111111111111111u64});
    for code in [".l | add", "null + .n", ".n + null"] {
        assert_eq!(native(code, &input), Err(Stop::Fallback), "{code}");
        assert!(reference(code, &input).is_ok(), "{code}");
    }
    same(".l | add", json!({"l": [1, 2.5, null]}));
    same("null + .n", json!({"n": 7}));
}

/// The direct route for single-output expressions (`Eval::val`): borrowed paths, string
/// sums built from borrowed text, slices inside paths, pipes fed once, builtins, and the
/// cases it hands to the general evaluator (iteration, `?`, `//`, local variables). Every
/// answer must be jaq's, and natively (`same` fails on a needless hand-over to jaq).
#[test]
fn single_output_expressions_match_jaq() {
    let doc = json!({
        "l": [{"free": true, "id": "a", "n": 2}, {"free": false, "id": "b", "n": 5}],
        "small": {"a": 1, "b": 2, "s": "x"},
        "t": "2026-12-01T09:30",
        "u": "héllo wörld",
        "nul": null,
    });
    let defs = "def lisbon: if . >= \"2027-03-28T01:00\" then . + \":00+01:00\" else . + \":00+00:00\" end; \
                def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber); \
                def iso: \"PT\" + tostring + \"M\";";
    for code in [
        ".t | lisbon",
        ".t | minutes",
        "(.t | minutes) - 60 | iso",
        "[.l[] | select(.free) | {id: .id, at: (.t? // \"none\"), k: $args.service_id}]",
        "{a: .small.a, s: (.small.s + .small.s + \"!\"), t: \"\\(.small.a)-\\(.small.s)\"}",
        ".small | .a + .b",
        ".small | .s | ascii_upcase",
        ".t[0:4] | tonumber",
        ".t[11:16][0:2]",
        ".u[1:3] + .u[6:]",
        ".nul.a.b, .nul[1:2]",
        "$args.tags[1:] | length",
        "$args.n * 2 - $meta.idempotency_key[2:] == 5",
        ".small.a as $x | $x + .small.b",
        "if .small.a == 1 and (.small.b > 1 or .nul) then .small.s else empty end",
        "[.l[] | .n] | add",
        "-(.small.b) + (.nul // 3)",
        ".small + {c: 3} | keys",
        "[.l[].id] + [\"z\"] | join(\",\")",
    ] {
        same(&format!("{defs} {code}"), doc.clone());
    }
    // A path into a value that has no such member stays jaq's error.
    same(&format!("{defs} .t.a"), doc.clone());
    same(&format!("{defs} .small[0:1]"), doc.clone());
}

/// The shortcuts of the hot path answer as jaq does: `select` passing its input by
/// reference, member lookup by key comparison (small objects) and by hash (large ones),
/// ASCII slices by byte range next to non-ASCII ones by character.
#[test]
fn hot_path_shortcuts_match_jaq() {
    let big: serde_json::Map<String, Value> =
        (0..20).map(|i| (format!("k{i}"), json!(i))).collect();
    let doc = json!({
        "l": [{"free": true, "id": "a"}, {"free": false, "id": "b"}, {"id": "c"}],
        "small": {"a": 1, "b": 2},
        "big": big,
        "t": "2026-12-01T09:00",
        "u": "héllo wörld",
    });
    for code in [
        "[.l[] | select(.free) | .id]",
        "[.l[] | select(.free == false) | {id: .id}]",
        "[.l[] | if .free then . else empty end]",
        "[.l[] | select(.free) | select(.id == \"a\") | .id]",
        ".small.a, .small.z, .big.k0, .big.k19, .big.missing",
        ".big[\"k7\"], .small[\"b\"]",
        ".t[11:13], .t[:4], .t[14:], .t[5:3], .t[3:100]",
        ".u[1:4], .u[:1], .u[6:], .u[4:2]",
    ] {
        same(code, doc.clone());
    }
}

/// `.[a:b] | tonumber` is read from the slice in place on ASCII text; every other input
/// takes the general route. Both answer as jaq does.
#[test]
fn sliced_numbers_match_jaq() {
    let doc = json!({"t": "2026-12-01T09:05", "x": "x-12", "u": "é12", "n": 42, "z": null});
    for code in [
        ".t | .[11:13] | tonumber",
        ".t[11:13] | tonumber",
        "(.t[:4] | tonumber) * 100 + (.t[5:7] | tonumber)",
        ".t[14:] | tonumber",
        ".x[1:] | tonumber",
        ".x | .[1:] | tonumber",
        ".u | .[1:3] | tonumber",
        ".n | .[0:1] | tonumber",
        ".z | .[0:1] | tonumber",
        ".t | .[null:4] | tonumber",
        ".t | [.[11:13], .[14:16] | tonumber]",
        "[([.t, .x][] | .[2:4] | tonumber)]",
        ".t[4:6] | tonumber",
        ".t | .[$args.n:4] | tonumber",
        ".t | .[14:null] | tonumber",
        ".t | .[14:99] | tonumber",
        ".x | .[2:] | tonumber",
        "(.t[11:13] | tonumber) - (.t[14:16] | tonumber) * 2",
    ] {
        same(code, doc.clone());
    }
    // Negative bounds are left to jaq.
    for code in [".t[-5:-3] | tonumber", ".t | .[-2:] | tonumber"] {
        assert_eq!(native(code, &doc), Err(Stop::Fallback), "{code}");
        assert!(reference(code, &doc).is_ok(), "{code}");
    }
    // Text that is not a plain integer is left to jaq, as before the shortcut.
    for code in [
        ".t[5:3] | tonumber",
        ".t[0:100] | tonumber",
        ".t[10:12] | tonumber",
    ] {
        let t = json!("2026-12-01T09:05");
        assert_eq!(
            native(code, &json!({"t": t})),
            Err(Stop::Fallback),
            "{code}"
        );
    }
}

/// Arithmetic of integers, taken on machine integers ([`Eval::int`]), answers as jaq does,
/// and every operand it does not take (text, null, floats, wide integers, an overflow)
/// leaves the answer to the general route, which answers the same.
#[test]
fn integer_arithmetic_matches_jaq() {
    let doc = json!({
        "b": "2026-12-01T09:05", "e": "2026-12-01T10:50", "n": 42, "m": -7, "f": 1.5,
        "s": "x", "z": null, "big": 9_000_000_000_000_000_000u64, "o": {"n": 3},
        "max": i64::MAX, "min": i64::MIN
    });
    let minutes = "def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber); ";
    for code in [
        "(.e | minutes) - (.b | minutes)",
        "((.e | minutes) - (.b | minutes)) * 2 + 1",
        ".n + .m",
        ".n - .m * 3",
        ".n * .m - 1",
        ".n + .f",
        ".n + .z",
        ".z + .n",
        ".n + .s",
        ".s + .n",
        ".n + .big",
        ".n + .missing",
        ".o | .n + 1",
        "(.o | .n) * .n",
        ".n + (.b | minutes)",
        ".n + 1.5",
        "3 * 4 - 5",
        "[(.n, .m) | . * 2 + 1]",
    ] {
        same(&format!("{minutes}{code}"), doc.clone());
    }
    // The text operand's error and the overflow are handed to jaq, as by the general route.
    for code in [
        ".n + (.s | minutes)",
        "(.s | minutes) + 1",
        ".max + 1",
        ".min - 1",
        ".max * 2",
    ] {
        assert_eq!(
            native(&format!("{minutes}{code}"), &doc),
            Err(Stop::Fallback),
            "{code}"
        );
    }
}

/// A chain of `+` is one sum: text parts (with `tostring` of the input written in place)
/// make one string; any other operand adds left to right as jq does, errors included.
#[test]
fn sums_match_jaq() {
    let doc = json!({"s": "ab", "n": 42, "f": 1.5, "z": null, "l": [1], "o": {"a": 1},
                     "b": true, "u": "é"});
    // Outside the modelled subset (`tostring` of a float or a collection, an integer past
    // i64): jaq answers, whatever the native side says must be jaq's answer.
    for code in [
        "\"PT\" + tostring + \"M\"",
        ".f | \"PT\" + tostring + \"M\"",
        ".l | \"PT\" + tostring + \"M\"",
        "9223372036854775807 + .n + 1",
    ] {
        let want = reference(code, &doc);
        match native(code, &doc) {
            Err(Stop::Fallback) => {}
            got => assert_eq!(got.ok(), want.ok(), "`{code}`"),
        }
    }
    for code in [
        ".n | \"PT\" + tostring + \"M\"",
        ".s | \"PT\" + tostring + \"M\"",
        ".z | \"PT\" + tostring + \"M\"",
        ".b | \"PT\" + tostring + \"M\"",
        ".u | \"<\" + tostring + \">\" + . + tostring",
        ".s + .s + .s",
        ".s + .u + \"x\" + .s",
        ".n + .n + 1",
        ".n + .f + 1",
        ".z + .s + .s",
        ".s + .z + .s",
        ".z + .z + .z",
        ".l + .l + [2]",
        ".o + {b: 2} + {a: 3}",
        ".s + .n + .s",
        ".s + .s + .n",
        "1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11",
        ".s + .s + .s + .s + .s + .s + .s + .s + .s + .s",
        "[.s, .n] | .[0] + \"-\" + (.[1] | tostring)",
        ".s + (.n | tostring) + .s",
        "(.s + .s) + .s",
        ".s + (.s + .s)",
    ] {
        same(code, doc.clone());
    }
}

/// The shapes the demo's mappings lean on compile to their dedicated forms; if a change
/// in the compiler lost them, the answers would stay right and only the cost would grow.
#[test]
fn chains_of_plus_and_sliced_numbers_compile_to_their_forms() {
    let expr = |code: &str| Program::compile(code).expect("in the subset").expr;
    assert!(matches!(expr("\"PT\" + tostring + \"M\""), Expr::Sum(p) if p.len() == 3));
    assert!(matches!(expr(".a + .b + .c + .d"), Expr::Sum(p) if p.len() == 4));
    assert!(matches!(expr(".a + .b"), Expr::Math(Math::Add, ..)));
    assert!(matches!(
        expr(".[11:13] | tonumber"),
        Expr::SliceNumAt(11, Some(13), _)
    ));
    assert!(matches!(
        expr(".[:4] | tonumber"),
        Expr::SliceNumAt(0, Some(4), _)
    ));
    assert!(matches!(
        expr(".[5:null] | tonumber"),
        Expr::SliceNumAt(5, None, _)
    ));
    assert!(matches!(expr(".[-2:] | tonumber"), Expr::SliceNum(..)));
    assert!(matches!(expr(".[$args.n:] | tonumber"), Expr::SliceNum(..)));
    assert!(matches!(expr(".[11:13]? | tonumber"), Expr::Pipe(..)));
    let long = vec![".a"; 20].join(" + ");
    assert!(matches!(expr(&long), Expr::Sum(p) if p.len() <= SUM_MAX));
}

/// Objects are key-ordered maps (no `preserve_order`): a built object has jaq's members and
/// is written in key order, as jaq's answer is once it is a `serde_json` value, whether
/// copied from a prototype (static, distinct keys, entries sorted) or built key by key.
/// Iterating a built object, where jaq's insertion order shows in the answer, is left to jaq.
#[test]
fn constructed_objects_have_jaq_members_and_iterate_in_jaq_order() {
    let doc = json!({"s": "x", "t": true, "n": null, "l": [1, 2]});
    for code in [
        "{b: .s, a: .t, c: .n}",
        "{a: 1, a: .s}",
        "{a: .s, b: .t, a: .n}",
        "{z: .s, y: {b: .t, a: .l}, x: [.l[] | {k: ., j: .}]}",
        "{(.s): 1, a: 2}",
        "{a: .s} + {b: 1, a: 2}",
        // Found by the `transform` fuzz target: a prototype's values went to the wrong keys.
        ".name as $n | {n: $n, l: ($n | length)}",
    ] {
        let want = reference(code, &doc).map(|v| v.map(|v| json_text::to_vec(&v)));
        let got = native(code, &doc).map(|v| v.map(|v| json_text::to_vec(&v)));
        assert_eq!(got.ok(), want.ok(), "`{code}`");
    }
    // jaq lists `b` first; a key-ordered map would list `a` first: these go to jaq.
    for code in [
        "{b: 1, a: 2} | to_entries",
        "[{b: 1, a: 2}[]]",
        "{b: \"x\", a: \"y\"} | add",
    ] {
        assert_eq!(native(code, &doc), Err(Stop::Fallback), "`{code}`");
        assert!(reference(code, &doc).is_ok(), "jaq answers `{code}`");
    }
    // `with_entries` is taken natively unless two entries end with the same key, where
    // jaq's last (in insertion order) wins.
    same(
        "{b: 1, a: null, c: 3} | with_entries(select(.value != null))",
        doc.clone(),
    );
    same(
        "{b: 1, a: 2} | with_entries({key: (.key + \"x\"), value})",
        doc.clone(),
    );
    let clash = "{b: 1, a: 2} | with_entries({key: \"k\", value})";
    assert_eq!(native(clash, &doc), Err(Stop::Fallback));
    assert_eq!(reference(clash, &doc), Ok(Some(json!({"k": 2}))));
    // One member has one order: taken natively.
    assert_eq!(
        native("{b: 1} | to_entries", &doc),
        Ok(Some(json!([{"key": "b", "value": 1}])))
    );
}

#[test]
fn paths_literals_and_construction() {
    let doc = json!({"a": {"b": [1, 2, {"c": "x"}]}, "s": "héllo wörld", "n": null, "t": true});
    for code in [
        ".",
        ".a",
        ".a.b",
        ".a.b[2].c",
        ".a.b[-1]",
        ".a.b[7]",
        ".missing",
        ".n.x",
        ".a.b[]",
        "[.a.b[]]",
        "{x: .s, y: [1, 2.5, \"z\", null, true, false]}",
        "{s, t}",
        "{(.s): 1}",
        "{\"k\": .t, $args}",
        ".a.b[1:]",
        ".a.b[:2]",
        ".s[1:4]",
        ".s[3:]",
        ".a.b | length",
        ".s | length",
        "{} | length",
        "null | length",
        "-3 | length",
        "[.a.b[] | select(type == \"number\")]",
        "[.a.b[] | numbers?]",
        ".a.b[]?",
        "[.s[]?]",
        "[.t.x?]",
        "[.s[0]?]",
        "[.n[]?]",
        ".a?.b",
        ".s[1:]?",
        "[.t[]?, 1]",
        "[.a.b[]?.c?]",
        "{a: 1, b: null} | with_entries(select(.value != null))",
        "{a: 1} | to_entries",
        "[{key: \"k\", value: 2}, {key: \"j\"}] | from_entries",
        "if .t then error(\"stop\") else 1 end",
        ".t | error",
        "\"x=\\(.t) n=\\(.n) i=\\(1 + 2)\"",
        "\"tab\\tquote\\\"\"",
        "$args.service_id",
        "$args[\"n\"]",
        "$status",
        "$meta.idempotency_key",
        "first",
        "[.a.b | first, last]",
        ".a | keys",
        ".a.b | has(0)",
        "{a: 1} | has(\"a\")",
        "[.a.b[] | type]",
    ] {
        // `numbers?` (try on a call) is outside the subset: the run must not be native.
        if code.contains("numbers?") {
            assert!(Program::compile(code).is_none(), "{code}");
            continue;
        }
        same(code, doc.clone());
    }
}

#[test]
fn operators_and_conditionals() {
    let doc = json!({"x": 7, "y": 2.5, "s": "ab", "l": [3, 1], "o": {"k": 1}, "z": 0});
    for code in [
        ".x + 1",
        ".x - 10",
        ".x * 3",
        ".x + .y",
        ".y * 2",
        "-.x",
        ".s + \"cd\"",
        ".l + [2]",
        ".o + {j: 2}",
        ".o + {k: 9}",
        "null + .x",
        ".x + null",
        ".s + 1",
        ".x == 7",
        ".x == 7.0",
        ".x != .y",
        ".s < \"b\"",
        ".l < [3, 2]",
        "null < false",
        "false < 0",
        "0 < \"\"",
        "\"\" < []",
        "[] < {}",
        ".x >= 7",
        ".o == {k: 1}",
        ".o == {k: 1.0}",
        ".x > 3 and .s == \"ab\"",
        ".z or false",
        "if .x > 5 then \"big\" else \"small\" end",
        "if .x > 50 then 1 elif .x > 5 then 2 else 3 end",
        "if .missing then 1 end",
        ".missing // \"d\"",
        ".z // 9",
        "false // null // 3",
        "(.l[] | select(. > 2)) // 0",
        "[.l[] | select(. > 5)] // 0",
        ".x | not",
        "[.l[] | . * 2]",
        "[.l[], .x]",
        ".l | map(. + 1)",
        ".l | add",
        "[\"a\", \"b\"] | add",
        "{} | add",
        ".o | to_entries? // 1",
    ] {
        if code.contains('?') {
            assert!(Program::compile(code).is_none(), "{code}");
            continue;
        }
        same(code, doc.clone());
    }
}

#[test]
fn strings_definitions_and_variables() {
    let doc = json!({"when": "2026-12-01T09:30", "name": "Ana Maria Silva", "code": "17",
                     "e": "", "lz": "09", "f": "1.5", "neg": "-4", "mixed": ["a", 1, null, true]});
    for code in [
        ".name | split(\" \")",
        ".name | split(\" \")[1:] | join(\" \")",
        ".e | split(\",\")",
        ".mixed | join(\"-\")",
        ".name | ascii_downcase",
        ".name | ascii_upcase",
        ".name | startswith(\"Ana\")",
        ".name | endswith(\"x\")",
        ".name | ltrimstr(\"Ana \")",
        ".name | rtrimstr(\"Silva\")",
        ".code | tonumber",
        ".neg | tonumber",
        ".lz | tonumber",
        "7 | tonumber",
        ".code | tonumber | tostring",
        "def hh: .[11:13] | tonumber; .when | hh * 60",
        "def twice(f): f | f; 3 | twice(. * 2)",
        "def add3($x; $y): $x + $y + .; 1 | add3(10; 100)",
        ".name as $n | {n: $n, l: ($n | length)}",
        "[.mixed[] as $m | $m]",
        "def f: 1; def g: f + 1; def f: 10; g + f",
        "def map(f): \"mine\"; [1] | map(. + 1)",
        "def fact: if . <= 1 then 1 else . * (. - 1 | fact) end; 5 | fact",
    ] {
        match Program::compile(code) {
            Some(_) => same(code, doc.clone()),
            // Recursion is beyond the inlining depth: jaq runs it.
            None => assert!(code.contains("fact"), "`{code}` should be native"),
        }
    }
}

#[test]
fn constructs_outside_the_subset_are_left_to_jaq() {
    for code in [
        "reduce .[] as $x (0; . + $x)",
        "try .a catch 0",
        "numbers?",
        "..",
        ".a = 1",
        ".a |= 1",
        "@base64",
        "range(3)",
        "tojson",
        "label $f | 1",
        "[.[] as [$a] | $a]",
        "$__loc__",
        "input",
        "limit(1; .[])",
        "error(\"x\") | 1 as $x | reduce .[] as $y (0; 1)",
    ] {
        assert!(
            Program::compile(code).is_none(),
            "`{code}` must not run natively"
        );
    }
}

#[test]
fn the_first_output_is_taken_lazily_like_jaq() {
    // jaq stops after the first output, so the later error never happens.
    same("1, (null | .[])", json!(null));
    // ... and an error before any output is jaq's to report.
    same("(null | .[]), 1", json!(null));
    same(".[]", json!([1, 2, 3]));
    same("empty", json!(1));
}

#[test]
fn numbers_it_cannot_read_exactly_are_handed_to_jaq() {
    let doc = json!({"f": "1.5", "big": 9223372036854775807i64, "u": 18446744073709551615u64});
    for code in [
        ".f | tonumber",
        "[1] | tostring",
        ".big + 1",
        ".u * 1",
        ".u | tostring",
        "1.5 | tostring",
    ] {
        assert_eq!(native(code, &doc), Err(Stop::Fallback), "{code}");
        let t = Transform::compile(code).expect("compiles");
        let (a, m) = (args(), meta());
        let vars = Vars3 {
            args: &a,
            status: 201,
            meta: &m,
        };
        assert_eq!(t.run(&doc, vars), t.run_jaq(&doc, vars), "{code}");
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        (-100.0f64..100.0).prop_map(|f| json!(f)),
        "[a-c ]{0,4}".prop_map(Value::String),
        Just(json!("09")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-c]", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// On arbitrary inputs the native evaluator either agrees with jaq or hands over.
    #[test]
    fn agrees_with_jaq_on_arbitrary_input(input in json_value()) {
        for (code, reference, program) in programs() {
            let (a, m) = (args(), meta());
            let want = reference
                .run_jaq(&input, Vars3 { args: &a, status: 201, meta: &m })
                .map_err(|e| e.message);
            let got = program.run(&input, [&a, &Value::from(201), &m]);
            match (&want, &got) {
                (_, Err(Stop::Fallback)) => {}
                (Ok(w), Ok(g)) => prop_assert_eq!(g, w, "`{}` on {}", code, input),
                _ => prop_assert!(false, "`{}` on {}: jaq {:?}, native {:?}", code, input, want, got),
            }
        }
    }
}

/// The programs of the property test, compiled once for both evaluators.
fn programs() -> &'static [(&'static str, Transform, Program)] {
    static ALL: std::sync::OnceLock<Vec<(&'static str, Transform, Program)>> =
        std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        [
            ".",
            ".a",
            ".a.b",
            ".[]",
            "[.[] | .a]",
            "{x: .a, y: .b // \"d\"}",
            ".a + .b",
            ".a - .b",
            ".a * .b",
            ".a == .b",
            ".a < .b",
            "[.[] | select(.)]",
            "length",
            "[.[] | length]",
            ".a | tostring",
            ".a | tonumber",
            "keys",
            "add",
            ".a[1:]",
            "if .a then .b else .c end",
            ".a and .b",
            ".a or .b",
            "[.[] | type]",
            "map(. + 1)",
            ".a | split(\" \")",
            "join(\",\")",
            "{(.a): 1}",
            "has(\"a\")",
            ".[0]",
            ".[-1]",
            "-.a",
            ".a[.b]",
            "[.a[]?]",
            "[.a.b?]",
            "[.[0]?]",
            "[.[]?.a?]",
            "[.a[1:]?]",
            "[.[.a]?]",
            "to_entries",
            "from_entries",
            "with_entries(select(.value))",
            "\"\\(.a)\"",
            ". as $x | [$x, $x]",
        ]
        .into_iter()
        .map(|code| {
            let t = Transform::compile(code).expect("compiles");
            let p = Program::compile(code).expect("in the subset");
            (code, t, p)
        })
        .collect()
    })
}
