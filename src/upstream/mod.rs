//! Clients for what portico calls: business REST backends and upstream MCP servers.
//! They own connections, timeouts and body limits; they never interpret protocol semantics.

pub mod credential;
pub mod exchange;
pub mod listen;
pub mod mcp;
pub mod oauth;
pub mod pool;
pub mod resilience;
pub mod rest;
pub mod sign;
