//! Configuration: mapping files and OpenRPC documents, loaded and compiled into a `Gateway`.
//! Everything that can fail fails here, at load, with file and line; nothing here runs per request.

pub mod ask;
pub mod backend_doc;
mod backend_fit;
mod backend_ops;
mod backend_place;
pub mod business;
pub mod compile;
mod compile_backend;
mod compile_tool;
pub mod diag;
mod envelope_check;
mod follow_up;
mod idempotency_check;
mod input_schema;
pub mod kind;
pub mod long_running;
pub mod mapping;
pub mod openrpc;
mod ref_hint;
pub mod request_variant;
pub mod schema;
pub mod schema_patch;
pub mod surface;
pub mod todo;
pub mod tool;

pub use compile::{Backend, Business, Gateway, OutcomeRule, Tool, load};
pub use diag::{Diagnostic, Severity};
