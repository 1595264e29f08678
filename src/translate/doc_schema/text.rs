//! The check of an answer's JSON text against a compiled [`DocSchema`] as the text is read,
//! building no tree: for an answer that becomes `structuredContent` as the backend wrote it.
//! It never answers valid where [`DocSchema::surely_valid`] on the [`Doc`] read from the same
//! text would not, and never passes text that is not faithful (see [`Shape`]).
//!
//! An object, array or scalar whose subschema holds only keywords that look at one value at a
//! time (`type`, `properties`, `required`, `additionalProperties`, `items`, string `enum`,
//! counts and lengths, a lone `$ref`) is checked as it is read. Any other subschema
//! (combinators, conditionals, `contains`, `propertyNames`, a leaf `jsonschema` checks) is
//! given the [`Doc`] of that value alone, read from its own text, and checked as the tree
//! check checks it. Anything this walk is not sure of ends it, and the caller reads the whole
//! answer into a [`Doc`] as before.

use super::check::{count_within, type_matches};
use super::node::{
    ARRAY, BOOL, DocSchema, Keywords, MAX_DEPTH, NULL, Node, OBJECT, STRING, Stream, Tri,
};
use crate::json_doc::{Doc, key_prefix, same_key};
use crate::json_text::{Cursor, Next, Shape};
use std::borrow::Cow;

/// The [`Shape`] of `bytes` when they are one JSON object, read whole, without an integer past
/// `i64`, faithful, and surely valid against `schema` (any object when `None`). `None` says
/// nothing about the text: the caller reads it into a [`Doc`] and decides there.
pub fn object_passes(schema: Option<&DocSchema>, bytes: &[u8]) -> Option<Shape> {
    let mut walk = Walk {
        schema,
        c: Cursor::new(bytes, true)?,
        keys: Vec::new(),
        orders: Vec::new(),
    };
    if walk.c.next()? != Next::Object {
        return None;
    }
    walk.value(schema.map(|s| s.root), 0)?;
    if !walk.c.finish() {
        return None;
    }
    let (narrow, faithful) = walk.c.narrow_and_faithful();
    (narrow && faithful).then_some(Shape { narrow, faithful })
}

/// A schema-guided read: `Some(())` when the value read is surely valid against its node.
struct Walk<'s, 't> {
    schema: Option<&'s DocSchema>,
    c: Cursor<'t>,
    /// The keys not among `properties` of the objects being read, innermost last: a repeated
    /// one makes the text unfaithful.
    keys: Vec<Cow<'t, str>>,
    /// Per object subschema met (by address), the property each of the first [`HINTS`]
    /// members of the last object read against it matched: the items of an array list their
    /// members in the same order, so the next object's member is looked for there first,
    /// its key's text ([`Prop::quoted`](super::node::Prop)) compared in place before any key
    /// is read.
    orders: Vec<(usize, [u8; HINTS])>,
}

/// Members per object whose property is remembered for the next object of the same schema.
const HINTS: usize = 16;

/// Object schemas whose member order is remembered in one walk.
const ORDERS: usize = 8;

/// No property remembered at a member's place.
const NO_HINT: u8 = u8::MAX;

impl<'t> Walk<'_, 't> {
    /// A member's key read from the text (not taken in place): the index of its property,
    /// looked for at `hint` first, then among the sorted properties (that answer remembered
    /// for the next object's member at `place`), or `Err` for a key among none; with the key.
    #[inline(always)]
    fn key_read(
        &mut self,
        k: &Keywords,
        slot: usize,
        place: usize,
        hint: Option<usize>,
    ) -> Option<(Result<usize, usize>, Cow<'t, str>)> {
        let key = self.c.key()?;
        if let Some(h) = hint
            && k.properties.get(h).is_some_and(|p| same_key(&p.name, &key))
        {
            return Some((Ok(h), key));
        }
        let kp = key_prefix(&key);
        let at = k.properties.binary_search_by(|p| p.cmp_key(kp, &key));
        // Remembered for the next object (a hit is remembered already).
        if let Some(o) = self
            .orders
            .get_mut(slot)
            .and_then(|(_, o)| o.get_mut(place))
        {
            *o = at
                .ok()
                .and_then(|i| u8::try_from(i).ok())
                .unwrap_or(NO_HINT);
        }
        Some((at, key))
    }
}

/// `Some(())` for [`Tri::Valid`].
fn sure(t: Tri) -> Option<()> {
    (t == Tri::Valid).then_some(())
}

/// The bit of `types` for a value that starts as `next` (numbers are decided on their value).
fn kind(next: Next) -> u8 {
    match next {
        Next::Null => NULL,
        Next::Bool => BOOL,
        Next::String => STRING,
        Next::Array => ARRAY,
        Next::Object => OBJECT,
        Next::Number => 0,
    }
}

impl Walk<'_, '_> {
    fn value(&mut self, node: Option<usize>, depth: u32) -> Option<()> {
        let (Some(schema), Some(at)) = (self.schema, node) else {
            return self.c.skip_value();
        };
        match schema.nodes.get(at)? {
            Node::True => self.c.skip_value(),
            Node::Type(types) => self.typed(*types),
            Node::Schema(k) if depth <= MAX_DEPTH => match k.stream {
                Stream::Read => self.keywords(k, depth),
                Stream::Through => self.value(Some(*k.all_of.first()?), depth + 1),
                Stream::Whole => self.whole(schema, at, depth),
            },
            Node::Schema(_) | Node::Leaf(_) => self.whole(schema, at, depth),
            Node::False | Node::Unknown => None,
        }
    }

    /// A value against `type` alone. Inlined: most members take it.
    #[inline(always)]
    fn typed(&mut self, types: u8) -> Option<()> {
        match self.c.next()? {
            Next::Number => {
                let n = self.c.number()?;
                sure(type_matches(types, &Doc::Num(n)))
            }
            next if types & kind(next) == 0 => None,
            Next::String => self.c.skip_string(),
            Next::Bool | Next::Null => self.c.skip_literal(),
            _ => self.c.skip_value(),
        }
    }

    /// A value against a subschema this walk does not check as it reads: the tree check of
    /// the value's own [`Doc`].
    fn whole(&mut self, schema: &DocSchema, at: usize, depth: u32) -> Option<()> {
        let from = self.c.at();
        self.c.skip_value()?;
        let text = self.c.since(from)?;
        let (doc, _) = crate::json_text::read_borrowed(text).ok()?;
        sure(schema.check(at, &doc, depth))
    }

    fn keywords(&mut self, k: &Keywords, depth: u32) -> Option<()> {
        let next = self.c.next()?;
        if k.strings.is_some() && next != Next::String {
            return None;
        }
        if let Some(types) = k.types
            && next != Next::Number
            && types & kind(next) == 0
        {
            return None;
        }
        match next {
            Next::Object => self.object(k, depth),
            Next::Array => {
                let mut count = 0;
                if !self.c.open(b']')? {
                    loop {
                        self.value(k.items, depth + 1)?;
                        count += 1;
                        if self.c.next_or_close(b']')? {
                            break;
                        }
                    }
                }
                sure(count_within(count, k.min_items, k.max_items))
            }
            Next::String => {
                let s = self.c.string()?;
                if let Some(strings) = &k.strings
                    && !strings.iter().any(|x| **x == *s)
                {
                    return None;
                }
                if k.min_length.is_some() || k.max_length.is_some() {
                    sure(count_within(s.chars().count(), k.min_length, k.max_length))?;
                }
                Some(())
            }
            Next::Number => {
                let n = self.c.number()?;
                match k.types {
                    Some(types) => sure(type_matches(types, &Doc::Num(n))),
                    None => Some(()),
                }
            }
            Next::Null | Next::Bool => self.c.skip_literal(),
        }
    }

    /// The index in [`Walk::orders`] of `k`'s remembered member order, added if new.
    #[inline]
    fn order_slot(&mut self, k: &Keywords) -> usize {
        let id = std::ptr::from_ref(k) as usize;
        match self.orders.iter().position(|(of, _)| *of == id) {
            Some(i) => i,
            // A few schemas are remembered: past them the search would cost what it saves,
            // and a slot out of range is no hint.
            None if self.orders.len() >= ORDERS => usize::MAX,
            None => {
                self.orders.push((id, [NO_HINT; HINTS]));
                self.orders.len() - 1
            }
        }
    }

    /// An object: each member against its property's subschema or `additionalProperties`,
    /// the properties found as bits for `required`, the other keys kept to find a repeat.
    /// Never inlined: in a function of its own the member loop keeps more of its state in
    /// registers than inside [`Walk::value`] (large: 815.9k against 805.1k instructions a call).
    #[inline(never)]
    fn object(&mut self, k: &Keywords, depth: u32) -> Option<()> {
        let slot = self.order_slot(k);
        let start = self.keys.len();
        let mut found = 0u64;
        let mut count = 0;
        if !self.c.open(b'}')? {
            loop {
                let place = count;
                count += 1;
                let hint = self
                    .orders
                    .get(slot)
                    .and_then(|(_, o)| o.get(place))
                    .map(|&h| usize::from(h));
                // The property the previous object had at this place, its key's text taken
                // in place when it is there: no scan of the key.
                let taken = hint.filter(|&h| {
                    k.properties
                        .get(h)
                        .and_then(|p| p.quoted.as_deref())
                        .is_some_and(|q| self.c.eat_key(q))
                });
                let (at, key) = match taken {
                    Some(h) => (Ok(h), None),
                    None => {
                        let (at, key) = self.key_read(k, slot, place, hint)?;
                        (at, Some(key))
                    }
                };
                match at {
                    Ok(i) => {
                        // Past the 64 bits a repeat would go unseen: the tree check decides.
                        let bit = 1u64.checked_shl(u32::try_from(i).ok()?)?;
                        if found & bit != 0 {
                            return None;
                        }
                        found |= bit;
                        let p = k.properties.get(i)?;
                        // A member that asserts only its type (most of them) is read here,
                        // without looking its node up, the call and the dispatch of `value`.
                        match p.types_only {
                            0 => self.value(Some(p.node), depth + 1)?,
                            types => self.typed(types)?,
                        }
                    }
                    Err(_) => {
                        self.value(k.additional, depth + 1)?;
                        // A key not among `properties` was read above (`taken` finds only
                        // properties).
                        self.keys.push(key?);
                    }
                }
                if self.c.next_or_close(b'}')? {
                    break;
                }
            }
        }
        if found & k.required_bits != k.required_bits {
            return None;
        }
        // Most objects hold only keys among `properties`: nothing else to look at.
        if self.keys.len() > start || !k.required.is_empty() {
            let others = self.keys.get_mut(start..)?;
            // Required names that are not among the first 64 properties: a name past them
            // would have ended the walk above, so these are found among the other keys or
            // nowhere.
            if crate::json_text::repeats(others)
                || !k.required.iter().all(|r| others.iter().any(|o| **o == **r))
            {
                return None;
            }
            self.keys.truncate(start);
        }
        sure(count_within(count, k.min_properties, k.max_properties))
    }
}
