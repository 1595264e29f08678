//! The command line's shape: every subcommand, flag, environment variable, default and help text.
//! It only describes and parses arguments; it never starts anything.

use super::common::LogFormat;
use clap::{Parser, Subcommand};
use portico::mcp::http::HttpOptions;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

const SERVE_EXAMPLES: &str = "\
Examples:
  portico serve mappings/
  portico serve --config /etc/portico --listen 0.0.0.0:8080 --admin-addr 0.0.0.0:9090
  PORTICO_CONFIG=mappings/ PORTICO_LISTEN=127.0.0.1:8080 portico serve
  portico serve mappings/demo-spa.yaml --tls-cert tls.crt --tls-key tls.key --log-format text
  portico serve mappings/ --oauth-issuer https://login.example.com --oauth-resource https://mcp.example.com/mcp";

const STDIO_EXAMPLES: &str = "\
Examples:
  portico stdio mappings/
  portico stdio --config mappings/demo-spa.yaml --server-name spa
  portico stdio mappings/ --webhook-listen 127.0.0.1:8081";

const DEMO_EXAMPLES: &str = "\
Examples:
  portico demo
  portico demo --port 9200 --fixtures
  portico demo --secure
  portico demo --shop
  portico demo --oauth-issuer http://127.0.0.1:9400";

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
  PORTICO_CONFIG=/etc/portico portico check
  portico check mappings/demo-spa.yaml --try usp_services_get --args '{\"service_id\":\"FACIAL-45\"}'
  portico check mappings/demo-spa.yaml --try usp_services_list --response 200:treatments.json";

const INIT_EXAMPLES: &str = "\
Examples:
  portico init --openapi api.yaml --out my-api
  portico init --openapi openapi.json --backend http://127.0.0.1:8081/v1 --include pets --exclude /pets/*/photos --out pets
  PORTICO_INIT_OPENAPI=api.yaml PORTICO_INIT_OUT=my-api portico init";

const SCHEMA_EXAMPLES: &str = "\
Examples:
  portico schema > mapping.schema.json
  portico schema --out schemas/mapping.schema.json
  portico schema | jq '.$defs | keys'";

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
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where the configuration is: mapping files or folders of them, as arguments or `--config`.
#[derive(clap::Args)]
pub struct ConfigArgs {
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
    pub fn all(self) -> Vec<PathBuf> {
        let mut all = self.paths;
        all.extend(self.config);
        all
    }
}

// Parsed once at start; boxing the big `Serve` variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Serve MCP in front of the backends described by mapping files.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Serve MCP over stdio (one JSON-RPC message per line; logs go to stderr).
    #[command(after_help = STDIO_EXAMPLES)]
    Stdio(StdioArgs),
    /// Run the embedded demo: a legacy spa + hotel API with portico in front, on 127.0.0.1.
    #[command(after_help = DEMO_EXAMPLES)]
    Demo(DemoArgs),
    /// Serve a REST facade in front of an MCP server (the reverse path), from a facade mapping.
    #[command(after_help = FACADE_EXAMPLES)]
    Facade(FacadeArgs),
    /// Print the OpenAPI 3.1 document of a facade mapping (what its `GET /openapi.json` serves).
    #[command(after_help = OPENAPI_EXAMPLES)]
    Openapi(OpenapiArgs),
    /// Run only the demo's legacy booking API (for `portico serve mappings/` and benchmarks).
    #[command(after_help = DEMO_BACKEND_EXAMPLES)]
    DemoBackend(DemoBackendArgs),
    /// Sign a webhook body (RFC 9421 + Content-Digest) with a private JWK; prints header lines.
    #[command(after_help = SIGN_EXAMPLES)]
    WebhookSign(WebhookSignArgs),
    /// Verify a signed webhook request (header lines + body) against a JWKS.
    #[command(after_help = VERIFY_EXAMPLES)]
    WebhookVerify(WebhookVerifyArgs),
    /// Exit 0 when a URL answers 2xx (default: /healthz of the admin listener at
    /// PORTICO_ADMIN_ADDR, the variable `serve --admin-addr` reads); for container health
    /// checks in images without curl. `serve` opens no admin listener unless given
    /// `--admin-addr`, so without `--url` the variable must be set.
    #[command(after_help = HEALTH_EXAMPLES)]
    Health(HealthArgs),
    /// Load and compile mapping files and OpenRPC documents; report every problem.
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
    /// Generate an OpenRPC document and a mapping file (plain binding) from a backend's
    /// OpenAPI 3.x document: one tool per operation, checked before it is written.
    #[command(after_help = INIT_EXAMPLES)]
    Init(InitArgs),
    /// Print the JSON Schema of mapping files (business and facade mappings), for editors:
    /// `# yaml-language-server: $schema=FILE` on a mapping's first line.
    #[command(after_help = SCHEMA_EXAMPLES)]
    Schema(SchemaArgs),
}

// The flags of `Serve`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Address of the MCP listener.
    #[arg(long, default_value = "127.0.0.1:8080", env = "PORTICO_LISTEN")]
    pub listen: SocketAddr,
    /// Accepted Host names besides localhost (repeatable, or comma-separated; `*` accepts
    /// any).
    #[arg(
        long = "allowed-host",
        env = "PORTICO_ALLOWED_HOST",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Accepted browser Origins besides localhost ones (repeatable, or comma-separated).
    #[arg(
        long = "allowed-origin",
        env = "PORTICO_ALLOWED_ORIGIN",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body in bytes.
    #[arg(long, default_value_t = 1 << 20, env = "PORTICO_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// Address of the admin listener (/healthz, /readyz, /metrics); off when absent.
    #[arg(long, env = "PORTICO_ADMIN_ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// How long in-flight calls may run after SIGTERM / Ctrl-C (e.g. `10s`, `500ms`).
    #[arg(long, default_value = "10s", value_parser = duration, env = "PORTICO_SHUTDOWN_TIMEOUT")]
    pub shutdown_timeout: Duration,
    /// Event-loop threads that own the MCP listener's connections (each connection and its
    /// backend calls stay on one); 0 runs them on the shared worker pool. Default: one per CPU.
    #[arg(long, env = "PORTICO_SHARDS")]
    pub shards: Option<usize>,
    /// How often the configuration files are checked for changes (`off` disables; SIGHUP
    /// always reloads).
    #[arg(long, default_value = "2s", value_parser = interval, env = "PORTICO_RELOAD_INTERVAL")]
    pub reload_interval: Interval,
    /// Log line format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "PORTICO_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Keep the code that startup ran mapped. By default, once started (and after each
    /// reload), portico unmaps its executable's code and constants, and what requests use is
    /// mapped back from the page cache as they use it (docs/operations.md).
    #[arg(long, env = "PORTICO_KEEP_STARTUP_CODE")]
    pub keep_startup_code: bool,
    /// Server name announced in `serverInfo` (e.g. `autonym`, which its B3 binding requires).
    #[arg(long, default_value = "portico", env = "PORTICO_SERVER_NAME")]
    pub server_name: String,
    /// portico's private JWK for outgoing webhooks (served public at
    /// /.well-known/jwks.json); default: an ephemeral P-256 key.
    #[arg(long, env = "PORTICO_WEBHOOK_KEY")]
    pub webhook_key: Option<PathBuf>,
    /// File where accepted webhooks and pending deliveries are journaled (synced before the
    /// sender is answered) and read back at start; default: memory only.
    #[arg(long, env = "PORTICO_WEBHOOK_JOURNAL")]
    pub webhook_journal: Option<PathBuf>,
    /// Shared state for several replicas (`redis://host:port/db`): idempotency records,
    /// webhook events (dedupe, order, replay) and 2025-era sessions (docs/scaling.md).
    #[arg(long, env = "PORTICO_STATE")]
    pub state: Option<String>,
    /// Prefix of every shared-state key (replica sets sharing one Redis need their own).
    #[arg(long, default_value = "portico", env = "PORTICO_STATE_PREFIX")]
    pub state_prefix: String,
    /// Byte budget of the in-memory idempotency store (the stored answers' JSON text; the
    /// least recently used records are evicted past it, and at most 100,000 keys). Not
    /// used with --state, where Redis holds the records.
    #[arg(long, default_value_t = portico::idempotency::DEFAULT_BUDGET, env = "PORTICO_IDEMPOTENCY_BYTES")]
    pub idempotency_bytes: u64,
    /// Accepted webhook events kept per replica for `Last-Event-ID` replay on 2025-era
    /// streams (a reconnecting client further behind gets no replay).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..), env = "PORTICO_WEBHOOK_REPLAY")]
    pub webhook_replay: u32,
    /// How long a webhook event id is remembered: the same id again within it is answered
    /// as a duplicate and not delivered (memory, or Redis with --state).
    #[arg(long, default_value = "24h", value_parser = window, env = "PORTICO_WEBHOOK_DEDUPE_WINDOW")]
    pub webhook_dedupe_window: Duration,
    /// Booking resources whose latest webhook event is kept for `resources/read` (past it,
    /// some are evicted: moka's TinyLFU policy).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..), env = "PORTICO_WEBHOOK_LATEST")]
    pub webhook_latest: u64,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// PEM CA certificate(s): ask TLS clients for a certificate and pass one this CA verifies
    /// to the `mtls` mechanism (clients without one still connect). Needs --tls-cert.
    #[arg(long, env = "PORTICO_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`): export each call's span there,
    /// continue a caller's W3C `traceparent` and send one to the backends.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    #[command(flatten)]
    pub oauth: OAuthArgs,
}

/// MCP authorization: portico as an OAuth 2.1 resource server (docs/security.md).
#[derive(clap::Args, Debug, Default)]
pub struct OAuthArgs {
    /// Trust access tokens of this OAuth authorization server (its issuer URL, https;
    /// repeatable, or comma-separated): every request to the MCP endpoint then needs one.
    #[arg(
        long = "oauth-issuer",
        env = "PORTICO_OAUTH_ISSUER",
        value_delimiter = ','
    )]
    pub oauth_issuers: Vec<String>,
    /// The canonical URI of the MCP endpoint, the tokens' audience (default: the request's
    /// scheme, Host and endpoint path; set it behind an ingress).
    #[arg(long, env = "PORTICO_OAUTH_RESOURCE")]
    pub oauth_resource: Option<String>,
}

// The flags of `Stdio`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Server name announced in `serverInfo`.
    #[arg(long, default_value = "portico", env = "PORTICO_SERVER_NAME")]
    pub server_name: String,
    /// Also receive webhooks on this address (`POST /webhooks/{business}`); their
    /// notifications are written to stdout once a 2025 session is initialized.
    #[arg(long, env = "PORTICO_WEBHOOK_LISTEN")]
    pub webhook_listen: Option<SocketAddr>,
    /// portico's private JWK for outgoing webhooks (as for `serve`).
    #[arg(long, env = "PORTICO_WEBHOOK_KEY")]
    pub webhook_key: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

// The flags of `Demo`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Port of the MCP endpoint; the legacy backend takes port + 1, the admin listener
    /// port + 2, the REST facade port + 3 (0: any free ports).
    #[arg(long, default_value_t = 9100, env = "PORTICO_DEMO_PORT")]
    pub port: u16,
    /// Also serve the MCP conformance fixtures (mappings/conformance.yaml) from a REST
    /// fixture backend on port + 4.
    #[arg(long, env = "PORTICO_DEMO_FIXTURES")]
    pub fixtures: bool,
    /// Require authentication for privileged tools (prints how to authenticate).
    #[arg(long, env = "PORTICO_DEMO_SECURE")]
    pub secure: bool,
    /// Also serve the UCP shop (mappings/shop/demo-shop.yaml): UCP's published shopping
    /// OpenRPC, unchanged, read from the fetched upstream folder ($PORTICO_UPSTREAM, else
    /// ./.upstream; fill it with scripts/fetch-upstream).
    #[arg(long, env = "PORTICO_DEMO_SHOP")]
    pub shop: bool,
    /// MCP authorization for trying it locally (an `http://127.0.0.1` issuer is accepted
    /// here, with a warning).
    #[command(flatten)]
    pub oauth: OAuthArgs,
}

// The flags of `Facade`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct FacadeArgs {
    /// The facade mapping file (`facade:` at its top; see docs/mapping.md).
    #[arg(env = "PORTICO_FACADE_MAPPING")]
    pub mapping: PathBuf,
    /// Address of the REST listener.
    #[arg(long, default_value = "127.0.0.1:8090", env = "PORTICO_FACADE_LISTEN")]
    pub listen: SocketAddr,
    /// Log line format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Json, env = "PORTICO_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// How long in-flight requests may run after SIGTERM / Ctrl-C.
    #[arg(long, default_value = "10s", value_parser = duration, env = "PORTICO_SHUTDOWN_TIMEOUT")]
    pub shutdown_timeout: Duration,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// OTLP/HTTP collector: export each request's span, continue a caller's W3C
    /// `traceparent` and send one to the upstream MCP server.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

// The flags of `Openapi`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct OpenapiArgs {
    /// The facade mapping file.
    #[arg(env = "PORTICO_FACADE_MAPPING")]
    pub mapping: PathBuf,
}

// The flags of `DemoBackend`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct DemoBackendArgs {
    /// Port of the legacy API (the demo mappings expect 9101).
    #[arg(long, default_value_t = 9101, env = "PORTICO_DEMO_BACKEND_PORT")]
    pub port: u16,
}

// The flags of `WebhookSign`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct WebhookSignArgs {
    /// Private JWK file (EC P-256 or OKP Ed25519, with `d`).
    #[arg(long, env = "PORTICO_SIGN_KEY")]
    pub key: PathBuf,
    /// The URL the webhook is POSTed to (its authority and path are signed).
    #[arg(long, env = "PORTICO_SIGN_URL")]
    pub url: String,
    /// File holding the exact body bytes to sign.
    #[arg(
        long,
        env = "PORTICO_SIGN_BODY_FILE",
        required_unless_present = "body",
        conflicts_with = "body"
    )]
    pub body_file: Option<PathBuf>,
    /// The body itself, as given (its UTF-8 bytes); instead of `--body-file`.
    #[arg(long, env = "PORTICO_SIGN_BODY")]
    pub body: Option<String>,
    /// `created` in Unix seconds (default: now).
    #[arg(long, env = "PORTICO_SIGN_CREATED")]
    pub created: Option<i64>,
}

// The flags of `WebhookVerify`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct WebhookVerifyArgs {
    /// The sender's public keys (a JWKS file).
    #[arg(long, env = "PORTICO_VERIFY_JWKS")]
    pub jwks: PathBuf,
    /// The URL the webhook was POSTed to.
    #[arg(long, env = "PORTICO_VERIFY_URL")]
    pub url: String,
    /// File of `Name: value` header lines.
    #[arg(long, env = "PORTICO_VERIFY_HEADERS")]
    pub headers: PathBuf,
    /// File holding the exact body bytes received.
    #[arg(
        long,
        env = "PORTICO_VERIFY_BODY_FILE",
        required_unless_present = "body",
        conflicts_with = "body"
    )]
    pub body_file: Option<PathBuf>,
    /// The body itself, as given (its UTF-8 bytes); instead of `--body-file`.
    #[arg(long, env = "PORTICO_VERIFY_BODY")]
    pub body: Option<String>,
    /// Freshness window for `created`.
    #[arg(long, default_value = "300s", value_parser = duration, env = "PORTICO_VERIFY_MAX_AGE")]
    pub max_age: Duration,
}

// The flags of `Health`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct HealthArgs {
    /// URL to GET (default: http://<PORTICO_ADMIN_ADDR>/healthz, a wildcard address read as
    /// loopback).
    #[arg(long, env = "PORTICO_HEALTH_URL")]
    pub url: Option<String>,
    /// Longest wait for the answer.
    #[arg(long, default_value = "2s", value_parser = duration, env = "PORTICO_HEALTH_TIMEOUT")]
    pub timeout: Duration,
}

// The flags of `Check`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Treat warnings as errors.
    #[arg(long, env = "PORTICO_STRICT")]
    pub strict: bool,
    /// Dry run: print the backend request this tool's call would send (nothing is sent).
    #[arg(long = "try", env = "PORTICO_CHECK_TRY")]
    pub try_tool: Option<String>,
    /// The dry run's arguments, a JSON object.
    #[arg(
        long,
        default_value = "{}",
        requires = "try_tool",
        env = "PORTICO_CHECK_ARGS"
    )]
    pub args: String,
    /// A sample backend answer for the dry run, `STATUS:FILE` (a JSON body): prints the MCP
    /// result or JSON-RPC error the client would get, output schema checked.
    #[arg(long, requires = "try_tool", env = "PORTICO_CHECK_RESPONSE")]
    pub response: Option<String>,
}

// The flags of `Init`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct InitArgs {
    /// The backend's OpenAPI 3.0/3.1/3.2 document (JSON or YAML; local `$ref`d files are read).
    #[arg(long, env = "PORTICO_INIT_OPENAPI")]
    pub openapi: PathBuf,
    /// A protocol's published OpenRPC document (its MCP surface): each method is paired with
    /// an operation; the OpenRPC is referenced unchanged, unpaired methods become `todo:` entries.
    #[arg(long, env = "PORTICO_INIT_OPENRPC")]
    pub openrpc: Option<PathBuf>,
    /// The protocol binding of the generated mapping (default: inferred from the OpenRPC,
    /// else `plain`; only `plain` is generated from an OpenAPI document alone).
    #[arg(long, value_parser = ["plain", "usp", "ucp", "autonym"], env = "PORTICO_INIT_BINDING")]
    pub binding: Option<String>,
    /// The protocol version results announce, when the OpenRPC has no `info.version`.
    #[arg(long, env = "PORTICO_INIT_PROTOCOL_VERSION")]
    pub protocol_version: Option<String>,
    /// Backend base URL (default: the document's first server URL).
    #[arg(long, env = "PORTICO_INIT_BACKEND")]
    pub backend: Option<String>,
    /// Only these operations: a tag, an operationId, a path glob (`/pets/*`) or `METHOD
    /// /glob` (repeatable, or comma-separated).
    #[arg(long, env = "PORTICO_INIT_INCLUDE", value_delimiter = ',')]
    pub include: Vec<String>,
    /// Leave out these operations (same forms as --include; wins over it).
    #[arg(long, env = "PORTICO_INIT_EXCLUDE", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// The folder to create (it must not exist, or be empty).
    #[arg(long, env = "PORTICO_INIT_OUT")]
    pub out: PathBuf,
}

// The flags of `Schema`; the variant's doc comment is the subcommand's help.
#[derive(clap::Args)]
pub struct SchemaArgs {
    /// Write the schema to this file instead of standard output.
    #[arg(long, env = "PORTICO_SCHEMA_OUT")]
    pub out: Option<PathBuf>,
}

/// 2025-era sessions of `serve` (docs/scaling.md, "Sessions").
#[derive(clap::Args)]
pub struct SessionArgs {
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
    pub fn apply(self, opts: &mut HttpOptions) {
        opts.max_sessions = self.max_sessions;
        opts.session_idle = self.session_idle;
        opts.session_rate = (self.session_rate > 0.0).then_some(portico::auth::limit::Shape {
            refill: self.session_rate,
            burst: f64::from(self.session_burst),
        });
    }
}

/// TLS for a listener (`serve`: MCP and /webhooks; `facade`: the REST listener).
/// Connection limits of every listener the command opens (docs/limits.md).
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Longest wait for a request's head, from connect or from the previous response
    /// (HTTP/1.1); a slower client is disconnected.
    #[arg(long, default_value = "30s", value_parser = duration, env = "PORTICO_HEADER_TIMEOUT")]
    header_timeout: Duration,
    /// A connection with no request in flight, and none started or finished for this long, is
    /// closed.
    #[arg(long, default_value = "60s", value_parser = duration, env = "PORTICO_IDLE_TIMEOUT")]
    idle_timeout: Duration,
    /// A request's whole body must arrive within this long after its head (else 408).
    #[arg(long, default_value = "60s", value_parser = duration, env = "PORTICO_BODY_TIMEOUT")]
    body_timeout: Duration,
    /// Largest request head in bytes (at least 8192); a larger one gets 431.
    #[arg(long, default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(8192..), env = "PORTICO_MAX_HEADER_BYTES")]
    max_header_bytes: u64,
    /// Open connections per listener; further ones are closed at once. Keep it under the
    /// process's file-descriptor limit.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..), env = "PORTICO_MAX_CONNECTIONS")]
    max_connections: u64,
    /// Open connections per client IP address, per listener.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..), env = "PORTICO_MAX_CONNECTIONS_PER_CLIENT")]
    max_connections_per_client: u64,
    /// HTTP/2 streams one connection may have open at once.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..), env = "PORTICO_H2_MAX_STREAMS")]
    h2_max_streams: u32,
    /// HTTP/2 streams a client may open and reset before they are served (rapid reset); more
    /// closes the connection.
    #[arg(long, default_value_t = 20, env = "PORTICO_H2_MAX_PENDING_RESETS")]
    h2_max_pending_resets: usize,
    /// HTTP/2 keep-alive ping interval; a peer silent for as long again is dropped.
    #[arg(long, default_value = "30s", value_parser = duration, env = "PORTICO_H2_KEEPALIVE")]
    h2_keepalive: Duration,
}

impl LimitArgs {
    pub fn limits(&self) -> portico::ops::limits::Limits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        portico::ops::limits::Limits {
            header_read_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            body_timeout: self.body_timeout,
            max_header_bytes: count(self.max_header_bytes),
            max_connections: count(self.max_connections),
            max_connections_per_client: count(self.max_connections_per_client),
            h2_max_streams: self.h2_max_streams,
            h2_max_pending_resets: self.h2_max_pending_resets,
            h2_keep_alive: self.h2_keepalive,
        }
    }
}

#[derive(clap::Args)]
pub struct TlsArgs {
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
    pub fn load(
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
pub struct Interval(pub Option<Duration>);

fn interval(s: &str) -> Result<Interval, String> {
    if s == "off" || s == "0" {
        Ok(Interval(None))
    } else {
        duration(s).map(|d| Interval(Some(d)))
    }
}
