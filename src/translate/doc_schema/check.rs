//! The walk of a [`Doc`] answer against a compiled [`DocSchema`]: valid, invalid or "not sure".
//! It never answers valid for a document `jsonschema` would reject; only a leaf builds a value.

use super::node::{
    ARRAY, BOOL, DocSchema, INTEGER, Keywords, MAX_DEPTH, NULL, NUMBER, Node, OBJECT, STRING,
    Stream, Tri,
};
use crate::json_doc::{Doc, key_prefix};
use std::cmp::Ordering;

impl DocSchema {
    /// `true` only when jsonschema (Draft 2020-12, default options) finds `doc` valid against
    /// the schema; `false` when it is invalid or not decided here.
    pub fn surely_valid(&self, doc: &Doc<'_>) -> bool {
        self.check(self.root, doc, 0) == Tri::Valid
    }

    #[inline]
    pub(super) fn check(&self, at: usize, doc: &Doc<'_>, depth: u32) -> Tri {
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
            Some(Node::Schema(k)) if depth <= MAX_DEPTH => match (k.stream, k.all_of.first()) {
                // Nothing but one subschema (a `$ref` alone): every other keyword is absent
                // and holds, so the answer is that subschema's, without the keyword walk.
                (Stream::Through, Some(&to)) => self.check(to, doc, depth + 1),
                _ => self.keywords(k, doc, depth),
            },
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
            let kp = key_prefix(key);
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

pub(super) fn count_within(n: usize, min: Option<usize>, max: Option<usize>) -> Tri {
    if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
        Tri::Invalid
    } else {
        Tri::Valid
    }
}

pub(super) fn type_matches(types: u8, doc: &Doc<'_>) -> Tri {
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
