//! Webhooks <-> MCP notifications: verified ingress (`POST /webhooks/{business}`), dedupe,
//! fan-out to MCP clients with replay, and the signature primitives. It never delivers an event
//! whose digest, signature or payload failed a check, and never blocks one client on another.

pub mod cli;
pub mod config;
pub mod dedupe;
pub mod edge;
pub mod egress;
pub mod hub;
pub mod ingress;
pub mod journal;
pub mod keys;
pub mod sfv;
pub mod sig;
