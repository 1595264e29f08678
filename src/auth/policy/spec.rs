//! The inputs a policy is compiled from: the YAML shape of a business's `authorization:`
//! section and the facts of each tool. It never validates or resolves anything (`compile` does).

use indexmap::IndexMap;
use serde::Deserialize;

/// The mapping file's `authorization:` section.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationSpec {
    /// USP's flag: false only for sandboxes (privileged calls then pass unauthenticated).
    #[serde(default = "yes")]
    pub privileged_operations_require_authentication: bool,
    /// Mechanisms accepted, USP names: `api_key`, `oauth2_bearer`, `platform_key_pop`,
    /// `booking_scoped_credential`.
    pub accepted_mechanisms: Vec<String>,
    /// `api_key`: the keys, each naming the principal it authenticates.
    #[serde(default)]
    pub api_keys: Vec<ApiKeySpec>,
    /// `oauth2_bearer`: how JWT access tokens are checked.
    #[serde(default)]
    pub oauth2_bearer: Option<OAuthSpec>,
    /// `platform_key_pop`: audiences and nonce policy.
    #[serde(default)]
    pub platform_key_pop: Option<PopSpec>,
    /// `booking_scoped_credential`: which tools issue one and how long it lives.
    #[serde(default)]
    pub booking_scoped_credential: Option<CredentialSpec>,
    /// `http_message_signature`: freshness, algorithms and how profiles are fetched.
    #[serde(default)]
    pub http_message_signature: Option<SignatureSpec>,
    /// `mtls`: which client certificates (verified by `--tls-client-ca`) are known.
    #[serde(default)]
    pub mtls: Option<MtlsSpec>,
    /// Tool -> access tier (`public`, `privileged_platform`, `privileged_scoped`), over the
    /// OpenRPC's `x-usp-access`; tools with neither are `privileged_platform`.
    #[serde(default)]
    pub tools: IndexMap<String, String>,
    /// Tools only a business principal may call (default: `usp_bookings_confirm`).
    #[serde(default)]
    pub business_only: Option<Vec<String>>,
    /// Resource URI (or URI template, as written under `resources:`) -> access tier; resources
    /// without one are `privileged_platform`.
    #[serde(default)]
    pub resources: IndexMap<String, String>,
    /// Tool -> JSON pointer into its `structuredContent` naming the booking (hold, waitlist
    /// entry) a successful call creates; the caller becomes its owner. Default: the
    /// `booking_scoped_credential.issue` tools, else `usp_bookings_create: /booking/id`.
    #[serde(default)]
    pub creates: Option<IndexMap<String, String>>,
    /// Tool -> the argument naming the existing booking (hold, waitlist entry, booking session)
    /// the tool acts on; only its owner or a business principal may name it. Default: every
    /// `privileged_scoped` tool with a `resource_args` parameter (`booking_id`, `entry_id`,
    /// `hold_id`), and UCP's `get|update|complete|cancel_booking_session` with `id`.
    #[serde(default)]
    pub acts_on: Option<IndexMap<String, String>>,
}

/// What a policy needs to know of each tool of its mapping.
#[derive(Debug, Clone, Default)]
pub struct ToolFacts {
    pub name: String,
    /// The OpenRPC's `x-usp-access`.
    pub access: Option<String>,
    /// The method's parameter names.
    pub params: Vec<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeySpec {
    /// The principal's name (logged; the value never is).
    pub name: String,
    /// The key; use `${ENV_VAR}`.
    pub value: String,
    /// May call business-only tools.
    #[serde(default)]
    pub business: bool,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthSpec {
    /// JWK Set file (relative to the mapping file).
    #[serde(default)]
    pub jwks: Option<String>,
    /// JWK Set URL (https), fetched with caching and limits.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Required `iss`.
    pub issuer: String,
    /// Required `aud` member.
    pub audience: String,
    /// Accepted algorithms (default `ES256`, `EdDSA`, `RS256`).
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Clock skew allowed for `exp` / `nbf` / `iat` (default `60s`).
    #[serde(default)]
    pub leeway: Option<String>,
    /// Scope value (in `scope`) that makes a token's principal a business principal.
    #[serde(default)]
    pub business_scope: Option<String>,
    /// Hosts the JWKS URL may reach over plain http or at a private address (tests: 127.0.0.1).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PopSpec {
    /// Profile URIs this business publishes; a proof's `aud` must be one of them.
    pub audiences: Vec<String>,
    /// Require a challenged nonce in every proof.
    #[serde(default)]
    pub require_nonce: bool,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialSpec {
    /// Tool -> JSON pointer into its `structuredContent` giving the created resource's id.
    pub issue: IndexMap<String, String>,
    /// Lifetime (`90d`, `12h`); default 30 days.
    #[serde(default)]
    pub ttl: Option<String>,
    /// Tools a credential authorizes on its resource (default: every `privileged_scoped` tool of
    /// the business but the business-only ones).
    #[serde(default)]
    pub scope: Vec<String>,
    /// Arguments naming the addressed resource (default `booking_id`, `entry_id`, `hold_id`).
    #[serde(default)]
    pub resource_args: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignatureSpec {
    /// Largest distance between a signature's `created` and now (default `5m`).
    #[serde(default)]
    pub max_age: Option<String>,
    /// Refuse signatures without `created` (default false: USP §9.1.4 makes it optional).
    #[serde(default)]
    pub require_created: bool,
    /// RFC 9421 algorithm names (default `ecdsa-p256-sha256`, `ed25519`).
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Hosts profile URLs may reach over plain http or at a private address (tests: 127.0.0.1).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MtlsSpec {
    /// Known client certificates; empty: any certificate `--tls-client-ca` verifies.
    #[serde(default)]
    pub clients: Vec<MtlsClientSpec>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MtlsClientSpec {
    /// The principal's name.
    pub name: String,
    /// SHA-256 of the certificate's DER bytes, hex (`:` separators allowed).
    pub sha256: String,
    /// May call business-only tools.
    #[serde(default)]
    pub business: bool,
}
