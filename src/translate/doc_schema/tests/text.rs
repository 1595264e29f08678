//! The check of an answer's text as it is read (`object_passes`): it answers as the tree
//! check of the same text, on faithful objects only. Test-only code.

use super::*;

/// The items of an array whose objects list their members as the first one did: each key
/// is taken in place (`Prop::quoted`) from the second object on. Whatever the later objects
/// hold at those places (a repeated key, a longer key the property's text begins, the key
/// escaped or spaced, a key with a quote in it, another order), the walk answers as the tree
/// check of the text read does.
#[test]
fn keys_taken_in_place_answer_as_keys_read() {
    let schema = json!({"type": "object", "properties": {"items": {"type": "array",
        "items": {"type": "object", "required": ["ref"], "properties": {
            "ref": {"type": "string"}, "n": {"type": "integer"}, "a\"b": {"type": "integer"},
            "refs": {"type": "boolean"}}}}}});
    let s = DocSchema::compile(&schema);
    let first = r#"{"ref":"x","n":1,"a\"b":2}"#;
    for (later, valid) in [
        (r#"{"ref":"y","n":2,"a\"b":3}"#, true),
        (r#"{"ref":"y","ref":"z"}"#, false),
        (r#"{"ref":"y","n":2,"n":3}"#, false),
        (r#"{"refs":true,"ref":"y"}"#, true),
        (r#"{"refs":true}"#, false),
        (r#"{"ref":1}"#, false),
        (r#"{"ref" :"y","n" : 2}"#, true),
        (r#"{"r\u0065f":"y","n":2}"#, true),
        (r#"{"r\u0065f":"y","ref":"z"}"#, false),
        (r#"{"n":2,"ref":"y"}"#, true),
        (r#"{"ref":"y","nn":2,"n":"2"}"#, false),
        (r#"{"ref":"y","nn":2,"m":"2"}"#, true),
        (r#"{"ref":"y","m":1,"m":2}"#, false),
    ] {
        for text in [
            format!(r#"{{"items":[{first},{later}]}}"#),
            format!(r#"{{"items":[{first},{first},{later},{first}]}}"#),
        ] {
            let passes = object_passes(Some(&s), text.as_bytes()).is_some();
            let tree = crate::json_text::read_shaped(text.as_bytes())
                .is_ok_and(|(doc, shape)| shape.faithful && s.surely_valid(&doc));
            assert_eq!(passes, tree, "{text}");
            assert_eq!(passes, valid, "{text}");
        }
    }
}

/// What only the text shows: whitespace, escapes, repeated keys, numbers not in the writer's
/// form, integers past `i64`, trailing text, and a document that is not an object.
#[test]
fn the_text_check_passes_only_faithful_objects() {
    let schema = json!({"type": "object", "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
    let s = DocSchema::compile(&schema);
    let passes = |t: &str| object_passes(Some(&s), t.as_bytes()).is_some();
    let any = |t: &str| object_passes(None, t.as_bytes()).is_some();
    for good in [
        r#"{"a":1,"b":"x"}"#,
        " \n{ \"a\" : 1 , \"b\" : \"x\\u00e9\\n\" }\r\n",
        r#"{"a":-7,"c":[1,{"d":null},2.5,"s"],"e":{"f":true,"g":false}}"#,
        // An escaped key is the key it decodes to.
        r#"{"\u0061":1}"#,
    ] {
        assert!(passes(good), "{good}");
        assert!(any(good), "{good}");
    }
    for bad in [
        r#"{"a":1,"a":2}"#,
        r#"{"\u0061":1,"a":2}"#,
        r#"{"a":1,"c":1,"c":2}"#,
        r#"{"a":1,"c":{"d":1,"d":1}}"#,
        r#"{"a":1,"c":[{"d":1,"e":2,"f":3,"g":4,"h":5,"i":6,"j":7,"k":8,"l":9,"d":1}]}"#,
        r#"{"a":1,"c":1E2}"#,
        r#"{"a":1,"c":1.50}"#,
        r#"{"a":1,"c":18446744073709551615}"#,
        r#"{"a":1} x"#,
        r#"{"a":1"#,
        r#"{"a":1,}"#,
        r#"{"a":01}"#,
        r#"[{"a":1}]"#,
        "\"a\"",
        "",
        "{\"a\":1,\"b\":\"\u{1}\"}",
    ] {
        assert!(!passes(bad), "{bad}");
        assert!(!any(bad), "{bad}");
    }
    // The schema's answers: a missing required name, a wrong type, an integer-valued float
    // (an integer to jsonschema, left undecided by the native check).
    for invalid in [
        r#"{"b":"x"}"#,
        r#"{"a":"1"}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"a":1.0}"#,
    ] {
        assert!(!passes(invalid), "{invalid}");
        assert!(any(invalid), "{invalid}");
    }
}

#[test]
fn items_in_any_member_order_answer_as_their_trees_do() {
    // The text walk looks for each member first where the previous item of the array had it:
    // items that list their members in another order, miss one, add one or repeat one must
    // answer as the tree check of the same text does (texts, since a `Value` sorts its keys).
    let schema = DocSchema::compile(&json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "required": ["a", "b"],
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                           "c": {"type": "boolean"}},
            "additionalProperties": false
        }}}
    }));
    let agrees = |items: &str| -> bool {
        let text = format!(r#"{{"items":[{items}]}}"#);
        let passes = object_passes(Some(&schema), text.as_bytes()).is_some();
        let tree = crate::json_text::read_shaped(text.as_bytes())
            .is_ok_and(|(doc, shape)| shape.faithful && schema.surely_valid(&doc));
        assert_eq!(passes, tree, "text and tree differ on {text}");
        passes
    };
    assert!(agrees(
        r#"{"a":"x","b":1},{"a":"y","b":2},{"b":3,"a":"z"},{"a":"x","b":1,"c":true},{"c":false,"b":1,"a":"x"},{"a":"x","b":1}"#
    ));
    assert!(!agrees(r#"{"a":"x","b":1},{"a":"x","b":"1"}"#));
    assert!(!agrees(r#"{"b":1,"a":"x"},{"b":1,"a":2}"#));
    assert!(!agrees(r#"{"a":"x","b":1},{"a":"x","d":1}"#));
    assert!(!agrees(r#"{"a":"x","b":1},{"b":1}"#));
    assert!(!agrees(r#"{"a":"x","b":1},{"a":"x","a":"y","b":1}"#));
    assert!(!agrees(r#"{"a":"x","b":1},{"a":"x","b":1,"b":2}"#));
    // More members than are remembered, forward then backward, and one wrong at the end.
    let wide = DocSchema::compile(&json!({"type": "object", "properties": {"items": {
        "type": "array", "items": {"type": "object", "additionalProperties": false,
        "properties": (0..40).map(|i| (format!("p{i:02}"), json!({"type": "integer"})))
            .collect::<Map<String, Value>>()}}}}));
    let item = |order: &mut dyn Iterator<Item = usize>, last: &str| {
        let members: Vec<String> = order.map(|i| format!(r#""p{i:02}":{i}"#)).collect();
        format!("{{{}{last}}}", members.join(","))
    };
    let forward = item(&mut (0..40), "");
    let backward = item(&mut (0..40).rev(), "");
    let bad = item(&mut (0..39), r#","p39":"x""#);
    for (items, valid) in [
        (format!("{forward},{backward},{forward}"), true),
        (format!("{forward},{forward},{bad}"), false),
    ] {
        let text = format!(r#"{{"items":[{items}]}}"#);
        assert_eq!(object_passes(Some(&wide), text.as_bytes()).is_some(), valid);
    }
}

/// Bytes of JSON text changed, dropped or repeated at random: whatever text the walk
/// passes, the reader reads whole into an object, faithful, without a wide integer, and the
/// tree check passes that object.
fn text_passes_only_what_the_tree_passes(text: &[u8], schema: Option<&DocSchema>) {
    if object_passes(schema, text).is_none() {
        return;
    }
    let Ok((doc, shape)) = crate::json_text::read_shaped(text) else {
        panic!(
            "passed text the reader refuses: {}",
            String::from_utf8_lossy(text)
        );
    };
    let shown = String::from_utf8_lossy(text);
    assert!(
        shape.narrow && shape.faithful,
        "passed unfaithful text: {shown}"
    );
    assert!(matches!(doc, Doc::Obj(_)), "passed a non-object: {shown}");
    if let Some(s) = schema {
        assert!(
            s.surely_valid(&doc),
            "passed text the tree check does not: {shown}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn mutated_texts_pass_only_as_their_trees_do(
        v in any_json(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..4),
    ) {
        let mut text = serde_json::to_vec_pretty(&json!({"v": v, "n": 1, "s": "x"})).expect("json");
        for (at, how, byte) in edits {
            let i = at.index(text.len());
            // A byte JSON gives meaning to, most of the time; any byte otherwise.
            let b = if byte < 200 {
                b"{}[]\",:\\0123456789.eE-+ntfu \n"[usize::from(byte) % 29]
            } else {
                byte
            };
            match how {
                0 => text[i] = b,
                1 => text.insert(i, b),
                2 => {
                    text.remove(i);
                }
                _ => {
                    let piece = text[i..text.len().min(i + 8)].to_vec();
                    text.splice(i..i, piece);
                }
            }
            if text.is_empty() {
                break;
            }
        }
        text_passes_only_what_the_tree_passes(&text, None);
        for (_, native, _) in compiled_demo_schemas() {
            text_passes_only_what_the_tree_passes(&text, Some(native));
        }
        let own = DocSchema::compile(&json!({"type": "object", "required": ["n"],
            "properties": {"n": {"type": "integer"}, "s": {"type": "string", "maxLength": 3},
            "v": {"anyOf": [{"type": "object"}, {"type": "array"}, {"type": ["string", "number", "boolean", "null"]}]}}}));
        text_passes_only_what_the_tree_passes(&text, Some(&own));
    }
}
