//! Operations around a running gateway: Prometheus metrics, the admin listener (health,
//! readiness, metrics), configuration hot reload, TLS certificates, the status page, OTLP trace export. It must never sit on the MCP port or block the
//! request path: the forward path only touches lock-free metric handles.

pub mod admin;
pub mod log;
pub mod metrics;
pub mod otel;
pub mod recent;
pub mod reload;
pub mod status;
pub mod tls;
