//! Compiles mapping files + OpenRPC documents into the runtime `Gateway` (tools, validators,
//! transforms, templates, backend clients). It must never panic on user input: every problem
//! becomes a `Diagnostic` naming the file, the line and a fix.

pub use super::business::{Backend, Business};
use super::diag::{Diagnostic, locate_yaml};
use super::mapping::MappingFile;
use super::openrpc::{self, Document};
use super::schema::Sources;
use super::surface::{self, Prompt, Resource};
use crate::binding::{Binding, Kind};
use crate::translate::transform::Transform;

use super::compile_backend::{compile_backend, unchecked_backend};
pub use super::compile_tool::DEFAULT_PROGRESS_EVERY;
use super::compile_tool::{compile_outcomes, compile_tool};
pub use super::tool::{Descriptor, OutcomeRule, Tool};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The registries `protocol.ucp` may declare (UCP `ucp.json` base and business schema).
const UCP_REGISTRIES: [&str; 4] = [
    "capabilities",
    "services",
    "payment_handlers",
    "supported_versions",
];

/// Tools by name. Looked up several times per call by a name the client sends, so hashed with
/// foldhash rather than SipHash (about a tenth of the instructions for a short name): the map
/// is built from the configuration alone, and a lookup never inserts, so the keys a client
/// chooses cannot crowd a bucket.
pub type ToolMap = IndexMap<String, Arc<Tool>, foldhash::fast::RandomState>;

/// The whole compiled configuration.
#[derive(Debug)]
pub struct Gateway {
    /// Tools in serving order (file order, then mapping order).
    pub tools: ToolMap,
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
    /// MCP authorization as the mapping files declare it (issuers, resource, every scope).
    pub mcp_authorization: crate::auth::resource::spec::McpAuthorization,
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
    let mut tools = ToolMap::default();
    let mut owners: HashMap<String, PathBuf> = HashMap::new();
    let mut businesses = Vec::new();
    let mut mcp_authorization = crate::auth::resource::spec::McpAuthorization::default();
    let mut resources: Vec<Arc<Resource>> = Vec::new();
    let mut prompts: IndexMap<String, Arc<Prompt>> = IndexMap::new();
    for file in &files {
        match compile_file(file, &mut sources, &mut docs, &mut diags) {
            Some(Compiled {
                business,
                mcp_authorization: file_mcp,
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
                if let Some(spec) = &file_mcp {
                    mcp_authorization.merge(spec, &business.scopes);
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
        mcp_authorization,
        reads_http_request,
        tools,
        businesses,
        resources,
        prompts,
        warnings,
        sources: read,
    })
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
    /// The file's `mcp_authorization`, for the gateway-wide settings.
    mcp_authorization: Option<crate::auth::resource::spec::McpAuthorizationSpec>,
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
            let column = e
                .location()
                .and_then(|l| u16::try_from(l.column()).ok())
                .filter(|c| *c > 0);
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
            let quoted = line
                .and_then(|l| super::diag::quote_line(&text, l, column))
                .unwrap_or_default();
            diags.push(
                Diagnostic::error(file, format!("{first}{quoted}"))
                    .line(line)
                    .column(column)
                    .hint(format!(
                        "{guess}see docs/mapping.md for the mapping-file fields"
                    )),
            );
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
    // The backend's own OpenAPI document, when named: methods, paths, query names, placed
    // params' types and header names, fields the transforms read.
    super::backend_doc::check(file, &text, &spec, Some(&doc), diags);

    let version = spec.protocol.version.clone().unwrap_or_else(|| match kind {
        Kind::Usp | Kind::Ucp if !doc.version.is_empty() => doc.version.clone(),
        _ => String::new(),
    });
    // Every USP and UCP result names the protocol version; an empty one breaks the schemas'
    // version pattern in every answer, so it is refused here rather than served.
    if matches!(kind, Kind::Usp | Kind::Ucp) && version.trim().is_empty() {
        let root = if kind == Kind::Usp { "usp" } else { "ucp" };
        diags.push(
            Diagnostic::error(
                file,
                format!(
                    "the `{root}.version` of every result would be empty: `protocol.version` is not set and the OpenRPC document has no `info.version`"
                ),
            )
            .line(at(&["protocol", "version"]).or_else(|| at(&["binding"])))
            .at("protocol.version")
            .hint(format!(
                "set the protocol version the business speaks, e.g. `protocol: {{ version: \"2026-01-11\" }}`; the published {} files do not always carry one",
                root.to_ascii_uppercase()
            )),
        );
        return None;
    }
    let ucp = match (&spec.protocol.ucp, kind) {
        (None, _) => None,
        (Some(serde_json::Value::Object(m)), Kind::Ucp) => {
            let unknown: Vec<&String> = m
                .keys()
                .filter(|k| !UCP_REGISTRIES.contains(&k.as_str()))
                .collect();
            if !unknown.is_empty() {
                diags.push(
                    Diagnostic::error(
                        file,
                        format!("`protocol.ucp` has unknown members: {unknown:?}"),
                    )
                    .line(at(&["protocol", "ucp"]))
                    .at("protocol.ucp")
                    .hint(format!("declare only {}", UCP_REGISTRIES.join(", "))),
                );
                return None;
            }
            Some(m.clone())
        }
        (Some(_), Kind::Ucp) => {
            diags.push(
                Diagnostic::error(file, "`protocol.ucp` must be a map of registries")
                    .line(at(&["protocol", "ucp"]))
                    .at("protocol.ucp")
                    .hint("e.g. `ucp: { capabilities: {...}, payment_handlers: {...} }`"),
            );
            return None;
        }
        (Some(_), _) => {
            diags.push(
                Diagnostic::error(file, "`protocol.ucp` applies to the ucp binding only")
                    .line(at(&["protocol", "ucp"]))
                    .at("protocol.ucp"),
            );
            return None;
        }
    };
    let binding = Binding {
        kind,
        version,
        capabilities: spec.protocol.capabilities.clone(),
        capability: spec.protocol.capability.clone(),
        ucp,
    };

    // Compiled on their own first, so that a mistake in them is reported once, at its own line
    // and column, and not again by every program that uses them.
    if let Some(defs) = &spec.definitions
        && let Err(e) = Transform::compile_with(None, &format!("{defs}\n."))
    {
        let (line, place) =
            super::diag::jq_error_place(&text, at(&["definitions"]), defs, e.offset);
        diags.push(
            Diagnostic::error(file, format!("definitions: {}", e.message))
                .line(line)
                .at("definitions")
                .hint(place.unwrap_or_else(|| {
                    "jq definitions look like `def money: {amount: .cents, currency: .ccy};`"
                        .to_string()
                })),
        );
        // Every transform of this file uses them: the tools are not compiled against them.
        return None;
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
    let scopes = match &spec.mcp_authorization {
        None => Default::default(),
        Some(m) => {
            let tools: Vec<(String, crate::auth::policy::Tier)> = spec
                .tools
                .keys()
                .map(|t| {
                    let access = doc.method(t).and_then(|m| m.access.clone());
                    let tier = match &auth {
                        Some(p) => p.tier(t, access.as_deref()),
                        None => access
                            .as_deref()
                            .and_then(crate::auth::policy::Tier::parse)
                            .unwrap_or(crate::auth::policy::Tier::Platform),
                    };
                    (t.clone(), tier)
                })
                .collect();
            crate::auth::resource::spec::compile(m, file, &text, &tools).unwrap_or_else(|ds| {
                diags.extend(ds);
                Default::default()
            })
        }
    };
    let business = Arc::new(Business {
        scopes,
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
    super::todo::check(file, &text, &spec, &doc, diags);
    let resources = surface::resources(file, &text, &spec, &business, diags);
    let prompts = surface::prompts(file, &text, &spec, diags);
    let errors_after = diags.iter().filter(|d| d.is_error()).count();
    (errors_after == errors_before).then_some(Compiled {
        mcp_authorization: spec.mcp_authorization.clone(),
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
    crate::util::similar::distance(a, b)
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
