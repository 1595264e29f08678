//! `portico health`: probes a running gateway's admin listener.
//! It only reads an HTTP status; it never changes the gateway.

use super::args::HealthArgs;
use super::common::{Exit, cli_result};
use std::net::SocketAddr;
use std::process::ExitCode;

/// Runs `portico health`.
pub async fn health(args: HealthArgs) -> ExitCode {
    let HealthArgs { url, timeout } = args;
    let url = match url.map(Ok).unwrap_or_else(admin_healthz_url) {
        Ok(url) => url,
        Err(why) => {
            eprintln!("portico health: {why}");
            return Exit::Usage.into();
        }
    };
    cli_result(
        portico::ops::admin::check_url(&url, timeout)
            .await
            .map(|s| s + "\n"),
    )
}

/// `portico health`'s default URL: `/healthz` on the admin listener `serve` opens from
/// `PORTICO_ADMIN_ADDR`; a wildcard address is reached on loopback.
fn admin_healthz_url() -> Result<String, String> {
    let raw = std::env::var("PORTICO_ADMIN_ADDR").map_err(|_| {
        "no URL: pass --url, or set PORTICO_ADMIN_ADDR to the admin listener's address (`serve` opens it only with --admin-addr / PORTICO_ADMIN_ADDR)".to_string()
    })?;
    let mut addr: SocketAddr = raw
        .parse()
        .map_err(|e| format!("PORTICO_ADMIN_ADDR `{raw}` is not an address: {e}"))?;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    Ok(format!("http://{addr}/healthz"))
}
