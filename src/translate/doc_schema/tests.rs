//! Unit and property tests of the native output-schema check: every "valid" agrees with
//! jsonschema. Test-only code.

use super::DocSchema;
use super::compile::{FORMATS_ASSERT, options};
use crate::json_doc::Doc;
use proptest::prelude::*;
use serde_json::json;
use serde_json::{Map, Value};
use std::sync::LazyLock;

fn validator(schema: &Value) -> jsonschema::Validator {
    options().build(schema).expect("a valid schema")
}

/// The native answer, checked against jsonschema's whenever it says valid.
fn sure(schema: &Value, v: &Value) -> bool {
    let s = DocSchema::compile(schema);
    let native = s.surely_valid(&Doc::from_value(v));
    if native {
        assert!(
            validator(schema).is_valid(v),
            "surely valid but jsonschema rejects {v} against {schema}"
        );
    }
    text_agrees(&s, v, native);
    native
}

/// The check of the value's text as it is read (`object_passes`), compact and pretty-printed,
/// against the check of its tree (`native`): it passes only an object the tree check passes,
/// and passes every such object (the values here have fewer than 64 properties an object and
/// no integer past `i64`).
fn text_agrees(s: &DocSchema, v: &Value, native: bool) {
    for text in [
        serde_json::to_vec(v).expect("json"),
        serde_json::to_vec_pretty(v).expect("json"),
    ] {
        let passes = super::object_passes(Some(s), &text).is_some();
        if passes {
            assert!(native && v.is_object(), "text passes, tree does not: {v}");
        }
        if native && v.is_object() && !has_wide_integer(v) {
            assert!(passes, "tree passes, text does not: {v}");
        }
    }
}

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
            let passes = super::object_passes(Some(&s), text.as_bytes()).is_some();
            let tree = crate::json_text::read_shaped(text.as_bytes())
                .is_ok_and(|(doc, shape)| shape.faithful && s.surely_valid(&doc));
            assert_eq!(passes, tree, "{text}");
            assert_eq!(passes, valid, "{text}");
        }
    }
}

/// An integer past `i64` anywhere in `v` (the text check leaves those to the tree path).
fn has_wide_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_u64() && n.as_i64().is_none(),
        Value::Array(items) => items.iter().any(has_wide_integer),
        Value::Object(m) => m.values().any(has_wide_integer),
        _ => false,
    }
}

/// What only the text shows: whitespace, escapes, repeated keys, numbers not in the writer's
/// form, integers past `i64`, trailing text, and a document that is not an object.
#[test]
fn the_text_check_passes_only_faithful_objects() {
    let schema = json!({"type": "object", "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
    let s = DocSchema::compile(&schema);
    let passes = |t: &str| super::object_passes(Some(&s), t.as_bytes()).is_some();
    let any = |t: &str| super::object_passes(None, t.as_bytes()).is_some();
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
fn keywords_answer_both_ways() {
    let schema = json!({
        "type": "object",
        "required": ["id", "state"],
        "properties": {
            "id": {"type": "string", "minLength": 2},
            "state": {"type": "string", "enum": ["available", "limited"]},
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "v": {"type": ["string", "null"]},
            "version": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}
        },
        "additionalProperties": false
    });
    let ok = json!({"id": "s1", "state": "available", "n": 3, "tags": ["a"], "v": null, "version": "2026-08-20"});
    assert!(sure(&schema, &ok));
    for bad in [
        json!({"id": "s1"}),
        json!({"id": "s", "state": "available"}),
        json!({"id": "s1", "state": "gone"}),
        json!({"id": "s1", "state": "available", "n": "3"}),
        json!({"id": "s1", "state": "available", "tags": ["a", "b", "c"]}),
        json!({"id": "s1", "state": "available", "tags": [1]}),
        json!({"id": "s1", "state": "available", "v": 1}),
        json!({"id": "s1", "state": "available", "extra": 1}),
        json!({"id": "s1", "state": "available", "version": "26-08-20"}),
        // ECMA-262's `\d` is ASCII only: jsonschema's answer, not Rust's regex crate's.
        json!({"id": "s1", "state": "available", "version": "٢٠٢٦-08-20"}),
        json!([]),
    ] {
        assert!(!sure(&schema, &bad), "{bad}");
        assert!(!validator(&schema).is_valid(&bad), "{bad}");
    }
}

#[test]
fn required_names_are_found_wherever_they_sort() {
    // Bits for the names among the properties, a list for the others.
    let with_props = json!({"type": "object", "required": ["m", "a", "z"],
        "properties": {"a": {}, "b": {}, "m": {"type": "integer"}}});
    let without = json!({"type": "object", "required": ["m", "a", "z"]});
    for schema in [with_props, without] {
        assert!(sure(&schema, &json!({"a": 1, "b": 2, "m": 3, "z": 4})));
        for bad in [
            json!({"b": 2, "m": 3, "z": 4}),
            json!({"a": 1, "b": 2, "z": 4}),
            json!({"a": 1, "b": 2, "m": 3}),
            json!({"aa": 1, "m": 3, "z": 4}),
            json!({}),
        ] {
            assert!(!sure(&schema, &bad), "{bad}");
            assert!(!validator(&schema).is_valid(&bad), "{bad}");
        }
    }
}

#[test]
fn refs_and_combinators() {
    let schema = json!({
        "type": "object",
        "anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
        "$defs": {
            "a": {"type": "object", "required": ["a"], "properties": {"a": {"const": "x"}}},
            "b": {"type": "object", "required": ["b"], "properties": {"b": {"$ref": "#/$defs/b"}}}
        }
    });
    assert!(sure(&schema, &json!({"a": "x"})));
    assert!(!sure(&schema, &json!({"b": {"b": {"b": {"b": {}}}}})));
    assert!(!sure(&schema, &json!({"a": "y"})));
    assert!(!sure(&schema, &json!({"c": 1})));
    let one = json!({"oneOf": [{"type": "string"}, {"type": "string", "enum": ["x"]}]});
    assert!(sure(&one, &json!("y")));
    assert!(!sure(&one, &json!("x")));
    let not = json!({"not": {"type": "null"}});
    assert!(sure(&not, &json!(1)));
    assert!(!sure(&not, &Value::Null));
    assert!(sure(&json!(true), &json!({"any": 1})));
    assert!(!sure(&json!(false), &json!(1)));
}

#[test]
fn conditionals_contains_and_property_names() {
    let schema = json!({
        "type": "object",
        "if": {"properties": {"status": {"const": "error"}}, "required": ["status"]},
        "then": {"required": ["messages"]},
        "else": {"required": ["id"]},
        "propertyNames": {"maxLength": 8},
        "properties": {"messages": {"type": "array",
            "contains": {"properties": {"type": {"const": "error"}}, "required": ["type"]},
            "maxContains": 1}}
    });
    assert!(sure(&schema, &json!({"id": "x"})));
    assert!(sure(
        &schema,
        &json!({"status": "error", "messages": [{"type": "error"}, {"type": "info"}]})
    ));
    for bad in [
        json!({"status": "error", "id": "x"}),
        json!({"status": "ok"}),
        json!({"status": "error", "messages": []}),
        json!({"status": "error", "messages": [{"type": "error"}, {"type": "error"}]}),
        json!({"id": "x", "much_too_long": 1}),
    ] {
        assert!(!sure(&schema, &bad), "{bad}");
        assert!(!validator(&schema).is_valid(&bad), "{bad}");
    }
    let none = json!({"contains": {"type": "string"}, "minContains": 0});
    assert!(sure(&none, &json!([1, 2])));
}

#[test]
fn a_cycle_without_data_ends() {
    let schema = json!({"$ref": "#"});
    assert!(!sure(&schema, &json!(1)));
}

#[test]
fn what_is_not_modelled_is_never_surely_valid() {
    for schema in [
        json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false}),
        json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
        json!({"type": "integer"}),
        json!({"enum": [1, 2]}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
        json!({"properties": {"a": {"$id": "https://x.example/a", "type": "string"}}}),
    ] {
        let v = if schema.get("type") == Some(&json!("integer")) {
            json!(1.0)
        } else if schema.get("enum").is_some() {
            json!(1)
        } else {
            json!({"a": "x"})
        };
        assert!(
            !DocSchema::compile(&schema).surely_valid(&Doc::from_value(&v)),
            "{schema}"
        );
        assert!(
            validator(&schema).is_valid(&v),
            "{schema} should accept {v}"
        );
    }
}

#[test]
fn formats_are_annotations_here() {
    // jsonschema does not assert `format` in 2020-12 by default: neither does this check.
    assert!(!*FORMATS_ASSERT);
    let schema = json!({"type": "string", "format": "date-time"});
    assert!(sure(&schema, &json!("not a date")));
}

/// The demo's configuration, as the loader builds it.
fn demo_config() -> crate::config::Gateway {
    let dir = crate::demo::write_files("127.0.0.1:9".parse().expect("an address"), None)
        .expect("demo files");
    let g = crate::config::load(&[dir.join("mappings")]).expect("demo config loads");
    let _ = std::fs::remove_dir_all(&dir);
    g
}

/// The demo's output schemas, as the loader builds them.
fn demo_schemas() -> Vec<(String, Value)> {
    demo_config()
        .tools
        .values()
        .filter_map(|t| {
            let d = t.descriptor.value();
            d.get("outputSchema").cloned().map(|s| (t.name.clone(), s))
        })
        .collect()
}

#[test]
fn the_benchmarked_answer_is_surely_valid() {
    let schemas = demo_schemas();
    let (_, schema) = schemas
        .iter()
        .find(|(n, _)| n == "usp_availability_query")
        .expect("the availability tool");
    let answer = json!({
        "usp": {"version": "2026-08-20", "capabilities": {"dev.usp-protocol.availability": [{"version": "2026-08-20"}]}},
        "service_id": "MASSAGE-60",
        "slots": [{"id": "MASSAGE-60@2026-12-01T09:00", "service_id": "MASSAGE-60",
            "start": "2026-12-01T09:00:00+00:00", "end": "2026-12-01T10:00:00+00:00",
            "duration": "PT60M", "state": "available"}],
        "messages": []
    });
    assert!(validator(schema).is_valid(&answer));
    assert!(sure(schema, &answer));
    let mut bad = answer.clone();
    bad["slots"][0]["state"] = json!("gone");
    assert!(!sure(schema, &bad));
}

/// Every property's `types_only` is its node's `type` bits exactly when that node is
/// [`Node::Type`](super::node::Node::Type), 0 otherwise.
fn types_only_agree(s: &DocSchema) -> usize {
    use super::node::Node;
    let mut typed = 0;
    for n in &s.nodes {
        if let Node::Schema(k) = n {
            for p in &k.properties {
                let expected = match s.nodes.get(p.node) {
                    Some(Node::Type(t)) => *t,
                    _ => 0,
                };
                assert_eq!(p.types_only, expected, "property {}", p.name);
                typed += usize::from(expected != 0);
            }
        }
    }
    typed
}

/// The type bits the walk reads a member by agree with the nodes: with `$ref`s compiled
/// before their targets, in the demo's schemas, and after `pin` has made a member `true`.
#[test]
fn a_members_type_bits_are_its_nodes() {
    let schema = json!({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/s"}, "b": {"type": "integer"}, "c": {"$ref": "#/$defs/o"},
        "d": {"type": "string", "minLength": 1}},
        "$defs": {"s": {"type": "string"},
            "o": {"type": "object", "properties": {"e": {"$ref": "#/$defs/s"}}}}});
    let mut s = DocSchema::compile(&schema);
    assert!(types_only_agree(&s) >= 1);
    assert!(s.pin("b", &Doc::from_value(&json!(1))));
    types_only_agree(&s);
    let passes = |s: &DocSchema, t: &str| super::object_passes(Some(s), t.as_bytes()).is_some();
    // `b` is `true` once pinned: any value passes there, and only there.
    assert!(passes(
        &s,
        r#"{"a":"x","b":"not an integer","c":{"e":"y"}}"#
    ));
    assert!(!passes(&s, r#"{"a":1,"b":1}"#));
    assert!(!passes(&s, r#"{"c":{"e":1}}"#));
    let mut typed = 0;
    for (_, compiled, _) in compiled_demo_schemas() {
        typed += types_only_agree(compiled);
    }
    assert!(typed > 0, "no demo property asserts only its type");
}

/// The pinned check of an answer carrying `usp` (the constant): the same answer as the
/// unpinned one on every answer with that member, for each demo tool that has one.
#[test]
fn a_pinned_envelope_answers_as_the_whole_check() {
    let g = demo_config();
    let mut pinned_tools = 0;
    for tool in g.tools.values() {
        let descriptor = tool.descriptor.value();
        let (Some((key, env)), Some(schema)) = (&tool.envelope, descriptor.get("outputSchema"))
        else {
            continue;
        };
        let whole = DocSchema::compile(schema);
        let mut pinned = DocSchema::compile(schema);
        if !pinned.pin(key, &Doc::from_value(env)) {
            continue;
        }
        pinned_tools += 1;
        // The benchmarked answer's shape with this tool's envelope, and mutations of it.
        let answer = json!({
            key.as_str(): env,
            "service_id": "MASSAGE-60",
            "slots": [{"id": "s", "service_id": "MASSAGE-60", "start": "2026-12-01T09:00:00+00:00",
                "end": "2026-12-01T10:00:00+00:00", "duration": "PT60M", "state": "available"}],
            "messages": [],
            "booking": {"id": "b"},
            "id": "x"
        });
        let mut cases = vec![answer.clone(), json!({ key.as_str(): env })];
        for (field, bad) in [
            ("service_id", json!(1)),
            ("slots", json!("x")),
            ("messages", json!([{"type": 1}])),
            ("booking", json!(7)),
        ] {
            let mut a = answer.clone();
            a[field] = bad;
            cases.push(a);
        }
        for case in &cases {
            let doc = Doc::from_value(case);
            assert_eq!(
                pinned.surely_valid(&doc),
                whole.surely_valid(&doc),
                "{}: {case}",
                tool.name
            );
        }
    }
    assert!(
        pinned_tools >= 10,
        "the demo's USP and UCP tools pin: {pinned_tools}"
    );
}

#[test]
fn a_pin_changes_no_answer_for_the_constant_and_keeps_nested_checks() {
    let object = json!({"type": "object", "required": ["usp"],
        "properties": {"usp": {"type": "object", "required": ["version"]}, "n": {"type": "integer"}}});
    let good = json!({"version": "1"});
    // The constant itself invalid, or a key the schema does not list: nothing pinned.
    let mut s = DocSchema::compile(&object);
    assert!(!s.pin("usp", &Doc::from_value(&json!({}))));
    assert!(!s.surely_valid(&Doc::from_value(&json!({"usp": {}}))));
    assert!(!DocSchema::compile(&object).pin("ucp", &Doc::from_value(&good)));
    // Behind `$ref`s and in-place applicators: the same answers, pinned or not, for every
    // answer holding the constant.
    let answers = [
        json!({"usp": good, "n": 1}),
        json!({"usp": good, "n": "1"}),
        json!({"usp": good}),
        json!({"usp": good, "x": true}),
        json!({"n": 1}),
    ];
    for extra in [
        json!({}),
        json!({"anyOf": [{"required": ["n"]}, {"required": ["x"]}]}),
        json!({"oneOf": [{"required": ["n"]}, {"properties": {"usp": {"required": ["version"]}}}]}),
        json!({"not": {"required": ["x"]}}),
        json!({"if": {"required": ["n"]}, "then": {"properties": {"usp": {"maxProperties": 1}}}, "else": false}),
        json!({"propertyNames": {"maxLength": 3}}),
        json!({"allOf": [{"properties": {"usp": {"type": "object"}}}]}),
    ] {
        let mut schema = object.clone();
        for (k, v) in extra.as_object().expect("an object") {
            schema[k] = v.clone();
        }
        let wrapped = json!({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/o"}, false]}, "o": schema}});
        for schema in [schema, wrapped] {
            let whole = DocSchema::compile(&schema);
            let mut pinned = DocSchema::compile(&schema);
            assert!(pinned.pin("usp", &Doc::from_value(&good)), "{schema}");
            for a in &answers {
                let doc = Doc::from_value(a);
                assert_eq!(
                    pinned.surely_valid(&doc),
                    whole.surely_valid(&doc),
                    "{a} against {schema}"
                );
            }
        }
    }
    // The same object schema reached again (a `$ref` to the root) is checked whole.
    let recursive = json!({"type": "object", "required": ["usp"],
        "properties": {"usp": {"type": "object", "required": ["version"]}, "child": {"$ref": "#"}}});
    let mut s = DocSchema::compile(&recursive);
    assert!(s.pin("usp", &Doc::from_value(&good)));
    assert!(s.surely_valid(&Doc::from_value(
        &json!({"usp": good, "child": {"usp": good}})
    )));
    assert!(!s.surely_valid(&Doc::from_value(
        &json!({"usp": good, "child": {"usp": {}}})
    )));
    // A cycle through in-place applicators ends.
    let cycle = json!({"allOf": [{"$ref": "#"}], "properties": {"usp": {"type": "object"}}});
    let mut s = DocSchema::compile(&cycle);
    assert!(s.pin("usp", &Doc::from_value(&good)));
    assert!(!s.surely_valid(&Doc::from_value(&json!({"usp": good}))));
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z0-9:+-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("available"),
            Just("2026-08-20"),
            Just("error"),
            Just("MASSAGE-60"),
            Just("PT60M"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    let keys = prop_oneof![
        Just("usp"),
        Just("version"),
        Just("slots"),
        Just("id"),
        Just("state"),
        Just("messages"),
        Just("type"),
        Just("code"),
        Just("content"),
        Just("service_id"),
        Just("booking"),
        Just("ucp"),
        Just("status"),
        Just("x"),
    ];
    leaf().prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// Removes, retypes or adds one member somewhere in `v` (`seed` picks where and how).
fn mutate(v: &mut Value, seed: u64) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[(seed as usize) % keys.len()];
            match seed % 5 {
                0 => {
                    m.remove(k);
                }
                1 => {
                    m.insert(k.clone(), json!(7));
                }
                2 => {
                    m.insert("extra".into(), json!("x"));
                }
                _ => {
                    if let Some(x) = m.get_mut(k) {
                        mutate(x, seed / 5);
                    }
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = (seed as usize) % a.len();
            mutate(&mut a[i], seed / 3);
        }
        Value::String(s) => s.push('!'),
        other => *other = json!("changed"),
    }
}

proptest! {
    /// Property names that share prefixes, run past eight bytes or hold NULs: the native
    /// answer is exactly jsonschema's (nothing here is left undecided).
    #[test]
    fn properties_and_required_answer_exactly(
        names in prop::collection::btree_set("(service_|s)?[a\u{0}z]{0,10}", 1..8),
        required in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        present in prop::collection::vec(any::<bool>(), 8),
        extra in prop::collection::btree_set("(service_|s)?[a\u{0}z]{0,10}", 0..3),
        closed in any::<bool>(),
    ) {
        let names: Vec<String> = names.into_iter().collect();
        let mut req: Vec<&String> = required.iter().map(|i| i.get(&names)).collect();
        req.sort();
        req.dedup();
        let props: Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!({"type": "integer"})))
            .collect();
        let schema = json!({"type": "object", "properties": props, "required": req,
            "additionalProperties": !closed});
        let mut doc = Map::new();
        for (n, p) in names.iter().zip(&present) {
            if *p {
                doc.insert(n.clone(), json!(1));
            }
        }
        for e in extra {
            doc.insert(e, json!(2));
        }
        let doc = Value::Object(doc);
        let compiled = DocSchema::compile(&schema);
        let native = compiled.surely_valid(&Doc::from_value(&doc));
        prop_assert_eq!(native, validator(&schema).is_valid(&doc), "{} against {}", doc, schema);
        text_agrees(&compiled, &doc, native);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn surely_valid_implies_jsonschema_valid(v in any_json(), seeds in prop::collection::vec(any::<u64>(), 4)) {
        for (schema, native, check) in compiled_demo_schemas() {
            let mut cases = vec![v.clone()];
            for s in &seeds {
                let mut m = v.clone();
                mutate(&mut m, *s);
                cases.push(m);
            }
            for c in cases {
                let sure = native.surely_valid(&Doc::from_value(&c));
                if sure {
                    prop_assert!(check.is_valid(&c), "{} against {}", c, schema);
                }
                text_agrees(native, &c, sure);
            }
        }
    }
}

/// Bytes of JSON text changed, dropped or repeated at random: whatever text the walk
/// passes, the reader reads whole into an object, faithful, without a wide integer, and the
/// tree check passes that object.
fn text_passes_only_what_the_tree_passes(text: &[u8], schema: Option<&DocSchema>) {
    if super::object_passes(schema, text).is_none() {
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

/// Each demo output schema with both checks compiled, once.
fn compiled_demo_schemas() -> &'static [(Value, DocSchema, jsonschema::Validator)] {
    static SCHEMAS: LazyLock<Vec<(Value, DocSchema, jsonschema::Validator)>> =
        LazyLock::new(|| {
            demo_schemas_cached()
                .iter()
                .map(|(_, s)| (s.clone(), DocSchema::compile(s), validator(s)))
                .collect()
        });
    &SCHEMAS
}

fn demo_schemas_cached() -> &'static [(String, Value)] {
    static SCHEMAS: LazyLock<Vec<(String, Value)>> = LazyLock::new(demo_schemas);
    &SCHEMAS
}

/// Valid demo answers, mutated: whatever the native check calls valid, jsonschema does,
/// and it calls some valid (the property above is not vacuous on real shapes).
#[test]
fn mutated_real_answers_are_never_wrongly_valid() {
    let schemas = demo_schemas_cached();
    let (_, schema) = schemas
        .iter()
        .find(|(n, _)| n == "usp_availability_query")
        .expect("the availability tool");
    let native = DocSchema::compile(schema);
    let check = validator(schema);
    let answer = json!({
        "usp": {"version": "2026-08-20"},
        "service_id": "MASSAGE-60",
        "slots": [
            {"id": "a", "service_id": "MASSAGE-60", "start": "s", "end": "e", "duration": "PT60M", "state": "available"},
            {"id": "b", "service_id": "MASSAGE-60", "start": "s", "end": "e", "duration": "PT30M", "state": "limited",
             "capacity": {"total": 3, "remaining": 1}, "pricing": {"amount": 100, "currency": "EUR"}}
        ],
        "messages": [{"type": "warning", "code": "c", "content": "t"}]
    });
    let (mut sure_count, mut total) = (0, 0);
    for seed in 0..4000u64 {
        let mut m = answer.clone();
        mutate(&mut m, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7);
        total += 1;
        let sure = native.surely_valid(&Doc::from_value(&m));
        if sure {
            sure_count += 1;
            assert!(check.is_valid(&m), "{m}");
        }
        text_agrees(&native, &m, sure);
    }
    assert!(
        sure_count > 0 && sure_count < total,
        "{sure_count} of {total}"
    );
}

#[test]
fn a_ref_beside_required_names_checks_both() {
    // `required` with no `properties` beside it keeps its names apart from the property bits:
    // the walk must not take such a subschema for a `$ref` alone.
    let schema = json!({
        "$ref": "#/$defs/o",
        "required": ["a"],
        "$defs": {"o": {"type": "object"}}
    });
    assert!(!sure(&schema, &json!({"b": 1})));
    assert!(sure(&schema, &json!({"a": 1})));
    let all_of = json!({"allOf": [{"type": "object"}], "required": ["a"]});
    assert!(!sure(&all_of, &json!({"b": 1})));
    assert!(sure(&all_of, &json!({"a": 1, "b": 2})));
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
        let passes = super::object_passes(Some(&schema), text.as_bytes()).is_some();
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
        assert_eq!(
            super::object_passes(Some(&wide), text.as_bytes()).is_some(),
            valid
        );
    }
}
