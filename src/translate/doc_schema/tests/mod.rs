//! Tests of the native output-schema check, by part: keywords, the text walk, the demo's
//! schemas; here the helpers they share. Test-only code: every "valid" agrees with jsonschema.

use super::compile::{FORMATS_ASSERT, options};
use super::{DocSchema, object_passes};
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
        let passes = object_passes(Some(s), &text).is_some();
        if passes {
            assert!(native && v.is_object(), "text passes, tree does not: {v}");
        }
        if native && v.is_object() && !has_wide_integer(v) {
            assert!(passes, "tree passes, text does not: {v}");
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

mod demo;
mod keywords;
mod text;
