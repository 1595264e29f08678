//! The compiled form of a [`DocSchema`]: nodes, keywords, properties, three-valued answers.
//! Plain data shared by the compiler and the check; it never reads a schema or a document.

use std::cmp::Ordering;
use std::sync::Arc;

/// Three-valued answers: [`Tri::Unknown`] is "ask jsonschema".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tri {
    Valid,
    Invalid,
    Unknown,
}

pub(super) const NULL: u8 = 1;
pub(super) const BOOL: u8 = 2;
pub(super) const OBJECT: u8 = 4;
pub(super) const ARRAY: u8 = 8;
pub(super) const NUMBER: u8 = 16;
pub(super) const STRING: u8 = 32;
pub(super) const INTEGER: u8 = 64;

#[derive(Debug, Clone)]
pub(super) enum Node {
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
pub(super) struct Keywords {
    pub(super) types: Option<u8>,
    /// The required names that are among the first 64 `properties`, as bits of their indexes.
    pub(super) required_bits: u64,
    /// The other required names.
    pub(super) required: Vec<Box<str>>,
    /// Sorted by name (byte order), as a [`Doc`]'s members are.
    pub(super) properties: Vec<Prop>,
    pub(super) additional: Option<usize>,
    pub(super) items: Option<usize>,
    /// A string `enum` (a `const` string is one of one).
    pub(super) strings: Option<Vec<Box<str>>>,
    pub(super) all_of: Vec<usize>,
    pub(super) any_of: Vec<usize>,
    pub(super) one_of: Vec<usize>,
    pub(super) not: Option<usize>,
    /// `if`, `then`, `else`.
    pub(super) conditional: Option<(usize, Option<usize>, Option<usize>)>,
    /// `contains` with `minContains` (1 unless given) and `maxContains`.
    pub(super) contains: Option<(usize, usize, Option<usize>)>,
    pub(super) property_names: Option<usize>,
    pub(super) min_items: Option<usize>,
    pub(super) max_items: Option<usize>,
    pub(super) min_length: Option<usize>,
    pub(super) max_length: Option<usize>,
    pub(super) min_properties: Option<usize>,
    pub(super) max_properties: Option<usize>,
    /// How the text walk reads a value against these keywords: decided once, when the
    /// subschema is compiled ([`Keywords::seal`]), not at every value.
    pub(super) stream: Stream,
}

/// How `object_passes`' walk of an answer's text treats a subschema.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    /// The value's own tree is read and checked (combinators, conditionals, `contains`,
    /// `propertyNames`): the default, right for any subschema.
    #[default]
    Whole,
    /// Every keyword looks at one value at a time: checked as the text is read.
    Read,
    /// Nothing but one subschema (a `$ref` alone, or `allOf` of one): the walk goes on to it.
    Through,
}

impl Keywords {
    /// No count or length bound (`minItems` ... `maxProperties`).
    pub(super) fn unbounded(&self) -> bool {
        [
            self.min_items,
            self.max_items,
            self.min_length,
            self.max_length,
            self.min_properties,
            self.max_properties,
        ]
        .iter()
        .all(Option::is_none)
    }

    /// No keyword about the value itself besides `type`: no `required`, `properties`,
    /// `additionalProperties`, `items`, string `enum`, count or length bound.
    pub(super) fn bare(&self) -> bool {
        self.required_bits == 0
            && self.required.is_empty()
            && self.properties.is_empty()
            && self.additional.is_none()
            && self.items.is_none()
            && self.strings.is_none()
            && self.unbounded()
    }

    /// No applicator but `allOf` (and `$ref`, kept with it): no `anyOf`, `oneOf`, `not`,
    /// conditional, `contains` or `propertyNames`.
    pub(super) fn one_at_a_time(&self) -> bool {
        self.any_of.is_empty()
            && self.one_of.is_empty()
            && self.not.is_none()
            && self.conditional.is_none()
            && self.contains.is_none()
            && self.property_names.is_none()
    }

    /// Sets [`Keywords::stream`] from the keywords present. Which subschemas they name does
    /// not matter, so a copy with other node indexes (`DocSchema::pin`) keeps it.
    pub(super) fn seal(&mut self) {
        self.stream = match self.all_of.len() {
            _ if !self.one_at_a_time() => Stream::Whole,
            0 => Stream::Read,
            1 if self.types.is_none() && self.bare() => Stream::Through,
            _ => Stream::Whole,
        };
    }
}

/// A tool's output schema compiled for [`DocSchema::surely_valid`].
#[derive(Debug)]
pub struct DocSchema {
    pub(super) nodes: Vec<Node>,
    /// The node a whole answer is checked against: 0, the schema's root, unless
    /// [`DocSchema::pin`] built a copy of the root's path to a pinned member.
    pub(super) root: usize,
}

/// How deep a check follows the schema (a `$ref` cycle that consumes no data stops here).
pub(super) const MAX_DEPTH: u32 = 96;

/// A property of a schema, with the first eight bytes of its name for quick comparisons.
#[derive(Debug, Clone)]
pub(super) struct Prop {
    pub(super) prefix: u64,
    pub(super) name: Box<str>,
    pub(super) node: usize,
    /// The member's key as JSON text with its colon (`"name":`), when the name is written
    /// as itself (no `"`, `\` or control character in it): text that starts with these
    /// bytes holds this key, so the walk takes it without reading the key.
    pub(super) quoted: Option<Box<[u8]>>,
    /// The `type` bits of the property's node when that node asserts only its type
    /// ([`Node::Type`]), 0 otherwise: set by `DocSchema::compile` once every node is final and
    /// reset by `DocSchema::pin` when it changes the node, so that the walk reads such a member
    /// without looking the node up.
    pub(super) types_only: u8,
}

impl Prop {
    /// A property named `name`, checked against node `node`.
    pub(super) fn new(name: &str, node: usize) -> Prop {
        let plain = !name.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        Prop {
            prefix: crate::json_doc::key_prefix(name),
            name: name.into(),
            node,
            quoted: plain.then(|| [b"\"", name.as_bytes(), b"\":"].concat().into()),
            types_only: 0,
        }
    }

    /// The byte order of this property's name and `key`, whose
    /// [`key_prefix`](crate::json_doc::key_prefix) is `kp`.
    #[inline]
    pub(super) fn cmp_key(&self, kp: u64, key: &str) -> Ordering {
        crate::json_doc::key_cmp(self.prefix, &self.name, kp, key)
    }
}
