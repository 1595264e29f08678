//! What every subcommand shares: exit codes, logging, configuration loading, signals, the banner.
//! It is a leaf: it never imports a subcommand or the argument definitions.

use std::path::PathBuf;
use std::process::ExitCode;

/// The exit codes of every subcommand, in one place (docs/operations.md "Exit codes" documents this table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done; a server stopped by SIGTERM / Ctrl-C after draining its in-flight calls.
    Ok = 0,
    /// The input was refused: a configuration, mapping, key or certificate file, a flag value
    /// checked after parsing (`--otlp-endpoint`, `--state`); `check` found errors; `health` got
    /// no 2xx answer; a webhook signature did not verify.
    Invalid = 1,
    /// Usage: an unknown subcommand or flag, a missing argument, a value that does not parse
    /// (clap's own exit code for usage errors).
    Usage = 2,
    /// Cannot start: a listener address cannot be bound (taken, not local, no permission), the
    /// OTLP exporter or a listener's state cannot be set up.
    Startup = 3,
    /// Failed while running: a server stopped with an I/O error, stdout could not be written.
    Runtime = 4,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// The log buffer, kept to write it out before the process exits.
static LOG_SINK: std::sync::OnceLock<portico::ops::log_sink::Sink> = std::sync::OnceLock::new();

/// Writes out the log lines still buffered; called before the process exits.
pub fn flush_logs() {
    if let Some(sink) = LOG_SINK.get() {
        sink.flush();
    }
}

pub fn init_logging() {
    init_logging_as(LogFormat::Json);
}

pub fn init_logging_as(format: LogFormat) {
    // Without an OTLP endpoint nothing can fail.
    let _ = init_tracing(format, None);
}

/// Logs on stderr, plus OTLP trace export when `otlp` names a collector.
pub fn init_tracing(
    format: LogFormat,
    otlp: Option<&str>,
) -> Result<Option<portico::ops::otel::Otel>, portico::ops::otel::OtelError> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Log lines are buffered and written out in batches by a thread of their own
    // (`ops::log_sink` says why); a call never waits on stderr while the buffer has room.
    let sink = portico::ops::log_sink::Sink::start(std::io::stderr());
    let _ = LOG_SINK.set(sink.clone());
    let fmt = tracing_subscriber::fmt::layer().with_writer(sink);
    let fmt = match format {
        // tracing-subscriber's JSON line with the call's span once (`span`), not again as a
        // one-item `spans` list, written by `ops::log_line` (which says why).
        LogFormat::Json => fmt
            .fmt_fields(portico::ops::log_line::fields())
            .event_format(portico::ops::log_line::JsonLine::default())
            .boxed(),
        // Colour codes only for a terminal: never into files, pipes or log collectors.
        LogFormat::Text => {
            use std::io::IsTerminal;
            fmt.with_ansi(std::io::stderr().is_terminal()).boxed()
        }
    };
    let (otel_layer, otel) = match otlp {
        Some(endpoint) => {
            let (layer, otel) = portico::ops::otel::layer(endpoint)?;
            (Some(layer), Some(otel))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(otel_layer)
        .with(fmt)
        .with(filter)
        .init();
    Ok(otel)
}

/// Loads the configuration, printing every diagnostic; logs warnings.
/// Compiled on the configuration thread, where every reload compiles too
/// (`ops::reload::on_config_thread` says why).
pub fn load_config(paths: &[PathBuf]) -> Option<portico::config::Gateway> {
    let owned = paths.to_vec();
    let loaded = portico::ops::reload::on_config_thread(move || portico::config::load(&owned));
    let Some(loaded) = loaded else {
        eprintln!("error: loading the configuration panicked (a bug: please report it)");
        return None;
    };
    match loaded {
        Ok(g) => {
            for w in &g.warnings {
                tracing::warn!("{w}");
            }
            Some(g)
        }
        Err(ds) => {
            for d in ds {
                eprintln!("{d}");
            }
            None
        }
    }
}

/// Registers for SIGTERM and SIGINT at once, so a signal that arrives while a server is still
/// starting is not fatal (the default action) but stops it cleanly once it runs; the returned
/// future resolves at the first signal.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                (Ok(mut one), Err(_)) | (Err(_), Ok(mut one)) => {
                    one.recv().await;
                }
                (Err(_), Err(_)) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Reads portico's webhook signing key (a private JWK file).
pub fn load_webhook_key(
    path: &std::path::Path,
) -> Result<std::sync::Arc<portico::webhook::keys::SigningKey>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read --webhook-key {}: {e}", path.display()))?;
    let jwk: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--webhook-key {} is not JSON: {e}", path.display()))?;
    portico::webhook::keys::SigningKey::from_jwk(&jwk)
        .map(std::sync::Arc::new)
        .map_err(|e| format!("--webhook-key {}: {e}", path.display()))
}

/// Prints a helper command's output, or its error on stderr with exit code 1.
pub fn cli_result(r: Result<String, String>) -> ExitCode {
    match r {
        Ok(out) => {
            print!("{out}");
            Exit::Ok.into()
        }
        Err(e) => {
            eprintln!("{e}");
            Exit::Invalid.into()
        }
    }
}

/// Logs and OTLP export for a server command; a refused endpoint is exit 1, an exporter that
/// cannot be built exit 3 (the reason printed).
pub fn start_tracing(
    format: LogFormat,
    otlp: Option<&str>,
) -> Result<Option<portico::ops::otel::Otel>, Exit> {
    init_tracing(format, otlp).map_err(|e| {
        eprintln!("{e}");
        match e {
            portico::ops::otel::OtelError::BadEndpoint(_) => Exit::Invalid,
            portico::ops::otel::OtelError::Exporter(_) => Exit::Startup,
        }
    })
}

/// A file named by a flag that was refused: the reason printed, exit 1.
pub fn refused<T>(r: Result<T, String>) -> Result<T, Exit> {
    r.map_err(|e| {
        eprintln!("{e}");
        Exit::Invalid
    })
}

/// After a server stopped: flush the spans still queued, exit 0, or 4 when it stopped with an
/// error.
pub async fn finish(
    stopped: std::io::Result<()>,
    otel: Option<portico::ops::otel::Otel>,
) -> ExitCode {
    if let Some(otel) = otel {
        // Flushing blocks on the exporter's thread.
        let _ = tokio::task::spawn_blocking(move || otel.shutdown()).await;
    }
    match stopped {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("server error: {e}");
            Exit::Runtime.into()
        }
    }
}

/// Comma-separated names, or `-` for none.
pub fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        "-".into()
    } else {
        all.join(",")
    }
}

/// The startup banner, on the log (stderr; JSON lines by default): the endpoints, then one line
/// per business with its backend and tools. stdout keeps its `name: url` lines.
pub fn banner(endpoints: &[(&str, String)], gateway: &portico::config::Gateway) {
    let endpoints = endpoints
        .iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect::<Vec<_>>()
        .join(" ");
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        endpoints = %endpoints,
        businesses = gateway.businesses.len(),
        tools = gateway.tools.len(),
        resources = gateway.resources.len(),
        prompts = gateway.prompts.len(),
        "portico ready"
    );
    for b in &gateway.businesses {
        let tools = list(
            gateway
                .tools
                .values()
                .filter(|t| t.business.name == b.name)
                .map(|t| t.name.as_str()),
        );
        tracing::info!(
            business = %b.name,
            backend = %b.backend.base,
            file = %b.file.display(),
            tools = %tools,
            "business loaded"
        );
    }
}
