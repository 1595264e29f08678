//! Unit and property tests of the JSON text reader and writer: every text and value matches
//! serde_json's. Test-only code.

use super::read::{READ_DEPTH, read};
use super::scan::{ESCAPE, first_escape};
use super::*;
use crate::json_doc::Doc;
use proptest::prelude::*;
use serde_json::Value;
use serde_json::json;
use std::borrow::Cow;

fn same(v: &Value) {
    let ours = to_vec(v);
    let theirs = serde_json::to_vec(v).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs)
    );
    assert_eq!(to_string(v).as_bytes(), &theirs[..]);
}

/// Objects are key-ordered (`serde_json` without `preserve_order`, docs/mapping.md "Object
/// member order"): read in any order, written in key order. Fails if a dependency turns
/// `preserve_order` on again, which would bring back a SipHash per stored key.
#[test]
fn objects_are_written_in_key_order() {
    let v = from_slice(br#"{"b":1,"a":{"z":true,"c":null},"aa":[]}"#).expect("valid JSON");
    assert_eq!(to_string(&v), r#"{"a":{"c":null,"z":true},"aa":[],"b":1}"#);
}

/// `from_slice_narrow` vouches for a document only when the fast reader read it whole and
/// met no integer past `i64`; the transform skips its check of the answer on that word.
#[test]
fn narrow_is_said_only_of_documents_read_whole_without_a_wide_integer() {
    let narrow = |t: &str| from_slice_narrow(t.as_bytes()).map(|(_, n)| n).ok();
    assert_eq!(
        narrow(r#"{"a":[1,-2,9223372036854775807,1.5e300,"x"]}"#),
        Some(true)
    );
    assert_eq!(
        narrow(r#"{"a":[1,{"b":10000000000854346115}]}"#),
        Some(false)
    );
    assert_eq!(narrow("18446744073709551615"), Some(false));
    // Nesting past the fast reader's depth goes to serde_json: not looked at, so not
    // vouched for.
    let deep = format!(
        "{}1{}",
        "[".repeat(READ_DEPTH + 1),
        "]".repeat(READ_DEPTH + 1)
    );
    assert_eq!(narrow(&deep), Some(false));
    assert_eq!(narrow("{"), None);
    for t in [r#"{"a":[1,{"b":10000000000854346115}]}"#, &deep, "[1,2.5]"] {
        let (value, _) = from_slice_narrow(t.as_bytes()).expect("valid JSON");
        assert_eq!(Some(value), serde_json::from_str::<Value>(t).ok(), "{t}");
    }
}

#[test]
fn every_byte_escapes_as_serde_json_does() {
    // Each ASCII byte alone, at every offset within a word, and beside multi-byte text.
    for b in 0u8..0x80 {
        let c = b as char;
        for pad in 0..10 {
            let s = format!("{}{c}{}é€😀", "a".repeat(pad), "z".repeat(9 - pad));
            same(&Value::String(s));
        }
    }
    same(&json!("\"\\\u{0}\u{1f}\u{7f}\u{80}\u{ff}\u{2028}"));
}

/// Every byte value at every position of texts up to three blocks long, the other bytes
/// high (0xe9, never an escape): the sixteen-byte blocks, the eight-byte words after them,
/// the overlapping last word and the byte-by-byte short text all find the first escape.
#[test]
fn the_block_and_word_scans_find_the_first_escape() {
    for len in 0..=48usize {
        assert_eq!(first_escape(&vec![0xe9; len]), None, "len {len}");
        for at in 0..len {
            for b in 0..=255u8 {
                let mut t = vec![0xe9u8; len];
                t[at] = b;
                let want = (ESCAPE[b as usize] != 0).then_some(at);
                assert_eq!(first_escape(&t), want, "len {len}, byte {b:#x} at {at}");
            }
        }
    }
}

/// Long texts (the out-of-line scan, 32 bytes at a time where the CPU has AVX2): every
/// length around each step's edge, an escape at every position, each kind of escape byte;
/// the answer is the first one's place, as a byte-by-byte search finds it.
#[test]
fn the_long_scan_finds_the_first_escape() {
    for len in (48..=200usize).chain([255, 256, 257, 1000, 4096 + 7]) {
        assert_eq!(first_escape(&vec![b'a'; len]), None, "len {len}");
        for at in 0..len {
            for b in [b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0xe9] {
                let mut t = vec![b'a'; len];
                t[at] = b;
                // A second escape later never hides the first.
                if at + 5 < len {
                    t[at + 5] = b'"';
                }
                let want = t.iter().position(|&x| ESCAPE[x as usize] != 0);
                assert_eq!(first_escape(&t), want, "len {len}, byte {b:#x} at {at}");
                // Both loops, whichever this CPU would pick.
                #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
                {
                    let sse2 = super::scan::first_escape_sse2(&t, 0);
                    assert_eq!(sse2, want, "SSE2: len {len}, byte {b:#x} at {at}");
                    if std::arch::is_x86_feature_detected!("avx2") {
                        // SAFETY: the CPU has AVX2 (asked above).
                        let avx2 = unsafe { super::scan::first_escape_avx2(&t, 0) };
                        assert_eq!(avx2, want, "AVX2: len {len}, byte {b:#x} at {at}");
                    }
                }
            }
        }
    }
}

/// Every length up to five words, with an escape at every position: the block and word
/// scans, the overlapping last word and the byte-by-byte short text, written and read back.
#[test]
fn escapes_at_every_position_of_every_short_length() {
    for len in 0..=40 {
        same(&Value::String("a".repeat(len)));
        for at in 0..len {
            for c in ['"', '\\', '\n', '\u{1f}', '\u{0}'] {
                let s: String = (0..len).map(|i| if i == at { c } else { 'a' }).collect();
                let v = Value::String(s);
                same(&v);
                let text = to_vec(&json!({ "k": v, "l": [v] }));
                assert!(read(&text).is_some());
                reads_alike(&text);
            }
        }
    }
}

/// Capacities `out` starts with: none (the block-wise escaper leaves blocks it has no room
/// for to the byte-wise loop), some, and room for every block of the texts here.
const ROOMS: [usize; 3] = [0, 100, 8192];

/// `bytes` written as a JSON string into a buffer that starts with `spare` capacity.
fn written_str(bytes: &[u8], spare: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(spare);
    write_str_bytes(bytes, &mut out);
    out
}

/// Strings long enough for the block-wise escaper (32 bytes and more), with escapes dense
/// and sparse: every position of the first blocks holds one, with a second escape at every
/// distance after it, beside multi-byte text; written as serde_json writes them, whether
/// from `&str` or from bytes.
#[test]
fn long_strings_with_escapes_anywhere_are_written_as_serde_json_writes_them() {
    for len in [32usize, 33, 47, 48, 63, 64, 65, 100] {
        for first in 0..34.min(len) {
            for gap in 0..20 {
                let mut s: Vec<char> = (0..len)
                    .map(|i| if i % 7 == 3 { 'é' } else { 'a' })
                    .collect();
                s[first] = '"';
                if let Some(c) = s.get_mut(first + gap) {
                    *c = if gap % 2 == 0 { '\\' } else { '\u{1}' };
                }
                let s: String = s.into_iter().collect();
                let want = serde_json::to_vec(&s).unwrap_or_default();
                let mut out = Vec::new();
                write_str(&s, &mut out);
                assert_eq!(out, want, "{s:?}");
                for spare in ROOMS {
                    assert_eq!(
                        written_str(s.as_bytes(), spare),
                        want,
                        "{s:?}, room {spare}"
                    );
                }
            }
        }
    }
    // JSON text as a string: the text content of a structured result.
    let doc =
        json!({"items": (0..200).map(|i| json!({"id": i, "n\"ame": "x\ty"})).collect::<Vec<_>>()});
    let text = to_vec(&doc);
    let mut out = Vec::new();
    write_str_bytes(&text, &mut out);
    let back: String = serde_json::from_slice(&out).unwrap_or_default();
    assert_eq!(back.as_bytes(), &text[..]);
}

/// The block-wise escaper where the escape-free run before a block's first escape is every
/// length from none to over two blocks (so copied as a fixed sixteen, exactly sixteen, or
/// whole) and runs long enough for the long scan to find their end, repeated so that escapes
/// fall at every offset of later blocks, with two- and six-byte escapes: written as
/// serde_json writes them.
#[test]
fn runs_of_every_length_between_escapes_are_written_as_serde_json_writes_them() {
    for run in (0..40).chain([63, 64, 65, 79, 80, 81, 95, 96, 97, 127, 128, 200, 333]) {
        for (i, esc) in ['"', '\\', '\u{1}', '\n'].into_iter().enumerate() {
            let piece: String = "a".repeat(run) + &esc.to_string();
            let s = piece.repeat(200 / (run + 1) + 2) + &"b".repeat(i * 5);
            let want = serde_json::to_vec(&s).unwrap_or_default();
            let mut out = b"#".to_vec();
            write_str_bytes(s.as_bytes(), &mut out);
            assert_eq!(out.get(1..), Some(&want[..]), "run {run}, {esc:?}");
            for spare in ROOMS {
                assert_eq!(written_str(s.as_bytes(), spare), want, "run {run}, {esc:?}");
            }
        }
    }
}

/// The block-wise escaper on text of nothing but six-byte escapes (the most a block can
/// grow), long escape-free runs between dense ones, and text appended after what `out`
/// already holds, with and without room to spare.
#[test]
fn escapes_that_grow_text_most_are_written_after_what_out_holds() {
    let mut texts: Vec<String> = vec![
        "\u{1}".repeat(200),
        "\u{1f}\"".repeat(90),
        format!(
            "{}{}{}",
            "\"".repeat(40),
            "x".repeat(300),
            "\u{2}".repeat(40)
        ),
    ];
    texts.push(
        (0..500)
            .map(|i| if i % 61 < 3 { '\u{7}' } else { 'é' })
            .collect(),
    );
    for s in &texts {
        let want = serde_json::to_vec(s).unwrap_or_default();
        for (before, spare) in [(0usize, 0usize), (5, 0), (5, 4096), (100, 1)] {
            let mut out = Vec::with_capacity(before + spare);
            out.extend(std::iter::repeat_n(b'#', before));
            write_str_bytes(s.as_bytes(), &mut out);
            assert_eq!(out.get(..before), Some(&vec![b'#'; before][..]));
            assert_eq!(out.get(before..), Some(&want[..]), "{s:?} after {before}");
        }
    }
}

/// Every ASCII byte filling whole blocks, and at every place of a block among bytes that
/// need no escape or among other escapes: the block-wise escaper's table and its room for
/// two- and six-byte escapes give what serde_json writes.
#[test]
fn every_byte_in_blocks_escapes_as_serde_json_does() {
    for b in 0u8..0x80 {
        let c = b as char;
        let mut texts = vec![c.to_string().repeat(48)];
        for at in 0..16 {
            for other in ['a', '"', '\u{1}'] {
                let mut s: Vec<char> = std::iter::repeat_n(other, 40).collect();
                s[at] = c;
                s[at + 16] = c;
                texts.push(s.into_iter().collect());
            }
        }
        for s in texts {
            let want = serde_json::to_vec(&s).unwrap_or_default();
            for spare in ROOMS {
                assert_eq!(
                    written_str(s.as_bytes(), spare),
                    want,
                    "{s:?}, room {spare}"
                );
            }
        }
    }
}

#[test]
fn structures_and_numbers_match_serde_json() {
    same(&json!({
        "b": [1, -1, 0, u64::MAX, i64::MIN, 1.5, -0.0, 1e300, 2.5e-8, 100.0],
        "a": {"": null, "t": true, "f": false, "nested": [[], {}, [{}]]},
        "k\"ey\n": "v"
    }));
    same(&json!([]));
    same(&json!({}));
    same(&json!(null));
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        "[\"\\\\\\x00-\\x1f a-z]{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// `from_slice` gives serde_json's answer: the same value with its members in the same
/// order (`Map` equality ignores order, so the written text is compared too), or an error
/// with the same message.
fn reads_alike(bytes: &[u8]) {
    let ours = from_slice(bytes);
    let theirs = serde_json::from_slice::<Value>(bytes);
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{}", String::from_utf8_lossy(bytes));
            assert_eq!(to_vec(a), to_vec(b), "{}", String::from_utf8_lossy(bytes));
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!(
            "{}: ours {ours:?}, serde_json {theirs:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

#[test]
fn reads_every_edge_case_as_serde_json_does() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let cases = [
        "0",
        "-0",
        "-0.0",
        "7",
        "-7",
        "01",
        "-01",
        "1.",
        ".5",
        "1.5",
        "-",
        "-a",
        "1e5",
        "1E+5",
        "1e-5",
        "-1.25e-3",
        "1e",
        "1e+",
        "1e400",
        "123456789012345678",
        "-123456789012345678",
        "1234567890123456789",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999999",
        r#""""#,
        r#""a""#,
        r#""\"\\\/\b\f\n\r\t""#,
        r#""\u0000\u001f\u00e9\u20ac""#,
        r#""\ud83d\ude00""#,
        r#""\uD83D\uDE00x""#,
        r#""\ud83d""#,
        r#""\ude00""#,
        r#""\ud83d\u0041""#,
        r#""\ud83dx""#,
        r#""\u12""#,
        r#""\u12g4""#,
        r#""\x""#,
        "\"tab\there\"",
        "\"nl\nhere\"",
        r#""unterminated"#,
        r#""ends in \"#,
        "\"é€😀\"",
        "true",
        "false",
        "null",
        "truex",
        "nul",
        "tru",
        " \t\r\n1 \n",
        "1 2",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{}",
        "[]",
        "{ }",
        "[ ]",
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{a:1}"#,
        r#"{"a":1,"a":2,"b":3}"#,
        r#"{"b":1,"a":2,"b":3,"a":4,"c":5,"a":6}"#,
        r#"{"b":1,"a":{"d":[],"c":{}}}"#,
        r#"{"k\u00e9y":"v"}"#,
        "\u{feff}1",
        "",
        " ",
        "[",
        "{",
        r#"{"a""#,
        r#"{"a":"#,
    ];
    for case in cases {
        reads_alike(case.as_bytes());
    }
    for n in [1, 99, 100, 101, 126, 127, 128, 129, 200] {
        reads_alike(deep(n).as_bytes());
    }
    reads_alike(b"\"\xff\"");
    reads_alike(b"[\"ok\", \"\xc3\"]");
    reads_alike(b"{\"\xe2\x82\xac\": 1}");
}

#[test]
fn ordinary_documents_are_read_without_serde_json() {
    // A reader that handed everything to serde_json would still read alike: this checks
    // that the fast path is the one taken for the documents portico sees every call.
    for doc in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,-2,true,null,"x\ny"]}}}"#,
        r#"{"treatment":"MASSAGE-60","openings":[{"ref":"M@2026-12-01T09:00","free":true}],"tz":"Europe/Lisbon"}"#,
        r#"{"price":12.5,"ratio":-1e-3,"big":18446744073709551615,"neg":-0,"s":"\u00e9\ud83d\ude00"}"#,
        " [ {} , [ ] , \"\" ] ",
    ] {
        assert!(read(doc.as_bytes()).is_some(), "{doc}");
        reads_alike(doc.as_bytes());
    }
}

/// `read_borrowed` gives `from_slice_narrow`'s answer once its `Doc` is a `Value`: the
/// same value (members in the same order), the same flag, an error together.
fn borrows_alike(bytes: &[u8]) {
    let ours = read_borrowed(bytes).map(|(d, n)| (d.into_value(), n));
    let theirs = from_slice_narrow(bytes);
    let text = String::from_utf8_lossy(bytes);
    match (&ours, &theirs) {
        (Ok((a, an)), Ok((b, bn))) => {
            assert_eq!(a, b, "{text}");
            assert_eq!(to_vec(a), to_vec(b), "{text}");
            assert_eq!(an, bn, "{text}");
        }
        (Err(_), Err(_)) => {}
        _ => panic!("{text}: borrowed {ours:?}, narrow {theirs:?}"),
    }
}

#[test]
fn the_shape_says_when_the_text_stands_for_the_value() {
    let faithful = |t: &str| read_shaped(t.as_bytes()).expect("valid JSON").1.faithful;
    for t in [
        r#"{"b":1,"a":[-7,12.5,1e-7,"x\u00e9"],"c":{"a":null}}"#,
        " \n{ \"z\" : true }\t",
        r#"{"big":18446744073709551615,"f":1.7976931348623157e+308}"#,
    ] {
        assert!(faithful(t), "{t}");
    }
    for t in [
        r#"{"a":1,"a":2}"#,
        r#"[{"k":{"a":1,"b":2,"a":3}}]"#,
        r#"{"n":1.50}"#,
        r#"{"n":1E2}"#,
        r#"{"n":-0}"#,
        r#"{"n":18446744073709551616}"#,
        r#"{"n":0.1000000000000000055511151231257827}"#,
    ] {
        assert!(!faithful(t), "{t}");
    }
    // Documents the fast reader leaves to serde_json are never faithful.
    let deep = format!("{}{}", "[".repeat(120), "]".repeat(120));
    assert!(!faithful(&deep));
}

fn borrowed(t: &str) -> (Doc<'_>, bool) {
    read_borrowed(t.as_bytes()).expect("valid JSON")
}

#[test]
fn plain_strings_and_keys_are_borrowed_and_escaped_ones_owned() {
    let t = r#"{"plain":"text é","esc\u00e9":"a\nb","l":["x","\"y"]}"#;
    let (doc, narrow) = borrowed(t);
    assert!(narrow);
    let Doc::Obj(m) = &doc else { panic!("{doc:?}") };
    let keys: Vec<(&str, bool)> = m
        .iter()
        .map(|(k, _)| (k.as_ref(), matches!(k, Cow::Borrowed(_))))
        .collect();
    assert_eq!(keys, [("escé", false), ("l", true), ("plain", true)]);
    assert!(matches!(
        doc.get("plain"),
        Some(Doc::Str(Cow::Borrowed("text é")))
    ));
    assert!(matches!(doc.get("escé"), Some(Doc::Str(Cow::Owned(s))) if s == "a\nb"));
    let Some(Doc::Arr(l)) = doc.get("l") else {
        panic!("{doc:?}")
    };
    assert!(
        matches!(&l[..], [Doc::Str(Cow::Borrowed("x")), Doc::Str(Cow::Owned(y))] if y == "\"y")
    );
    borrows_alike(t.as_bytes());
}

#[test]
fn borrowed_objects_are_key_sorted_and_keep_the_last_repeated_key() {
    for t in [
        r#"{"b":1,"a":2,"b":3}"#,
        r#"{"b":1,"a":2,"b":3,"a":4,"c":5,"a":6}"#,
        r#"{"z":{"y":[],"x":{}},"\u0061":1,"a":2,"":0}"#,
        r#"{"a":1,"a":2}"#,
    ] {
        let (doc, _) = borrowed(t);
        let Doc::Obj(m) = &doc else { panic!("{doc:?}") };
        assert!(m.windows(2).all(|w| w[0].0 < w[1].0), "{t}: {m:?}");
        borrows_alike(t.as_bytes());
    }
    let (doc, _) = borrowed(r#"{"b":1,"a":2,"b":3,"\u0061":4}"#);
    assert_eq!(doc.get("a"), Some(&Doc::from(4i64)));
    assert_eq!(doc.get("b"), Some(&Doc::from(3i64)));
}

#[test]
fn borrowed_numbers_and_the_wide_flag_match_from_slice_narrow() {
    let (doc, narrow) = borrowed("[1,-2,9223372036854775807,-9223372036854775808,1.5e300,-0,0.25]");
    assert!(narrow);
    assert_eq!(
        doc.into_value(),
        json!([1, -2, i64::MAX, i64::MIN, 1.5e300, -0.0, 0.25])
    );
    // `-0` is a float to serde_json, read from its own text: not wide.
    let (doc, narrow) = borrowed("-0");
    assert!(narrow);
    assert!(matches!(&doc, Doc::Num(n) if n.as_f64() == Some(0.0) && n.is_f64()));
    let (doc, narrow) = borrowed(r#"{"a":[1,{"b":10000000000854346115}]}"#);
    assert!(!narrow);
    let wide = doc
        .get("a")
        .and_then(|a| match a {
            Doc::Arr(items) => items.get(1),
            _ => None,
        })
        .and_then(|o| o.get("b"));
    assert!(matches!(wide, Some(Doc::Num(n)) if n.as_i64().is_none() && !n.is_f64()));
    for t in [
        "18446744073709551615",
        "18446744073709551616",
        "-0",
        "-0.0",
        "1e5",
        "1e400",
        "123456789012345678",
        "1234567890123456789",
        "-9223372036854775809",
        "01",
    ] {
        borrows_alike(t.as_bytes());
    }
}

#[test]
fn borrowed_edge_cases_fall_back_or_fail_as_from_slice_narrow_does() {
    let nest = |n: usize| format!(r#"{}"s"{}"#, "[".repeat(n), "]".repeat(n));
    // The innermost string is borrowed, and whether the document is vouched for.
    let innermost = |n: usize| {
        let text = nest(n);
        let (doc, narrow) = borrowed(&text);
        let mut inner = &doc;
        while let Doc::Arr(a) = inner {
            inner = &a[0];
        }
        assert_eq!(inner.as_str(), Some("s"));
        (matches!(inner, Doc::Str(Cow::Borrowed(_))), narrow)
    };
    assert_eq!(innermost(READ_DEPTH), (true, true));
    // Past the fast reader's depth serde_json reads it: owned, and not vouched for.
    assert_eq!(innermost(READ_DEPTH + 1), (false, false));
    for n in [99, 100, 101, 127, 128, 129, 200] {
        borrows_alike(nest(n).as_bytes());
    }
    for t in [
        "",
        " ",
        "{",
        "[1,]",
        r#"{"a":1,}"#,
        r#"{a:1}"#,
        "1 2",
        "nul",
        r#""\x""#,
        r#""\ud83d""#,
        r#""\ud83d\ude00""#,
        "\"tab\there\"",
        "\u{feff}1",
        "[\"ok\", \"é\"]",
    ] {
        borrows_alike(t.as_bytes());
    }
    assert!(read_borrowed(b"{").is_err());
    assert!(read_borrowed(b"\"\xff\"").is_err());
    borrows_alike(b"[\"ok\", \"\xc3\"]");
}

/// A JSON text with what `value()` does not write: repeated keys, keys and strings
/// spelt with `\u` escapes, and whitespace between tokens (also the texts
/// `translate::lent`'s tests lend from).
pub(crate) fn varied_text() -> impl Strategy<Value = String> {
    let ws = "[ \t\n\r]{0,2}";
    let key = (r#"[ab"\\é😀]{0,2}"#, any::<bool>()).prop_map(|(k, esc)| spell(&k, esc));
    let leaf = prop_oneof![
        value().prop_map(|v| to_string(&v)),
        (r#"[a"\\\n😀]{0,4}"#, any::<bool>()).prop_map(|(s, esc)| spell(&s, esc)),
    ];
    leaf.prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..5), ws)
                .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!("{w},")))),
            (prop::collection::vec((key.clone(), inner), 0..6), ws).prop_map(|(m, w)| {
                let m: Vec<String> = m.iter().map(|(k, v)| format!("{k}{w}:{v}")).collect();
                format!("{{{w}{}}}", m.join(&format!(",{w}")))
            }),
        ]
    })
}

/// `s` as a JSON string: as serde_json writes it, or every character as a `\u` escape
/// (a surrogate pair past the BMP).
fn spell(s: &str, escaped: bool) -> String {
    if !escaped {
        return to_string(&Value::String(s.to_owned()));
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{u:04x}"));
        }
    }
    out.push('"');
    out
}

proptest! {
    #[test]
    fn any_value_is_read_borrowed_as_from_slice_narrow_reads_it(v in value()) {
        for text in [to_vec(&v), serde_json::to_vec_pretty(&v).unwrap_or_default()] {
            prop_assert!(read_borrowed(&text).is_ok());
            borrows_alike(&text);
        }
    }

    #[test]
    fn any_written_value_stands_for_itself(v in value()) {
        for text in [to_vec(&v), serde_json::to_vec_pretty(&v).unwrap_or_default()] {
            let (doc, shape) = read_shaped(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(shape.faithful);
            prop_assert_eq!(doc.into_value(), v.clone());
        }
    }

    #[test]
    fn a_faithful_text_is_read_by_serde_json_as_the_value_read(text in varied_text()) {
        if let Ok((doc, shape)) = read_shaped(text.as_bytes()) {
            let (value, narrow) = from_slice_narrow(text.as_bytes())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(shape.narrow, narrow);
            if shape.faithful {
                prop_assert_eq!(doc.into_value(), value);
            }
        }
    }

    #[test]
    fn any_varied_text_is_read_borrowed_as_from_slice_narrow_reads_it(text in varied_text()) {
        prop_assert!(read_borrowed(text.as_bytes()).is_ok(), "{}", text);
        borrows_alike(text.as_bytes());
    }

    #[test]
    fn any_text_is_read_borrowed_as_from_slice_narrow_reads_it(
        text in r#"[\[\]{}",:0-9a-z.eE+\- \t\n\\/éu]{0,48}"#,
    ) {
        borrows_alike(text.as_bytes());
    }

    #[test]
    fn any_string_is_written_as_serde_json_writes_it(s in r#"[a"\\\n\u{0}\u{1f}é€😀 z]{0,120}"#) {
        let mut out = Vec::new();
        write_str(&s, &mut out);
        prop_assert_eq!(out, serde_json::to_vec(&s).unwrap_or_default());
    }

    #[test]
    fn any_value_is_written_as_serde_json_writes_it(v in value()) {
        prop_assert_eq!(to_vec(&v), serde_json::to_vec(&v).unwrap_or_default());
    }

    #[test]
    fn any_doc_is_written_as_its_value_is(text in varied_text()) {
        if let Ok((doc, _)) = read_borrowed(text.as_bytes()) {
            let mut out = Vec::new();
            write_doc(&doc, &mut out);
            prop_assert_eq!(out, to_vec(&doc.to_value()));
        }
    }

    #[test]
    fn any_written_value_is_read_back_without_serde_json(v in value()) {
        for text in [to_vec(&v), serde_json::to_vec_pretty(&v).unwrap_or_default()] {
            prop_assert!(read(&text).is_some());
            reads_alike(&text);
        }
    }

    #[test]
    fn any_text_is_read_as_serde_json_reads_it(
        text in r#"[\[\]{}",:0-9a-z.eE+\- \t\n\\/éu]{0,48}"#,
    ) {
        reads_alike(text.as_bytes());
    }

    #[test]
    fn any_bytes_are_read_as_serde_json_reads_them(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
        reads_alike(&bytes);
    }
}

#[test]
fn a_skipped_literal_ends_where_the_read_one_does() {
    for text in [
        "true", "false", "null", "true,", "false]", "null}", "tru", "fals", "nul", "t", "f", "n",
        "trUe", "nulll", "falsey", "x", "\"true\"",
    ] {
        let (Some(mut read), Some(mut skipped)) = (
            Cursor::new(text.as_bytes(), false),
            Cursor::new(text.as_bytes(), false),
        ) else {
            panic!("{text} is UTF-8");
        };
        let value = read.literal();
        assert_eq!(skipped.skip_literal().is_some(), value.is_some(), "{text}");
        assert_eq!(skipped.at(), read.at(), "{text}");
    }
}

/// The cursor's UTF-8 check (SIMD, `simdutf8`) accepts exactly what `std::str::from_utf8`
/// accepts, on texts long enough for its vector loops: each kind of bad sequence (a stray
/// continuation byte, a lead byte cut short, an overlong form, an encoded surrogate, a code
/// point past U+10FFFF, 0xFF) at every offset of a 200-byte document, and the reader answers
/// as serde_json does for each.
#[test]
fn the_utf8_check_agrees_with_std_at_every_offset() {
    let text = format!(
        "{{\"k\":\"{}\",\"n\":[1,2,3]}}",
        "aé€𝄞 plain ascii text ".repeat(6)
    );
    let good = text.as_bytes();
    assert!(Cursor::new(good, false).is_some());
    let bad: [&[u8]; 7] = [
        b"\x80",
        b"\xc3",
        b"\xe2\x82",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xff",
    ];
    for seq in bad {
        for at in 0..good.len() {
            let mut bytes = good.get(..at).unwrap_or_default().to_vec();
            bytes.extend_from_slice(seq);
            bytes.extend_from_slice(good.get(at..).unwrap_or_default());
            assert_eq!(
                Cursor::new(&bytes, false).is_some(),
                std::str::from_utf8(&bytes).is_ok(),
                "{seq:x?} at {at}"
            );
            reads_alike(&bytes);
        }
    }
}
