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
/// docs/benchmarks.md against the system allocator and against the `mimalloc` crate's wrapper.
#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

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

/// The exit codes of every subcommand, in one place (docs/operations.md "Exit codes" documents this table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
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

const SERVE_EXAMPLES: &str = "\
Examples:
  portico serve mappings/
  portico serve --config /etc/portico --listen 0.0.0.0:8080 --admin-addr 0.0.0.0:9090
  PORTICO_CONFIG=mappings/ PORTICO_LISTEN=127.0.0.1:8080 portico serve
  portico serve mappings/demo-spa.yaml --tls-cert tls.crt --tls-key tls.key --log-format text";

const STDIO_EXAMPLES: &str = "\
Examples:
  portico stdio mappings/
  portico stdio --config mappings/demo-spa.yaml --server-name spa
  portico stdio mappings/ --webhook-listen 127.0.0.1:8081";

const DEMO_EXAMPLES: &str = "\
Examples:
  portico demo
  portico demo --port 9200 --fixtures
  portico demo --secure";

const FACADE_EXAMPLES: &str = "\
Examples:
  portico facade mappings/demo-spa-facade.yaml
  portico facade mappings/demo-spa-facade.yaml --listen 127.0.0.1:8090 --log-format text
  PORTICO_FACADE_MAPPING=mappings/demo-spa-facade.yaml portico facade --tls-cert tls.crt --tls-key tls.key";

const OPENAPI_EXAMPLES: &str = "\
Examples:
  portico openapi mappings/demo-spa-facade.yaml > openapi.json
  portico openapi mappings/demo-spa-facade.yaml | jq '.paths | keys'";

const DEMO_BACKEND_EXAMPLES: &str = "\
Examples:
  portico demo-backend
  portico demo-backend --port 9101 & portico serve mappings/";

const SIGN_EXAMPLES: &str = "\
Examples:
  portico webhook-sign --key sender.jwk --url https://gw.example/webhooks/spa --body-file event.json
  portico webhook-sign --key sender.jwk --url http://127.0.0.1:8080/webhooks/spa --body-file event.json --created 1767225600 > headers.txt
  portico webhook-sign --key sender.jwk --url http://127.0.0.1:8080/webhooks/spa --body '{\"event_id\":\"e1\"}'";

const VERIFY_EXAMPLES: &str = "\
Examples:
  portico webhook-verify --jwks jwks.json --url https://gw.example/webhooks/spa --headers headers.txt --body-file event.json
  portico webhook-verify --jwks jwks.json --url http://127.0.0.1:8080/webhooks/spa --headers headers.txt --body-file event.json --max-age 10m";

const HEALTH_EXAMPLES: &str = "\
Examples:
  portico health
  portico health --url http://127.0.0.1:9090/readyz --timeout 5s
  HEALTHCHECK CMD [\"portico\", \"health\"]   (Dockerfile, with ENV PORTICO_ADMIN_ADDR=0.0.0.0:9090)";

const CHECK_EXAMPLES: &str = "\
Examples:
  portico check mappings/
  portico check --strict mappings/demo-spa.yaml mappings/demo-hotel.yaml
  PORTICO_CONFIG=/etc/portico portico check";

const AFTER_HELP: &str = "\
Every flag can also be set by an environment variable (shown as [env: ...]); a flag on the
command line wins. Exit codes: 0 ok, 1 input refused (configuration, files, check), 2 usage,
3 cannot start (address taken), 4 failed while running.";

#[derive(Parser)]
#[command(
    name = "portico",
    version,
    about = "A protocol-translating gateway between REST and MCP",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the configuration is: mapping files or folders of them, as arguments or `--config`.
#[derive(clap::Args)]
struct ConfigArgs {
    /// Mapping files, or folders of them (every `*.yaml` / `*.yml` directly inside).
    #[arg(value_name = "CONFIG", required_unless_present = "config")]
    paths: Vec<PathBuf>,
    /// Mapping file or folder (repeatable, or comma-separated); joins the CONFIG arguments.
    #[arg(
        long,
        short = 'c',
        value_name = "FILE|DIR",
        env = "PORTICO_CONFIG",
        value_delimiter = ','
    )]
    config: Vec<PathBuf>,
}

impl ConfigArgs {
    fn all(self) -> Vec<PathBuf> {
        let mut all = self.paths;
        all.extend(self.config);
        all
    }
}

// Parsed once at start; boxing the big `Serve` variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Serve MCP in front of the backends described by mapping files.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve {
        #[command(flatten)]
        config: ConfigArgs,
        /// Address of the MCP listener.
        #[arg(long, default_value = "127.0.0.1:8080", env = "PORTICO_LISTEN")]
        listen: SocketAddr,
        /// Accepted Host names besides localhost (repeatable, or comma-separated; `*` accepts
        /// any).
        #[arg(
            long = "allowed-host",
            env = "PORTICO_ALLOWED_HOST",
            value_delimiter = ','
        )]
        allowed_hosts: Vec<String>,
        /// Accepted browser Origins besides localhost ones (repeatable, or comma-separated).
        #[arg(
            long = "allowed-origin",
            env = "PORTICO_ALLOWED_ORIGIN",
            value_delimiter = ','
        )]
        allowed_origins: Vec<String>,
        /// Largest accepted request body in bytes.
        #[arg(long, default_value_t = 1 << 20, env = "PORTICO_MAX_BODY_BYTES")]
        max_body_bytes: usize,
        /// Address of the admin listener (/healthz, /readyz, /metrics); off when absent.
        #[arg(long, env = "PORTICO_ADMIN_ADDR")]
        admin_addr: Option<SocketAddr>,
        /// How long in-flight calls may run after SIGTERM / Ctrl-C (e.g. `10s`, `500ms`).
        #[arg(long, default_value = "10s", value_parser = duration, env = "PORTICO_SHUTDOWN_TIMEOUT")]
        shutdown_timeout: Duration,
        /// Event-loop threads that own the MCP listener's connections (each connection and its
        /// backend calls stay on one); 0 runs them on the shared worker pool. Default: one per CPU.
        #[arg(long, env = "PORTICO_SHARDS")]
        shards: Option<usize>,
        /// How often the configuration files are checked for changes (`off` disables; SIGHUP
        /// always reloads).
        #[arg(long, default_value = "2s", value_parser = interval, env = "PORTICO_RELOAD_INTERVAL")]
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
        /// Accepted webhook events kept per replica for `Last-Event-ID` replay on 2025-era
        /// streams (a reconnecting client further behind gets no replay).
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..), env = "PORTICO_WEBHOOK_REPLAY")]
        webhook_replay: u32,
        /// How long a webhook event id is remembered: the same id again within it is answered
        /// as a duplicate and not delivered (memory, or Redis with --state).
        #[arg(long, default_value = "24h", value_parser = window, env = "PORTICO_WEBHOOK_DEDUPE_WINDOW")]
        webhook_dedupe_window: Duration,
        /// Booking resources whose latest webhook event is kept for `resources/read` (past it,
        /// some are evicted: moka's TinyLFU policy).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..), env = "PORTICO_WEBHOOK_LATEST")]
        webhook_latest: u64,
        #[command(flatten)]
        sessions: SessionArgs,
        #[command(flatten)]
        tls: TlsArgs,
        /// PEM CA certificate(s): ask TLS clients for a certificate and pass one this CA verifies
        /// to the `mtls` mechanism (clients without one still connect). Needs --tls-cert.
        #[arg(long, env = "PORTICO_TLS_CLIENT_CA", requires = "tls_cert")]
        tls_client_ca: Option<PathBuf>,
        /// OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`): export each call's span there,
        /// continue a caller's W3C `traceparent` and send one to the backends.
        #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
        otlp_endpoint: Option<String>,
    },
    /// Serve MCP over stdio (one JSON-RPC message per line; logs go to stderr).
    #[command(after_help = STDIO_EXAMPLES)]
    Stdio {
        #[command(flatten)]
        config: ConfigArgs,
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
    #[command(after_help = DEMO_EXAMPLES)]
    Demo {
        /// Port of the MCP endpoint; the legacy backend takes port + 1, the admin listener
        /// port + 2, the REST facade port + 3 (0: any free ports).
        #[arg(long, default_value_t = 9100, env = "PORTICO_DEMO_PORT")]
        port: u16,
        /// Also serve the MCP conformance fixtures (mappings/conformance.yaml) from a REST
        /// fixture backend on port + 4.
        #[arg(long, env = "PORTICO_DEMO_FIXTURES")]
        fixtures: bool,
        /// Require authentication for privileged tools (prints how to authenticate).
        #[arg(long, env = "PORTICO_DEMO_SECURE")]
        secure: bool,
    },
    /// Serve a REST facade in front of an MCP server (the reverse path), from a facade mapping.
    #[command(after_help = FACADE_EXAMPLES)]
    Facade {
        /// The facade mapping file (`facade:` at its top; see docs/mapping.md).
        #[arg(env = "PORTICO_FACADE_MAPPING")]
        mapping: PathBuf,
        /// Address of the REST listener.
        #[arg(long, default_value = "127.0.0.1:8090", env = "PORTICO_FACADE_LISTEN")]
        listen: SocketAddr,
        /// Log line format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "PORTICO_LOG_FORMAT")]
        log_format: LogFormat,
        /// How long in-flight requests may run after SIGTERM / Ctrl-C.
        #[arg(long, default_value = "10s", value_parser = duration, env = "PORTICO_SHUTDOWN_TIMEOUT")]
        shutdown_timeout: Duration,
        #[command(flatten)]
        tls: TlsArgs,
        /// OTLP/HTTP collector: export each request's span, continue a caller's W3C
        /// `traceparent` and send one to the upstream MCP server.
        #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
        otlp_endpoint: Option<String>,
    },
    /// Print the OpenAPI 3.1 document of a facade mapping (what its `GET /openapi.json` serves).
    #[command(after_help = OPENAPI_EXAMPLES)]
    Openapi {
        /// The facade mapping file.
        #[arg(env = "PORTICO_FACADE_MAPPING")]
        mapping: PathBuf,
    },
    /// Run only the demo's legacy booking API (for `portico serve mappings/` and benchmarks).
    #[command(after_help = DEMO_BACKEND_EXAMPLES)]
    DemoBackend {
        /// Port of the legacy API (the demo mappings expect 9101).
        #[arg(long, default_value_t = 9101, env = "PORTICO_DEMO_BACKEND_PORT")]
        port: u16,
    },
    /// Sign a webhook body (RFC 9421 + Content-Digest) with a private JWK; prints header lines.
    #[command(after_help = SIGN_EXAMPLES)]
    WebhookSign {
        /// Private JWK file (EC P-256 or OKP Ed25519, with `d`).
        #[arg(long, env = "PORTICO_SIGN_KEY")]
        key: PathBuf,
        /// The URL the webhook is POSTed to (its authority and path are signed).
        #[arg(long, env = "PORTICO_SIGN_URL")]
        url: String,
        /// File holding the exact body bytes to sign.
        #[arg(
            long,
            env = "PORTICO_SIGN_BODY_FILE",
            required_unless_present = "body",
            conflicts_with = "body"
        )]
        body_file: Option<PathBuf>,
        /// The body itself, as given (its UTF-8 bytes); instead of `--body-file`.
        #[arg(long, env = "PORTICO_SIGN_BODY")]
        body: Option<String>,
        /// `created` in Unix seconds (default: now).
        #[arg(long, env = "PORTICO_SIGN_CREATED")]
        created: Option<i64>,
    },
    /// Verify a signed webhook request (header lines + body) against a JWKS.
    #[command(after_help = VERIFY_EXAMPLES)]
    WebhookVerify {
        /// The sender's public keys (a JWKS file).
        #[arg(long, env = "PORTICO_VERIFY_JWKS")]
        jwks: PathBuf,
        /// The URL the webhook was POSTed to.
        #[arg(long, env = "PORTICO_VERIFY_URL")]
        url: String,
        /// File of `Name: value` header lines.
        #[arg(long, env = "PORTICO_VERIFY_HEADERS")]
        headers: PathBuf,
        /// File holding the exact body bytes received.
        #[arg(
            long,
            env = "PORTICO_VERIFY_BODY_FILE",
            required_unless_present = "body",
            conflicts_with = "body"
        )]
        body_file: Option<PathBuf>,
        /// The body itself, as given (its UTF-8 bytes); instead of `--body-file`.
        #[arg(long, env = "PORTICO_VERIFY_BODY")]
        body: Option<String>,
        /// Freshness window for `created`.
        #[arg(long, default_value = "300s", value_parser = duration, env = "PORTICO_VERIFY_MAX_AGE")]
        max_age: Duration,
    },
    /// Exit 0 when a URL answers 2xx (default: /healthz of the admin listener at
    /// PORTICO_ADMIN_ADDR, the variable `serve --admin-addr` reads); for container health
    /// checks in images without curl. `serve` opens no admin listener unless given
    /// `--admin-addr`, so without `--url` the variable must be set.
    #[command(after_help = HEALTH_EXAMPLES)]
    Health {
        /// URL to GET (default: http://<PORTICO_ADMIN_ADDR>/healthz, a wildcard address read as
        /// loopback).
        #[arg(long, env = "PORTICO_HEALTH_URL")]
        url: Option<String>,
        /// Longest wait for the answer.
        #[arg(long, default_value = "2s", value_parser = duration, env = "PORTICO_HEALTH_TIMEOUT")]
        timeout: Duration,
    },
    /// Load and compile mapping files and OpenRPC documents; report every problem.
    #[command(after_help = CHECK_EXAMPLES)]
    Check {
        #[command(flatten)]
        config: ConfigArgs,
        /// Treat warnings as errors.
        #[arg(long, env = "PORTICO_STRICT")]
        strict: bool,
    },
}

/// 2025-era sessions of `serve` (docs/scaling.md, "Sessions").
#[derive(clap::Args)]
struct SessionArgs {
    /// Most 2025-era sessions this process holds; `initialize` past it is refused with 503
    /// and `Retry-After` (no session is evicted to make room).
    #[arg(long, default_value_t = portico::mcp::http::DEFAULT_MAX_SESSIONS, value_parser = clap::value_parser!(u64).range(1..), env = "PORTICO_MAX_SESSIONS")]
    max_sessions: u64,
    /// A session with no request, no open GET stream and no call in flight for this long
    /// ends (e.g. `30m`, `90s`).
    #[arg(long, default_value = "30m", value_parser = duration, env = "PORTICO_SESSION_IDLE")]
    session_idle: Duration,
    /// New sessions per second per client address (0: no limit); past it and the burst,
    /// `initialize` is refused with 429 and `Retry-After`.
    #[arg(long, default_value_t = portico::mcp::http::DEFAULT_SESSION_RATE, value_parser = rate, env = "PORTICO_SESSION_RATE")]
    session_rate: f64,
    /// New sessions a client address may open at once above --session-rate.
    #[arg(long, default_value_t = portico::mcp::http::DEFAULT_SESSION_BURST as u32, value_parser = clap::value_parser!(u32).range(1..), env = "PORTICO_SESSION_BURST")]
    session_burst: u32,
}

impl SessionArgs {
    fn apply(self, opts: &mut HttpOptions) {
        opts.max_sessions = self.max_sessions;
        opts.session_idle = self.session_idle;
        opts.session_rate = (self.session_rate > 0.0).then_some(portico::auth::limit::Shape {
            refill: self.session_rate,
            burst: f64::from(self.session_burst),
        });
    }
}

/// TLS for a listener (`serve`: MCP and /webhooks; `facade`: the REST listener).
#[derive(clap::Args)]
struct TlsArgs {
    /// PEM certificate chain: serve the listener over TLS. Reloaded when the file changes.
    /// Needs --tls-key.
    #[arg(long, env = "PORTICO_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, env = "PORTICO_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The loaded certificate pair, if TLS is asked for, verifying client certificates
    /// against `client_ca` when given (`serve --tls-client-ca`).
    fn load(
        self,
        client_ca: Option<&std::path::Path>,
    ) -> Result<Option<std::sync::Arc<portico::ops::tls::Tls>>, String> {
        match self.tls_cert.zip(self.tls_key) {
            None => Ok(None),
            Some((cert, key)) => portico::ops::tls::Tls::load_with(
                portico::ops::tls::TlsFiles { cert, key },
                client_ca,
            )
            .map(Some)
            .map_err(|e| format!("TLS: {e}")),
        }
    }
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

/// A retention window: a duration as for [`duration`], or whole hours (`24h`), at most 30 days.
fn window(s: &str) -> Result<Duration, String> {
    if let Some(h) = s.trim().strip_suffix('h') {
        return match h.parse::<u64>() {
            Ok(n @ 1..=720) => Ok(Duration::from_secs(n * 3600)),
            _ => Err(format!(
                "`{s}` is not a window such as 24h, 90m or 300s (at most 720h)"
            )),
        };
    }
    duration(s)
}

/// A rate per second: a finite number, 0 or more.
fn rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!(
            "`{s}` is not a rate such as 10 or 0.5 (per second; 0 = no limit)"
        )),
    }
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
fn load_config(paths: &[PathBuf]) -> Option<portico::config::Gateway> {
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
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
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

/// Prints a helper command's output, or its error on stderr with exit code 1.
fn cli_result(r: Result<String, String>) -> ExitCode {
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
fn start_tracing(
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
fn refused<T>(r: Result<T, String>) -> Result<T, Exit> {
    r.map_err(|e| {
        eprintln!("{e}");
        Exit::Invalid
    })
}

/// After a server stopped: flush the spans still queued, exit 0, or 4 when it stopped with an
/// error.
async fn finish(stopped: std::io::Result<()>, otel: Option<portico::ops::otel::Otel>) -> ExitCode {
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
fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        "-".into()
    } else {
        all.join(",")
    }
}

/// The startup banner, on the log (stderr; JSON lines by default): the endpoints, then one line
/// per business with its backend and tools. stdout keeps its `name: url` lines.
fn banner(endpoints: &[(&str, String)], gateway: &portico::config::Gateway) {
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

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // `--help` and `--version` print to stdout: not an error.
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            }
            .into();
        }
    };
    match cli.command {
        Command::WebhookSign {
            key,
            url,
            body_file,
            body,
            created,
        } => cli_result(
            portico::webhook::cli::Body::from_flags(body_file, body)
                .and_then(|body| portico::webhook::cli::sign(&key, &url, &body, created)),
        ),
        Command::WebhookVerify {
            jwks,
            url,
            headers,
            body_file,
            body,
            max_age,
        } => cli_result(
            portico::webhook::cli::Body::from_flags(body_file, body).and_then(|body| {
                portico::webhook::cli::verify(&jwks, &url, &headers, &body, max_age)
            }),
        ),
        Command::Health { url, timeout } => {
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
        Command::Check { config, strict } => {
            let paths = config.all();
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
                Exit::Invalid.into()
            } else {
                println!(
                    "ok: {} file(s), {} tool(s), {} warning(s)",
                    report.files,
                    report.tools,
                    report.diagnostics.len()
                );
                Exit::Ok.into()
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
            shards,
            reload_interval,
            log_format,
            server_name,
            webhook_key,
            webhook_journal,
            state,
            state_prefix,
            idempotency_bytes,
            webhook_replay,
            webhook_dedupe_window,
            webhook_latest,
            sessions,
            tls,
            tls_client_ca,
            otlp_endpoint,
        } => {
            portico::idempotency::set_budget(idempotency_bytes);
            let stop_signal = shutdown_signal();
            let config = config.all();
            let otel = match start_tracing(log_format, otlp_endpoint.as_deref()) {
                Ok(o) => o,
                Err(code) => return code.into(),
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
                        return Exit::Invalid.into();
                    }
                }
            }
            let tls = match refused(tls.load(tls_client_ca.as_deref())) {
                Ok(t) => t,
                Err(code) => return code.into(),
            };
            let webhook_key = match refused(webhook_key.map(|p| load_webhook_key(&p)).transpose()) {
                Ok(k) => k,
                Err(code) => return code.into(),
            };
            let Some(gateway) = load_config(&config) else {
                return Exit::Invalid.into();
            };
            let mut opts = HttpOptions {
                max_body_bytes,
                shutdown_timeout,
                webhook_key,
                webhook_journal,
                webhook_retention: portico::webhook::ingress::Retention {
                    replay: webhook_replay as usize,
                    dedupe: webhook_dedupe_window,
                    latest: webhook_latest,
                },
                tls,
                ..HttpOptions::default()
            };
            sessions.apply(&mut opts);
            if let Some(n) = shards {
                opts.shards = n;
            }
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
                    let admin = admin_addr.map(|a| format!(" or {a}")).unwrap_or_default();
                    eprintln!("cannot listen on {listen}{admin}: {e}");
                    return Exit::Startup.into();
                }
            };
            println!("mcp: {}", running.mcp_url());
            if let Some(admin) = running.admin_url() {
                println!("admin: {admin}");
            }
            let mut endpoints = vec![("mcp", running.mcp_url())];
            let base = running.mcp_url();
            let base = base.trim_end_matches(&running.server.opts.path);
            endpoints.push(("webhooks", format!("{base}/webhooks/{{business}}")));
            if let Some(admin) = running.admin_url() {
                endpoints.push(("admin", admin));
            }
            banner(&endpoints, &running.server.core.gateway.load());
            stop_signal.await;
            tracing::info!("shutting down");
            finish(running.stop().await, otel).await
        }
        Command::Stdio {
            config,
            server_name,
            webhook_listen,
            webhook_key,
        } => {
            init_logging();
            let webhook_key = match refused(webhook_key.map(|p| load_webhook_key(&p)).transpose()) {
                Ok(k) => k,
                Err(code) => return code.into(),
            };
            let Some(gateway) = load_config(&config.all()) else {
                return Exit::Invalid.into();
            };
            let mut endpoints = vec![("stdio", "stdin/stdout".to_string())];
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
                        return Exit::Startup.into();
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
                    endpoints.push(("webhooks", format!("http://{a}/webhooks/{{business}}")));
                }
                tokio::spawn(portico::webhook::listener::serve(
                    listener,
                    ingress,
                    core.clone(),
                    HttpOptions::default().max_body_bytes,
                ));
            }
            banner(&endpoints, &core.gateway.load());
            match portico::mcp::stdio::serve_with_events(
                core,
                tokio::io::stdin(),
                tokio::io::stdout(),
                max_depth,
                hub,
            )
            .await
            {
                Ok(()) => Exit::Ok.into(),
                Err(e) => {
                    eprintln!("stdio error: {e}");
                    Exit::Runtime.into()
                }
            }
        }
        Command::DemoBackend { port } => {
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
        Command::Facade {
            mapping,
            listen,
            log_format,
            shutdown_timeout,
            tls,
            otlp_endpoint,
        } => {
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
        Command::Openapi { mapping } => match portico::facade::config::load(&mapping) {
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
        },
        Command::Demo {
            port,
            fixtures,
            secure,
        } => {
            let stop_signal = shutdown_signal();
            init_logging();
            let demo = match portico::demo::start_opts(port, fixtures, secure).await {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument of every subcommand (help and version aside).
    fn all_args() -> Vec<(String, clap::Arg)> {
        let cli = Cli::command();
        let mut out = Vec::new();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                if !matches!(arg.get_id().as_str(), "help" | "version") {
                    out.push((sub.get_name().to_string(), arg.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_argument_has_an_environment_variable_documented_in_the_operations_reference() {
        let readme = include_str!("../docs/operations.md");
        for (sub, arg) in all_args() {
            if arg.get_id() == "paths" {
                // The CONFIG arguments: `--config` (PORTICO_CONFIG) is their variable.
                continue;
            }
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("`portico {sub}`: {} has no env", arg.get_id()));
            let env = env.to_string_lossy();
            assert!(
                env.starts_with("PORTICO_") || env == "OTEL_EXPORTER_OTLP_ENDPOINT",
                "{env}"
            );
            assert!(
                readme.contains(&format!("`{env}`")),
                "docs/operations.md does not document {env} (`portico {sub}`)"
            );
        }
    }

    /// The flag (`--long`) whose variable is `env`, in subcommand `sub`.
    fn flag_of(sub: &str, env: &str) -> String {
        let (_, arg) = all_args()
            .into_iter()
            .find(|(s, a)| s == sub && a.get_env().is_some_and(|e| e == env))
            .unwrap_or_else(|| panic!("`portico {sub}` has no flag for {env}"));
        match arg.get_long() {
            Some(long) => format!("--{long}"),
            // A positional argument: its value alone.
            None => String::new(),
        }
    }

    /// Every `portico ...` example line of every subcommand's help parses, with its variables
    /// (`NAME=value portico ...`) read as the flags they stand for, and the files it names from
    /// the repository exist.
    #[test]
    fn every_help_example_parses_and_names_real_files() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut cli = Cli::command();
        let mut n = 0;
        for sub in cli.get_subcommands_mut() {
            let name = sub.get_name().to_string();
            let help = sub.render_long_help().to_string();
            let examples = help
                .split("Examples:\n")
                .nth(1)
                .unwrap_or_else(|| panic!("`portico {name}` has no examples"));
            for line in examples.lines().filter(|l| l.contains("portico ")) {
                // A shell pipeline or redirection ends the command.
                let command = line.split(['|', '>', '&']).next().unwrap_or("").trim();
                let mut argv = Vec::new();
                let mut env = Vec::new();
                for word in command.split_whitespace() {
                    match word.split_once('=') {
                        Some((var, value)) if argv.is_empty() && var.starts_with("PORTICO_") => {
                            env.push((var.to_string(), value.to_string()))
                        }
                        _ => argv.push(word.to_string()),
                    }
                }
                for (var, value) in env {
                    let flag = flag_of(&name, &var);
                    if !flag.is_empty() {
                        argv.push(flag);
                    }
                    argv.push(value);
                }
                for word in &argv {
                    if word.starts_with("mappings/") {
                        assert!(root.join(word).exists(), "{line}: {word} does not exist");
                    }
                }
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("example `{line}` does not parse ({argv:?}): {e}");
                }
                n += 1;
            }
        }
        assert!(n >= 20, "only {n} examples");
    }

    #[test]
    fn usage_errors_exit_with_the_documented_code() {
        let e = Cli::try_parse_from(["portico", "serve", "--no-such-flag"])
            .err()
            .expect("refused");
        assert!(e.use_stderr());
        assert_eq!(e.exit_code(), Exit::Usage as i32, "clap's own code agrees");
        let readme = include_str!("../docs/operations.md");
        for code in [
            Exit::Ok,
            Exit::Invalid,
            Exit::Usage,
            Exit::Startup,
            Exit::Runtime,
        ] {
            let row = format!("| {} |", code as u8);
            assert!(
                readme.contains(&row),
                "docs/operations.md's exit code table lacks {row}"
            );
        }
    }
}
