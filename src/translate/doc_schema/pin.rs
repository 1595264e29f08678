//! [`DocSchema::pin`]: copies of the root's path with a constant member's check made `true`.
//! It never changes a node other paths share; the copies are new nodes.

use super::node::{DocSchema, Node, Tri};
use crate::json_doc::Doc;
use std::collections::HashMap;

impl DocSchema {
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
            p.types_only = 0;
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
}
