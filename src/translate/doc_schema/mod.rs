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
//! [`object_passes`] runs the same check on an answer's text as it is read, building no tree.

mod check;
mod compile;
mod node;
mod pin;
#[cfg(test)]
mod tests;
mod text;

pub use node::DocSchema;
pub use text::object_passes;
