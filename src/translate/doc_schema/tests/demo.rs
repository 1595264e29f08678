//! The demo's output schemas: real answers, pinned envelopes and the type bits the walk
//! reads, against jsonschema. Test-only code.

use super::*;

/// The output schema of the demo's `usp_availability_query`, the benchmarked tool.
fn availability_schema() -> &'static Value {
    demo_schemas_cached()
        .iter()
        .find_map(|(n, s)| (n == "usp_availability_query").then_some(s))
        .expect("the availability tool")
}

#[test]
fn the_benchmarked_answer_is_surely_valid() {
    let schema = availability_schema();
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
/// [`Node::Type`](crate::translate::doc_schema::node::Node::Type), 0 otherwise.
fn types_only_agree(s: &DocSchema) -> usize {
    use crate::translate::doc_schema::node::Node;
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
    let passes = |s: &DocSchema, t: &str| object_passes(Some(s), t.as_bytes()).is_some();
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

/// Valid demo answers, mutated: whatever the native check calls valid, jsonschema does,
/// and it calls some valid (the property above is not vacuous on real shapes).
#[test]
fn mutated_real_answers_are_never_wrongly_valid() {
    let schema = availability_schema();
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
