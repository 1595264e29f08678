//! `portico facade` and `portico openapi`: REST in front of an MCP server.
//! It wires the facade module; it never holds protocol logic.

use super::args::{FacadeArgs, OpenapiArgs};
use super::common::{Exit, finish, list, refused, shutdown_signal, start_tracing};
use std::process::ExitCode;

/// Runs `portico facade`.
pub async fn facade(args: FacadeArgs) -> ExitCode {
    let FacadeArgs {
        mapping,
        listen,
        log_format,
        shutdown_timeout,
        tls,
        limits,
        otlp_endpoint,
    } = args;
    let stop_signal = shutdown_signal();
    let otel = match start_tracing(log_format, otlp_endpoint.as_deref()) {
        Ok(o) => o,
        Err(code) => return code.into(),
    };
    let tls = match refused(tls.load(None)) {
        Ok(t) => t,
        Err(code) => return code.into(),
    };
    let facade = match portico::facade::config::load(&mapping) {
        Ok(f) => f,
        Err(ds) => {
            for d in ds {
                eprintln!("{d}");
            }
            return Exit::Invalid.into();
        }
    };
    let listen_opts = portico::facade::http::Listen {
        tls,
        drain: shutdown_timeout,
        limits: limits.limits(),
        ..portico::facade::http::Listen::default()
    };
    let (name, upstream) = (facade.name.clone(), facade.upstream.url().to_string());
    let routes: Vec<String> = facade.routes.iter().map(|r| r.tool.clone()).collect();
    let summary = (name, upstream, routes);
    match portico::facade::http::start_with(facade, listen, listen_opts).await {
        Ok(running) => {
            println!("facade: {}", running.url());
            facade_banner(&running.url(), &summary);
            stop_signal.await;
            finish(running.stop().await, otel).await
        }
        Err(e) => {
            eprintln!("cannot listen on {listen}: {e}");
            Exit::Startup.into()
        }
    }
}

/// Runs `portico openapi`.
pub fn openapi(args: OpenapiArgs) -> ExitCode {
    let OpenapiArgs { mapping } = args;
    match portico::facade::config::load(&mapping) {
        Ok(f) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is an ordinary end, not a panic.
            match serde_json::to_writer_pretty(&mut out, &*f.openapi)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
            {
                Ok(()) => Exit::Ok.into(),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok.into(),
                Err(e) => {
                    eprintln!("cannot write the document: {e}");
                    Exit::Runtime.into()
                }
            }
        }
        Err(ds) => {
            for d in ds {
                eprintln!("{d}");
            }
            Exit::Invalid.into()
        }
    }
}

/// The facade's startup banner (name, upstream URL, the tools of its routes).
fn facade_banner(url: &str, (name, upstream, tools): &(String, String, Vec<String>)) {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        endpoints = %format!("facade={url} openapi={url}/openapi.json"),
        facade = %name,
        upstream = %upstream,
        routes = tools.len(),
        tools = %list(tools.iter().map(String::as_str)),
        "portico facade ready"
    );
}
