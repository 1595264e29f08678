//! The `portico` command line: serve, demo, check.
//! It parses arguments and wires modules; it never holds protocol logic.

use clap::{Parser, Subcommand};
use portico::app::Ops;
use portico::mcp::handler::ServerInfo;
use portico::mcp::http::HttpOptions;
use portico::ops::reload::Watch;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// mimalloc: the translation path allocates many small JSON values; measured in
/// docs/benchmarks.md against the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc 3.3's `mi_option_arena_eager_commit` (libmimalloc-sys 0.1.49 names no constant).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Runs before `main` and before Rust's first allocation (mimalloc reserves its first arena
/// then): arenas are committed as they are used, not up front, which keeps an idle sidecar's
/// resident set about 5 MiB smaller (docs/benchmarks.md). It allocates nothing itself.
extern "C" fn lazy_arena_commit() {
    // SAFETY: sets one process-wide allocator option before any Rust allocation;
    // mi_option_set has no other precondition.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

#[used]
#[unsafe(link_section = ".init_array")]
static LAZY_ARENA_COMMIT: extern "C" fn() = lazy_arena_commit;

/// Gives the memory freed after loading a configuration (schema and jq compilation scratch)
/// back to the OS at once, instead of after mimalloc's purge delay: the resident set of an
/// idle sidecar is what its pod is sized by.
fn release_freed_memory() {
    // SAFETY: mi_collect only walks mimalloc's own heaps; it has no preconditions.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[derive(Parser)]
#[command(
    name = "portico",
    version,
    about = "A protocol-translating gateway between REST and MCP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start; boxing the big `Serve` variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Serve MCP in front of the backends described by mapping files.
    Serve {
        /// Mapping files, or folders of them.
        #[arg(required = true)]
        config: Vec<PathBuf>,
        /// Address of the MCP listener.
        #[arg(long, default_value = "127.0.0.1:8080", env = "PORTICO_LISTEN")]
        listen: SocketAddr,
        /// Accepted Host names besides localhost (repeatable; `*` accepts any).
        #[arg(long = "allowed-host")]
        allowed_hosts: Vec<String>,
        /// Accepted browser Origins besides localhost ones (repeatable).
        #[arg(long = "allowed-origin")]
        allowed_origins: Vec<String>,
        /// Largest accepted request body in bytes.
        #[arg(long, default_value_t = 1 << 20)]
        max_body_bytes: usize,
        /// Address of the admin listener (/healthz, /readyz, /metrics); off when absent.
        #[arg(long, env = "PORTICO_ADMIN_ADDR")]
        admin_addr: Option<SocketAddr>,
        /// How long in-flight calls may run after SIGTERM / Ctrl-C (e.g. `10s`, `500ms`).
        #[arg(long, default_value = "10s", value_parser = duration)]
        shutdown_timeout: Duration,
        /// How often the configuration files are checked for changes (`off` disables; SIGHUP
        /// always reloads).
        #[arg(long, default_value = "2s", value_parser = interval)]
        reload_interval: Interval,
        /// Log line format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "PORTICO_LOG_FORMAT")]
        log_format: LogFormat,
        /// Server name announced in `serverInfo` (e.g. `autonym`, which its B3 binding requires).
        #[arg(long, default_value = "portico", env = "PORTICO_SERVER_NAME")]
        server_name: String,
        /// portico's private JWK for outgoing webhooks (served public at
        /// /.well-known/jwks.json); default: an ephemeral P-256 key.
        #[arg(long, env = "PORTICO_WEBHOOK_KEY")]
        webhook_key: Option<PathBuf>,
        /// File where accepted webhooks and pending deliveries are journaled (synced before the
        /// sender is answered) and read back at start; default: memory only.
        #[arg(long, env = "PORTICO_WEBHOOK_JOURNAL")]
        webhook_journal: Option<PathBuf>,
        /// Shared state for several replicas (`redis://host:port/db`): idempotency records,
        /// webhook events (dedupe, order, replay) and 2025-era sessions (docs/scaling.md).
        #[arg(long, env = "PORTICO_STATE")]
        state: Option<String>,
        /// Prefix of every shared-state key (replica sets sharing one Redis need their own).
        #[arg(long, default_value = "portico", env = "PORTICO_STATE_PREFIX")]
        state_prefix: String,
        /// Byte budget of the in-memory idempotency store (the stored answers' JSON text; the
        /// least recently used records are evicted past it, and at most 100,000 keys). Not
        /// used with --state, where Redis holds the records.
        #[arg(long, default_value_t = portico::idempotency::DEFAULT_BUDGET, env = "PORTICO_IDEMPOTENCY_BYTES")]
        idempotency_bytes: u64,
        /// PEM certificate chain: serve the MCP listener (and /webhooks) over TLS. Reloaded
        /// when the file changes. Needs --tls-key.
        #[arg(long, env = "PORTICO_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
        #[arg(long, env = "PORTICO_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`): export each call's span there
        /// and send W3C `traceparent` to the backends.
        #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
        otlp_endpoint: Option<String>,
    },
    /// Serve MCP over stdio (one JSON-RPC message per line; logs go to stderr).
    Stdio {
        /// Mapping files, or folders of them.
        #[arg(required = true)]
        config: Vec<PathBuf>,
        /// Server name announced in `serverInfo`.
        #[arg(long, default_value = "portico", env = "PORTICO_SERVER_NAME")]
        server_name: String,
        /// Also receive webhooks on this address (`POST /webhooks/{business}`); their
        /// notifications are written to stdout once a 2025 session is initialized.
        #[arg(long, env = "PORTICO_WEBHOOK_LISTEN")]
        webhook_listen: Option<SocketAddr>,
        /// portico's private JWK for outgoing webhooks (as for `serve`).
        #[arg(long, env = "PORTICO_WEBHOOK_KEY")]
        webhook_key: Option<PathBuf>,
    },
    /// Run the embedded demo: a legacy spa + hotel API with portico in front, on 127.0.0.1.
    Demo {
        /// Port of the MCP endpoint; the legacy backend takes the next one.
        #[arg(long, default_value_t = 9100)]
        port: u16,
        /// Also serve the MCP conformance fixtures (mappings/conformance.yaml) from a REST
        /// fixture backend on port + 2.
        #[arg(long)]
        fixtures: bool,
        /// Require authentication for privileged tools (prints how to authenticate).
        #[arg(long)]
        secure: bool,
    },
    /// Serve a REST facade in front of an MCP server (the reverse path), from a facade mapping.
    Facade {
        /// The facade mapping file (`facade:` at its top; see docs/mapping.md).
        mapping: PathBuf,
        /// Address of the REST listener.
        #[arg(long, default_value = "127.0.0.1:8090", env = "PORTICO_FACADE_LISTEN")]
        listen: SocketAddr,
        /// Log line format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "PORTICO_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Print the OpenAPI 3.1 document of a facade mapping (what its `GET /openapi.json` serves).
    Openapi {
        /// The facade mapping file.
        mapping: PathBuf,
    },
    /// Run only the demo's legacy booking API (for `portico serve mappings/` and benchmarks).
    DemoBackend {
        /// Port of the legacy API (the demo mappings expect 9101).
        #[arg(long, default_value_t = 9101)]
        port: u16,
    },
    /// Sign a webhook body (RFC 9421 + Content-Digest) with a private JWK; prints header lines.
    WebhookSign {
        /// Private JWK file (EC P-256 or OKP Ed25519, with `d`).
        #[arg(long)]
        key: PathBuf,
        /// The URL the webhook is POSTed to (its authority and path are signed).
        #[arg(long)]
        url: String,
        /// The exact body bytes.
        #[arg(long)]
        body: PathBuf,
        /// `created` in Unix seconds (default: now).
        #[arg(long)]
        created: Option<i64>,
    },
    /// Verify a signed webhook request (header lines + body) against a JWKS.
    WebhookVerify {
        #[arg(long)]
        jwks: PathBuf,
        #[arg(long)]
        url: String,
        /// File of `Name: value` header lines.
        #[arg(long)]
        headers: PathBuf,
        #[arg(long)]
        body: PathBuf,
        /// Freshness window for `created`.
        #[arg(long, default_value = "300s", value_parser = duration)]
        max_age: Duration,
    },
    /// Exit 0 when a URL answers 2xx (default: the admin /healthz); for container health
    /// checks in images without curl.
    Health {
        /// URL to GET.
        #[arg(long, default_value = "http://127.0.0.1:9090/healthz")]
        url: String,
        /// Longest wait for the answer.
        #[arg(long, default_value = "2s", value_parser = duration)]
        timeout: Duration,
    },
    /// Load and compile mapping files and OpenRPC documents; report every problem.
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Treat warnings as errors.
        #[arg(long)]
        strict: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

fn duration(s: &str) -> Result<Duration, String> {
    portico::config::compile::parse_duration(s)
        .ok_or_else(|| format!("`{s}` is not a duration such as 10s, 500ms or 1m"))
}

/// A poll period, or `off`.
#[derive(Clone, Copy)]
struct Interval(Option<Duration>);

fn interval(s: &str) -> Result<Interval, String> {
    if s == "off" || s == "0" {
        Ok(Interval(None))
    } else {
        duration(s).map(|d| Interval(Some(d)))
    }
}

fn init_logging() {
    init_logging_as(LogFormat::Json);
}

fn init_logging_as(format: LogFormat) {
    // Without an OTLP endpoint nothing can fail.
    let _ = init_tracing(format, None);
}

/// Logs on stderr, plus OTLP trace export when `otlp` names a collector.
fn init_tracing(
    format: LogFormat,
    otlp: Option<&str>,
) -> Result<Option<portico::ops::otel::Otel>, portico::ops::otel::OtelError> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Json => fmt.json().boxed(),
        LogFormat::Text => fmt.boxed(),
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
fn load_config(paths: &[PathBuf]) -> Option<portico::config::Gateway> {
    match portico::config::load(paths) {
        Ok(g) => {
            for w in &g.warnings {
                tracing::warn!("{w}");
            }
            release_freed_memory();
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

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reads portico's webhook signing key (a private JWK file).
fn load_webhook_key(
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

/// Prints a helper command's output, or its error on stderr with a failing exit code.
fn cli_result(r: Result<String, String>) -> ExitCode {
    match r {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::WebhookSign {
            key,
            url,
            body,
            created,
        } => cli_result(portico::webhook::cli::sign(&key, &url, &body, created)),
        Command::WebhookVerify {
            jwks,
            url,
            headers,
            body,
            max_age,
        } => cli_result(portico::webhook::cli::verify(
            &jwks, &url, &headers, &body, max_age,
        )),
        Command::Health { url, timeout } => cli_result(
            portico::ops::admin::check_url(&url, timeout)
                .await
                .map(|s| s + "\n"),
        ),
        Command::Check { paths, strict } => {
            let report = portico::check::run(&paths);
            for d in &report.diagnostics {
                eprintln!("{d}");
            }
            let failed = report.has_errors() || (strict && !report.diagnostics.is_empty());
            if failed {
                let n = report.diagnostics.iter().filter(|d| d.is_error()).count();
                eprintln!(
                    "check failed: {n} error(s), {} warning(s)",
                    report.diagnostics.len() - n
                );
                ExitCode::FAILURE
            } else {
                println!(
                    "ok: {} file(s), {} tool(s), {} warning(s)",
                    report.files,
                    report.tools,
                    report.diagnostics.len()
                );
                ExitCode::SUCCESS
            }
        }
        Command::Serve {
            config,
            listen,
            allowed_hosts,
            allowed_origins,
            max_body_bytes,
            admin_addr,
            shutdown_timeout,
            reload_interval,
            log_format,
            server_name,
            webhook_key,
            webhook_journal,
            state,
            state_prefix,
            idempotency_bytes,
            tls_cert,
            tls_key,
            otlp_endpoint,
        } => {
            portico::idempotency::set_budget(idempotency_bytes);
            let otel = match init_tracing(log_format, otlp_endpoint.as_deref()) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Some(url) = state {
                match portico::state::Shared::new(&url, &state_prefix) {
                    Ok(s) => {
                        tracing::info!(redis = %s.display, "shared state in redis");
                        portico::state::install(s);
                        if let Some(shared) = portico::state::shared() {
                            // Identity bindings, proof jti, issued credentials and nonces too.
                            portico::auth::store::install(portico::state::auth::stores(shared));
                        }
                    }
                    Err(e) => {
                        eprintln!("--state: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            let tls = match tls_cert.zip(tls_key) {
                None => None,
                Some((cert, key)) => {
                    match portico::ops::tls::Tls::load(portico::ops::tls::TlsFiles { cert, key }) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            eprintln!("TLS: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
            };
            let webhook_key = match webhook_key.map(|p| load_webhook_key(&p)).transpose() {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            let Some(gateway) = load_config(&config) else {
                return ExitCode::FAILURE;
            };
            let mut opts = HttpOptions {
                max_body_bytes,
                shutdown_timeout,
                webhook_key,
                webhook_journal,
                tls,
                ..HttpOptions::default()
            };
            opts.allowed_hosts.extend(allowed_hosts);
            opts.allowed_origins.extend(allowed_origins);
            let ops = Ops {
                admin: admin_addr,
                watch: Some(Watch {
                    paths: config,
                    interval: reload_interval.0,
                    sighup: true,
                }),
                ..Ops::default()
            };
            let info = ServerInfo {
                name: server_name,
                ..ServerInfo::default()
            };
            let running = match portico::app::start_with(gateway, listen, opts, info, ops).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("cannot listen on {listen} (or the admin address): {e}");
                    return ExitCode::FAILURE;
                }
            };
            println!("mcp: {}", running.mcp_url());
            if let Some(admin) = running.admin_url() {
                println!("admin: {admin}");
            }
            wait_for_signal().await;
            tracing::info!("shutting down");
            let stopped = running.stop().await;
            if let Some(otel) = otel {
                // Flushing blocks on the exporter's thread.
                let _ = tokio::task::spawn_blocking(move || otel.shutdown()).await;
            }
            match stopped {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("server error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Stdio {
            config,
            server_name,
            webhook_listen,
            webhook_key,
        } => {
            init_logging();
            let webhook_key = match webhook_key.map(|p| load_webhook_key(&p)).transpose() {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            let Some(gateway) = load_config(&config) else {
                return ExitCode::FAILURE;
            };
            let core = std::sync::Arc::new(portico::mcp::handler::Core {
                gateway: arc_swap::ArcSwap::from_pointee(gateway),
                info: ServerInfo {
                    name: server_name,
                    ..ServerInfo::default()
                },
            });
            let max_depth = HttpOptions::default().max_depth;
            let mut hub = None;
            if let Some(addr) = webhook_listen {
                let listener = match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("--webhook-listen {addr}: {e}");
                        return ExitCode::FAILURE;
                    }
                };
                let ingress = std::sync::Arc::new(portico::webhook::ingress::Ingress::with_key(
                    webhook_key,
                    None,
                ));
                hub = Some(ingress.hub.clone());
                // stdout carries JSON-RPC only: the address goes to stderr.
                if let Ok(a) = listener.local_addr() {
                    eprintln!("webhooks: http://{a}/webhooks/");
                }
                tokio::spawn(portico::webhook::listener::serve(
                    listener,
                    ingress,
                    core.clone(),
                    HttpOptions::default().max_body_bytes,
                ));
            }
            match portico::mcp::stdio::serve_with_events(
                core,
                tokio::io::stdin(),
                tokio::io::stdout(),
                max_depth,
                hub,
            )
            .await
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("stdio error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::DemoBackend { port } => {
            init_logging();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            match portico::demo::backend::spawn(addr).await {
                Ok((bound, task)) => {
                    println!("backend: http://{bound}");
                    tokio::select! {
                        _ = wait_for_signal() => ExitCode::SUCCESS,
                        r = task => {
                            eprintln!("backend stopped: {r:?}");
                            ExitCode::FAILURE
                        }
                    }
                }
                Err(e) => {
                    eprintln!("cannot listen on {addr}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Facade {
            mapping,
            listen,
            log_format,
        } => {
            init_logging_as(log_format);
            let facade = match portico::facade::config::load(&mapping) {
                Ok(f) => f,
                Err(ds) => {
                    for d in ds {
                        eprintln!("{d}");
                    }
                    return ExitCode::FAILURE;
                }
            };
            match portico::facade::http::start(facade, listen).await {
                Ok(running) => {
                    println!("facade: {}", running.url());
                    wait_for_signal().await;
                    let _ = running.stop().await;
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("cannot listen on {listen}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Openapi { mapping } => match portico::facade::config::load(&mapping) {
            Ok(f) => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                // A closed pipe (`| head`) is an ordinary end, not a panic.
                match serde_json::to_writer_pretty(&mut out, &*f.openapi)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out))
                {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("cannot write the document: {e}");
                        ExitCode::FAILURE
                    }
                }
            }
            Err(ds) => {
                for d in ds {
                    eprintln!("{d}");
                }
                ExitCode::FAILURE
            }
        },
        Command::Demo {
            port,
            fixtures,
            secure,
        } => {
            init_logging();
            let demo = match portico::demo::start_opts(port, fixtures, secure).await {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            print!("{}", demo.banner());
            wait_for_signal().await;
            demo.stop().await;
            ExitCode::SUCCESS
        }
    }
}
