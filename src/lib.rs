//! portico: a protocol-translating gateway between REST and MCP.
//! This crate root only wires modules together; it holds no logic and no global state.
//!
//! # Layout
//!
//! - [`model`]: the neutral `Call` / `Outcome` types every edge translates into and out of.
//! - [`config`]: OpenRPC documents and mapping files, loaded and compiled into a [`config::Gateway`].
//! - [`binding`]: the protocol rulebooks (usp, ucp, plain): metadata, envelopes, error tables.
//! - [`translate`]: `Call` -> REST request, REST response -> `Outcome`, jq transforms, path templates.
//! - [`upstream`]: the pooled REST client that talks to a business's backend.
//! - [`mcp`]: JSON-RPC, both MCP protocol eras, Streamable HTTP.
//! - [`catalog`]: resources and prompts from mappings (read, render, complete).
//! - [`auth`]: inbound authentication: policies, JWTs, proofs of possession, identity binding.
//! - [`discovery`]: `/.well-known/ucp` and `/.well-known/usp` profiles from the mappings.
//! - [`vrp`]: VRP receipt verification and signed MCP transport assertions.
//! - [`state`]: shared state in Redis for several replicas (`--state redis://...`).
//! - [`demo`]: the embedded legacy booking API and the `portico demo` runner.

pub mod app;
pub mod auth;
pub mod binding;
pub mod catalog;
pub mod check;
pub mod clock;
pub mod config;
pub mod demo;
pub mod discovery;
pub mod dry_run;
pub mod facade;
pub mod forward;
pub mod idempotency;
pub mod init;
pub mod json_doc;
pub mod json_text;
pub mod mapping_schema;
pub mod mcp;
pub mod model;
pub mod ops;
pub mod state;
pub mod tasks;
pub mod translate;
pub mod upstream;
pub mod util;
pub mod vrp;
pub mod webhook;
