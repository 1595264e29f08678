//! Webhooks <-> MCP notifications: verified ingress, dedupe, fan-out with replay, signed egress, signature primitives.
//! It never delivers an event whose digest, signature or payload failed a check, nor blocks one client on another.

pub mod cli;
pub mod config;
pub mod dedupe;
pub mod edge;
pub mod egress;
pub mod hub;
pub mod ingress;
pub mod journal;
pub mod keys;
pub mod listener;
pub mod retry;
pub mod sfv;
pub mod sig;
