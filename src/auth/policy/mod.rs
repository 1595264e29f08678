//! A business's `authorization:` section (USP's AuthorizationPolicy plus how portico verifies
//! each mechanism): its compiled form (the YAML shape is in `spec`). It never panics on user
//! input (every problem becomes a `Diagnostic`) and never prints a secret, in `Debug` or in a
//! diagnostic.

use super::fetch::Limits;
use super::jws::{JwsAlg, JwtKey};
use crate::config::diag::{Diagnostic, locate_yaml};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

mod jwks;
mod spec;
pub use jwks::{JWKS_MIN_REFRESH, JWKS_TTL, Jwks};
pub use spec::{
    ApiKeySpec, AuthorizationSpec, CredentialSpec, MtlsClientSpec, MtlsSpec, OAuthSpec, PopSpec,
    SignatureSpec, ToolFacts,
};

/// Access tier of a tool (`x-usp-access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    Public,
    Platform,
    Scoped,
}

impl Tier {
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "public" => Some(Tier::Public),
            "privileged_platform" => Some(Tier::Platform),
            "privileged_scoped" => Some(Tier::Scoped),
            _ => None,
        }
    }
}

/// Mechanisms portico implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    ApiKey,
    OAuth2Bearer,
    PlatformKeyPop,
    BookingScopedCredential,
    HttpMessageSignature,
    Mtls,
}

impl Mechanism {
    pub fn parse(s: &str) -> Option<Mechanism> {
        match s {
            "api_key" => Some(Mechanism::ApiKey),
            "oauth2_bearer" => Some(Mechanism::OAuth2Bearer),
            "platform_key_pop" => Some(Mechanism::PlatformKeyPop),
            "booking_scoped_credential" => Some(Mechanism::BookingScopedCredential),
            "http_message_signature" => Some(Mechanism::HttpMessageSignature),
            "mtls" => Some(Mechanism::Mtls),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ApiKey => "api_key",
            Mechanism::OAuth2Bearer => "oauth2_bearer",
            Mechanism::PlatformKeyPop => "platform_key_pop",
            Mechanism::BookingScopedCredential => "booking_scoped_credential",
            Mechanism::HttpMessageSignature => "http_message_signature",
            Mechanism::Mtls => "mtls",
        }
    }
}

/// One API key.
pub struct ApiKey {
    pub name: String,
    pub value: Vec<u8>,
    pub business: bool,
}

pub struct OAuth {
    pub jwks: Jwks,
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<JwsAlg>,
    pub leeway: i64,
    pub business_scope: Option<String>,
}

pub struct Pop {
    pub audiences: Vec<String>,
    pub require_nonce: bool,
}

/// A known client certificate.
pub struct MtlsClient {
    pub name: String,
    /// Lower-case hex, no separators.
    pub sha256: String,
    pub business: bool,
}

pub struct Credentials {
    pub issue: HashMap<String, String>,
    pub ttl: Duration,
    pub scope: Vec<String>,
    pub resource_args: Vec<String>,
}

/// A business's compiled policy.
pub struct Policy {
    pub require: bool,
    pub mechanisms: Vec<Mechanism>,
    pub api_keys: Vec<ApiKey>,
    pub oauth: Option<OAuth>,
    pub pop: Option<Pop>,
    pub credentials: Option<Credentials>,
    /// `http_message_signature` (present when the mechanism is accepted).
    pub signatures: Option<super::httpsig::Signatures>,
    /// `mtls` known clients; empty: any verified certificate.
    pub mtls_clients: Vec<MtlsClient>,
    pub tiers: HashMap<String, Tier>,
    pub business_only: Vec<String>,
    /// Resource URI (template) as written -> tier.
    pub resource_tiers: HashMap<String, Tier>,
    /// Tools whose success creates an owned resource -> pointer to its id.
    pub creates: HashMap<String, String>,
    /// Tools that act on an existing owned resource -> the argument naming it.
    pub acts_on: HashMap<String, String>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("require", &self.require)
            .field("mechanisms", &self.mechanisms)
            .field(
                "api_keys",
                &self.api_keys.iter().map(|k| &k.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Policy {
    pub fn accepts(&self, m: Mechanism) -> bool {
        self.mechanisms.contains(&m)
    }

    /// The tier of `tool`: the mapping's override, the OpenRPC's `x-usp-access`, else
    /// privileged (fail closed).
    pub fn tier(&self, tool: &str, access: Option<&str>) -> Tier {
        self.tiers
            .get(tool)
            .copied()
            .or_else(|| access.and_then(Tier::parse))
            .unwrap_or(Tier::Platform)
    }

    /// The tier of a mapped resource (its URI or URI template as written): the mapping's
    /// `resources` entry, else privileged (fail closed).
    pub fn resource_tier(&self, uri: &str) -> Tier {
        self.resource_tiers
            .get(uri)
            .copied()
            .unwrap_or(Tier::Platform)
    }

    /// Argument (and URI variable) names that address an owned resource.
    pub fn resource_args(&self) -> &[String] {
        match &self.credentials {
            Some(c) => &c.resource_args,
            None => default_resource_args(),
        }
    }

    /// The AuthorizationPolicy object published in the discovery profile.
    pub fn published(&self) -> Value {
        serde_json::json!({
            "privileged_operations_require_authentication": self.require,
            "accepted_mechanisms": self.mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>(),
        })
    }
}

/// `booking_id`, `entry_id`, `hold_id`: what addresses a booking, waitlist entry or hold.
fn default_resource_args() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| vec!["booking_id".into(), "entry_id".into(), "hold_id".into()])
}

/// `90d`, `12h`, `30m`, `45s`.
pub fn long_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "d" => n.checked_mul(86_400)?,
        "h" => n.checked_mul(3_600)?,
        "m" => n.checked_mul(60)?,
        "s" => n,
        _ => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// Compiles `spec` (the `authorization:` section of `file`, YAML `text`).
pub fn compile(
    spec: &AuthorizationSpec,
    file: &Path,
    text: &str,
    tools: &[ToolFacts],
) -> Result<Policy, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let err = |path: &[&str], msg: String, hint: &str| {
        let mut full = vec!["authorization"];
        full.extend_from_slice(path);
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &full))
            .at(full.join("."))
            .hint(hint.to_string())
    };
    let mut mechanisms = Vec::new();
    for name in &spec.accepted_mechanisms {
        match Mechanism::parse(name) {
            Some(m) => mechanisms.push(m),
            // USP §10.1.6: an unrecognised mechanism is ignored, never treated as accepted.
            None => diags.push(
                Diagnostic::warning(file, format!("unknown mechanism `{name}` is ignored"))
                    .line(locate_yaml(text, &["authorization", "accepted_mechanisms"]))
                    .at("authorization.accepted_mechanisms"),
            ),
        }
    }
    if mechanisms.is_empty() {
        diags.push(err(
            &["accepted_mechanisms"],
            "no mechanism portico implements is accepted".into(),
            "list at least one of api_key, oauth2_bearer, platform_key_pop, booking_scoped_credential, http_message_signature, mtls",
        ));
    }
    let mut api_keys = Vec::new();
    for (i, k) in spec.api_keys.iter().enumerate() {
        match crate::util::env::substitute_env(&k.value) {
            Ok(v) if v.len() >= 16 => api_keys.push(ApiKey {
                name: k.name.clone(),
                value: v.into_bytes(),
                business: k.business,
            }),
            Ok(_) => diags.push(err(
                &["api_keys"],
                format!("api key `{}` is shorter than 16 characters", k.name),
                "use a long random value, e.g. from `openssl rand -hex 24`",
            )),
            Err(e) => diags.push(err(
                &["api_keys"],
                format!("api key `{}`: {e}", k.name),
                "set the variable, or write the value with ${NAME}",
            )),
        }
        if i > 0 && spec.api_keys[..i].iter().any(|o| o.name == k.name) {
            diags.push(err(
                &["api_keys"],
                format!("api key name `{}` is used twice", k.name),
                "each key names one principal",
            ));
        }
    }
    if mechanisms.contains(&Mechanism::ApiKey) && spec.api_keys.is_empty() {
        diags.push(err(
            &["accepted_mechanisms"],
            "`api_key` is accepted but no `api_keys` are configured".into(),
            "add `api_keys: [{name: ..., value: \"${KEY}\"}]`",
        ));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let oauth = match (
        &spec.oauth2_bearer,
        mechanisms.contains(&Mechanism::OAuth2Bearer),
    ) {
        (None, true) => {
            diags.push(err(
                &["accepted_mechanisms"],
                "`oauth2_bearer` is accepted but has no `oauth2_bearer:` settings".into(),
                "add issuer, audience and jwks (file) or jwks_url",
            ));
            None
        }
        (None, false) => None,
        (Some(o), _) => compile_oauth(o, dir, &err, &mut diags),
    };
    let pop = match (
        &spec.platform_key_pop,
        mechanisms.contains(&Mechanism::PlatformKeyPop),
    ) {
        (Some(p), _) if p.audiences.is_empty() => {
            diags.push(err(
                &["platform_key_pop", "audiences"],
                "`audiences` is empty".into(),
                "list the profile URIs this business publishes (e.g. https://host/.well-known/usp)",
            ));
            None
        }
        (Some(p), _) => Some(Pop {
            audiences: p.audiences.clone(),
            require_nonce: p.require_nonce,
        }),
        (None, true) => {
            diags.push(err(
                &["accepted_mechanisms"],
                "`platform_key_pop` is accepted but has no `platform_key_pop.audiences`".into(),
                "list the profile URIs this business publishes",
            ));
            None
        }
        (None, false) => None,
    };
    let credentials = spec.booking_scoped_credential.as_ref().and_then(|c| {
        let ttl = match c.ttl.as_deref() {
            None => Some(Duration::from_secs(30 * 86_400)),
            Some(t) => long_duration(t),
        };
        let Some(ttl) = ttl else {
            diags.push(err(
                &["booking_scoped_credential", "ttl"],
                "`ttl` is not a duration".into(),
                "write e.g. `90d`, `12h` or `30m`",
            ));
            return None;
        };
        check_pointers(
            &["booking_scoped_credential", "issue"],
            &c.issue,
            tools,
            &err,
            &mut diags,
        );
        Some(Credentials {
            issue: c
                .issue
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ttl,
            scope: if c.scope.is_empty() {
                tools
                    .iter()
                    .filter(|t| declared_tier(spec, t) == Some("privileged_scoped"))
                    .map(|t| t.name.clone())
                    .collect()
            } else {
                c.scope.clone()
            },
            resource_args: if c.resource_args.is_empty() {
                default_resource_args().to_vec()
            } else {
                c.resource_args.clone()
            },
        })
    });
    if mechanisms.contains(&Mechanism::BookingScopedCredential) && credentials.is_none() {
        diags.push(err(
            &["accepted_mechanisms"],
            "`booking_scoped_credential` is accepted but nothing issues one".into(),
            "add `booking_scoped_credential: {issue: {usp_bookings_create: /booking/id}}`",
        ));
    }
    let signatures = mechanisms
        .contains(&Mechanism::HttpMessageSignature)
        .then(|| compile_signatures(spec.http_message_signature.as_ref(), &err, &mut diags));
    if spec.http_message_signature.is_some() && signatures.is_none() {
        diags.push(
            Diagnostic::warning(
                file,
                "`http_message_signature:` is set but the mechanism is not accepted",
            )
            .line(locate_yaml(
                text,
                &["authorization", "http_message_signature"],
            ))
            .at("authorization.http_message_signature"),
        );
    }
    let mut mtls_clients = Vec::new();
    for (i, c) in spec.mtls.iter().flat_map(|m| &m.clients).enumerate() {
        let hex: String = c
            .sha256
            .chars()
            .filter(|ch| *ch != ':')
            .collect::<String>()
            .to_ascii_lowercase();
        if hex.len() != 64 || !hex.chars().all(|ch| ch.is_ascii_hexdigit()) {
            diags.push(err(
                &["mtls", "clients"],
                format!("client `{}`: `sha256` is not 64 hex digits", c.name),
                "give the certificate's SHA-256 fingerprint, e.g. from `openssl x509 -noout -fingerprint -sha256 -in client.pem`",
            ));
            continue;
        }
        if spec
            .mtls
            .iter()
            .flat_map(|m| &m.clients)
            .take(i)
            .any(|o| o.name == c.name)
        {
            diags.push(err(
                &["mtls", "clients"],
                format!("client name `{}` is used twice", c.name),
                "each certificate names one principal",
            ));
        }
        mtls_clients.push(MtlsClient {
            name: c.name.clone(),
            sha256: hex,
            business: c.business,
        });
    }
    if spec.mtls.is_some() && !mechanisms.contains(&Mechanism::Mtls) {
        diags.push(
            Diagnostic::warning(file, "`mtls:` is set but the mechanism is not accepted")
                .line(locate_yaml(text, &["authorization", "mtls"]))
                .at("authorization.mtls"),
        );
    }
    let tiers = compile_tiers("tools", &spec.tools, &err, &mut diags);
    let resource_tiers = compile_tiers("resources", &spec.resources, &err, &mut diags);
    let creates: HashMap<String, String> = match &spec.creates {
        Some(c) => c.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        None => {
            let mut c: HashMap<String, String> = tools
                .iter()
                .filter_map(|t| DEFAULT_CREATES.iter().find(|(n, _)| *n == t.name))
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect();
            c.extend(credentials.iter().flat_map(|c| c.issue.clone()));
            c
        }
    };
    if let Some(c) = &spec.creates {
        check_pointers(&["creates"], c, tools, &err, &mut diags);
    }
    let resource_args = credentials
        .as_ref()
        .map_or(default_resource_args(), |c| c.resource_args.as_slice());
    let acts_on = match &spec.acts_on {
        Some(a) => {
            for (tool, arg) in a {
                let path = ["acts_on", tool.as_str()];
                match tools.iter().find(|t| &t.name == tool) {
                    None => diags.push(err(
                        &path,
                        format!("`{tool}` is not a tool of this mapping"),
                        "name a tool under `tools:`",
                    )),
                    Some(t) if !t.params.contains(arg) => diags.push(err(
                        &path,
                        format!("`{tool}` has no parameter `{arg}`"),
                        "name the argument that carries the booking id",
                    )),
                    Some(t) if tier_of(spec, t) == Tier::Public => diags.push(err(
                        &path,
                        format!("`{tool}` is public: it has no principal to check"),
                        "give the tool a privileged tier under `tools:`",
                    )),
                    Some(_) => {}
                }
            }
            a.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        None => tools
            .iter()
            .filter(|t| tier_of(spec, t) != Tier::Public)
            .filter_map(|t| default_acts_on(spec, t, resource_args).map(|a| (t.name.clone(), a)))
            .collect(),
    };
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    for d in diags {
        tracing::warn!("{d}");
    }
    Ok(Policy {
        resource_tiers,
        creates,
        acts_on,
        require: spec.privileged_operations_require_authentication,
        mechanisms,
        api_keys,
        oauth,
        pop,
        credentials,
        signatures,
        mtls_clients,
        tiers,
        business_only: spec
            .business_only
            .clone()
            .unwrap_or_else(|| vec!["usp_bookings_confirm".into()]),
    })
}

/// Creating tools portico knows, and where their result names what they created.
const DEFAULT_CREATES: &[(&str, &str)] = &[
    ("usp_bookings_create", "/booking/id"),
    ("create_booking_session", "/id"),
];

/// UCP's tools that act on an existing booking session, named by `id`.
const UCP_SESSION_TOOLS: &[&str] = &[
    "get_booking_session",
    "update_booking_session",
    "complete_booking_session",
    "cancel_booking_session",
];

/// A tool's tier as the mapping or the OpenRPC writes it.
fn declared_tier<'a>(spec: &'a AuthorizationSpec, t: &'a ToolFacts) -> Option<&'a str> {
    spec.tools
        .get(&t.name)
        .map(String::as_str)
        .or(t.access.as_deref())
}

/// A tool's tier (privileged when neither says).
fn tier_of(spec: &AuthorizationSpec, t: &ToolFacts) -> Tier {
    declared_tier(spec, t)
        .and_then(Tier::parse)
        .unwrap_or(Tier::Platform)
}

/// The argument naming the booking a tool acts on, by default: a `privileged_scoped` tool's
/// first `resource_args` parameter, or `id` of UCP's booking-session tools.
fn default_acts_on(spec: &AuthorizationSpec, t: &ToolFacts, names: &[String]) -> Option<String> {
    if tier_of(spec, t) == Tier::Scoped
        && let Some(n) = names.iter().find(|n| t.params.contains(n))
    {
        return Some(n.clone());
    }
    (UCP_SESSION_TOOLS.contains(&t.name.as_str()) && t.params.iter().any(|p| p == "id"))
        .then(|| "id".to_string())
}

/// A `name -> tier` map of the section `at` (`tools`, `resources`).
fn compile_tiers(
    at: &str,
    map: &IndexMap<String, String>,
    err: &dyn Fn(&[&str], String, &str) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> HashMap<String, Tier> {
    let mut tiers = HashMap::new();
    for (name, tier) in map {
        match Tier::parse(tier) {
            Some(t) => {
                tiers.insert(name.clone(), t);
            }
            None => diags.push(err(
                &[at, name],
                format!("unknown access tier `{tier}`"),
                "use public, privileged_platform or privileged_scoped",
            )),
        }
    }
    tiers
}

/// Checks a `tool -> JSON pointer` map (under `at`): each tool is the mapping's, each pointer a
/// pointer.
fn check_pointers(
    at: &[&str],
    map: &IndexMap<String, String>,
    tools: &[ToolFacts],
    err: &dyn Fn(&[&str], String, &str) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) {
    for (tool, pointer) in map {
        let path: Vec<&str> = at.iter().copied().chain([tool.as_str()]).collect();
        if !tools.iter().any(|t| &t.name == tool) {
            diags.push(err(
                &path,
                format!("`{tool}` is not a tool of this mapping"),
                "name a tool under `tools:`",
            ));
        }
        if !pointer.starts_with('/') {
            diags.push(err(
                &path,
                format!("`{pointer}` is not a JSON pointer"),
                "point into structuredContent, e.g. `/booking/id`",
            ));
        }
    }
}

fn compile_signatures(
    spec: Option<&SignatureSpec>,
    err: &dyn Fn(&[&str], String, &str) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> super::httpsig::Signatures {
    use crate::webhook::keys::Alg;
    let spec = spec.cloned().unwrap_or_default();
    let max_age = match spec.max_age.as_deref() {
        None => Duration::from_secs(300),
        Some(t) => long_duration(t).unwrap_or_else(|| {
            diags.push(err(
                &["http_message_signature", "max_age"],
                "`max_age` is not a duration".into(),
                "write e.g. `5m` or `300s`",
            ));
            Duration::from_secs(300)
        }),
    };
    let mut algorithms = Vec::new();
    for a in &spec.algorithms {
        match Alg::parse(a) {
            Some(x) => algorithms.push(x),
            None => diags.push(err(
                &["http_message_signature", "algorithms"],
                format!("algorithm `{a}` is not supported"),
                "use ecdsa-p256-sha256 or ed25519 (RFC 9421 names)",
            )),
        }
    }
    if algorithms.is_empty() {
        algorithms = Alg::ALL.to_vec();
    }
    super::httpsig::Signatures::new(
        max_age,
        spec.require_created,
        algorithms,
        Limits {
            allow_hosts: spec.allow_hosts,
            ..Limits::default()
        },
    )
}

fn compile_oauth(
    o: &OAuthSpec,
    dir: &Path,
    err: &dyn Fn(&[&str], String, &str) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Option<OAuth> {
    let mut algorithms = Vec::new();
    for a in &o.algorithms {
        match JwsAlg::parse(a) {
            Some(x) => algorithms.push(x),
            None => diags.push(err(
                &["oauth2_bearer", "algorithms"],
                format!("algorithm `{a}` is not supported"),
                "use ES256, EdDSA or RS256 (`none` is never accepted)",
            )),
        }
    }
    if algorithms.is_empty() {
        algorithms = vec![JwsAlg::Es256, JwsAlg::EdDsa, JwsAlg::Rs256];
    }
    let leeway = match o.leeway.as_deref() {
        None => 60,
        Some(l) => match long_duration(l) {
            Some(d) => d.as_secs() as i64,
            None => {
                diags.push(err(
                    &["oauth2_bearer", "leeway"],
                    "`leeway` is not a duration".into(),
                    "write e.g. `30s`",
                ));
                60
            }
        },
    };
    let jwks = match (&o.jwks, &o.jwks_url) {
        (Some(f), None) => {
            let path = dir.join(f);
            let read = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))
                .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
                .and_then(|doc| JwtKey::from_jwks(&doc));
            match read {
                Ok(k) if !k.is_empty() => Jwks::Static(k),
                Ok(_) => {
                    diags.push(err(
                        &["oauth2_bearer", "jwks"],
                        "the JWKS holds no usable key".into(),
                        "keys must be EC P-256, OKP Ed25519 or RSA (2048+ bits) public JWKs",
                    ));
                    return None;
                }
                Err(e) => {
                    diags.push(err(
                        &["oauth2_bearer", "jwks"],
                        e,
                        "the path is relative to the mapping file",
                    ));
                    return None;
                }
            }
        }
        (None, Some(u)) => {
            let parsed = url::Url::parse(u).ok();
            let host_allowed = parsed
                .as_ref()
                .and_then(|p| p.host_str().map(str::to_string))
                .is_some_and(|h| o.allow_hosts.contains(&h));
            if !parsed.is_some_and(|p| p.scheme() == "https" || host_allowed) {
                diags.push(err(
                    &["oauth2_bearer", "jwks_url"],
                    "`jwks_url` must be an https URL".into(),
                    "plain http is allowed only for a host listed in `allow_hosts`",
                ));
                return None;
            }
            Jwks::Url {
                url: u.clone(),
                limits: Limits {
                    allow_hosts: o.allow_hosts.clone(),
                    ..Limits::default()
                },
                cache: Mutex::new(None),
                refresh: tokio::sync::Mutex::new(()),
            }
        }
        _ => {
            diags.push(err(
                &["oauth2_bearer"],
                "give exactly one of `jwks` (file) and `jwks_url`".into(),
                "the issuer's JWK Set verifies the tokens",
            ));
            return None;
        }
    };
    Some(OAuth {
        jwks,
        issuer: o.issuer.clone(),
        audience: o.audience.clone(),
        algorithms,
        leeway,
        business_scope: o.business_scope.clone(),
    })
}

#[cfg(test)]
mod tests;
