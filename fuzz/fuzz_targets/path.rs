//! Path templating and percent-encoding. Input: a template, a NUL byte, then JSON arguments.
//! A segment never carries `/`, `?` or `#` and decodes back to its input; a rendered path has no `?`/`#`, keeps every literal segment, and renders each segment with
//! placeholders (alone or beside fixed text) as one non-empty, non-dot ASCII segment that keeps its fixed text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percent_encoding::percent_decode_str;
use portico::translate::path::{PathTemplate, encode_segment};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (template, args) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(template) = std::str::from_utf8(template) else {
        return;
    };

    let seg = encode_segment(template);
    assert!(seg.is_ascii());
    assert!(
        !seg.contains(['/', '?', '#']),
        "unencoded delimiter in {seg:?}"
    );
    assert_eq!(
        percent_decode_str(&seg).decode_utf8().ok().as_deref(),
        Some(template)
    );

    let Ok(t) = PathTemplate::parse(template) else {
        return;
    };
    let args: Value = serde_json::from_slice(args).unwrap_or(Value::Null);
    if let Ok(path) = t.render(&args) {
        assert!(!path.contains(['?', '#']), "rendered {path:?}");
        let got: Vec<&str> = path.split('/').collect();
        let want: Vec<&str> = template.split('/').collect();
        assert_eq!(
            got.len(),
            want.len(),
            "a variable changed the segment count: {template:?} -> {path:?}"
        );
        for (g, w) in got.iter().zip(&want) {
            if let (Some(open), Some(close)) = (w.find('{'), w.rfind('}')) {
                // A segment with placeholders, alone (`{id}`) or beside fixed text
                // (`{sid}.json`): one non-dot segment that keeps the fixed text (written as
                // is) around what the placeholders put in, which is non-empty.
                let (before, after) = (&w[..open], &w[close + 1..]);
                assert!(
                    g.len() > before.len() + after.len()
                        && g.starts_with(before)
                        && g.ends_with(after),
                    "the fixed text around a placeholder changed: {w:?} -> {g:?}"
                );
                // A placeholder alone in its segment: nothing but its encoded value.
                if w.starts_with('{')
                    && w.ends_with('}')
                    && w.matches('{').count() == 1
                    && w.matches('}').count() == 1
                {
                    assert!(g.is_ascii(), "segment {g:?}");
                }
                let decoded = percent_decode_str(g).decode_utf8_lossy();
                assert!(
                    decoded != "." && decoded != "..",
                    "dot-segment from {template:?}"
                );
            } else {
                assert_eq!(g, w, "a literal segment changed");
            }
        }
    }
});
