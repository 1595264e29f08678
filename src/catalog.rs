//! Resources and prompts from mappings, for every MCP edge: `resources/read` as one REST GET,
//! prompt rendering, argument completion, each as `auth::access` allows. It never touches
//! transport details, never reads a resource for a caller `auth::access` refuses, and a URI
//! variable only ever reaches the backend as one percent-encoded path segment (`translate::path`).

use crate::auth::access::Audience;
use crate::config::Gateway;
use crate::config::surface::{PromptBody, Resource};
use crate::translate::content;
use crate::translate::request::RestRequest;
use crate::upstream::resilience::call::BackendCall;
use crate::upstream::rest;
use http::{HeaderMap, HeaderValue, Method};
use serde_json::{Map, Value, json};

/// Why a resource, prompt or completion request cannot be answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// No mapped resource has this URI (the edge picks the era's code).
    #[error("Resource not found: {0}")]
    ResourceNotFound(String),
    /// The caller's params are wrong (-32602).
    #[error("{0}")]
    InvalidParams(String),
    /// The backend failed or answered something unusable (-32603).
    #[error("{0}")]
    Failed(String),
    /// The caller may not read it: the binding's authentication refusal.
    #[error("{}", .0.message)]
    Refused(crate::binding::RpcError),
    /// An autonym failure: JSON-RPC `-32602` (or `-32603` when `internal`) whose message is
    /// the registered title and whose `data` is the Problem Details object.
    #[error("{title}")]
    Problem {
        title: String,
        problem: Value,
        internal: bool,
    },
}

/// The autonym form of a failed resource read (B3.4): never the URI or a backend message.
fn autonym_problem(f: &crate::model::Failure) -> CatalogError {
    let code = crate::binding::autonym_code(f);
    let problem = crate::binding::autonym::problem(code, f.problem.as_deref(), None);
    let internal = code.form != crate::binding::autonym::Form::Params;
    let code = if internal {
        crate::binding::autonym::INTERNAL
    } else {
        code
    };
    CatalogError::Problem {
        title: code.title.to_string(),
        problem,
        internal,
    }
}

/// Largest number of completion values per answer (MCP caps it at 100).
const MAX_COMPLETIONS: usize = 100;

/// True when a 2025-era session may see `r`: autonym resources are 2026-07-28 only.
pub fn legacy_visible(r: &Resource) -> bool {
    r.business.binding.kind != crate::binding::Kind::Autonym
}

/// The `resources/list` entries (`legacy`: as a 2025-era session sees them; `audience`: only
/// those it may read, when some business has a policy).
pub fn list_resources(g: &Gateway, legacy: bool, audience: Option<&Audience>) -> Vec<Value> {
    g.resources
        .iter()
        .filter(|r| !legacy || legacy_visible(r))
        .filter(|r| audience.is_none_or(|a| a.lists(r)))
        .filter(|r| !r.template.is_template())
        .map(|r| r.descriptor.clone())
        .collect()
}

/// The `resources/templates/list` entries (as [`list_resources`] filters them).
pub fn list_templates(g: &Gateway, legacy: bool, audience: Option<&Audience>) -> Vec<Value> {
    g.resources
        .iter()
        .filter(|r| !legacy || legacy_visible(r))
        .filter(|r| audience.is_none_or(|a| a.lists(r)))
        .filter(|r| r.template.is_template())
        .map(|r| r.descriptor.clone())
        .collect()
}

/// The `prompts/list` entries.
pub fn list_prompts(g: &Gateway, legacy: bool) -> Vec<Value> {
    g.prompts
        .values()
        .filter(|p| !legacy || !p.stateless_only)
        .map(|p| p.descriptor.clone())
        .collect()
}

/// True when `uri` names a mapped resource (static first, then templates in file order).
pub fn find<'g>(g: &'g Gateway, uri: &str) -> Option<(&'g Resource, Map<String, Value>)> {
    let exact = g
        .resources
        .iter()
        .find(|r| !r.template.is_template() && r.uri == uri);
    if let Some(r) = exact {
        return Some((r, Map::new()));
    }
    g.resources
        .iter()
        .filter(|r| r.template.is_template())
        .find_map(|r| r.template.matches(uri).map(|vars| (&**r, vars)))
}

/// Why the current caller may not read `uri` of `res`: another principal's resource is not
/// found; a missing or bad credential gets the binding's refusal.
fn refused(res: &Resource, uri: &str, r: crate::auth::Refusal) -> CatalogError {
    if r.kind == crate::model::FailureKind::Forbidden {
        return CatalogError::ResourceNotFound(uri.into());
    }
    match crate::auth::render_for(&res.business, r) {
        crate::binding::Reply::Error(e) => CatalogError::Refused(e),
        _ => CatalogError::Failed(format!("resource `{uri}`: not authorized")),
    }
}

/// Whether the current caller may read `uri` (`auth::access`); `Ok` for a URI no mapped
/// resource has (the read then answers "not found").
pub async fn may_read(g: &Gateway, uri: &str) -> Result<(), CatalogError> {
    match find(g, uri) {
        Some((res, vars)) => crate::auth::access::resource(res, &vars)
            .await
            .map_err(|r| refused(res, uri, r)),
        None => Ok(()),
    }
}

/// `resources/read`: the `contents` array for `uri`, when the current caller may read it.
pub async fn read(g: &Gateway, uri: &str) -> Result<Vec<Value>, CatalogError> {
    let (res, vars) = find(g, uri).ok_or_else(|| CatalogError::ResourceNotFound(uri.into()))?;
    crate::auth::access::resource(res, &vars)
        .await
        .map_err(|r| refused(res, uri, r))?;
    let path = res
        .path
        .render(&Value::Object(vars))
        .map_err(|e| CatalogError::InvalidParams(format!("resource URI `{uri}`: {e}")))?;
    let backend = &res.business.backend;
    let mut headers = HeaderMap::new();
    for (k, v) in &backend.headers {
        headers.insert(k.clone(), v.clone());
    }
    headers.insert(http::header::ACCEPT, HeaderValue::from_static("*/*"));
    let req = RestRequest {
        method: Method::GET,
        url: format!("{}{}", backend.base, path),
        headers,
        body: None,
    };
    let autonym = res.business.binding.kind == crate::binding::Kind::Autonym;
    let call = BackendCall::new(req, &res.breaker, backend.timeout, false);
    let resp = match rest::call(backend, call).await {
        Ok(r) => r,
        Err(f) if autonym => return Err(autonym_problem(&f)),
        Err(f) => {
            return Err(CatalogError::Failed(format!(
                "resource `{uri}`: {}",
                f.message
            )));
        }
    };
    if autonym && !(200..=299).contains(&resp.status) {
        let f = crate::translate::response::failure_of(&resp);
        return Err(autonym_problem(&f));
    }
    match resp.status {
        200..=299 => {}
        404 | 410 => return Err(CatalogError::ResourceNotFound(uri.into())),
        s => {
            return Err(CatalogError::Failed(format!(
                "resource `{uri}`: the backend answered HTTP {s}"
            )));
        }
    }
    let media = res
        .mime_type
        .clone()
        .unwrap_or_else(|| content::media_type(&resp.headers));
    tracing::info!(business = %res.business.name, resource = %res.uri, "resources/read");
    Ok(vec![content::resource_contents(uri, &media, &resp.body)])
}

/// Prompt argument values: strings only; CR LF and lone CR become LF; other control characters
/// (tab and LF aside) are refused.
fn clean_argument(name: &str, v: &Value) -> Result<String, CatalogError> {
    let Value::String(s) = v else {
        return Err(CatalogError::InvalidParams(format!(
            "prompt argument `{name}` must be a string"
        )));
    };
    let s = s.replace("\r\n", "\n").replace('\r', "\n");
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(CatalogError::InvalidParams(format!(
            "prompt argument `{name}` contains control characters"
        )));
    }
    Ok(s)
}

/// `prompts/get`: renders the prompt's messages; `resource` messages read their resource.
pub async fn get_prompt(
    g: &Gateway,
    name: &str,
    arguments: Option<&Value>,
) -> Result<Value, CatalogError> {
    let prompt = g
        .prompts
        .get(name)
        .ok_or_else(|| CatalogError::InvalidParams(format!("Unknown prompt: {name}")))?;
    let given = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(CatalogError::InvalidParams(
                "prompt `arguments` must be an object of strings".into(),
            ));
        }
    };
    let mut ctx = Map::new();
    let asked = prompt.ask.as_ref().map(|a| a.filled()).unwrap_or_default();
    for (k, v) in &given {
        // Answers gathered by `ask:` (mcp::input): strings are cleaned like arguments.
        if asked.contains(k) {
            let v = match v {
                Value::String(_) => Value::String(clean_argument(k, v)?),
                other => other.clone(),
            };
            ctx.insert(k.clone(), v);
            continue;
        }
        if !prompt.args.iter().any(|a| &a.name == k) {
            return Err(CatalogError::InvalidParams(format!(
                "prompt `{name}` has no argument `{k}`"
            )));
        }
        ctx.insert(k.clone(), Value::String(clean_argument(k, v)?));
    }
    if let Some(missing) = prompt
        .args
        .iter()
        .find(|a| a.required && !ctx.contains_key(&a.name))
    {
        return Err(CatalogError::InvalidParams(format!(
            "prompt `{name}` needs argument `{}`",
            missing.name
        )));
    }
    let ctx = Value::Object(ctx);
    let render = |t: &content::TextTemplate| {
        t.render(&ctx)
            .map_err(|e| CatalogError::Failed(format!("prompt `{name}`: {e}")))
    };
    let mut messages = Vec::new();
    for m in &prompt.messages {
        let block = match &m.body {
            PromptBody::Text(t) => json!({ "type": "text", "text": render(t)? }),
            PromptBody::Resource(t) | PromptBody::ResourceText(t) => {
                let uri = render(t)?;
                if uri.chars().any(char::is_control) {
                    return Err(CatalogError::InvalidParams(format!(
                        "prompt `{name}`: a resource URI must be one line"
                    )));
                }
                let contents = read(g, &uri).await.map_err(|e| match e {
                    CatalogError::ResourceNotFound(u) => {
                        CatalogError::InvalidParams(format!("Resource not found: {u}"))
                    }
                    other => other,
                })?;
                let first = contents.into_iter().next().ok_or_else(|| {
                    CatalogError::Failed(format!("resource `{uri}` has no contents"))
                })?;
                match (&m.body, first.get("text")) {
                    (PromptBody::ResourceText(_), Some(text)) => {
                        json!({ "type": "text", "text": text })
                    }
                    (PromptBody::ResourceText(_), None) => {
                        return Err(CatalogError::Failed(format!(
                            "prompt `{name}`: resource `{uri}` is not text"
                        )));
                    }
                    _ => content::block_for_contents(&first),
                }
            }
        };
        messages.push(json!({ "role": m.role, "content": block }));
    }
    let mut out = Map::new();
    if let Some(d) = prompt.descriptor.get("description") {
        out.insert("description".into(), d.clone());
    }
    out.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(out))
}

/// `completion/complete`: a prompt argument's declared values starting with the typed prefix.
/// Resource-template arguments have no declared values: an empty list, for a template the
/// `audience` may list (others are unknown to it).
pub fn complete(
    g: &Gateway,
    params: Option<&Value>,
    audience: Option<&Audience>,
) -> Result<Value, CatalogError> {
    let p = params.ok_or_else(|| CatalogError::InvalidParams("completion needs params".into()))?;
    let arg = p.get("argument").and_then(Value::as_object);
    let (Some(arg_name), Some(prefix)) = (
        arg.and_then(|a| a.get("name")).and_then(Value::as_str),
        arg.and_then(|a| a.get("value")).and_then(Value::as_str),
    ) else {
        return Err(CatalogError::InvalidParams(
            "completion needs `argument.name` and `argument.value` strings".into(),
        ));
    };
    let r = p.get("ref");
    let values: Vec<&String> = match r.and_then(|r| r.get("type")).and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = r
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let prompt = g
                .prompts
                .get(name)
                .ok_or_else(|| CatalogError::InvalidParams(format!("Unknown prompt: {name}")))?;
            let a = prompt
                .args
                .iter()
                .find(|a| a.name == arg_name)
                .ok_or_else(|| {
                    CatalogError::InvalidParams(format!(
                        "prompt `{name}` has no argument `{arg_name}`"
                    ))
                })?;
            a.values.iter().filter(|v| v.starts_with(prefix)).collect()
        }
        Some("ref/resource") => {
            let uri = r
                .and_then(|r| r.get("uri"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if !g
                .resources
                .iter()
                .any(|x| x.uri == uri && audience.is_none_or(|a| a.lists(x)))
            {
                return Err(CatalogError::InvalidParams(format!(
                    "Unknown resource template: {uri}"
                )));
            }
            Vec::new()
        }
        _ => {
            return Err(CatalogError::InvalidParams(
                "completion `ref.type` must be `ref/prompt` or `ref/resource`".into(),
            ));
        }
    };
    let total = values.len();
    let page: Vec<&String> = values.into_iter().take(MAX_COMPLETIONS).collect();
    Ok(json!({ "completion": {
        "values": page,
        "total": total,
        "hasMore": total > MAX_COMPLETIONS,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_one_kind_of_newline_and_no_other_controls() {
        assert_eq!(
            clean_argument("a", &json!("x\r\ny\rz\n")).expect("clean"),
            "x\ny\nz\n"
        );
        assert!(clean_argument("a", &json!("bell\u{7}")).is_err());
        assert!(clean_argument("a", &json!(3)).is_err());
    }
}
