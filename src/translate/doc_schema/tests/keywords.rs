//! Each keyword the native check models, answered as jsonschema answers it (and by the text
//! walk where the value is an object). Test-only code.

use super::*;

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
