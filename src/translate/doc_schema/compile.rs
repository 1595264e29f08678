//! Compiles a tool's output schema (`serde_json` value) into the node tree of a [`DocSchema`].
//! It never checks a document; what it does not model compiles to a node that answers "not sure".

use super::node::{
    ARRAY, BOOL, DocSchema, INTEGER, Keywords, MAX_DEPTH, NULL, NUMBER, Node, OBJECT, Prop, STRING,
};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Keywords that assert nothing (in Draft 2020-12 with default options).
const ANNOTATIONS: [&str; 12] = [
    "title",
    "description",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$defs",
    "definitions",
    "contentMediaType",
    "contentEncoding",
];

/// The assertions and applicators checked here.
const MODELLED: [&str; 25] = [
    "if",
    "then",
    "else",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "type",
    "required",
    "enum",
    "const",
    "properties",
    "additionalProperties",
    "items",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
];

/// Keywords that hold subschemas: a subschema with one of them is never handed to a leaf
/// validator (its subschemas may `$ref` into the root).
const APPLICATORS: [&str; 20] = [
    "properties",
    "patternProperties",
    "additionalProperties",
    "items",
    "prefixItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$ref",
    "$dynamicRef",
    "dependencies",
];

/// Draft 2020-12, as `config::compile` builds the authority.
pub(super) fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012)
}

/// Whether `format` asserts with these options (it is an annotation in 2020-12 unless asked
/// for): asked of jsonschema itself, once.
pub(super) static FORMATS_ASSERT: LazyLock<bool> = LazyLock::new(|| {
    let probe = serde_json::json!({ "format": "email" });
    options()
        .build(&probe)
        .map(|v| !v.is_valid(&Value::String("not an email".into())))
        .unwrap_or(true)
});

struct Compiler<'s> {
    root: &'s Value,
    nodes: Vec<Node>,
    /// `$ref` targets already compiled, by pointer.
    refs: HashMap<String, usize>,
}

impl DocSchema {
    /// Compiles `schema` (a tool's bundled output schema: local `$ref`s only). Never fails: a
    /// construct it does not model compiles to a node that answers "not sure".
    pub fn compile(schema: &Value) -> DocSchema {
        let mut c = Compiler {
            root: schema,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        let dialect_ok = match schema.get("$schema") {
            None => true,
            Some(Value::String(s)) => {
                s.trim_end_matches('#') == "https://json-schema.org/draft/2020-12/schema"
            }
            Some(_) => false,
        };
        if dialect_ok {
            c.node(schema, true, 0);
        } else {
            c.nodes.push(Node::Unknown);
        }
        let mut nodes = c.nodes;
        // A `$ref` compiles to a node filled in later: the properties learn their node's kind
        // only now, with every node final.
        let types: Vec<u8> = nodes
            .iter()
            .map(|n| if let Node::Type(t) = n { *t } else { 0 })
            .collect();
        for n in &mut nodes {
            if let Node::Schema(k) = n {
                for p in &mut k.properties {
                    p.types_only = types.get(p.node).copied().unwrap_or(0);
                }
            }
        }
        DocSchema { nodes, root: 0 }
    }
}

/// The validator of a leaf subschema, shared by every tool whose schema holds the same leaf
/// (the bundled schemas of one protocol repeat theirs: USP's version `pattern` in every tool).
fn leaf(m: &Map<String, Value>) -> Option<Arc<jsonschema::Validator>> {
    type Leaves = Mutex<HashMap<String, Weak<jsonschema::Validator>>>;
    static LEAVES: LazyLock<Leaves> = LazyLock::new(Leaves::default);
    let schema = Value::Object(m.clone());
    let text = crate::json_text::to_string(&schema);
    let mut leaves = LEAVES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = leaves.get(&text).and_then(Weak::upgrade) {
        return Some(v);
    }
    let v = Arc::new(options().build(&schema).ok()?);
    leaves.retain(|_, w| w.strong_count() > 0);
    leaves.insert(text, Arc::downgrade(&v));
    Some(v)
}

fn type_bit(name: &str) -> Option<u8> {
    Some(match name {
        "null" => NULL,
        "boolean" => BOOL,
        "object" => OBJECT,
        "array" => ARRAY,
        "number" => NUMBER,
        "string" => STRING,
        "integer" => INTEGER,
        _ => return None,
    })
}

fn count(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

impl Compiler<'_> {
    /// Compiles `schema` into a new node; returns its index.
    fn node(&mut self, schema: &Value, root: bool, depth: u32) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Node::Unknown);
        let node = if depth > MAX_DEPTH {
            Node::Unknown
        } else {
            match schema {
                Value::Bool(true) => Node::True,
                Value::Bool(false) => Node::False,
                Value::Object(m) => self.object(m, root, depth),
                _ => Node::Unknown,
            }
        };
        if let Some(slot) = self.nodes.get_mut(at) {
            *slot = node;
        }
        at
    }

    fn object(&mut self, m: &Map<String, Value>, root: bool, depth: u32) -> Node {
        let unmodelled = |k: &str| {
            !(ANNOTATIONS.contains(&k)
                || MODELLED.contains(&k)
                || (k == "format" && !*FORMATS_ASSERT)
                || (root && matches!(k, "$schema" | "$id")))
        };
        if m.keys().any(|k| unmodelled(k)) {
            // A subschema without subschemas goes whole to a validator of its own.
            if root
                || m.keys()
                    .any(|k| APPLICATORS.contains(&k.as_str()) || k == "$id")
            {
                return Node::Unknown;
            }
            return leaf(m).map_or(Node::Unknown, Node::Leaf);
        }
        let mut k = Keywords::default();
        let mut required_later = false;
        for (key, value) in m {
            let ok = match key.as_str() {
                "type" => self.types(value, &mut k),
                "required" => match value {
                    Value::Array(names) => {
                        let mut r = Vec::with_capacity(names.len());
                        for n in names {
                            match n {
                                Value::String(s) => r.push(s.as_str().into()),
                                _ => return Node::Unknown,
                            }
                        }
                        r.sort();
                        r.dedup();
                        k.required = r;
                        required_later = true;
                        true
                    }
                    _ => false,
                },
                "enum" | "const" => {
                    let list = match (key.as_str(), value) {
                        ("enum", Value::Array(a)) => a.as_slice(),
                        ("const", v) => std::slice::from_ref(v),
                        _ => return Node::Unknown,
                    };
                    let mut strings = Vec::with_capacity(list.len());
                    for v in list {
                        match v {
                            Value::String(s) => strings.push(s.as_str().into()),
                            // Other values compare by jsonschema's equality: not modelled.
                            _ => return Node::Unknown,
                        }
                    }
                    match &mut k.strings {
                        // `enum` and `const` together: both must hold.
                        Some(prev) => prev.retain(|s| strings.contains(s)),
                        None => k.strings = Some(strings),
                    }
                    true
                }
                "properties" => match value {
                    Value::Object(props) => {
                        let mut list: Vec<Prop> = Vec::with_capacity(props.len());
                        for (name, s) in props {
                            let node = self.node(s, false, depth + 1);
                            list.push(Prop::new(name, node));
                        }
                        list.sort_by(|a, b| a.name.cmp(&b.name));
                        k.properties = list;
                        true
                    }
                    _ => false,
                },
                "additionalProperties" => {
                    k.additional = Some(self.node(value, false, depth + 1));
                    true
                }
                "items" => {
                    k.items = Some(self.node(value, false, depth + 1));
                    true
                }
                "allOf" | "anyOf" | "oneOf" => match value {
                    Value::Array(list) if !list.is_empty() => {
                        let ids: Vec<usize> = list
                            .iter()
                            .map(|s| self.node(s, false, depth + 1))
                            .collect();
                        match key.as_str() {
                            "allOf" => k.all_of.extend_from_slice(&ids),
                            "anyOf" => k.any_of = ids,
                            _ => k.one_of = ids,
                        }
                        true
                    }
                    _ => false,
                },
                "not" => {
                    k.not = Some(self.node(value, false, depth + 1));
                    true
                }
                // Without `if`, `then` and `else` assert nothing (read with `if` below).
                "if" | "then" | "else" => true,
                "contains" => {
                    let min = match m.get("minContains") {
                        None => Some(1),
                        Some(v) => count(v),
                    };
                    let max = m.get("maxContains").map(count);
                    match (min, max) {
                        (Some(min), None) => {
                            k.contains = Some((self.node(value, false, depth + 1), min, None));
                            true
                        }
                        (Some(min), Some(Some(max))) => {
                            k.contains = Some((self.node(value, false, depth + 1), min, Some(max)));
                            true
                        }
                        _ => false,
                    }
                }
                // Read with `contains`; without it they assert nothing.
                "minContains" | "maxContains" => true,
                "propertyNames" => {
                    k.property_names = Some(self.node(value, false, depth + 1));
                    true
                }
                "$ref" => match value.as_str().and_then(|r| self.reference(r, depth)) {
                    Some(n) => {
                        k.all_of.push(n);
                        true
                    }
                    None => false,
                },
                "minItems" => count(value).map(|n| k.min_items = Some(n)).is_some(),
                "maxItems" => count(value).map(|n| k.max_items = Some(n)).is_some(),
                "minLength" => count(value).map(|n| k.min_length = Some(n)).is_some(),
                "maxLength" => count(value).map(|n| k.max_length = Some(n)).is_some(),
                "minProperties" => count(value).map(|n| k.min_properties = Some(n)).is_some(),
                "maxProperties" => count(value).map(|n| k.max_properties = Some(n)).is_some(),
                // Annotations, the root's `$schema`/`$id`, `format` as an annotation (anything
                // else made the subschema a leaf or unknown above).
                _ => true,
            };
            if !ok {
                return Node::Unknown;
            }
        }
        if let Some(cond) = m.get("if") {
            let cond = self.node(cond, false, depth + 1);
            let then = m.get("then").map(|t| self.node(t, false, depth + 1));
            let other = m.get("else").map(|e| self.node(e, false, depth + 1));
            k.conditional = Some((cond, then, other));
        }
        if required_later {
            // Required names among the properties become bits of their indexes.
            let names = std::mem::take(&mut k.required);
            for r in names {
                match k.properties.iter().position(|p| p.name == r) {
                    Some(i) if i < 64 => k.required_bits |= 1 << i,
                    _ => k.required.push(r),
                }
            }
        }
        // Most leaves of an output schema assert only their type.
        let only_type = k.bare() && k.all_of.is_empty() && k.one_at_a_time();
        match k.types {
            Some(t) if only_type => Node::Type(t),
            _ => {
                k.seal();
                Node::Schema(Box::new(k))
            }
        }
    }

    fn types(&mut self, value: &Value, k: &mut Keywords) -> bool {
        let names: Vec<&str> = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return false,
        };
        let mut bits = 0;
        for n in &names {
            match type_bit(n) {
                Some(b) => bits |= b,
                None => return false,
            }
        }
        if matches!(value, Value::Array(a) if a.len() != names.len()) {
            return false;
        }
        k.types = Some(bits);
        true
    }

    /// The node a local `$ref` (`#` or `#/json/pointer`) names, compiled once.
    fn reference(&mut self, r: &str, depth: u32) -> Option<usize> {
        if let Some(&n) = self.refs.get(r) {
            return Some(n);
        }
        let pointer = r.strip_prefix('#')?;
        if pointer.contains('%') {
            return None;
        }
        let target = if pointer.is_empty() {
            self.root
        } else {
            self.root.pointer(pointer)?
        };
        // Noted before compiling, so a cycle finds it.
        let at = self.nodes.len();
        self.refs.insert(r.to_string(), at);
        Some(self.node(target, pointer.is_empty(), depth + 1))
    }
}
