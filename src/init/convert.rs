//! OpenAPI schema objects (3.0 and 3.1) rewritten as JSON Schema 2020-12 for an OpenRPC
//! document: `nullable`, boolean exclusive bounds and `example` translated, every `$ref` turned
//! into a shared `components.schemas` entry (recursion-safe), `readOnly` properties left out of
//! inputs. It never fetches a remote reference: those are reported and replaced by `{}`.

use super::source::{Place, RefError, Sources};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Which side of a call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Tool arguments: `readOnly` properties are left out.
    Input,
    /// The backend's answer: `writeOnly` properties are not required.
    Output,
}

/// A non-fatal finding at a place in the OpenAPI documents.
#[derive(Debug, Clone)]
pub struct Finding {
    pub place: Place,
    pub message: String,
}

/// The shared schema table being built, and the findings made on the way.
pub struct Schemas<'s> {
    pub src: &'s mut Sources,
    names: HashMap<(Place, Dir), String>,
    taken: HashSet<String>,
    queue: Vec<(Place, Dir, String)>,
    sensitive: HashMap<Place, bool>,
    pub defs: BTreeMap<String, Value>,
    pub findings: Vec<Finding>,
}

const DROPPED: &[&str] = &[
    "discriminator",
    "xml",
    "externalDocs",
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$dynamicRef",
    "$comment",
    "nullable",
    "example",
];
const SUBSCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "contentSchema",
];
const SUBSCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
const SUBSCHEMA_MAP: &[&str] = &[
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Characters kept in a component name.
pub fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl<'s> Schemas<'s> {
    pub fn new(src: &'s mut Sources) -> Self {
        Schemas {
            src,
            names: HashMap::new(),
            taken: HashSet::new(),
            queue: Vec::new(),
            sensitive: HashMap::new(),
            defs: BTreeMap::new(),
            findings: Vec::new(),
        }
    }

    fn find(&mut self, place: &Place, message: String) {
        self.findings.push(Finding {
            place: place.clone(),
            message,
        });
    }

    /// Whether the schema at `place` (or one it references) has `readOnly` or `writeOnly`, so
    /// that its input and output forms differ. `visiting` breaks cycles.
    fn is_sensitive(&mut self, place: &Place, visiting: &mut Vec<Place>) -> (bool, bool) {
        if let Some(s) = self.sensitive.get(place) {
            return (*s, false);
        }
        if visiting.contains(place) {
            return (false, true);
        }
        let Ok(node) = self.src.node(place) else {
            return (false, false);
        };
        visiting.push(place.clone());
        let mut refs = Vec::new();
        let mut own = false;
        collect(&node, &mut refs, &mut own);
        let mut cyc = false;
        let mut result = own;
        if !result {
            for r in refs {
                let Ok(t) = self.src.target(&r, place) else {
                    continue;
                };
                let (s, c) = self.is_sensitive(&t, visiting);
                cyc |= c;
                if s {
                    result = true;
                    break;
                }
            }
        }
        visiting.pop();
        if result || !cyc {
            self.sensitive.insert(place.clone(), result);
        }
        (result, cyc)
    }

    fn name_for(&mut self, place: &Place, dir: Dir) -> String {
        let sensitive = self.is_sensitive(place, &mut Vec::new()).0;
        let dir = if sensitive { dir } else { Dir::Output };
        if let Some(n) = self.names.get(&(place.clone(), dir)) {
            return n.clone();
        }
        let base = match place.pointer.strip_prefix("/components/schemas/") {
            Some(n) if !n.contains('/') => n.replace("~1", "/").replace("~0", "~"),
            _ => {
                let stem = place
                    .file
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("schema")
                    .to_string();
                match place.pointer.rsplit('/').next() {
                    Some(last) if !last.is_empty() => {
                        if place.pointer.starts_with("/components/") {
                            last.to_string()
                        } else {
                            format!("{stem}_{last}")
                        }
                    }
                    _ => stem,
                }
            }
        };
        let mut base = sanitize(&base);
        if dir == Dir::Input {
            base.push_str("Input");
        }
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        self.names.insert((place.clone(), dir), name.clone());
        self.queue.push((place.clone(), dir, name.clone()));
        name
    }

    /// Converts every referenced schema still waiting.
    pub fn finish(&mut self) {
        while let Some((place, dir, name)) = self.queue.pop() {
            let node = match self.src.node(&place) {
                Ok(n) => n,
                Err(e) => {
                    self.find(
                        &place,
                        format!("unresolvable schema: {e}; an open schema stands in"),
                    );
                    self.defs.insert(name, json!({}));
                    continue;
                }
            };
            // A pure alias chain that comes back to itself would never end in a validator.
            if node
                .as_object()
                .is_some_and(|o| o.len() == 1 && o.contains_key("$ref"))
                && let Err(e @ RefError::Circular(_)) = self.src.deref(&node, &place)
            {
                self.find(&place, format!("{e}; an open schema stands in"));
                self.defs.insert(name, json!({}));
                continue;
            }
            let v = self.convert(&node, &place, dir);
            self.defs.insert(name, v);
        }
    }

    /// Rewrites one schema node found at `at`.
    pub fn convert(&mut self, node: &Value, at: &Place, dir: Dir) -> Value {
        let Value::Object(obj) = node else {
            return node.clone();
        };
        let mut out = Map::new();
        let mut dropped_props: Vec<String> = Vec::new();
        for (k, v) in obj {
            if DROPPED.contains(&k.as_str()) || k.starts_with("x-") {
                continue;
            }
            let here = at.child(k);
            match k.as_str() {
                "$ref" => {
                    let Some(r) = v.as_str() else { continue };
                    match self.src.target(r, at) {
                        Ok(t) => match self.src.node(&t) {
                            Ok(_) => {
                                let name = self.name_for(&t, dir);
                                out.insert(
                                    "$ref".into(),
                                    json!(format!("#/components/schemas/{name}")),
                                );
                            }
                            Err(e) => self.find(
                                &here,
                                format!("unresolvable `$ref: {r}` ({e}); an open schema stands in"),
                            ),
                        },
                        Err(e) => {
                            self.find(&here, format!("{e}; an open schema stands in"));
                        }
                    }
                }
                "properties" => {
                    let mut props = Map::new();
                    if let Value::Object(p) = v {
                        for (name, s) in p {
                            if dir == Dir::Input && flag(s, "readOnly") {
                                dropped_props.push(name.clone());
                                continue;
                            }
                            if dir == Dir::Output && flag(s, "writeOnly") {
                                dropped_props.push(name.clone());
                            }
                            props.insert(name.clone(), self.convert(s, &here.child(name), dir));
                        }
                    }
                    out.insert(k.clone(), Value::Object(props));
                }
                "exclusiveMinimum" | "exclusiveMaximum" if v.is_boolean() => {
                    let bound = if k == "exclusiveMinimum" {
                        "minimum"
                    } else {
                        "maximum"
                    };
                    if v == &Value::Bool(true)
                        && let Some(b) = obj.get(bound)
                    {
                        out.insert(k.clone(), b.clone());
                    }
                }
                _ if SUBSCHEMA.contains(&k.as_str()) && v.is_object() => {
                    out.insert(k.clone(), self.convert(v, &here, dir));
                }
                _ if SUBSCHEMA_LIST.contains(&k.as_str()) => match v {
                    Value::Array(items) => {
                        let list = items
                            .iter()
                            .enumerate()
                            .map(|(i, s)| self.convert(s, &here.child(&i.to_string()), dir))
                            .collect();
                        out.insert(k.clone(), Value::Array(list));
                    }
                    other => {
                        out.insert(k.clone(), other.clone());
                    }
                },
                _ if SUBSCHEMA_MAP.contains(&k.as_str()) => {
                    let mut m = Map::new();
                    if let Value::Object(p) = v {
                        for (name, s) in p {
                            m.insert(name.clone(), self.convert(s, &here.child(name), dir));
                        }
                    }
                    out.insert(k.clone(), Value::Object(m));
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        // A bound made exclusive above is not also inclusive.
        for (ex, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if obj.get(ex) == Some(&Value::Bool(true)) && out.contains_key(ex) {
                out.remove(bound);
            }
        }
        if !dropped_props.is_empty()
            && let Some(Value::Array(req)) = out.get_mut("required")
        {
            req.retain(|r| {
                r.as_str()
                    .is_none_or(|r| !dropped_props.iter().any(|d| d == r))
            });
            if req.is_empty() {
                out.remove("required");
            }
        }
        if let Some(ex) = obj.get("example")
            && !out.contains_key("examples")
        {
            out.insert("examples".into(), json!([ex]));
        }
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            return nullable(out);
        }
        Value::Object(out)
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

/// OpenAPI 3.0 `nullable: true`: `null` joins the types (and the enum).
fn nullable(mut out: Map<String, Value>) -> Value {
    if let Some(Value::Array(e)) = out.get_mut("enum")
        && !e.contains(&Value::Null)
    {
        e.push(Value::Null);
    }
    match out.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            out.insert("type".into(), json!([t, "null"]));
            Value::Object(out)
        }
        Some(Value::Array(ts)) => {
            if !ts.contains(&json!("null")) {
                ts.push(json!("null"));
            }
            Value::Object(out)
        }
        _ => json!({"anyOf": [Value::Object(out), {"type": "null"}]}),
    }
}

/// The `$ref` values below `node`, and whether it has `readOnly` / `writeOnly` itself.
fn collect(node: &Value, refs: &mut Vec<String>, own: &mut bool) {
    match node {
        Value::Object(o) => {
            for (k, v) in o {
                match k.as_str() {
                    "$ref" => {
                        if let Some(r) = v.as_str() {
                            refs.push(r.to_string());
                        }
                    }
                    "readOnly" | "writeOnly" if v == &Value::Bool(true) => *own = true,
                    "example" | "examples" | "default" | "enum" | "const" => {}
                    _ => collect(v, refs, own),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect(v, refs, own)),
        _ => {}
    }
}
