//! A tool's output schema compiled for a native "surely valid" check of a [`Doc`] answer.
//! It never answers valid for a document `jsonschema` (the authority) would reject.
//!
//! The hot path (`translate::answer`) keeps the answer a [`Doc`]; `jsonschema` only takes
//! `serde_json` values, so checking with it would mean building the tree the hot path exists to
//! avoid. This check models the keywords output schemas use (types, `required`, `properties`
//! merge-joined against the document's key-sorted members, `additionalProperties`, `items`,
//! string `enum`/`const`, local `$ref`s, `anyOf`/`allOf`/`oneOf`/`not`, `if`/`then`/`else`,
//! `contains`, `propertyNames`, counts and lengths).
//! A subschema with any other keyword that holds no subschema (`pattern`, a numeric bound, ...)
//! is handed whole to a `jsonschema` validator compiled for it alone, with the node's value: so
//! regular expressions keep jsonschema's ECMA-262 meaning. Anything else answers "not sure",
//! and the caller asks `jsonschema` about the whole answer, which also explains a failure.

use crate::json_doc::Doc;
use serde_json::{Map, Value};
use std::cmp::Ordering;
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
fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012)
}

/// Whether `format` asserts with these options (it is an annotation in 2020-12 unless asked
/// for): asked of jsonschema itself, once.
static FORMATS_ASSERT: LazyLock<bool> = LazyLock::new(|| {
    let probe = serde_json::json!({ "format": "email" });
    options()
        .build(&probe)
        .map(|v| !v.is_valid(&Value::String("not an email".into())))
        .unwrap_or(true)
});

/// Three-valued answers: [`Tri::Unknown`] is "ask jsonschema".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tri {
    Valid,
    Invalid,
    Unknown,
}

const NULL: u8 = 1;
const BOOL: u8 = 2;
const OBJECT: u8 = 4;
const ARRAY: u8 = 8;
const NUMBER: u8 = 16;
const STRING: u8 = 32;
const INTEGER: u8 = 64;

#[derive(Debug, Clone)]
enum Node {
    True,
    False,
    Unknown,
    /// A subschema without subschemas, checked by jsonschema on the node's value.
    Leaf(Arc<jsonschema::Validator>),
    /// A subschema that asserts only `type` (most leaves of an output schema).
    Type(u8),
    Schema(Box<Keywords>),
}

#[derive(Debug, Default, Clone)]
struct Keywords {
    types: Option<u8>,
    /// The required names that are among the first 64 `properties`, as bits of their indexes.
    required_bits: u64,
    /// The other required names.
    required: Vec<Box<str>>,
    /// Sorted by name (byte order), as a [`Doc`]'s members are.
    properties: Vec<Prop>,
    additional: Option<usize>,
    items: Option<usize>,
    /// A string `enum` (a `const` string is one of one).
    strings: Option<Vec<Box<str>>>,
    all_of: Vec<usize>,
    any_of: Vec<usize>,
    one_of: Vec<usize>,
    not: Option<usize>,
    /// `if`, `then`, `else`.
    conditional: Option<(usize, Option<usize>, Option<usize>)>,
    /// `contains` with `minContains` (1 unless given) and `maxContains`.
    contains: Option<(usize, usize, Option<usize>)>,
    property_names: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    min_properties: Option<usize>,
    max_properties: Option<usize>,
}

/// A tool's output schema compiled for [`DocSchema::surely_valid`].
#[derive(Debug)]
pub struct DocSchema {
    nodes: Vec<Node>,
    /// The node a whole answer is checked against: 0, the schema's root, unless
    /// [`DocSchema::pin`] built a copy of the root's path to a pinned member.
    root: usize,
}

/// How deep a check follows the schema (a `$ref` cycle that consumes no data stops here).
const MAX_DEPTH: u32 = 96;

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
        DocSchema {
            nodes: c.nodes,
            root: 0,
        }
    }

    /// `true` only when jsonschema (Draft 2020-12, default options) finds `doc` valid against
    /// the schema; `false` when it is invalid or not decided here.
    pub fn surely_valid(&self, doc: &Doc<'_>) -> bool {
        self.check(self.root, doc, 0) == Tri::Valid
    }

    /// Makes this the check of answers whose member `key` is always `value` (the binding's
    /// `usp`/`ucp` envelope, the same in every answer of a tool), so that no answer checks
    /// that constant again. Wherever an object schema applies to the whole answer (the root,
    /// and what `$ref`, `allOf`, `anyOf`, `oneOf`, `not` and `if`/`then`/`else` apply in place)
    /// and lists `key` in `properties`, the property's subschema becomes `true` when `value` is
    /// surely valid against it: for an answer holding `value` there, that subschema answered
    /// valid anyway, so every verdict above it is unchanged. The changed schemas are copies on
    /// the path from the root: where the same subschemas apply to nested values (an object of
    /// the same shape inside, a `$ref` to the root) they still check everything. Returns
    /// whether anything was pinned.
    ///
    /// Only for a caller that guarantees the member: an answer whose `key` member differs
    /// from `value` may be judged valid when it is not.
    pub fn pin(&mut self, key: &str, value: &Doc<'_>) -> bool {
        let mut seen = HashMap::new();
        match self.pin_at(self.root, key, value, &mut seen) {
            Some(root) => {
                self.root = root;
                true
            }
            None => false,
        }
    }

    /// [`DocSchema::pin`] from node `at`: the index of its pinned copy, `None` when nothing
    /// under it changed. `seen` holds each node's answer; a node met again on its own path (a
    /// `$ref` cycle) answers `None`, keeping the original, which checks everything.
    fn pin_at(
        &mut self,
        at: usize,
        key: &str,
        value: &Doc<'_>,
        seen: &mut HashMap<usize, Option<usize>>,
    ) -> Option<usize> {
        if let Some(&done) = seen.get(&at) {
            return done;
        }
        seen.insert(at, None);
        let Some(Node::Schema(k)) = self.nodes.get(at) else {
            return None;
        };
        let mut k = (**k).clone();
        let mut changed = false;
        if let Some(p) = k.properties.iter_mut().find(|p| &*p.name == key)
            && self.check(p.node, value, 0) == Tri::Valid
        {
            p.node = self.nodes.len();
            self.nodes.push(Node::True);
            changed = true;
        }
        let mut in_place: Vec<&mut usize> = k
            .all_of
            .iter_mut()
            .chain(k.any_of.iter_mut())
            .chain(k.one_of.iter_mut())
            .chain(k.not.iter_mut())
            .collect();
        if let Some((cond, then, other)) = &mut k.conditional {
            in_place.push(cond);
            in_place.extend(then.iter_mut());
            in_place.extend(other.iter_mut());
        }
        for sub in in_place {
            if let Some(copy) = self.pin_at(*sub, key, value, seen) {
                *sub = copy;
                changed = true;
            }
        }
        if !changed {
            return None;
        }
        let copy = self.nodes.len();
        self.nodes.push(Node::Schema(Box::new(k)));
        seen.insert(at, Some(copy));
        Some(copy)
    }

    #[inline]
    fn check(&self, at: usize, doc: &Doc<'_>, depth: u32) -> Tri {
        match self.nodes.get(at) {
            Some(Node::Type(types)) => type_matches(*types, doc),
            Some(Node::True) => Tri::Valid,
            Some(Node::False) => Tri::Invalid,
            Some(Node::Leaf(v)) => {
                if v.is_valid(&doc.to_value()) {
                    Tri::Valid
                } else {
                    Tri::Invalid
                }
            }
            Some(Node::Schema(k)) if depth <= MAX_DEPTH => self.keywords(k, doc, depth),
            _ => Tri::Unknown,
        }
    }

    #[inline(never)]
    fn keywords(&self, k: &Keywords, doc: &Doc<'_>, depth: u32) -> Tri {
        let mut answer = Tri::Valid;
        // Every keyword must hold: one invalid answers; an unknown stays unless one is invalid.
        macro_rules! and {
            ($t:expr) => {
                match $t {
                    Tri::Invalid => return Tri::Invalid,
                    Tri::Unknown => answer = Tri::Unknown,
                    Tri::Valid => {}
                }
            };
        }
        if let Some(types) = k.types {
            and!(type_matches(types, doc));
        }
        if let Some(strings) = &k.strings {
            match doc {
                Doc::Str(s) if strings.iter().any(|x| **x == **s) => {}
                _ => return Tri::Invalid,
            }
        }
        match doc {
            Doc::Obj(members) => {
                and!(count_within(
                    members.len(),
                    k.min_properties,
                    k.max_properties
                ));
                and!(self.members(k, members, depth));
            }
            Doc::Arr(items) => {
                and!(count_within(items.len(), k.min_items, k.max_items));
                if let Some(i) = k.items {
                    for item in items {
                        and!(self.check(i, item, depth + 1));
                    }
                }
                if let Some((c, min, max)) = k.contains {
                    // How many items match: at least `valid`, at most `valid + unknown`.
                    let (mut valid, mut unknown) = (0, 0);
                    for item in items {
                        match self.check(c, item, depth + 1) {
                            Tri::Valid => valid += 1,
                            Tri::Unknown => unknown += 1,
                            Tri::Invalid => {}
                        }
                    }
                    let (lo, hi) = (valid, valid + unknown);
                    let within = |n: usize| n >= min && max.is_none_or(|m| n <= m);
                    and!(if within(lo) && within(hi) {
                        Tri::Valid
                    } else if hi < min || max.is_some_and(|m| lo > m) {
                        Tri::Invalid
                    } else {
                        Tri::Unknown
                    });
                }
            }
            Doc::Str(s) if k.min_length.is_some() || k.max_length.is_some() => {
                and!(count_within(s.chars().count(), k.min_length, k.max_length));
            }
            _ => {}
        }
        for &s in &k.all_of {
            and!(self.check(s, doc, depth + 1));
        }
        if !k.any_of.is_empty() {
            let mut any = Tri::Invalid;
            for &s in &k.any_of {
                match self.check(s, doc, depth + 1) {
                    Tri::Valid => {
                        any = Tri::Valid;
                        break;
                    }
                    Tri::Unknown => any = Tri::Unknown,
                    Tri::Invalid => {}
                }
            }
            and!(any);
        }
        if !k.one_of.is_empty() {
            let (mut valid, mut unknown) = (0, false);
            for &s in &k.one_of {
                match self.check(s, doc, depth + 1) {
                    Tri::Valid => valid += 1,
                    Tri::Unknown => unknown = true,
                    Tri::Invalid => {}
                }
            }
            and!(match (valid, unknown) {
                (_, true) => Tri::Unknown,
                (1, false) => Tri::Valid,
                _ => Tri::Invalid,
            });
        }
        if let Some(s) = k.not {
            and!(match self.check(s, doc, depth + 1) {
                Tri::Valid => Tri::Invalid,
                Tri::Invalid => Tri::Valid,
                Tri::Unknown => Tri::Unknown,
            });
        }
        if let Some((cond, then, other)) = k.conditional {
            let branch = match self.check(cond, doc, depth + 1) {
                Tri::Valid => then,
                Tri::Invalid => other,
                Tri::Unknown => return Tri::Unknown,
            };
            if let Some(b) = branch {
                and!(self.check(b, doc, depth + 1));
            }
        }
        if let (Some(names), Doc::Obj(members)) = (k.property_names, doc) {
            for (key, _) in members {
                and!(self.check(names, &Doc::Str(std::borrow::Cow::Borrowed(key)), depth + 1));
            }
        }
        answer
    }

    /// `required`, `properties` and `additionalProperties` in one pass: the document's members
    /// and the schema's properties are both sorted by key, and each property found sets its bit
    /// for the required names among them.
    fn members(
        &self,
        k: &Keywords,
        members: &[(std::borrow::Cow<'_, str>, Doc<'_>)],
        depth: u32,
    ) -> Tri {
        let mut answer = Tri::Valid;
        let mut found = 0u64;
        let mut i = 0;
        for (key, value) in members {
            let kp = prefix(key);
            let mut schema = k.additional;
            while let Some(p) = k.properties.get(i) {
                match p.cmp_key(kp, key) {
                    Ordering::Less => i += 1,
                    Ordering::Equal => {
                        schema = Some(p.node);
                        if i < 64 {
                            found |= 1 << i;
                        }
                        i += 1;
                        break;
                    }
                    Ordering::Greater => break,
                }
            }
            if let Some(s) = schema {
                match self.check(s, value, depth + 1) {
                    Tri::Invalid => return Tri::Invalid,
                    Tri::Unknown => answer = Tri::Unknown,
                    Tri::Valid => {}
                }
            }
        }
        if found & k.required_bits != k.required_bits
            || k.required
                .iter()
                .any(|r| crate::json_doc::member(members, r).is_none())
        {
            return Tri::Invalid;
        }
        answer
    }
}

/// A property of a schema, with the first eight bytes of its name for quick comparisons.
#[derive(Debug, Clone)]
struct Prop {
    prefix: u64,
    name: Box<str>,
    node: usize,
}

impl Prop {
    /// The byte order of this property's name and `key` (whose [`prefix`] is `kp`): the
    /// prefixes decide unless they are equal.
    #[inline]
    fn cmp_key(&self, kp: u64, key: &str) -> Ordering {
        match self.prefix.cmp(&kp) {
            Ordering::Equal if self.name.len() <= 8 && key.len() <= 8 => {
                self.name.len().cmp(&key.len())
            }
            Ordering::Equal => (*self.name).cmp(key),
            other => other,
        }
    }
}

/// The first eight bytes of `s`, big-endian, zero-padded. Zero is the least byte, so when two
/// prefixes differ their order is the order of the strings: where one string ends inside the
/// eight bytes, it is a prefix of the other up to there.
#[inline]
fn prefix(s: &str) -> u64 {
    let b = s.as_bytes();
    if let Some(Ok(word)) = b.get(..8).map(<[u8; 8]>::try_from) {
        return u64::from_be_bytes(word);
    }
    let mut word = 0u64;
    for (i, &x) in b.iter().enumerate() {
        word |= u64::from(x) << (56 - 8 * i);
    }
    word
}

fn count_within(n: usize, min: Option<usize>, max: Option<usize>) -> Tri {
    if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
        Tri::Invalid
    } else {
        Tri::Valid
    }
}

fn type_matches(types: u8, doc: &Doc<'_>) -> Tri {
    let kind = match doc {
        Doc::Null => NULL,
        Doc::Bool(_) => BOOL,
        Doc::Obj(_) => OBJECT,
        Doc::Arr(_) => ARRAY,
        Doc::Str(_) => STRING,
        Doc::Num(n) => {
            if types & NUMBER != 0 {
                return Tri::Valid;
            }
            if types & INTEGER == 0 {
                return Tri::Invalid;
            }
            // An integer-valued float (`1.0`) is an integer to jsonschema; not decided here.
            return if n.is_i64() || n.is_u64() {
                Tri::Valid
            } else {
                Tri::Unknown
            };
        }
    };
    if types & kind != 0 {
        Tri::Valid
    } else {
        Tri::Invalid
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
                            list.push(Prop {
                                prefix: prefix(name),
                                name: name.as_str().into(),
                                node,
                            });
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
        let only_type = k.required.is_empty()
            && k.required_bits == 0
            && k.properties.is_empty()
            && k.additional.is_none()
            && k.items.is_none()
            && k.strings.is_none()
            && k.all_of.is_empty()
            && k.any_of.is_empty()
            && k.one_of.is_empty()
            && k.not.is_none()
            && k.conditional.is_none()
            && k.contains.is_none()
            && k.property_names.is_none()
            && [
                k.min_items,
                k.max_items,
                k.min_length,
                k.max_length,
                k.min_properties,
                k.max_properties,
            ]
            .iter()
            .all(Option::is_none);
        match k.types {
            Some(t) if only_type => Node::Type(t),
            _ => Node::Schema(Box::new(k)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

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
        native
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
            let native = DocSchema::compile(&schema).surely_valid(&Doc::from_value(&doc));
            prop_assert_eq!(native, validator(&schema).is_valid(&doc), "{} against {}", doc, schema);
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
                    if native.surely_valid(&Doc::from_value(&c)) {
                        prop_assert!(check.is_valid(&c), "{} against {}", c, schema);
                    }
                }
            }
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
            if native.surely_valid(&Doc::from_value(&m)) {
                sure_count += 1;
                assert!(check.is_valid(&m), "{m}");
            }
        }
        assert!(
            sure_count > 0 && sure_count < total,
            "{sure_count} of {total}"
        );
    }
}
