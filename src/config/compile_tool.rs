//! Compiles one mapping tool (and the outcome rules of a tool or business) into a `Tool`.
//! It must never panic on user input: every problem becomes a `Diagnostic` with a fix.

use super::business::Business;
use super::diag::{Diagnostic, jq_error_place, locate_yaml};
use super::mapping::{OutcomeSpec, OutcomeSpecs, ToolSpec};
use super::openrpc::{self, Document};
use super::schema::{Bundler, Sources, Unresolved};
use super::surface;
use super::tool::{Descriptor, OutcomeRule, StatusKey, Tool};
use crate::binding::{Binding, Kind, Rule};
use crate::translate::content::ContentRule;
use crate::translate::path::PathTemplate;
use crate::translate::transform::Transform;
use crate::util::duration::parse_duration;
use http::{HeaderName, Method};

/// Default interval of `notifications/progress` ticks (mapping key `progress_every`).
pub const DEFAULT_PROGRESS_EVERY: Duration = Duration::from_secs(1);
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

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
        let hint = super::ref_hint::with_suggestion(hint, &u);
        let d = d.line(line).at(u.pointer).hint(hint);
        // The same reference is reached from many tools: report it once.
        if !diags.contains(&d) {
            diags.push(d);
        }
    }
}

pub(super) fn compile_outcomes(
    file: &Path,
    text: &str,
    prefix: &[&str],
    specs: &IndexMap<String, OutcomeSpecs>,
    binding: &Binding,
    defs: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> HashMap<StatusKey, Vec<OutcomeRule>> {
    let mut out = HashMap::new();
    for (key, specs) in specs {
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
        let listed = matches!(specs, OutcomeSpecs::Many(_));
        let rules = specs.rules();
        if rules.is_empty() {
            diags.push(
                Diagnostic::error(file, format!("`{key}` has an empty list of outcomes"))
                    .line(line)
                    .at(at)
                    .hint("give one outcome, or remove the status"),
            );
            continue;
        }
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, spec) in rules.iter().enumerate() {
            let (at, line) = if listed {
                let item = line.map(|l| super::diag::locate_yaml_item(text, l, i));
                (format!("{at}[{i}]"), item)
            } else {
                (at.clone(), line)
            };
            if spec.when.is_none() && i + 1 < rules.len() {
                diags.push(
                    Diagnostic::error(
                        file,
                        format!(
                            "outcome {i} of `{key}` has no `when`, so the {} after it can never apply",
                            if rules.len() - i - 1 == 1 { "rule" } else { "rules" }
                        ),
                    )
                    .line(line)
                    .at(at.clone())
                    .hint("give it a `when:` predicate, or move it to the end of the list as the fallback"),
                );
            }
            if let Some(rule) =
                compile_outcome(file, text, &path, &at, line, spec, binding, defs, diags)
            {
                compiled.push(rule);
            }
        }
        if compiled.len() == rules.len() {
            out.insert(status, compiled);
        }
    }
    out
}

/// One outcome rule of a status (`at`: where it sits, for messages).
#[allow(clippy::too_many_arguments)]
fn compile_outcome(
    file: &Path,
    text: &str,
    path: &[&str],
    at: &str,
    line: Option<usize>,
    spec: &OutcomeSpec,
    binding: &Binding,
    defs: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> Option<OutcomeRule> {
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
        return None;
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
            return None;
        }
        Rule::Error(e.clone())
    } else if spec.tool_error == Some(true) {
        Rule::ToolError
    } else {
        Rule::Success
    };
    for (field, set) in [
        ("code_from", spec.code_from.is_some()),
        ("severity_from", spec.severity_from.is_some()),
        ("with_result", spec.with_result == Some(true)),
        ("follow_up", spec.follow_up.is_some()),
    ] {
        if set && spec.business.is_none() {
            diags.push(
                Diagnostic::error(
                    file,
                    format!("`{field}` only applies to `business` outcomes"),
                )
                .line(line)
                .at(format!("{at}.{field}")),
            );
            return None;
        }
    }
    let mut failed = false;
    let mut jq = |field: &str, src: &Option<String>| match src {
        Some(src) => match Transform::compile_with(defs, src) {
            Ok(t) => Some(t),
            Err(e) => {
                let mut key = path.to_vec();
                key.push(field);
                let (line, place) = jq_error_place(text, locate_yaml(text, &key), src, e.offset);
                diags.push(
                    Diagnostic::error(file, format!("{field}: {}", e.message))
                        .line(line)
                        .at(format!("{at}.{field}"))
                        .hint(
                            place.unwrap_or_else(|| "jq syntax, e.g. `.error.message`".to_string()),
                        ),
                );
                failed = true;
                None
            }
        },
        None => None,
    };
    let content_from = jq("content_from", &spec.content_from);
    let code_from = jq("code_from", &spec.code_from);
    let severity_from = jq("severity_from", &spec.severity_from);
    let when = jq("when", &spec.when);
    let follow_up = match &spec.follow_up {
        None => None,
        Some(f) => Some(super::follow_up::compile(file, line, at, f, diags)?),
    };
    if failed {
        return None;
    }
    Some(OutcomeRule {
        rule,
        content: spec.content.clone(),
        content_from,
        code_from,
        severity: spec
            .severity
            .clone()
            .unwrap_or_else(|| "recoverable".into()),
        severity_from,
        when,
        with_result: spec.with_result == Some(true),
        follow_up,
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn compile_tool(
    file: &Path,
    text: &str,
    name: &str,
    ts: &ToolSpec,
    method: &openrpc::Method,
    doc: &Document,
    sources: &mut Sources,
    business: &Arc<Business>,
    business_outcomes: &HashMap<StatusKey, Vec<OutcomeRule>>,
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
    super::idempotency_check::derived_keys(file, text, name, ts, diags);
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
    super::follow_up::check_params(file, at("outcomes"), name, &param_names, &outcomes, diags);

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
    let (mut input_schema, unresolved) = bundler.finish(Value::Object(input));
    report_unresolved(unresolved, doc, name, ref_error, file, diags);
    use super::schema_patch::{PatchCtx, Side, apply_all};
    let pcx = PatchCtx {
        file,
        text,
        tool: name,
        written_input: ts.input_schema.is_some(),
    };
    let patches = &ts.schema_patches;
    let mut schema_patches = apply_all(&pcx, patches, Side::Params, &mut input_schema, "", diags);
    // A response-shaped param schema with `ucp_request` annotations: serve this operation's
    // request variant of it.
    let operation = match ts.request_variant.as_deref() {
        Some("none") => None,
        Some(op) => Some(op),
        None => super::request_variant::annotated(&input_schema)
            .then(|| name.split('_').next())
            .flatten(),
    };
    let request_variant = operation.map(|op| {
        let changed = super::request_variant::apply(&mut input_schema, op);
        (op.to_string(), changed)
    });
    let input_schema = match &ts.input_schema {
        Some(written) => {
            let line = locate_yaml(text, &["tools", name, "input_schema"]);
            super::input_schema::check(written, file, line, &format!("tools.{name}"), diags);
            written.clone()
        }
        None => input_schema,
    };
    // A written input schema is served as written: no request variant of it.
    let request_variant = request_variant.filter(|_| ts.input_schema.is_none());
    let (input_schema, mcp_headers) = super::input_schema::mcp_headers(
        input_schema,
        &ts.mcp_headers,
        file,
        locate_yaml(text, &["tools", name, "mcp_headers"]),
        &format!("tools.{name}"),
        diags,
    );

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
            let (mut out, unresolved) = bundler.finish(root);
            report_unresolved(unresolved, doc, name, ref_error, file, diags);
            let base = ["", "/anyOf/0"][usize::from(business.binding.business_schema().is_some())];
            schema_patches.extend(apply_all(
                &pcx,
                patches,
                Side::Result,
                &mut out,
                base,
                diags,
            ));
            Some(out)
        }
    };
    if method.result.is_none() {
        apply_all(&pcx, patches, Side::Result, &mut Value::Null, "", diags);
    }

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
    let long_running = ts
        .long_running
        .as_ref()
        .map(|lr| super::long_running::compile(file, text, name, lr, defs, diags).map(Arc::new));
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
    // A UCP envelope the tool's own output schema refuses would fail every successful call.
    if business.binding.kind == Kind::Ucp
        && let (Some(out), Some((_, env))) = (&output_schema, &envelope)
    {
        // With a business-outcome schema, the success shape is the first `anyOf` branch.
        let success = if business.binding.business_schema().is_some() {
            "/anyOf/0"
        } else {
            ""
        };
        let problems = super::envelope_check::violations(out, success, env);
        if !problems.is_empty() {
            let line = locate_yaml(text, &["protocol", "ucp"])
                .or_else(|| locate_yaml(text, &["protocol"]))
                .or_else(|| locate_yaml(text, &["binding"]));
            diags.push(super::envelope_check::diagnostic(
                file, line, name, &problems,
            ));
            return None;
        }
    }
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
        drop_nulls: ts.drop_nulls,
        request_variant,
        schema_patches,
        mcp_headers,
        long_running: long_running.flatten(),
    })
}
