//! JSON text to and from `serde_json::Value`s: byte for byte what `serde_json::to_vec` writes,
//! and exactly the value (or error) `serde_json::from_slice` reads. It never changes a value.
//!
//! Every answer portico sends is written here, so the string escaper is the hot loop: it checks
//! eight bytes at a time for the three kinds of byte JSON must escape (`"`, `\` and controls)
//! and copies the runs between them whole, where serde_json looks up a table for each byte.
//!
//! Every request body and backend answer is read here too ([`from_slice`]). The same eight-byte
//! scan finds the end of each string; the input's UTF-8 is checked once, not string by string;
//! arrays are built at their final size. serde_json stays the reference for every
//! answer: a number with a fraction or exponent, an integer of 19 digits or more and `-0` are
//! read by serde_json from their own text; any error, a lone surrogate escape or nesting past
//! 100 levels hands the whole document to serde_json, which reads it again from the start.
//! The same reader builds a borrowed [`Doc`] ([`read_borrowed`]) whose escape-free strings and
//! keys are slices of the input, with the value and errors it would give as a `Value`.

mod cursor;
mod read;
mod scan;
#[cfg(target_arch = "x86_64")]
mod shuffle;
#[cfg(test)]
pub(crate) mod tests;
mod write;

pub use cursor::{Cursor, Next, repeats};
pub use read::{Shape, from_slice, from_slice_narrow, read_borrowed, read_nested, read_shaped};
pub use write::{
    to_string, to_vec, write, write_doc, write_map, write_object, write_str, write_str_bytes,
    write_str_contents,
};
