//! Small shared helpers with no knowledge of portico's configuration, protocols or runtime state.
//! A leaf: modules here must never import anything else from this crate.

pub mod boxed;
pub mod duration;
pub mod env;
pub mod jwk;
pub mod listen;
pub mod names;
pub mod schema_error;
pub mod similar;
pub mod version;
