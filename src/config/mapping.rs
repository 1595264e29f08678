//! The mapping-file format as written by users (YAML, one business per file).
//! Plain data with serde: it must never compile, resolve or validate anything (see `compile`).

use indexmap::IndexMap;
use serde::Deserialize;

/// One business: its backend, its protocol binding and how each tool becomes a REST call.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MappingFile {
    /// Business name (used in logs, metrics and `/mcp/{business}`).
    pub business: String,
    /// Protocol rulebook: `usp`, `ucp` or `plain`.
    pub binding: String,
    /// OpenRPC document describing the tools (path relative to this file).
    pub openrpc: String,
    /// Absolute JSON Schema `$id` (or prefix ending in `/`) -> local file or folder.
    #[serde(default)]
    pub schema_ids: IndexMap<String, String>,
    /// `error` (default) or `warn`: what an unresolvable `$ref` in the OpenRPC is.
    #[serde(default)]
    pub unresolved_refs: Option<String>,
    /// The legacy REST backend.
    pub backend: BackendSpec,
    /// jq definitions (`def name: ...;`) available to every transform of this file.
    #[serde(default)]
    pub definitions: Option<String>,
    /// Protocol values the binding puts in every result (USP/UCP version, capabilities).
    #[serde(default)]
    pub protocol: ProtocolSpec,
    /// HTTP status -> outcome overrides for every tool of this business.
    #[serde(default)]
    pub outcomes: IndexMap<String, OutcomeSpecs>,
    /// Tool name (an OpenRPC method) -> REST call.
    pub tools: IndexMap<String, ToolSpec>,
    /// OpenRPC methods not yet paired with a backend operation (written by `portico init
    /// --openrpc`): each entry is an error in `check` until it moves under `tools:`.
    #[serde(default)]
    pub todo: IndexMap<String, TodoSpec>,
    /// Resource URI, or URI template with `{var}`s -> REST GET (`resources/*`).
    #[serde(default)]
    pub resources: IndexMap<String, ResourceSpec>,
    /// Prompt name -> MiniJinja messages (`prompts/*`, `completion/complete`).
    #[serde(default)]
    pub prompts: IndexMap<String, PromptSpec>,
    /// What `/.well-known/ucp` or `/.well-known/usp` advertises for this business.
    #[serde(default)]
    pub discovery: DiscoverySpec,
    /// Inbound authentication and access tiers (USP AuthorizationPolicy), see docs/security.md.
    #[serde(default)]
    pub authorization: Option<crate::auth::policy::AuthorizationSpec>,
    /// MCP authorization: trusted authorization servers and the scopes each tool needs.
    #[serde(default)]
    pub mcp_authorization: Option<crate::auth::resource::spec::McpAuthorizationSpec>,
    /// Token-bucket rate limits per business and per principal, see docs/security.md.
    #[serde(default)]
    pub rate_limits: Option<crate::auth::limit::RateLimitsSpec>,
    /// RFC 9421 response signatures for some tools, see docs/security.md.
    #[serde(default)]
    pub response_signing: Option<crate::auth::respsig::ResponseSigningSpec>,
    /// VRP transport attestations for some tools' results, see docs/security.md.
    #[serde(default)]
    pub vrp: Option<crate::vrp::VrpSpec>,
    /// Incoming webhooks from this business (`POST /webhooks/{business}`), see docs/mapping.md.
    #[serde(default)]
    pub webhooks: Option<WebhookSpec>,
}

/// Discovery-profile values that the protocol binding cannot derive.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySpec {
    /// Public URL of the MCP endpoint (default: the URL the client reached, from its `Host`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Profile version, `YYYY-MM-DD` (default: `protocol.version`).
    #[serde(default)]
    pub version: Option<String>,
    /// USP: `usp.business` (`name`, `timezone`, `currency`, optional `locations`).
    #[serde(default)]
    pub business: Option<serde_json::Value>,
    /// Public JWKs published as `keys[]` (webhook signature verification).
    #[serde(default)]
    pub keys: Vec<serde_json::Value>,
}

/// How the business's webhooks are verified, deduplicated and turned into protocol events.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookSpec {
    /// JWKS file with the sender's public keys (relative to this file).
    #[serde(default)]
    pub jwks: Option<String>,
    /// Accepted RFC 9421 algorithms; default both `ecdsa-p256-sha256` and `ed25519`.
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Largest distance between the signature's `created` and now; default 300s.
    #[serde(default)]
    pub max_age: Option<String>,
    /// Legacy HMAC-SHA256 header scheme for senders that cannot do RFC 9421.
    #[serde(default)]
    pub hmac: Option<HmacSpec>,
    /// jq program: legacy payload -> protocol event; default: the payload as is.
    #[serde(default)]
    pub transform: Option<String>,
    /// JSON pointer to the event id in the event; default `/event_id`.
    #[serde(default)]
    pub event_id: Option<String>,
    /// JSON pointer to the booking id in the event; default `/booking_id`.
    #[serde(default)]
    pub resource_id: Option<String>,
    /// Resource URI per booking, `{id}` replaced; default `usp://bookings/{id}` (usp).
    #[serde(default)]
    pub resource_uri: Option<String>,
    /// JSON-RPC notification method; default `usp_webhook` (usp), else `notifications/webhook`.
    #[serde(default)]
    pub method: Option<String>,
    /// URLs each accepted event is POSTed to, signed with portico's own key.
    #[serde(default)]
    pub deliver_to: Vec<String>,
    /// Retry schedule for `deliver_to` (USP defaults: 30s initial, 3 retries, 15m in total).
    #[serde(default)]
    pub retry: Option<RetrySpec>,
}

/// Exponential backoff for outgoing webhooks.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    #[serde(default)]
    pub initial: Option<String>,
    #[serde(default)]
    pub retries: Option<u32>,
    #[serde(default)]
    pub max_total: Option<String>,
    /// Time allowed for one attempt; default 10s.
    #[serde(default)]
    pub timeout: Option<String>,
}

/// The legacy HMAC scheme: `<header>: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HmacSpec {
    /// Shared secret; use `${ENV_VAR}`.
    pub secret: String,
    /// Header name; default `X-Webhook-Signature`.
    #[serde(default)]
    pub header: Option<String>,
}

/// Where and how to reach the backend.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// Base URL; tool paths are appended to it.
    pub url: String,
    /// Total time for one backend call (`5s`, `1500ms`); default 10s.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Time to establish a connection; default 2s.
    #[serde(default)]
    pub connect_timeout: Option<String>,
    /// Static headers sent on every call; values may use `${ENV_VAR}`.
    #[serde(default)]
    pub headers: IndexMap<String, String>,
    /// Largest backend response body accepted, in bytes; default 8 MiB.
    #[serde(default)]
    pub max_response_bytes: Option<u64>,
    /// Retries of safe (GET/HEAD/OPTIONS) or keyed calls; default: none.
    #[serde(default)]
    pub retries: Option<BackendRetrySpec>,
    /// Circuit breaker per route (tool or resource); default: opens a route for 30s when half
    /// of at least 20 calls within 30s failed.
    #[serde(default)]
    pub breaker: Option<BreakerSpec>,
    /// Most calls in flight to this backend; more are shed. Default 1024; 0 = no limit.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Client request headers (MCP over HTTP) passed on to the backend, by name; none by
    /// default. `Authorization` / `X-API-Key` only when listed here.
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// Sign every backend request with portico's key (RFC 9421 + `Content-Digest`).
    #[serde(default)]
    pub sign_requests: bool,
    /// The backend's OpenAPI 3.x document (relative to this file): `check` then verifies each
    /// tool's method and path, its query parameters and the fields its transforms read.
    #[serde(default)]
    pub openapi: Option<String>,
    /// OAuth 2.0 backend credentials: a token from the backend's own authorization server
    /// (client credentials, or RFC 8693 token exchange of the caller's MCP access token) sent
    /// as `Authorization: Bearer` on every backend request.
    #[serde(default)]
    pub oauth: Option<BackendOAuthSpec>,
}

/// `backend.oauth.grant`: how portico obtains the backend's token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendGrant {
    /// One token for portico itself (`client_credentials`).
    #[default]
    ClientCredentials,
    /// A token for the end user: the caller's validated MCP access token exchanged at the
    /// backend's authorization server (RFC 8693), cached per subject.
    TokenExchange,
}

/// `backend.oauth`: the grant portico uses for the backend's token.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendOAuthSpec {
    /// `client_credentials` (default) or `token_exchange` (needs MCP authorization).
    #[serde(default)]
    pub grant: BackendGrant,
    /// RFC 8693 `audience` of the exchanged token (`token_exchange` only).
    #[serde(default)]
    pub audience: Option<String>,
    /// The token endpoint (https; plain http only for a loopback host).
    pub token_url: String,
    pub client_id: String,
    /// The client secret; use `${ENV_VAR}`.
    pub client_secret: String,
    /// `scope` to ask for.
    #[serde(default)]
    pub scope: Option<String>,
    /// RFC 8707 `resource` to ask the token for (the backend's identifier).
    #[serde(default)]
    pub resource: Option<String>,
}

/// `backend.retries`: how often and how patiently a retryable call is sent again.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendRetrySpec {
    /// Attempts in all, the first included (1 = no retry); at most 10.
    pub attempts: u32,
    /// Delay before the first retry, doubled for each next one (default `100ms`); jittered.
    #[serde(default)]
    pub backoff: Option<String>,
    /// Longest delay between two attempts (default `2s`).
    #[serde(default)]
    pub max_backoff: Option<String>,
    /// How many retries the backend's calls may make in all (default: `ratio: 0.2`,
    /// `min_per_s: 10`, `window: 10s`).
    #[serde(default)]
    pub budget: Option<RetryBudgetSpec>,
}

/// `backend.retries.budget`: retries may be `ratio` of the retryable calls of the last
/// `window`, plus `min_per_s` a second; a retry beyond that is not made.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBudgetSpec {
    /// Retries allowed per retryable call within `window`, 0 to 1000 (default 0.2: one
    /// retry per five calls).
    #[serde(default)]
    pub ratio: Option<f64>,
    /// Retries a second allowed whatever the traffic (default 10).
    #[serde(default)]
    pub min_per_s: Option<u32>,
    /// How long a call counts, `1s` to `60s` (default `10s`).
    #[serde(default)]
    pub window: Option<String>,
}

/// `backend.breaker`: when calls to a failing route (a tool, or a resource) of the backend are
/// refused without trying.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
    /// Share of failed calls within `window` that opens a route (above 0, at most 1; default
    /// 0.5).
    #[serde(default)]
    pub failure_ratio: Option<f64>,
    /// Fewest calls within `window` before the ratio is judged (default 20).
    #[serde(default)]
    pub min_calls: Option<u32>,
    /// Length of the sliding window (default `30s`).
    #[serde(default)]
    pub window: Option<String>,
    /// Shorthand: `failures: N` opens a route after N failed calls and no success within the
    /// window (`min_calls: N, failure_ratio: 1`); 0 turns the breaker off.
    #[serde(default)]
    pub failures: Option<u32>,
    /// How long it stays open before one trial call is let through (default `30s`).
    #[serde(default)]
    pub open_for: Option<String>,
}

/// An OpenRPC method `init` could not pair with a backend operation.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoSpec {
    /// Why it is not paired.
    #[serde(default)]
    pub reason: Option<String>,
    /// The backend operations considered, best first: `METHOD /path (operationId): why`.
    #[serde(default)]
    pub candidates: Vec<String>,
}

/// Protocol envelope values.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtocolSpec {
    /// Protocol version announced in results (USP `usp.version`, UCP `ucp.version`).
    #[serde(default)]
    pub version: Option<String>,
    /// USP: `usp.capabilities` object put in every result.
    #[serde(default)]
    pub capabilities: Option<serde_json::Value>,
    /// UCP: the capability name announced in `ucp.capabilities` (per tool overridable).
    #[serde(default)]
    pub capability: Option<String>,
    /// UCP: the business's registries as its profile declares them (`capabilities`,
    /// `services`, `payment_handlers`); results carry their response form.
    #[serde(default)]
    pub ucp: Option<serde_json::Value>,
}

/// How one tool call becomes one REST request, and the answer a result.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// `METHOD /path/{arg}`.
    pub http: String,
    /// Query parameter -> jq expression over the arguments (null / absent values are omitted).
    #[serde(default)]
    pub query: IndexMap<String, String>,
    /// Header -> jq expression over the arguments.
    #[serde(default)]
    pub headers: IndexMap<String, String>,
    /// jq expression building the JSON body from the arguments; default: the arguments minus
    /// protocol metadata and path arguments (for POST/PUT/PATCH).
    #[serde(default)]
    pub body: Option<String>,
    /// jq expression turning the backend's 2xx body into the protocol payload.
    #[serde(default)]
    pub result: Option<String>,
    /// Drops `null` object members from the success payload, at every depth.
    #[serde(default)]
    pub drop_nulls: bool,
    /// The operation whose request variant of the params' schemas is served (`ucp_request`
    /// annotations); default: the word before the first `_` of the tool's name; `none`: the
    /// schemas as published.
    #[serde(default)]
    pub request_variant: Option<String>,
    /// Patches to the published param or result schemas, applied in order at load (before the
    /// request variant and the validators are made); the published file stays unchanged.
    #[serde(default)]
    pub schema_patches: Vec<SchemaPatchSpec>,
    /// jq expression over a 2xx body that yields `messages[]` when the backend reported a
    /// business failure in a success status (e.g. `200 {"errors": [...]}`), else null/empty.
    #[serde(default)]
    pub business: Option<String>,
    /// MiniJinja template for the human-readable `content[]` text.
    #[serde(default)]
    pub summary: Option<String>,
    /// HTTP status -> outcome overrides for this tool.
    #[serde(default)]
    pub outcomes: IndexMap<String, OutcomeSpecs>,
    /// UCP: capability announced for this tool.
    #[serde(default)]
    pub capability: Option<String>,
    /// `required` refuses calls without an idempotency key (UCP complete/cancel default).
    #[serde(default)]
    pub idempotency: Option<String>,
    /// Overrides the backend timeout for this tool.
    #[serde(default)]
    pub timeout: Option<String>,
    /// How often a caller that sent a `progressToken` hears `notifications/progress` while the
    /// backend call runs (default `1s`).
    #[serde(default)]
    pub progress_every: Option<String>,
    /// Overrides the tool description taken from the OpenRPC.
    #[serde(default)]
    pub description: Option<String>,
    /// The whole `inputSchema`, served as written instead of the one built from the OpenRPC
    /// params: for inputs params cannot express (`allOf`, `if`/`then`/`else`, `$defs`).
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
    /// Param -> `Mcp-Param-<name>` header (SEP-2243): the param's schema gets
    /// `x-mcp-header: <name>`, and a 2026-07-28 call must carry the header with its value.
    #[serde(default)]
    pub mcp_headers: IndexMap<String, String>,
    /// How a success body becomes MCP `content[]` (default: JSON -> structuredContent + text).
    #[serde(default)]
    pub content: Option<ContentSpec>,
    /// Questions for the MCP client before the backend call (`elicit`, `sample`, `roots`), in
    /// rounds: each list item is one round, a map of request key -> step. See `config::ask`.
    #[serde(default)]
    pub ask: Vec<IndexMap<String, AskSpec>>,
    /// The backend answers `202 Accepted` and a status resource to poll: the call is an MCP
    /// task (`tasks/get`), or completes synchronously for a client that did not ask for one.
    #[serde(default)]
    pub long_running: Option<LongRunningSpec>,
}

/// A long-running REST operation (`202` + status resource) served as an MCP task.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LongRunningSpec {
    /// jq over the `202` body yielding the status URL; default: the `Location` header.
    #[serde(default)]
    pub status_url: Option<String>,
    /// jq over the status body yielding the backend's state (default `.status`).
    #[serde(default)]
    pub state: Option<String>,
    /// Backend state -> task state (`working`, `completed`, `failed`, `cancelled`); a state
    /// not listed is `working`.
    #[serde(default)]
    pub states: IndexMap<String, String>,
    /// jq over a completed status body yielding the answer body (default: the whole body),
    /// which goes through the tool's `result`/`summary`/`outcomes` like a direct answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// jq over a completed status body yielding the HTTP status the answer is judged with
    /// (default 200): e.g. `.http_status` to let a job's `422` become a business outcome.
    #[serde(default)]
    pub answer_status: Option<String>,
    /// jq over a failed status body yielding the error message.
    #[serde(default)]
    pub error: Option<String>,
    /// First poll interval (default `1s`); a `Retry-After` from the backend wins.
    #[serde(default)]
    pub poll_every: Option<String>,
    /// Factor each interval grows by (default 1.5), up to `poll_max`.
    #[serde(default)]
    pub backoff: Option<f64>,
    /// Longest poll interval (default `30s`).
    #[serde(default)]
    pub poll_max: Option<String>,
    /// How long the operation may run before the task fails (default `1h`).
    #[serde(default)]
    pub deadline: Option<String>,
    /// How long a task stays readable after it was created (default `1h`).
    #[serde(default)]
    pub ttl: Option<String>,
    /// The cancel call: `DELETE` (on the status URL) or `METHOD <url>` where `{status_url}`
    /// stands for the status URL (`POST {status_url}/cancel`).
    #[serde(default)]
    pub cancel: Option<String>,
    /// `optional` (default): a client that does not ask for tasks gets the call completed
    /// synchronously; `required`: such a client is refused (-32021).
    #[serde(default)]
    pub task: Option<String>,
    /// `in_task` (default): `ask:` questions are asked through the task (`input_required`,
    /// `tasks/update`); `before_task`: asked first (MRTR), the task starts on the last round.
    #[serde(default)]
    pub ask: Option<String>,
}

/// One request to the MCP client. Exactly one of `elicit`, `sample`, `roots`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskSpec {
    /// `elicitation/create`: the message shown to the user (MiniJinja over the arguments).
    #[serde(default)]
    pub elicit: Option<String>,
    /// `elicit`: the requested schema (a flat object of primitive properties).
    #[serde(default)]
    pub schema: Option<serde_json::Value>,
    /// `sampling/createMessage`: the user prompt (MiniJinja over the arguments).
    #[serde(default)]
    pub sample: Option<String>,
    /// `sample`: the system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// `sample`: `maxTokens` (default 100).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// `roots/list`: `roots: true`.
    #[serde(default)]
    pub roots: Option<bool>,
    /// The argument the answer becomes (required for `sample` and `roots`; for `elicit` the
    /// accepted object goes there instead of being merged into the arguments).
    #[serde(default)]
    pub into: Option<String>,
    /// Skip this step when the client did not declare the capability (default: the tool
    /// refuses such clients with -32021).
    #[serde(default)]
    pub optional: bool,
    /// `elicit`: the tool result text when the user declines or cancels (MiniJinja).
    #[serde(default)]
    pub on_decline: Option<String>,
    /// 2025 era: how long to wait for the client's answer (default 120s).
    #[serde(default)]
    pub timeout: Option<String>,
}

/// How a tool's success body becomes MCP content.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContentSpec {
    /// `media`, `embedded`, `link` or `blocks`.
    pub kind: String,
    /// `embedded` / `link`: the resource URI (MiniJinja over the arguments).
    #[serde(default)]
    pub uri: Option<String>,
    /// `link`: the link's name (default: the URI).
    #[serde(default)]
    pub name: Option<String>,
    /// `blocks`: jq over the JSON body yielding an array of MCP content blocks.
    #[serde(default)]
    pub blocks: Option<String>,
}

/// A resource (or resource template) read with one REST GET.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// `GET /path/{var}`: placeholders name the URI template's variables.
    pub http: String,
    /// Programmatic name (`resources/list`).
    pub name: String,
    /// Human title.
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Media type announced and used for the contents (default: the backend's Content-Type).
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// A prompt: arguments and MiniJinja message templates.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    #[serde(default)]
    pub title: Option<String>,
    pub description: String,
    /// Argument name -> declaration, in order.
    #[serde(default)]
    pub arguments: IndexMap<String, PromptArgSpec>,
    pub messages: Vec<PromptMessageSpec>,
    /// Questions for the MCP client before rendering (as a tool's `ask:`; 2026-07-28 only).
    #[serde(default)]
    pub ask: Vec<IndexMap<String, AskSpec>>,
}

/// One prompt argument.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptArgSpec {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    /// Values offered by `completion/complete` (filtered by prefix).
    #[serde(default)]
    pub values: Vec<String>,
}

/// One prompt message: exactly one of `text` or `resource`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptMessageSpec {
    /// `user` (default) or `assistant`.
    #[serde(default)]
    pub role: Option<String>,
    /// MiniJinja template over the arguments.
    #[serde(default)]
    pub text: Option<String>,
    /// MiniJinja template giving a URI of a mapped resource, read through the backend.
    #[serde(default)]
    pub resource: Option<String>,
    /// As `resource`, but the contents become a text message (the resource's text as is).
    #[serde(default)]
    pub resource_text: Option<String>,
}

/// What an HTTP status means. Exactly one of `business`, `error`, `tool_error`, `success`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutcomeSpec {
    /// A business outcome: `messages[]` entry with this code.
    #[serde(default)]
    pub business: Option<String>,
    /// A protocol error with this code slug from the binding's table.
    #[serde(default)]
    pub error: Option<String>,
    /// An MCP `isError: true` tool result.
    #[serde(default)]
    pub tool_error: Option<bool>,
    /// Treat the status as success (run `result` on the body).
    #[serde(default)]
    pub success: Option<bool>,
    /// Fixed human-readable text for the message.
    #[serde(default)]
    pub content: Option<String>,
    /// jq expression over the backend body giving the text (used when it yields a string).
    #[serde(default)]
    pub content_from: Option<String>,
    /// With `business`: jq expression over the backend body giving the message code (used when it
    /// yields a string; `business` is the fallback).
    #[serde(default)]
    pub code_from: Option<String>,
    /// Business message severity (default `recoverable`).
    #[serde(default)]
    pub severity: Option<String>,
    /// With `business`: jq expression over the backend body giving the severity (used when it
    /// yields a string; `severity` is the fallback).
    #[serde(default)]
    pub severity_from: Option<String>,
    /// jq predicate over the backend body: the rule applies only when it yields neither `null`
    /// nor `false`. Rules of one status are tried in order; the first that applies wins.
    #[serde(default)]
    pub when: Option<String>,
    /// With `business`: the outcome carries the resource, the tool's `result` program run over
    /// the backend body (an object), beside `messages[]`.
    #[serde(default)]
    pub with_result: Option<bool>,
    /// With `business`: one read through the same backend when the error body lacks the
    /// resource; its 2xx answer, mapped by the tool's `result`, is the resource the outcome
    /// carries. A failed read leaves the outcome without it.
    #[serde(default)]
    pub follow_up: Option<FollowUpSpec>,
}

/// A follow-up read of an outcome rule.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowUpSpec {
    /// `GET` (default) or `HEAD`.
    #[serde(default)]
    pub method: Option<String>,
    /// Path template on the backend, placeholders from the call's arguments.
    pub path: String,
}

/// The rules of one status: one rule, or a list tried in order (first match wins). Its schema is
/// "one rule or a list of rules"; deserializing keeps each rule's own messages (below).
#[derive(Debug, Clone, PartialEq, schemars::JsonSchema)]
#[schemars(untagged)]
pub enum OutcomeSpecs {
    One(Box<OutcomeSpec>),
    Many(Vec<OutcomeSpec>),
}

/// A map is one rule, a sequence a list of them; each rule keeps the field-level messages of
/// `OutcomeSpec` (an untagged enum would replace them with "did not match any variant").
impl<'de> Deserialize<'de> for OutcomeSpecs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Specs;
        impl<'de> serde::de::Visitor<'de> for Specs {
            type Value = OutcomeSpecs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an outcome (a map) or a list of outcomes tried in order")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                a: A,
            ) -> Result<OutcomeSpecs, A::Error> {
                OutcomeSpec::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(|s| OutcomeSpecs::One(Box::new(s)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                a: A,
            ) -> Result<OutcomeSpecs, A::Error> {
                Vec::<OutcomeSpec>::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(OutcomeSpecs::Many)
            }
        }
        d.deserialize_any(Specs)
    }
}

impl OutcomeSpecs {
    /// The rules in the order they are tried.
    pub fn rules(&self) -> &[OutcomeSpec] {
        match self {
            OutcomeSpecs::One(s) => std::slice::from_ref(s),
            OutcomeSpecs::Many(v) => v,
        }
    }
}

/// One patch of a tool's param or result schema (RFC 6902-like).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemaPatchSpec {
    /// `params.<name>` (one param's schema) or `result` (the result schema).
    pub target: String,
    /// `add`, `replace` or `remove`.
    pub op: PatchOp,
    /// JSON pointer into the target schema (`""`: all of it); it crosses `$ref`s.
    pub pointer: String,
    /// The new value (`add`, `replace`).
    #[serde(default)]
    pub value: Option<serde_json::Value>,
}

/// An RFC 6902 operation a schema patch performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PatchOp {
    /// Sets an object member, or inserts into an array (`-` appends).
    Add,
    /// Replaces what exists at the pointer.
    Replace,
    /// Removes what exists at the pointer.
    Remove,
}
