//! Derived facade routes: pairs the methods of an OpenRPC document with the operations of an
//! OpenAPI document (by the `pair` sentence in method descriptions, or an explicit table); it
//! must never invent a route that one of the two documents does not have.

use super::route::{Body, QueryType, Route, RouteDoc, Segment, Template};
use crate::config::openrpc;
use crate::config::schema::{Bundler, Sources};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// Pairing of an OpenRPC document (the tools) and an OpenAPI document (the REST surface).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeriveSpec {
    /// OpenRPC document (relative to the mapping file).
    pub openrpc: String,
    /// OpenAPI 3.x document (relative to the mapping file).
    pub openapi: String,
    /// How an OpenRPC method names its REST operation: a sentence of its `description` with
    /// `{method}` and `{path}` placeholders, e.g. `"Maps to {method} {path}."`.
    #[serde(default)]
    pub pair: Option<String>,
    /// Explicit pairs, `"METHOD /path"` or an OpenAPI `operationId` -> OpenRPC method name;
    /// they win over `pair`.
    #[serde(default)]
    pub pairs: IndexMap<String, String>,
    /// Absolute JSON Schema `$id` (or prefix ending in `/`) -> local file or folder, for the
    /// OpenRPC's external references (as in business mappings).
    #[serde(default)]
    pub schema_ids: IndexMap<String, String>,
}

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

fn read_json(base: &Path, rel: &str) -> Result<(Value, PathBuf), String> {
    let path = base.join(rel);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let v = serde_json::from_str(&text)
        .map_err(|e| format!("`{}` is not JSON: {e}", path.display()))?;
    Ok((v, path))
}

/// Finds `{method}` and `{path}` in `description` as the `pattern` sentence places them.
pub fn paired_by_sentence(pattern: &str, description: &str) -> Option<(String, String)> {
    let (prefix, rest) = pattern.split_once("{method}")?;
    let (sep, suffix) = rest.split_once("{path}")?;
    let start = description.find(prefix)? + prefix.len();
    let after = &description[start..];
    let (method, tail) = after.split_once(sep)?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let token = tail.split_whitespace().next()?;
    let path = token.strip_suffix(suffix).unwrap_or(token);
    path.starts_with('/')
        .then(|| (method.to_ascii_uppercase(), path.to_string()))
}

/// Resolves a local `#/components/...` reference of the OpenAPI document.
fn deref<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) if r.starts_with("#/") => doc.pointer(&r[1..]).unwrap_or(v),
        _ => v,
    }
}

fn query_type(schema: Option<&Value>) -> QueryType {
    match schema.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("integer") => QueryType::Integer,
        Some("number") => QueryType::Number,
        Some("boolean") => QueryType::Boolean,
        _ => QueryType::String,
    }
}

/// What derivation produced: routes (with their schemas), the shared schema table
/// (`components.schemas` of the generated OpenAPI) and the files read.
pub struct Derived {
    pub routes: Vec<Route>,
    pub components: Map<String, Value>,
    pub files: Vec<PathBuf>,
}

/// The routes the two documents pair into.
pub fn routes(base: &Path, spec: &DeriveSpec) -> Result<Derived, Vec<String>> {
    let (rpc, rpc_path) = read_json(base, &spec.openrpc).map_err(|e| vec![e])?;
    let (api, api_path) = read_json(base, &spec.openapi).map_err(|e| vec![e])?;
    let methods: Vec<&Value> = rpc
        .get("methods")
        .and_then(Value::as_array)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    if methods.is_empty() {
        return Err(vec![format!(
            "`{}` has no OpenRPC `methods`",
            rpc_path.display()
        )]);
    }
    let Some(paths) = api.get("paths").and_then(Value::as_object) else {
        return Err(vec![format!(
            "`{}` has no OpenAPI `paths`",
            api_path.display()
        )]);
    };
    // (HTTP method, path) -> tool, in OpenRPC order.
    let mut pairs: IndexMap<(String, String), String> = IndexMap::new();
    let mut errors = Vec::new();
    if let Some(pattern) = &spec.pair {
        if !(pattern.contains("{method}") && pattern.contains("{path}")) {
            errors.push("`derive.pair` needs both `{method}` and `{path}`".to_string());
        } else {
            for m in &methods {
                let (Some(name), Some(d)) = (
                    m.get("name").and_then(Value::as_str),
                    m.get("description").and_then(Value::as_str),
                ) else {
                    continue;
                };
                if let Some(key) = paired_by_sentence(pattern, d) {
                    pairs.insert(key, name.to_string());
                }
            }
        }
    }
    for (key, tool) in &spec.pairs {
        if !methods
            .iter()
            .any(|m| m.get("name").and_then(Value::as_str) == Some(tool))
        {
            errors.push(format!(
                "`derive.pairs`: `{tool}` is not a method of the OpenRPC document"
            ));
            continue;
        }
        let found = match key.split_once(' ') {
            Some((m, p)) => Some((m.to_ascii_uppercase(), p.to_string())),
            None => paths.iter().find_map(|(p, item)| {
                METHODS.iter().find_map(|m| {
                    (item
                        .get(*m)
                        .and_then(|o| o.get("operationId"))
                        .and_then(Value::as_str)
                        == Some(key.as_str()))
                    .then(|| (m.to_ascii_uppercase(), p.clone()))
                })
            }),
        };
        match found {
            Some(k) => {
                pairs.retain(|_, t| t != tool);
                pairs.insert(k, tool.clone());
            }
            None => errors.push(format!(
                "`derive.pairs`: no OpenAPI operation `{key}` in `{}`",
                api_path.display()
            )),
        }
    }
    let mut out = Vec::new();
    for ((method, path), tool) in &pairs {
        let op = paths
            .get(path)
            .and_then(|item| item.get(method.to_ascii_lowercase()));
        let Some(op) = op else {
            errors.push(format!(
                "`{tool}` pairs with {method} {path}, which `{}` does not have",
                api_path.display()
            ));
            continue;
        };
        let template = match Template::parse(path) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{method} {path}: {e}"));
                continue;
            }
        };
        let status = op
            .get("responses")
            .and_then(Value::as_object)
            .and_then(|r| {
                r.keys()
                    .filter_map(|k| k.parse::<u16>().ok())
                    .filter(|s| (200..300).contains(s))
                    .min()
            })
            .unwrap_or(200);
        let mut query = IndexMap::new();
        let item_params = paths.get(path).and_then(|i| i.get("parameters"));
        for list in [item_params, op.get("parameters")].into_iter().flatten() {
            for p in list.as_array().into_iter().flatten() {
                let p = deref(&api, p);
                if p.get("in").and_then(Value::as_str) == Some("query")
                    && let Some(n) = p.get("name").and_then(Value::as_str)
                {
                    query.insert(n.to_string(), query_type(p.get("schema")));
                }
            }
        }
        let method = match http::Method::from_bytes(method.as_bytes()) {
            Ok(m) => m,
            Err(_) => {
                errors.push(format!("`{method}` is not an HTTP method"));
                continue;
            }
        };
        out.push(Route {
            method,
            template,
            tool: tool.clone(),
            status,
            body: Body::Flatten,
            query,
            doc: None,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut sources = Sources::default();
    for (id, local) in &spec.schema_ids {
        sources.map_id(id, base.join(local));
    }
    let components = schemas(&rpc_path, &mut sources, &mut out)?;
    let mut files = vec![rpc_path, api_path];
    files.extend(sources.local_files());
    Ok(Derived {
        routes: out,
        components,
        files,
    })
}

/// Rewrites `#/$defs/K` references to `#/components/schemas/K`.
fn to_components(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(k) = r.strip_prefix("#/$defs/")
            {
                *r = format!("#/components/schemas/{k}");
            }
            m.values_mut().for_each(to_components);
        }
        Value::Array(a) => a.iter_mut().for_each(to_components),
        _ => {}
    }
}

/// Bundles each route's request body (the method's by-name params that are neither path nor
/// query parameters, nor `_meta`) and its result (`structuredContent` when the result schema
/// describes the whole tool result) with one shared definitions table.
fn schemas(
    rpc_path: &Path,
    sources: &mut Sources,
    routes: &mut [Route],
) -> Result<Map<String, Value>, Vec<String>> {
    let doc = openrpc::load(rpc_path, sources)
        .map_err(|ds| ds.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    let mut bundler = Bundler::new(sources);
    let mut docs = Vec::new();
    for r in routes.iter() {
        let Some(m) = doc.method(&r.tool) else {
            docs.push(Value::Null);
            continue;
        };
        let in_path = |n: &str| {
            r.template
                .segments
                .iter()
                .any(|s| matches!(s, Segment::Param(p) if p == n))
        };
        let mut props = Map::new();
        let mut required = Vec::new();
        for p in &m.params {
            if p.name == "_meta" || in_path(&p.name) || r.query.contains_key(&p.name) {
                continue;
            }
            let mut schema = bundler.add(&p.schema, &doc.uri, &p.pointer);
            if let (Some(d), Value::Object(o)) = (&p.description, &mut schema) {
                o.entry("description")
                    .or_insert_with(|| Value::String(d.clone()));
            }
            props.insert(p.name.clone(), schema);
            if p.required {
                required.push(Value::String(p.name.clone()));
            }
        }
        let result =
            m.result.as_ref().map(
                |(s, ptr)| match s.pointer("/properties/structuredContent") {
                    Some(sc) => {
                        bundler.add(sc, &doc.uri, &format!("{ptr}/properties/structuredContent"))
                    }
                    None => bundler.add(s, &doc.uri, ptr),
                },
            );
        docs.push(json!({
            "summary": m.summary,
            "description": m.description,
            "body": { "type": "object", "properties": props, "required": required },
            "result": result.unwrap_or_else(|| json!({ "type": "object" })),
        }));
    }
    let (mut bundled, unresolved) = bundler.finish(json!({ "routes": docs }));
    if !unresolved.is_empty() {
        return Err(unresolved
            .into_iter()
            .map(|u| {
                format!(
                    "unresolvable `$ref: {}` in {} at {} ({}); map its id to a local file with `derive.schema_ids`",
                    u.reference, u.document, u.pointer, u.reason
                )
            })
            .collect());
    }
    to_components(&mut bundled);
    let components = match bundled.get_mut("$defs").map(Value::take) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Some(Value::Array(docs)) = bundled.get_mut("routes").map(Value::take) {
        for (r, d) in routes.iter_mut().zip(docs) {
            if d.is_null() {
                continue;
            }
            r.doc = Some(RouteDoc {
                summary: d.get("summary").and_then(Value::as_str).map(str::to_string),
                description: d
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                body: d.get("body").cloned().unwrap_or(Value::Null),
                result: d.get("result").cloned().unwrap_or(Value::Null),
            });
        }
    }
    Ok(components)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_names_method_and_path() {
        let p = "Maps to {method} {path}.";
        assert_eq!(
            paired_by_sentence(
                p,
                "Cancels. Maps to POST /bookings/{booking_id}/cancel. Privileged."
            ),
            Some(("POST".into(), "/bookings/{booking_id}/cancel".into()))
        );
        assert_eq!(paired_by_sentence(p, "Maps to nothing"), None);
        assert_eq!(paired_by_sentence(p, "No sentence here."), None);
    }
}
