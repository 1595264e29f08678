//! Clients for what portico calls: business REST backends (and, later, MCP servers).
//! They own connections, timeouts and body limits; they never interpret protocol semantics.

pub mod pool;
pub mod resilience;
pub mod rest;
