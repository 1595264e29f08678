//! Compiles mapping files + OpenRPC documents into the runtime `Gateway` (tools, validators,
//! transforms, templates, backend clients). It must never panic on user input: every problem
//! becomes a `Diagnostic` naming the file, the line and a fix.

pub use super::business::{Backend, Business};
use super::diag::{Diagnostic, jq_error_place, locate_yaml};
use super::mapping::{MappingFile, OutcomeSpec, ToolSpec};
use super::openrpc::{self, Document};
use super::schema::{Bundler, Sources, Unresolved};
use super::surface::{self, Prompt, Resource};
use crate::binding::{Binding, Kind, Rule};
use crate::translate::content::ContentRule;
use crate::translate::path::PathTemplate;
use crate::translate::transform::Transform;
use http::{HeaderName, HeaderValue, Method};

/// Default interval of `notifications/progress` ticks (mapping key `progress_every`).
pub const DEFAULT_PROGRESS_EVERY: Duration = Duration::from_secs(1);
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a status means, compiled.
#[derive(Debug, Clone)]
pub struct OutcomeRule {
    pub rule: Rule,
    pub content: Option<String>,
    pub content_from: Option<Transform>,
    pub code_from: Option<Transform>,
    pub severity: String,
}

/// Status keys: an exact code or a class (`4xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StatusKey {
    Exact(u16),
    Class(u16),
}

/// A tool's MCP `Tool` object (its `tools/list` entry), kept as compact JSON text. Parsed, the
/// bundled input and output schemas took about seven times the memory of their text (1.9 MiB
/// for the demo's 37 tools, a sixth of an idle sidecar's heap); `tools/list` parses the page it
/// serves, which is rare next to `tools/call`.
#[derive(Debug, Clone)]
pub struct Descriptor(Box<str>);

impl Descriptor {
    /// `None` when the text cannot be read back (nesting deeper than serde_json's limit).
    fn new(v: &Value) -> Option<Descriptor> {
        let text = v.to_string();
        serde_json::from_str::<serde::de::IgnoredAny>(&text).ok()?;
        Some(Descriptor(text.into_boxed_str()))
    }

    /// The descriptor as a JSON value.
    pub fn value(&self) -> Value {
        // Written by `new`, which checked that it reads back.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// A tool, ready to serve.
pub struct Tool {
    pub name: String,
    pub business: Arc<Business>,
    /// The MCP `Tool` object served by `tools/list`.
    pub descriptor: Descriptor,
    pub input_validator: jsonschema::Validator,
    pub output_validator: Option<jsonschema::Validator>,
    /// The same output schema for the native check of the hot path (`translate::answer`),
    /// built on the tool's first successful answer ([`Tool::output_check`]): a tool never
    /// called costs no memory for it. `output_validator` stays the authority.
    output_check: std::sync::OnceLock<Option<crate::translate::doc_schema::DocSchema>>,
    /// The `usp`/`ucp` member of the tool's successful results (USP and UCP bindings), built
    /// once for the hot path (`translate::answer`).
    pub envelope: Option<(String, Value)>,
    /// The JSON text of `envelope`'s value, written once: the hot path splices it into each
    /// answer instead of writing the constant again.
    pub envelope_text: Option<Vec<u8>>,
    pub method: Method,
    pub path: PathTemplate,
    pub query: Vec<(String, Transform)>,
    pub headers: Vec<(HeaderName, Transform)>,
    pub body: Option<Transform>,
    pub result: Option<Transform>,
    pub business_messages: Option<Transform>,
    pub summary: Option<crate::translate::summary::Summary>,
    outcomes: HashMap<StatusKey, OutcomeRule>,
    pub capability: Option<String>,
    pub idempotency_required: bool,
    pub timeout: Duration,
    /// Interval of `notifications/progress` ticks while the backend call runs.
    pub progress_every: Duration,
    /// USP `x-usp-access` of the method.
    pub access: Option<String>,
    /// Metric handles, resolved on the first call.
    pub metrics: crate::ops::metrics::ToolMetrics,
    /// The tool's own circuit breaker on its backend (`upstream::resilience`).
    pub breaker: crate::upstream::resilience::Breaker,
    /// How a success body becomes `content[]` (`None`: JSON -> structuredContent + text).
    pub content: Option<ContentRule>,
    /// Questions for the MCP client before the backend call (`ask:`).
    pub ask: Option<Arc<super::ask::AskPlan>>,
    /// Whether any of the tool's transforms names `$meta` (`translate::request::meta_for`).
    pub meta_used: bool,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("business", &self.business.name)
            .field("method", &self.method)
            .finish()
    }
}

impl Tool {
    /// The native check of the tool's output schema (see `translate::doc_schema`), built from
    /// the served `outputSchema` on first use; `None` when the tool has no output schema.
    /// The hot path's answers always carry [`Tool::envelope`], so the check is pinned to it
    /// ([`crate::translate::doc_schema::DocSchema::pin`]): the constant is checked once here,
    /// not in every answer. Only for answers built with that envelope.
    pub fn output_check(&self) -> Option<&crate::translate::doc_schema::DocSchema> {
        self.output_check
            .get_or_init(|| {
                self.output_validator.as_ref()?;
                let descriptor = self.descriptor.value();
                let mut check = crate::translate::doc_schema::DocSchema::compile(
                    descriptor.get("outputSchema")?,
                );
                if let Some((key, env)) = &self.envelope {
                    check.pin(key, &crate::json_doc::Doc::from_value(env));
                }
                Some(check)
            })
            .as_ref()
    }

    /// The rule for a backend status: tool rules, then business rules (merged at load), then the
    /// binding's table.
    pub fn rule_for(&self, status: u16) -> OutcomeRule {
        self.outcomes
            .get(&StatusKey::Exact(status))
            .or_else(|| self.outcomes.get(&StatusKey::Class(status / 100)))
            .cloned()
            .unwrap_or_else(|| OutcomeRule {
                rule: self.business.binding.default_rule(status),
                content: None,
                content_from: None,
                code_from: None,
                severity: "recoverable".into(),
            })
    }

    /// Every jq program of this tool, named by where it sits in the mapping.
    pub fn transforms(&self) -> Vec<(String, &Transform)> {
        let mut all: Vec<(String, &Transform)> = Vec::new();
        all.extend(self.query.iter().map(|(k, t)| (format!("query.{k}"), t)));
        all.extend(
            self.headers
                .iter()
                .map(|(k, t)| (format!("headers.{k}"), t)),
        );
        all.extend(self.body.iter().map(|t| ("body".to_string(), t)));
        all.extend(self.result.iter().map(|t| ("result".to_string(), t)));
        all.extend(
            self.business_messages
                .iter()
                .map(|t| ("business".to_string(), t)),
        );
        for (key, rule) in &self.outcomes {
            let key = match key {
                StatusKey::Exact(s) => s.to_string(),
                StatusKey::Class(c) => format!("{c}xx"),
            };
            all.extend(
                rule.content_from
                    .iter()
                    .map(|t| (format!("outcomes.{key}.content_from"), t)),
            );
            all.extend(
                rule.code_from
                    .iter()
                    .map(|t| (format!("outcomes.{key}.code_from"), t)),
            );
        }
        all
    }
}

/// The whole compiled configuration.
#[derive(Debug)]
pub struct Gateway {
    /// Tools in serving order (file order, then mapping order).
    pub tools: IndexMap<String, Arc<Tool>>,
    pub businesses: Vec<Arc<Business>>,
    /// Resources and resource templates, in file order (`resources/*`).
    pub resources: Vec<Arc<Resource>>,
    /// Prompts by name (`prompts/*`, `completion/complete`).
    pub prompts: IndexMap<String, Arc<Prompt>>,
    /// Warnings found while loading (errors make `load` fail).
    pub warnings: Vec<Diagnostic>,
    /// Every local file the configuration was read from (mappings, OpenRPC, schemas), sorted.
    pub sources: Vec<PathBuf>,
    /// Whether any business reads the client's HTTP request itself (an authorization policy
    /// with `signatures`, or `backend.forward_headers`): the MCP edge keeps a copy only then.
    pub reads_http_request: bool,
}

/// Checks the `discovery` section: an absolute endpoint URL, a `YYYY-MM-DD` version, public
/// JWKs only (a private member would publish the key).
fn check_discovery(
    file: &Path,
    text: &str,
    d: &super::mapping::DiscoverySpec,
    diags: &mut Vec<Diagnostic>,
) {
    let at = |k: &str| locate_yaml(text, &["discovery", k]);
    if let Some(e) = &d.endpoint
        && url::Url::parse(e).map_or(true, |u| !matches!(u.scheme(), "http" | "https"))
    {
        diags.push(
            Diagnostic::error(
                file,
                format!("discovery.endpoint `{e}` is not an http(s) URL"),
            )
            .line(at("endpoint"))
            .at("discovery.endpoint")
            .hint("write the public URL of the MCP endpoint, e.g. `https://spa.example.com/mcp`"),
        );
    }
    if let Some(v) = &d.version
        && !crate::util::version::is_date_version(v)
    {
        diags.push(
            Diagnostic::error(file, format!("discovery.version `{v}` is not YYYY-MM-DD"))
                .line(at("version"))
                .at("discovery.version")
                .hint("profiles carry dated versions, e.g. `2026-08-20`"),
        );
    }
    for (i, k) in d.keys.iter().enumerate() {
        let problem = match k {
            Value::Object(o) if !o.contains_key("kid") || !o.contains_key("kty") => {
                Some("needs `kid` and `kty`".to_string())
            }
            Value::Object(o) => crate::util::jwk::PRIVATE_JWK_MEMBERS
                .iter()
                .find(|m| o.contains_key(**m))
                .map(|m| format!("has the private member `{m}`: publish public keys only")),
            _ => Some("is not a JWK object".to_string()),
        };
        if let Some(p) = problem {
            diags.push(
                Diagnostic::error(file, format!("discovery.keys[{i}] {p}"))
                    .line(at("keys"))
                    .at(format!("discovery.keys[{i}]"))
                    .hint("a public JWK, e.g. `{ kid: k1, kty: EC, crv: P-256, x: ..., y: ... }`"),
            );
        }
    }
}

pub use crate::util::duration::parse_duration;
use crate::util::env::substitute_env;

/// Collects the mapping files named by `paths` (files, or folders of `*.yaml` / `*.yml`).
pub fn mapping_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(rd) => {
                    let mut found: Vec<PathBuf> = rd
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|f| {
                            matches!(
                                f.extension().and_then(|e| e.to_str()),
                                Some("yaml") | Some("yml")
                            )
                        })
                        // Facade mappings (reverse path) share the folder; `facade` loads them.
                        .filter(|f| !super::kind::is_facade_file(f))
                        .collect();
                    found.sort();
                    out.extend(found);
                }
                Err(e) => diags.push(Diagnostic::error(p, format!("cannot read folder: {e}"))),
            }
        } else if p.exists() {
            out.push(p.clone());
        } else {
            diags.push(Diagnostic::error(p, "no such file or folder"));
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// Loads and compiles every mapping file under `paths` into one gateway.
pub fn load(paths: &[PathBuf]) -> Result<Gateway, Vec<Diagnostic>> {
    let files = mapping_files(paths)?;
    if files.is_empty() {
        return Err(paths
            .iter()
            .map(|p| {
                Diagnostic::error(p, "no mapping files (*.yaml) found")
                    .hint("pass mapping files or a folder holding them")
            })
            .collect());
    }
    let mut sources = Sources::default();
    let mut docs: HashMap<PathBuf, Document> = HashMap::new();
    let mut diags = Vec::new();
    let mut tools: IndexMap<String, Arc<Tool>> = IndexMap::new();
    let mut owners: HashMap<String, PathBuf> = HashMap::new();
    let mut businesses = Vec::new();
    let mut resources: Vec<Arc<Resource>> = Vec::new();
    let mut prompts: IndexMap<String, Arc<Prompt>> = IndexMap::new();
    for file in &files {
        match compile_file(file, &mut sources, &mut docs, &mut diags) {
            Some(Compiled {
                business,
                tools: compiled,
                resources: file_resources,
                prompts: file_prompts,
            }) => {
                let text = std::fs::read_to_string(file).unwrap_or_default();
                for r in file_resources {
                    if resources.iter().any(|o| o.uri == r.uri) {
                        diags.push(defined_twice(file, &text, "resources", &r.uri));
                        continue;
                    }
                    resources.push(Arc::new(r));
                }
                for p in file_prompts {
                    if prompts.contains_key(&p.name) {
                        diags.push(defined_twice(file, &text, "prompts", &p.name));
                        continue;
                    }
                    prompts.insert(p.name.clone(), Arc::new(p));
                }
                for t in compiled {
                    if let Some(other) = owners.get(&t.name) {
                        let text = std::fs::read_to_string(file).unwrap_or_default();
                        diags.push(
                            Diagnostic::error(file, format!("tool `{}` is also defined by {}", t.name, other.display()))
                                .line(locate_yaml(&text, &["tools", &t.name]))
                                .at(format!("tools.{}", t.name))
                                .hint("tool names must be unique across the mapping files one portico serves"),
                        );
                        continue;
                    }
                    owners.insert(t.name.clone(), file.clone());
                    tools.insert(t.name.clone(), Arc::new(t));
                }
                businesses.push(business);
            }
            None => continue,
        }
    }
    let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(Diagnostic::is_error);
    if !errors.is_empty() {
        let mut all = errors;
        all.extend(warnings);
        return Err(all);
    }
    let mut read: Vec<PathBuf> = files;
    read.extend(docs.into_keys());
    read.extend(sources.local_files());
    read.sort();
    read.dedup();
    let reads_http_request = businesses.iter().any(|b| {
        !b.backend.forward_headers.is_empty()
            || b.auth.as_ref().is_some_and(|p| p.signatures.is_some())
    });
    Ok(Gateway {
        reads_http_request,
        tools,
        businesses,
        resources,
        prompts,
        warnings,
        sources: read,
    })
}

/// Compiles one schema node (or a set of param schemas) with shared `$defs`.
fn report_unresolved(
    unresolved: Vec<Unresolved>,
    doc: &Document,
    method: &str,
    policy_error: bool,
    mapping: &Path,
    diags: &mut Vec<Diagnostic>,
) {
    for u in unresolved {
        // The `$ref` may sit in the OpenRPC document itself or in a schema file it pulls in.
        let in_doc = u.document == doc.uri.as_str();
        let (file, line) = if in_doc {
            (doc.path.clone(), doc.line_of(Some(method), &u.pointer))
        } else {
            let file = url::Url::parse(&u.document)
                .ok()
                .filter(|x| x.scheme() == "file")
                .and_then(|x| x.to_file_path().ok());
            match file {
                Some(f) => {
                    let line = std::fs::read_to_string(&f)
                        .ok()
                        .and_then(|t| super::diag::locate_json(&t, &u.pointer));
                    (f, line)
                }
                None => (doc.path.clone(), None),
            }
        };
        let msg = format!(
            "unresolvable `$ref: {}` (in {} at {}): {}",
            u.reference, u.document, u.pointer, u.reason
        );
        let d = if policy_error {
            Diagnostic::error(&file, msg)
        } else {
            Diagnostic::warning(&file, format!("{msg}; replaced by an open schema"))
        };
        let hint = if policy_error {
            format!(
                "map the id to a local file with `schema_ids` in {}, fix the reference, or set `unresolved_refs: warn`",
                mapping.display()
            )
        } else {
            format!(
                "map the id to a local file with `schema_ids` in {}, or fix the reference",
                mapping.display()
            )
        };
        let d = d.line(line).at(u.pointer).hint(hint);
        // The same reference is reached from many tools: report it once.
        if !diags.contains(&d) {
            diags.push(d);
        }
    }
}

/// A resource URI or prompt name that an earlier mapping file already defines.
fn defined_twice(file: &Path, text: &str, section: &str, key: &str) -> Diagnostic {
    let what = if section == "resources" {
        "resource"
    } else {
        "prompt"
    };
    Diagnostic::error(
        file,
        format!("{what} `{key}` is also defined by an earlier mapping file"),
    )
    .line(locate_yaml(text, &[section, key]))
    .at(format!("{section}.{key}"))
    .hint(format!(
        "{what} names must be unique across the mapping files one portico serves"
    ))
}

/// One mapping file, compiled.
struct Compiled {
    business: Arc<Business>,
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    prompts: Vec<Prompt>,
}

fn compile_file(
    file: &Path,
    sources: &mut Sources,
    docs: &mut HashMap<PathBuf, Document>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Compiled> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                format!("cannot read mapping file: {e}"),
            ));
            return None;
        }
    };
    let spec: MappingFile = match serde_saphyr::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            let line = e.location().map(|l| l.line() as usize);
            let msg = e.to_string();
            let mut first = msg.lines().next().unwrap_or("invalid mapping file").trim();
            // serde-saphyr prefixes `error: line L column C: `; the diagnostic says both already.
            first = first.strip_prefix("error:").unwrap_or(first).trim();
            if let Some(rest) = first.strip_prefix("line ")
                && let Some((_, tail)) = rest.split_once(": ")
            {
                first = tail;
            }
            let guess = closest_field(first)
                .map(|f| format!("did you mean `{f}`? "))
                .unwrap_or_default();
            let first = first.to_string();
            diags.push(Diagnostic::error(file, first).line(line).hint(format!(
                "{guess}see docs/mapping.md for the mapping-file fields"
            )));
            return None;
        }
    };
    let at = |path: &[&str]| locate_yaml(&text, path);
    let dir = file.parent().unwrap_or(Path::new("."));
    let errors_before = diags.iter().filter(|d| d.is_error()).count();

    let Some(kind) = Kind::parse(&spec.binding) else {
        diags.push(
            Diagnostic::error(file, format!("unknown binding `{}`", spec.binding))
                .line(at(&["binding"]))
                .at("binding")
                .hint("use one of: usp, ucp, plain, autonym"),
        );
        return None;
    };
    let ref_error = match spec.unresolved_refs.as_deref() {
        None | Some("error") => true,
        Some("warn") => false,
        Some(other) => {
            diags.push(
                Diagnostic::error(file, format!("unknown `unresolved_refs: {other}`"))
                    .line(at(&["unresolved_refs"]))
                    .hint("use `error` (default) or `warn`"),
            );
            true
        }
    };
    for (id, local) in &spec.schema_ids {
        let p = dir.join(local);
        if !p.exists() {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("schema_ids: `{}` does not exist", p.display()),
                )
                .line(at(&["schema_ids", id]))
                .at(format!("schema_ids.{id}"))
                .hint("paths are relative to the mapping file"),
            );
        }
        sources.map_id(id, p);
    }

    // Backend.
    let backend = compile_backend(file, &text, &spec, diags);

    // OpenRPC.
    let doc_path = dir.join(&spec.openrpc);
    let canonical = std::fs::canonicalize(&doc_path).unwrap_or(doc_path.clone());
    if !docs.contains_key(&canonical) {
        match openrpc::load(&doc_path, sources) {
            Ok(d) => {
                diags.extend(d.warnings.iter().cloned());
                docs.insert(canonical.clone(), d);
            }
            Err(ds) => {
                if !doc_path.exists() {
                    diags.push(
                        Diagnostic::error(
                            file,
                            format!("OpenRPC document `{}` not found", doc_path.display()),
                        )
                        .line(at(&["openrpc"]))
                        .at("openrpc")
                        .hint("the path is relative to the mapping file"),
                    );
                } else {
                    diags.extend(ds);
                }
                return None;
            }
        }
    }
    let doc = docs.get(&canonical)?.clone();

    let version = spec.protocol.version.clone().unwrap_or_else(|| match kind {
        Kind::Usp | Kind::Ucp if !doc.version.is_empty() => doc.version.clone(),
        _ => String::new(),
    });
    let binding = Binding {
        kind,
        version,
        capabilities: spec.protocol.capabilities.clone(),
        capability: spec.protocol.capability.clone(),
    };

    if let Some(defs) = &spec.definitions
        && let Err(e) = Transform::compile_with(Some(defs), ".")
    {
        diags.push(
            Diagnostic::error(file, format!("definitions: {}", e.message))
                .line(at(&["definitions"]))
                .at("definitions")
                .hint("jq definitions look like `def money: {amount: .cents, currency: .ccy};`"),
        );
    }
    let business_outcomes = compile_outcomes(
        file,
        &text,
        &["outcomes"],
        &spec.outcomes,
        &binding,
        spec.definitions.as_deref(),
        diags,
    );
    let webhooks = spec.webhooks.as_ref().and_then(|w| {
        crate::webhook::config::compile(
            w,
            &spec.business,
            kind,
            file,
            &text,
            spec.definitions.as_deref(),
        )
        .map_err(|ds| diags.extend(ds))
        .ok()
        .map(Arc::new)
    });
    let auth = spec.authorization.as_ref().and_then(|a| {
        let tools: Vec<crate::auth::policy::ToolFacts> = spec
            .tools
            .keys()
            .map(|t| crate::auth::policy::ToolFacts {
                name: t.clone(),
                access: doc.method(t).and_then(|m| m.access.clone()),
                params: doc.method(t).map_or_else(Vec::new, |m| {
                    m.params.iter().map(|p| p.name.clone()).collect()
                }),
            })
            .collect();
        crate::auth::policy::compile(a, file, &text, &tools)
            .map_err(|ds| diags.extend(ds))
            .ok()
            .map(Arc::new)
    });
    let limits = match &spec.rate_limits {
        None => Default::default(),
        Some(r) => crate::auth::limit::compile(r, file, &text).unwrap_or_else(|ds| {
            diags.extend(ds);
            Default::default()
        }),
    };
    let vrp = spec.vrp.as_ref().and_then(|v| {
        let tools: Vec<&String> = spec.tools.keys().collect();
        crate::vrp::compile(v, file, &text, &tools)
            .map_err(|ds| diags.extend(ds))
            .ok()
            .map(Arc::new)
    });
    let response_signing = spec.response_signing.as_ref().and_then(|r| {
        let tools: Vec<&String> = spec.tools.keys().collect();
        crate::auth::respsig::compile(r, file, &text, &tools)
            .map_err(|ds| diags.extend(ds))
            .ok()
    });
    // A backend with mistakes still lets the tools be checked, so one `portico check` lists
    // every mistake in the file; the file is refused all the same (its errors are counted).
    let backend = match backend {
        Some(b) => b,
        None => unchecked_backend(&spec.business)?,
    };
    check_discovery(file, &text, &spec.discovery, diags);
    let business = Arc::new(Business {
        name: spec.business.clone(),
        file: file.to_path_buf(),
        binding,
        backend,
        discovery: spec.discovery.clone(),
        webhooks,
        auth,
        limits,
        vrp,
        response_signing,
    });

    let mut tools = Vec::new();
    for (name, ts) in &spec.tools {
        let Some(method) = doc.method(name) else {
            let known: Vec<&str> = doc.methods.iter().map(|m| m.name.as_str()).collect();
            let close = known
                .iter()
                .min_by_key(|k| strsim(k, name))
                .map(|k| format!("did you mean `{k}`? "))
                .unwrap_or_default();
            diags.push(
                Diagnostic::error(
                    file,
                    format!("tool `{name}` is not a method of {}", doc.path.display()),
                )
                .line(at(&["tools", name]))
                .at(format!("tools.{name}"))
                .hint(format!("{close}methods there: {}", known.join(", "))),
            );
            continue;
        };
        if let Some(t) = compile_tool(
            file,
            &text,
            name,
            ts,
            method,
            &doc,
            sources,
            &business,
            &business_outcomes,
            ref_error,
            spec.definitions.as_deref(),
            diags,
        ) {
            tools.push(t);
        }
    }
    let resources = surface::resources(file, &text, &spec, &business, diags);
    let prompts = surface::prompts(file, &text, &spec, diags);
    let errors_after = diags.iter().filter(|d| d.is_error()).count();
    (errors_after == errors_before).then_some(Compiled {
        business,
        tools,
        resources,
        prompts,
    })
}

/// For serde's "unknown field `x`, expected one of a, b, c" (or "expected `a` or `b`"), the
/// expected field nearest `x`, when it is near enough to be a typo.
fn closest_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field ")?;
    let (field, expected) = rest.split_once(", expected ")?;
    let field = field.trim_matches('`');
    let expected = expected.strip_prefix("one of ").unwrap_or(expected);
    expected
        .split(", ")
        .flat_map(|part| part.split(" or "))
        .map(|name| name.trim().trim_matches('`'))
        .filter(|name| !name.is_empty())
        .map(|name| (strsim(name, field), name))
        .filter(|(d, name)| *d <= 2.max(name.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name.to_string())
}

/// Rough edit distance for "did you mean".
fn strsim(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn compile_backend(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    diags: &mut Vec<Diagnostic>,
) -> Option<Backend> {
    let at = |path: &[&str]| locate_yaml(text, path);
    let b = &spec.backend;
    let mut ok = true;
    let base = b.url.trim_end_matches('/').to_string();
    let mut authority = None;
    match url::Url::parse(&base) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {
            if u.scheme() == "http"
                && let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default())
            {
                authority = Some(match u.host() {
                    Some(url::Host::Ipv6(_)) => {
                        format!("[{}]:{port}", host.trim_matches(['[', ']']))
                    }
                    _ => format!("{host}:{port}"),
                });
            }
        }
        _ => {
            ok = false;
            diags.push(
                Diagnostic::error(
                    file,
                    format!("backend url `{}` is not an http(s) URL", b.url),
                )
                .line(at(&["backend", "url"]))
                .at("backend.url")
                .hint("e.g. `url: http://127.0.0.1:8081/api`"),
            );
        }
    }
    let duration =
        |field: &str, v: &Option<String>, default: Duration, diags: &mut Vec<Diagnostic>| match v {
            None => Some(default),
            Some(s) => parse_duration(s).or_else(|| {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a duration"))
                        .line(at(&["backend", field]))
                        .at(format!("backend.{field}"))
                        .hint("write e.g. `5s`, `1500ms` or `1m`"),
                );
                None
            }),
        };
    let timeout = duration("timeout", &b.timeout, Duration::from_secs(10), diags);
    let connect = duration(
        "connect_timeout",
        &b.connect_timeout,
        Duration::from_secs(2),
        diags,
    );
    let mut headers = Vec::new();
    for (k, v) in &b.headers {
        let line = at(&["backend", "headers", k]);
        let name = match HeaderName::from_bytes(k.as_bytes()) {
            Ok(n) => n,
            Err(_) => {
                ok = false;
                diags.push(
                    Diagnostic::error(file, format!("`{k}` is not a valid header name"))
                        .line(line)
                        .at(format!("backend.headers.{k}")),
                );
                continue;
            }
        };
        match substitute_env(v) {
            Ok(value) => match HeaderValue::from_str(&value) {
                Ok(mut hv) => {
                    hv.set_sensitive(true);
                    headers.push((name, hv));
                }
                Err(_) => {
                    ok = false;
                    diags.push(
                        Diagnostic::error(
                            file,
                            format!("header `{k}` has characters not allowed in HTTP headers"),
                        )
                        .line(line)
                        .at(format!("backend.headers.{k}")),
                    );
                }
            },
            Err(e) => {
                ok = false;
                diags.push(
                    Diagnostic::error(file, format!("header `{k}`: {e}"))
                        .line(line)
                        .at(format!("backend.headers.{k}"))
                        .hint("export the variable before starting portico (its value is never logged)"),
                );
            }
        }
    }
    let forward_headers = compile_forward_headers(file, b, &at, diags);
    let resilience =
        crate::upstream::resilience::compile(file, text, &spec.business, &base, b, diags);
    let (timeout, connect, resilience, forward_headers) =
        (timeout?, connect?, resilience?, forward_headers?);
    if !ok {
        return None;
    }
    let client = match reqwest::Client::builder()
        .connect_timeout(connect)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                format!("cannot build the HTTP client: {e}"),
            ));
            return None;
        }
    };
    let pool = authority
        .and_then(|a| crate::upstream::pool::Pool::new(&a, connect))
        .map(Arc::new);
    Some(Backend {
        base,
        client,
        pool,
        timeout,
        headers,
        max_response_bytes: b
            .max_response_bytes
            .unwrap_or(8 << 20)
            .min(usize::MAX as u64) as usize,
        resilience,
        forward_headers,
        sign_requests: b.sign_requests,
    })
}

/// The stand-in for a backend whose settings had mistakes: never called, since a file with
/// errors is never served; it only lets the file's tools be compiled and checked.
fn unchecked_backend(business: &str) -> Option<Backend> {
    let base = "http://backend.invalid";
    Some(Backend {
        base: base.to_string(),
        client: reqwest::Client::builder().build().ok()?,
        pool: None,
        timeout: Duration::from_secs(10),
        headers: Vec::new(),
        max_response_bytes: 8 << 20,
        resilience: crate::upstream::resilience::Resilience::new(
            business,
            base,
            crate::upstream::resilience::Policy::default(),
        ),
        forward_headers: Vec::new(),
        sign_requests: false,
    })
}

/// Headers a client may not choose for the backend: connection management, framing, and what
/// portico itself sets or signs.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "content-digest",
    "content-encoding",
    "accept",
    "signature",
    "signature-input",
    "expect",
];

/// `backend.forward_headers`: valid names, none portico owns, none also set statically.
fn compile_forward_headers(
    file: &Path,
    b: &super::mapping::BackendSpec,
    at: &dyn Fn(&[&str]) -> Option<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<HeaderName>> {
    let mut names: Vec<HeaderName> = Vec::new();
    let mut ok = true;
    let mut bad = |msg: String, hint: &str| {
        ok = false;
        diags.push(
            Diagnostic::error(file, msg)
                .line(at(&["backend", "forward_headers"]))
                .at("backend.forward_headers")
                .hint(hint.to_string()),
        );
    };
    for raw in &b.forward_headers {
        let Ok(name) = HeaderName::from_bytes(raw.as_bytes()) else {
            bad(
                format!("`{raw}` is not a valid header name"),
                "list header names only, e.g. `X-Request-Source`",
            );
            continue;
        };
        if NOT_FORWARDED.contains(&name.as_str()) || name.as_str().starts_with("proxy-") {
            bad(
                format!(
                    "`{raw}` cannot be forwarded: portico sets it or it manages the connection"
                ),
                "remove it; the backend request gets its own framing, content type and signature",
            );
        } else if b.headers.keys().any(|k| k.eq_ignore_ascii_case(raw)) {
            bad(
                format!("`{raw}` is both a static header and a forwarded one"),
                "keep it in one of `backend.headers` and `backend.forward_headers`",
            );
        } else if names.contains(&name) {
            bad(format!("`{raw}` is listed twice"), "list each header once");
        } else {
            names.push(name);
        }
    }
    ok.then_some(names)
}

fn compile_outcomes(
    file: &Path,
    text: &str,
    prefix: &[&str],
    specs: &IndexMap<String, OutcomeSpec>,
    binding: &Binding,
    defs: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> HashMap<StatusKey, OutcomeRule> {
    let mut out = HashMap::new();
    for (key, spec) in specs {
        let mut path: Vec<&str> = prefix.to_vec();
        path.push(key);
        let line = locate_yaml(text, &path);
        let at = path.join(".");
        let status = if let Some(class) = key
            .strip_suffix("xx")
            .and_then(|c| c.parse::<u16>().ok())
            .filter(|c| (1..=5).contains(c))
        {
            StatusKey::Class(class)
        } else if let Ok(code) = key.parse::<u16>()
            && (100..=599).contains(&code)
        {
            StatusKey::Exact(code)
        } else {
            diags.push(
                Diagnostic::error(file, format!("`{key}` is not an HTTP status"))
                    .line(line)
                    .at(at)
                    .hint("use a code such as `409` or a class such as `4xx`"),
            );
            continue;
        };
        let chosen = [
            spec.business.is_some(),
            spec.error.is_some(),
            spec.tool_error == Some(true),
            spec.success == Some(true),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if chosen != 1 {
            diags.push(
                Diagnostic::error(file, "an outcome needs exactly one of `business`, `error`, `tool_error: true`, `success: true`")
                    .line(line)
                    .at(at),
            );
            continue;
        }
        let rule = if let Some(b) = &spec.business {
            Rule::Business(b.clone())
        } else if let Some(e) = &spec.error {
            if binding.error_code(e).is_none() {
                let known: Vec<&str> = binding.errors().iter().map(|e| e.slug).collect();
                diags.push(
                    Diagnostic::error(
                        file,
                        format!(
                            "`{e}` is not an error code of the {} binding",
                            binding.kind.name()
                        ),
                    )
                    .line(line)
                    .at(format!("{at}.error"))
                    .hint(format!("use one of: {}", known.join(", "))),
                );
                continue;
            }
            Rule::Error(e.clone())
        } else if spec.tool_error == Some(true) {
            Rule::ToolError
        } else {
            Rule::Success
        };
        if spec.code_from.is_some() && spec.business.is_none() {
            diags.push(
                Diagnostic::error(file, "`code_from` only applies to `business` outcomes")
                    .line(line)
                    .at(format!("{at}.code_from")),
            );
            continue;
        }
        let mut jq =
            |field: &str, src: &Option<String>| match src {
                Some(src) => match Transform::compile_with(defs, src) {
                    Ok(t) => Ok(Some(t)),
                    Err(e) => {
                        let mut key = path.clone();
                        key.push(field);
                        let (line, place) =
                            jq_error_place(text, locate_yaml(text, &key), src, e.offset);
                        diags.push(
                            Diagnostic::error(file, format!("{field}: {}", e.message))
                                .line(line)
                                .at(format!("{at}.{field}"))
                                .hint(place.unwrap_or_else(|| {
                                    "jq syntax, e.g. `.error.message`".to_string()
                                })),
                        );
                        Err(())
                    }
                },
                None => Ok(None),
            };
        let (Ok(content_from), Ok(code_from)) = (
            jq("content_from", &spec.content_from),
            jq("code_from", &spec.code_from),
        ) else {
            continue;
        };
        out.insert(
            status,
            OutcomeRule {
                rule,
                content: spec.content.clone(),
                content_from,
                code_from,
                severity: spec
                    .severity
                    .clone()
                    .unwrap_or_else(|| "recoverable".into()),
            },
        );
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn compile_tool(
    file: &Path,
    text: &str,
    name: &str,
    ts: &ToolSpec,
    method: &openrpc::Method,
    doc: &Document,
    sources: &mut Sources,
    business: &Arc<Business>,
    business_outcomes: &HashMap<StatusKey, OutcomeRule>,
    ref_error: bool,
    defs: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Tool> {
    let at = |field: &str| {
        locate_yaml(text, &["tools", name, field]).or_else(|| locate_yaml(text, &["tools", name]))
    };
    let here = |field: &str| format!("tools.{name}.{field}");
    let before = diags.iter().filter(|d| d.is_error()).count();

    // `METHOD /path`.
    let (verb, path) = ts
        .http
        .trim()
        .split_once(' ')
        .unwrap_or((ts.http.trim(), ""));
    let http_method = match verb.to_ascii_uppercase().as_str() {
        "GET" => Some(Method::GET),
        "POST" => Some(Method::POST),
        "PUT" => Some(Method::PUT),
        "PATCH" => Some(Method::PATCH),
        "DELETE" => Some(Method::DELETE),
        other => {
            diags.push(
                Diagnostic::error(file, format!("unknown HTTP method `{other}`"))
                    .line(at("http"))
                    .at(here("http"))
                    .hint("write `http: GET /path`, with one of GET, POST, PUT, PATCH, DELETE"),
            );
            None
        }
    };
    let template = match PathTemplate::parse(path.trim()) {
        Ok(t) => Some(t),
        Err(e) => {
            diags.push(
                Diagnostic::error(file, e)
                    .line(at("http"))
                    .at(here("http"))
                    .hint("write `http: POST /bookings/{booking_id}/cancel`"),
            );
            None
        }
    };
    let param_names: Vec<&str> = method.params.iter().map(|p| p.name.as_str()).collect();
    if let Some(t) = &template {
        for var in t.variables() {
            if !param_names.contains(&var) {
                diags.push(
                    Diagnostic::error(
                        file,
                        format!("path placeholder `{{{var}}}` is not a param of `{name}`"),
                    )
                    .line(at("http"))
                    .at(here("http"))
                    .hint(format!("params of `{name}`: {}", param_names.join(", "))),
                );
            }
        }
    }

    let jq = |field: &str, src: &str, diags: &mut Vec<Diagnostic>| -> Option<Transform> {
        Transform::compile_with(defs, src)
            .map_err(|e| {
                // `query.from` is the `from:` line below `query:` (`locate_yaml` falls back
                // to the deepest key it finds).
                let mut key = vec!["tools", name];
                key.extend(field.split('.'));
                let (line, place) = jq_error_place(text, locate_yaml(text, &key), src, e.offset);
                diags.push(
                    Diagnostic::error(file, format!("{field}: {}", e.message))
                        .line(line)
                        .at(here(field))
                        .hint(place.unwrap_or_else(|| {
                            "jq syntax, e.g. `{ service: .service_id }`".to_string()
                        })),
                );
            })
            .ok()
    };
    let mut query = Vec::new();
    for (k, src) in &ts.query {
        if let Some(t) = jq(&format!("query.{k}"), src, diags) {
            query.push((k.clone(), t));
        }
    }
    let mut headers = Vec::new();
    for (k, src) in &ts.headers {
        match HeaderName::from_bytes(k.as_bytes()) {
            Ok(h) => {
                if let Some(t) = jq(&format!("headers.{k}"), src, diags) {
                    headers.push((h, t));
                }
            }
            Err(_) => diags.push(
                Diagnostic::error(file, format!("`{k}` is not a valid header name"))
                    .line(at("headers"))
                    .at(here("headers")),
            ),
        }
    }
    let body = ts.body.as_deref().and_then(|s| jq("body", s, diags));
    let result = ts.result.as_deref().and_then(|s| jq("result", s, diags));
    let business_messages = ts
        .business
        .as_deref()
        .and_then(|s| jq("business", s, diags));
    if ts.body.is_some() && matches!(http_method, Some(Method::GET) | Some(Method::DELETE)) {
        diags.push(
            Diagnostic::warning(file, format!("`body` is ignored for {verb} requests"))
                .line(at("body"))
                .at(here("body")),
        );
    }
    let summary = match &ts.summary {
        None => None,
        Some(src) => match crate::translate::summary::Summary::compile(src) {
            Ok(summary) => Some(summary),
            Err(e) => {
                diags.push(
                        Diagnostic::error(file, format!("summary template: {e}"))
                            .line(at("summary"))
                            .at(here("summary"))
                            .hint("MiniJinja syntax, e.g. `{{ slots | length }} slots for {{ service_id }}`"),
                    );
                None
            }
        },
    };
    let timeout = match &ts.timeout {
        None => business.backend.timeout,
        Some(s) => match parse_duration(s) {
            Some(d) => d,
            None => {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a duration"))
                        .line(at("timeout"))
                        .at(here("timeout"))
                        .hint("write e.g. `5s` or `1500ms`"),
                );
                business.backend.timeout
            }
        },
    };
    let progress_every = match &ts.progress_every {
        None => DEFAULT_PROGRESS_EVERY,
        Some(s) => match parse_duration(s).filter(|d| !d.is_zero()) {
            Some(d) => d,
            None => {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a positive duration"))
                        .line(at("progress_every"))
                        .at(here("progress_every"))
                        .hint("write e.g. `1s` or `250ms`"),
                );
                DEFAULT_PROGRESS_EVERY
            }
        },
    };
    let idempotency_required = match ts.idempotency.as_deref() {
        Some("required") => true,
        Some("optional") => false,
        None => {
            business.binding.kind == Kind::Ucp
                && (name.starts_with("complete_") || name.starts_with("cancel_"))
        }
        Some(other) => {
            diags.push(
                Diagnostic::error(file, format!("unknown `idempotency: {other}`"))
                    .line(at("idempotency"))
                    .at(here("idempotency"))
                    .hint("use `required` or `optional`"),
            );
            false
        }
    };
    let content = ts.content.as_ref().and_then(|c| {
        let cx = surface::ContentCtx {
            file,
            text,
            tool: name,
            binding: business.binding.kind,
            has_output: method.result.is_some(),
            defs,
        };
        surface::content(&cx, c, diags)
    });
    let ask = super::ask::compile(
        &super::ask::AskCtx {
            file,
            text,
            section: "tools",
            tool: name,
            params: &param_names,
        },
        &ts.ask,
        diags,
    )
    .map(Arc::new);
    let mut outcomes = business_outcomes.clone();
    let prefix = ["tools", name, "outcomes"];
    outcomes.extend(compile_outcomes(
        file,
        text,
        &prefix,
        &ts.outcomes,
        &business.binding,
        defs,
        diags,
    ));

    // Schemas.
    let mut bundler = Bundler::new(sources);
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in &method.params {
        let mut s = bundler.add(&p.schema, &doc.uri, &p.pointer);
        if let (Some(d), Value::Object(obj)) = (&p.description, &mut s)
            && !obj.contains_key("description")
        {
            obj.insert("description".into(), Value::String(d.clone()));
        }
        props.insert(p.name.clone(), s);
        if p.required {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut input = Map::new();
    input.insert("type".into(), json!("object"));
    input.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        input.insert("required".into(), Value::Array(required));
    }
    let (input_schema, unresolved) = bundler.finish(Value::Object(input));
    report_unresolved(unresolved, doc, name, ref_error, file, diags);

    let output_schema = match &method.result {
        None => None,
        Some((schema, pointer)) => {
            let mut bundler = Bundler::new(sources);
            // USP result schemas describe the whole tool result: serve the structuredContent part.
            let (node, base, ptr) = match bundler.deref_root(schema, &doc.uri) {
                Ok((target, base, ptr)) => match target.pointer("/properties/structuredContent") {
                    Some(sc) => {
                        let p = if ptr.is_empty() { pointer.clone() } else { ptr };
                        (
                            sc.clone(),
                            base,
                            format!("{p}/properties/structuredContent"),
                        )
                    }
                    None => (schema.clone(), doc.uri.clone(), pointer.clone()),
                },
                Err(_) => (schema.clone(), doc.uri.clone(), pointer.clone()),
            };
            let derived = bundler.add(&node, &base, &ptr);
            let root = match business.binding.business_schema() {
                Some(alt) => json!({"type": "object", "anyOf": [derived, alt]}),
                None => {
                    let mut d = derived;
                    if let Value::Object(obj) = &mut d
                        && !obj.contains_key("type")
                    {
                        obj.insert("type".into(), json!("object"));
                    }
                    d
                }
            };
            let (out, unresolved) = bundler.finish(root);
            report_unresolved(unresolved, doc, name, ref_error, file, diags);
            Some(out)
        }
    };

    let compile_schema = |schema: &Value,
                          what: &str,
                          diags: &mut Vec<Diagnostic>|
     -> Option<jsonschema::Validator> {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map_err(|e| {
                diags.push(
                    Diagnostic::error(
                        &doc.path,
                        format!("{what} schema of `{name}` does not compile: {e}"),
                    )
                    .line(doc.line_of(Some(name), "/params"))
                    .at(format!("/methods/{}", method.index)),
                )
            })
            .ok()
    };
    let input_validator = compile_schema(&input_schema, "input", diags);
    let output_validator = output_schema
        .as_ref()
        .and_then(|s| compile_schema(s, "output", diags));

    let description = ts
        .description
        .clone()
        .or_else(|| match (&method.summary, &method.description) {
            (Some(s), Some(d)) if !d.starts_with(s.as_str()) => Some(format!("{s}. {d}")),
            (_, Some(d)) => Some(d.clone()),
            (Some(s), None) => Some(s.clone()),
            (None, None) => None,
        })
        .unwrap_or_else(|| format!("{name} ({})", business.name));
    let read_only = http_method == Some(Method::GET);
    let mut descriptor = Map::new();
    descriptor.insert("name".into(), json!(name));
    if let Some(s) = &method.summary {
        descriptor.insert("title".into(), json!(s));
    }
    descriptor.insert("description".into(), json!(description));
    descriptor.insert("inputSchema".into(), input_schema);
    if let Some(o) = &output_schema {
        descriptor.insert("outputSchema".into(), o.clone());
    }
    descriptor.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": read_only,
            "destructiveHint": !read_only && !matches!(http_method, Some(Method::POST)) ,
            "idempotentHint": matches!(http_method, Some(Method::GET) | Some(Method::PUT) | Some(Method::DELETE)),
            "openWorldHint": false
        }),
    );
    let descriptor = Descriptor::new(&Value::Object(descriptor));
    if descriptor.is_none() {
        diags.push(
            Diagnostic::error(
                &doc.path,
                format!(
                    "the schemas of `{name}` nest deeper than JSON readers accept (128 levels)"
                ),
            )
            .line(doc.line_of(Some(name), "/params"))
            .at(format!("/methods/{}", method.index))
            .hint("flatten the schema, or move nested parts into `$defs` referenced with `$ref`"),
        );
    }
    if diags.iter().filter(|d| d.is_error()).count() != before {
        return None;
    }
    let blocks = match &content {
        Some(ContentRule::Blocks(t)) => Some(t),
        _ => None,
    };
    let meta_used = query
        .iter()
        .map(|(_, t)| t)
        .chain(headers.iter().map(|(_, t)| t))
        .chain(body.iter())
        .chain(result.iter())
        .chain(business_messages.iter())
        .chain(blocks)
        .any(Transform::uses_meta);
    let envelope = business.binding.success_envelope(ts.capability.as_deref());
    Some(Tool {
        name: name.to_string(),
        breaker: business.backend.resilience.route(name),
        business: business.clone(),
        descriptor: descriptor?,
        input_validator: input_validator?,
        output_validator,
        output_check: std::sync::OnceLock::new(),
        method: http_method?,
        path: template?,
        query,
        headers,
        body,
        result,
        business_messages,
        summary,
        outcomes,
        envelope_text: envelope.as_ref().map(|(_, v)| crate::json_text::to_vec(v)),
        envelope,
        capability: ts.capability.clone(),
        idempotency_required,
        timeout,
        progress_every,
        access: method.access.clone(),
        metrics: Default::default(),
        content,
        ask,
        meta_used,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance() {
        assert_eq!(strsim("usp_bookings_create", "usp_booking_create"), 1);
    }

    #[test]
    fn an_unknown_field_is_matched_to_the_nearest_expected_one() {
        let msg = "unknown field `reslt`, expected one of http, query, headers, body, result";
        assert_eq!(closest_field(msg).as_deref(), Some("result"));
        let msg = "unknown field `timout`, expected `url` or `timeout`";
        assert_eq!(closest_field(msg).as_deref(), Some("timeout"));
        // Nothing close: no guess rather than a wrong one.
        let msg = "unknown field `colour`, expected one of http, query, body";
        assert_eq!(closest_field(msg), None);
        assert_eq!(closest_field("invalid type: string, expected a map"), None);
    }
}
