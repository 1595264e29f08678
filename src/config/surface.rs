//! Compiles the MCP surface beyond tools: `resources`, `prompts` and tools' `content` rules.
//! It must never panic on user input: every problem becomes a `Diagnostic` with file, line, hint.

use super::business::Business;
use super::diag::{Diagnostic, jq_error_place, locate_yaml};
use super::mapping::{ContentSpec, MappingFile};
use crate::binding::Kind;
use crate::translate::content::{ContentRule, TextTemplate};
use crate::translate::path::PathTemplate;
use crate::translate::transform::Transform;
use crate::translate::uri::UriTemplate;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;

/// A resource or resource template, read with one REST GET on its business's backend.
#[derive(Debug)]
pub struct Resource {
    /// The URI or URI template as written in the mapping.
    pub uri: String,
    pub template: UriTemplate,
    /// Backend path; its placeholders are the template's variables.
    pub path: PathTemplate,
    pub business: Arc<Business>,
    /// Overrides the backend's Content-Type.
    pub mime_type: Option<String>,
    /// The `resources/list` or `resources/templates/list` entry.
    pub descriptor: Value,
    /// The resource's own circuit breaker on its backend (`upstream::resilience`).
    pub breaker: crate::upstream::resilience::Breaker,
}

/// One declared prompt argument.
#[derive(Debug)]
pub struct PromptArg {
    pub name: String,
    pub required: bool,
    /// Completion values.
    pub values: Vec<String>,
}

/// What one prompt message holds.
#[derive(Debug)]
pub enum PromptBody {
    /// Text rendered from the arguments.
    Text(TextTemplate),
    /// A URI (rendered from the arguments) of a mapped resource, read through its backend.
    Resource(TextTemplate),
    /// As `Resource`, sent as a text block holding the resource's text.
    ResourceText(TextTemplate),
}

#[derive(Debug)]
pub struct PromptMessage {
    pub role: String,
    pub body: PromptBody,
}

/// A prompt, ready to render.
#[derive(Debug)]
pub struct Prompt {
    pub name: String,
    /// The `prompts/list` entry.
    pub descriptor: Value,
    pub args: Vec<PromptArg>,
    pub messages: Vec<PromptMessage>,
    /// Served at 2026-07-28 only (the autonym binding, prompts with `ask:`): hidden from
    /// 2025-era sessions.
    pub stateless_only: bool,
    /// Questions for the MCP client before rendering; their answers are template variables.
    pub ask: Option<Arc<super::ask::AskPlan>>,
}

fn here(path: &[&str]) -> String {
    path.join(".")
}

/// Compiles `resources:`; the business is the file's.
pub fn resources(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    business: &Arc<Business>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Resource> {
    let mut out = Vec::new();
    for (uri, rs) in &spec.resources {
        let line = |field: &str| {
            locate_yaml(text, &["resources", uri, field])
                .or_else(|| locate_yaml(text, &["resources", uri]))
        };
        let template = match UriTemplate::parse(uri) {
            Ok(t) => t,
            Err(e) => {
                diags.push(
                    Diagnostic::error(file, e)
                        .line(locate_yaml(text, &["resources", uri]))
                        .at(here(&["resources", uri]))
                        .hint("write `test://items/{id}`: variables are `{name}`, separated by literals"),
                );
                continue;
            }
        };
        let (verb, path) = rs
            .http
            .trim()
            .split_once(' ')
            .unwrap_or((rs.http.trim(), ""));
        if !verb.eq_ignore_ascii_case("GET") {
            diags.push(
                Diagnostic::error(file, format!("resources are read with GET, not `{verb}`"))
                    .line(line("http"))
                    .at(here(&["resources", uri, "http"]))
                    .hint("write `http: GET /path/{var}`"),
            );
            continue;
        }
        let path = match PathTemplate::parse(path.trim()) {
            Ok(p) => p,
            Err(e) => {
                diags.push(
                    Diagnostic::error(file, e)
                        .line(line("http"))
                        .at(here(&["resources", uri, "http"]))
                        .hint("write `http: GET /items/{id}` with whole-segment placeholders"),
                );
                continue;
            }
        };
        let vars: Vec<&str> = template.variables().collect();
        if let Some(bad) = path.variables().find(|v| !vars.contains(v)) {
            diags.push(
                Diagnostic::error(
                    file,
                    format!(
                        "path placeholder `{{{bad}}}` is not a variable of the URI template `{uri}`"
                    ),
                )
                .line(line("http"))
                .at(here(&["resources", uri, "http"]))
                .hint(if vars.is_empty() {
                    "this URI has no variables: the path must be fixed".to_string()
                } else {
                    format!("variables: {}", vars.join(", "))
                }),
            );
            continue;
        }
        let mut d = Map::new();
        let key = if template.is_template() {
            "uriTemplate"
        } else {
            "uri"
        };
        d.insert(key.into(), json!(uri));
        d.insert("name".into(), json!(rs.name));
        if let Some(t) = &rs.title {
            d.insert("title".into(), json!(t));
        }
        if let Some(t) = &rs.description {
            d.insert("description".into(), json!(t));
        }
        if let Some(m) = &rs.mime_type {
            d.insert("mimeType".into(), json!(m));
        }
        out.push(Resource {
            uri: uri.clone(),
            template,
            path,
            business: business.clone(),
            mime_type: rs.mime_type.clone(),
            descriptor: Value::Object(d),
            breaker: business.backend.resilience.route(uri),
        });
    }
    out
}

/// Compiles `prompts:`.
pub fn prompts(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Prompt> {
    let mut out = Vec::new();
    for (name, ps) in &spec.prompts {
        let before = diags.iter().filter(|d| d.is_error()).count();
        let line = |field: &str| {
            locate_yaml(text, &["prompts", name, field])
                .or_else(|| locate_yaml(text, &["prompts", name]))
        };
        let declared: Vec<&str> = ps.arguments.keys().map(String::as_str).collect();
        let ask = super::ask::compile(
            &super::ask::AskCtx {
                file,
                text,
                section: "prompts",
                tool: name,
                params: &declared,
            },
            &ps.ask,
            diags,
        )
        .map(Arc::new);
        // Templates may use the declared arguments and what `ask:` fills.
        let filled = ask.as_ref().map(|a| a.filled()).unwrap_or_default();
        let known: Vec<&str> = declared
            .iter()
            .copied()
            .chain(filled.iter().map(String::as_str))
            .collect();
        let mut messages = Vec::new();
        if ps.messages.is_empty() {
            diags.push(
                Diagnostic::error(file, format!("prompt `{name}` has no messages"))
                    .line(line("messages"))
                    .at(here(&["prompts", name, "messages"]))
                    .hint("add `messages: [{ role: user, text: \"...\" }]`"),
            );
        }
        for (i, m) in ps.messages.iter().enumerate() {
            let at = format!("prompts.{name}.messages[{i}]");
            let role = m.role.clone().unwrap_or_else(|| "user".into());
            if role != "user" && role != "assistant" {
                diags.push(
                    Diagnostic::error(file, format!("unknown role `{role}`"))
                        .line(line("messages"))
                        .at(format!("{at}.role"))
                        .hint("use `user` or `assistant`"),
                );
                continue;
            }
            let (field, src) = match (&m.text, &m.resource, &m.resource_text) {
                (Some(t), None, None) => ("text", t),
                (None, Some(r), None) => ("resource", r),
                (None, None, Some(r)) => ("resource_text", r),
                _ => {
                    diags.push(
                        Diagnostic::error(file, "a prompt message needs exactly one of `text`, `resource` or `resource_text`")
                            .line(line("messages"))
                            .at(at)
                            .hint("`text` is a MiniJinja template; `resource` the URI of a mapped resource"),
                    );
                    continue;
                }
            };
            let tpl = match TextTemplate::compile(src) {
                Ok(t) => t,
                Err(e) => {
                    diags.push(
                        Diagnostic::error(file, format!("{field} template: {e}"))
                            .line(line("messages"))
                            .at(format!("{at}.{field}"))
                            .hint("MiniJinja syntax, e.g. `Summarise {{ topic }}`"),
                    );
                    continue;
                }
            };
            let unknown = tpl.undeclared(&known);
            if !unknown.is_empty() {
                diags.push(
                    Diagnostic::error(
                        file,
                        format!(
                            "{field} template uses undeclared argument(s): {}",
                            unknown.join(", ")
                        ),
                    )
                    .line(line("messages"))
                    .at(format!("{at}.{field}"))
                    .hint(format!(
                        "declare them under `prompts.{name}.arguments` (declared: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    )),
                );
                continue;
            }
            let body = match field {
                "text" => PromptBody::Text(tpl),
                "resource" => PromptBody::Resource(tpl),
                _ => PromptBody::ResourceText(tpl),
            };
            messages.push(PromptMessage { role, body });
        }
        if diags.iter().filter(|d| d.is_error()).count() != before {
            continue;
        }
        let mut d = Map::new();
        d.insert("name".into(), json!(name));
        if let Some(t) = &ps.title {
            d.insert("title".into(), json!(t));
        }
        d.insert("description".into(), json!(ps.description));
        let args: Vec<Value> = ps
            .arguments
            .iter()
            .map(|(n, a)| {
                let mut m = Map::new();
                m.insert("name".into(), json!(n));
                if let Some(desc) = &a.description {
                    m.insert("description".into(), json!(desc));
                }
                m.insert("required".into(), json!(a.required));
                Value::Object(m)
            })
            .collect();
        if !args.is_empty() {
            d.insert("arguments".into(), Value::Array(args));
        }
        out.push(Prompt {
            name: name.clone(),
            // A prompts/get of a 2025 session has no stream to ask on: MRTR (2026-07-28) only.
            stateless_only: Kind::parse(&spec.binding) == Some(Kind::Autonym) || ask.is_some(),
            ask,
            descriptor: Value::Object(d),
            args: ps
                .arguments
                .iter()
                .map(|(n, a)| PromptArg {
                    name: n.clone(),
                    required: a.required,
                    values: a.values.clone(),
                })
                .collect(),
            messages,
        });
    }
    out
}

/// Everything `content` needs to know about its tool.
pub struct ContentCtx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub tool: &'a str,
    pub binding: Kind,
    /// The OpenRPC method has a result schema (an `outputSchema`).
    pub has_output: bool,
    pub defs: Option<&'a str>,
}

/// Compiles `tools.<name>.content`.
pub fn content(
    cx: &ContentCtx<'_>,
    spec: &ContentSpec,
    diags: &mut Vec<Diagnostic>,
) -> Option<ContentRule> {
    let name = cx.tool;
    let line = |field: &str| {
        locate_yaml(cx.text, &["tools", name, "content", field])
            .or_else(|| locate_yaml(cx.text, &["tools", name, "content"]))
    };
    let at = |field: &str| format!("tools.{name}.content.{field}");
    let err = |diags: &mut Vec<Diagnostic>, field: &str, msg: String, hint: &str| {
        diags.push(
            Diagnostic::error(cx.file, msg)
                .line(line(field))
                .at(at(field))
                .hint(hint),
        );
    };
    if cx.binding != Kind::Plain {
        err(
            diags,
            "kind",
            format!(
                "`content` needs `binding: plain` (this file is `{}`)",
                cx.binding.name()
            ),
            "usp and ucp results are JSON envelopes; serve media from a `plain` mapping file",
        );
        return None;
    }
    let allowed: &[&str] = match spec.kind.as_str() {
        "media" => &[],
        "embedded" => &["uri"],
        "link" => &["uri", "name"],
        "blocks" => &["blocks"],
        other => {
            err(
                diags,
                "kind",
                format!("unknown content kind `{other}`"),
                "use one of: media, embedded, link, blocks",
            );
            return None;
        }
    };
    let present = [
        ("uri", spec.uri.is_some()),
        ("name", spec.name.is_some()),
        ("blocks", spec.blocks.is_some()),
    ];
    for (field, set) in present {
        if set && !allowed.contains(&field) {
            err(
                diags,
                field,
                format!("`{field}` does not apply to `kind: {}`", spec.kind),
                "media: no fields; embedded: uri; link: uri, name; blocks: blocks",
            );
            return None;
        }
        if !set && allowed.contains(&field) && field != "name" {
            err(
                diags,
                "kind",
                format!("`kind: {}` needs `{field}`", spec.kind),
                if field == "uri" {
                    "e.g. `uri: \"test://reports/{{ args.id }}\"` (MiniJinja over args, body, location)"
                } else {
                    "a jq program yielding `[{type: \"text\", text: .caption}, ...]`"
                },
            );
            return None;
        }
    }
    if cx.has_output && spec.kind != "media" {
        err(
            diags,
            "kind",
            format!(
                "`kind: {}` answers without structuredContent, but `{name}` has an outputSchema (an OpenRPC `result`)",
                spec.kind
            ),
            "remove the method's `result` from the OpenRPC document, or use `kind: media`",
        );
        return None;
    }
    let template = |diags: &mut Vec<Diagnostic>, src: &str| match TextTemplate::compile(src) {
        Ok(t) => Some(t),
        Err(e) => {
            err(
                diags,
                "uri",
                format!("uri template: {e}"),
                "MiniJinja syntax, e.g. `test://items/{{ args.id }}`",
            );
            None
        }
    };
    match spec.kind.as_str() {
        "embedded" => template(diags, spec.uri.as_deref()?).map(ContentRule::Embedded),
        "link" => Some(ContentRule::Link {
            uri: template(diags, spec.uri.as_deref()?)?,
            name: spec.name.clone(),
        }),
        "blocks" => {
            let src = spec.blocks.as_deref()?;
            match Transform::compile_with(cx.defs, src) {
                Ok(t) => Some(ContentRule::Blocks(t)),
                Err(e) => {
                    let (line, place) = jq_error_place(cx.text, line("blocks"), src, e.offset);
                    let hint = place.unwrap_or_else(|| {
                        "jq syntax, e.g. `[{type: \"text\", text: .caption}]`".into()
                    });
                    diags.push(
                        Diagnostic::error(cx.file, format!("blocks: {}", e.message))
                            .line(line)
                            .at(at("blocks"))
                            .hint(hint),
                    );
                    None
                }
            }
        }
        _ => Some(ContentRule::Media),
    }
}
