//! `portico demo` and `portico demo-backend`: the self-contained demonstration.
//! It starts the library's demo; it never holds protocol logic.

use super::args::{DemoArgs, DemoBackendArgs};
use super::common::{Exit, banner, init_logging, shutdown_signal};
use std::net::SocketAddr;
use std::process::ExitCode;

/// Runs `portico demo`.
pub async fn demo(args: DemoArgs) -> ExitCode {
    let DemoArgs {
        port,
        fixtures,
        secure,
        oauth,
        shop,
    } = args;
    let stop_signal = shutdown_signal();
    init_logging();
    let oauth = match super::serve::oauth_options(oauth, true) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return Exit::Invalid.into();
        }
    };
    let demo = match portico::demo::start_shop(port, fixtures, secure, oauth, shop).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return Exit::Startup.into();
        }
    };
    // stdout: the `name: url` lines scripts and tests read; the banner goes to the log.
    print!("{}", demo.banner());
    let mut endpoints = vec![("mcp", demo.mcp_url())];
    if let Some(admin) = demo.gateway.admin_url() {
        endpoints.push(("admin", admin));
    }
    banner(&endpoints, &demo.gateway.server.core.gateway.load());
    stop_signal.await;
    demo.stop().await;
    Exit::Ok.into()
}

/// Runs `portico demo-backend`.
pub async fn demo_backend(args: DemoBackendArgs) -> ExitCode {
    let DemoBackendArgs { port } = args;
    let stop_signal = shutdown_signal();
    init_logging();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    match portico::demo::backend::spawn(addr).await {
        Ok((bound, task)) => {
            println!("backend: http://{bound}");
            tokio::select! {
                _ = stop_signal => Exit::Ok.into(),
                r = task => {
                    eprintln!("backend stopped: {r:?}");
                    Exit::Runtime.into()
                }
            }
        }
        Err(e) => {
            eprintln!("cannot listen on {addr}: {e}");
            Exit::Startup.into()
        }
    }
}
