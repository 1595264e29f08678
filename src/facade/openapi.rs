//! The OpenAPI 3.1 document of a facade (`GET /openapi.json`, `portico openapi`): its routes,
//! their parameters, the request and response schemas from the OpenRPC (derived routes), the
//! binding's metadata headers and Problem Details; it must never describe a route the facade does not serve.

use super::route::{Body, QueryType, Route, Segment};
use crate::binding::{Binding, Kind};
use serde_json::{Map, Value, json};

fn problem_schema() -> Value {
    json!({
        "type": "object",
        "description": "RFC 9457 Problem Details.",
        "required": ["type", "title", "status"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "code": {"type": "string", "description": "The binding's error code, when one is named."}
        }
    })
}

fn header(name: &str, description: &str) -> Value {
    header_with(name, description, json!({"type": "string", "minLength": 1}))
}

fn header_with(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "header", "required": false, "schema": schema, "description": description})
}

/// The agent header's documented form: an RFC 8941 dictionary whose `profile` is an https URL
/// string (the facade also accepts other members, and http on loopback).
fn agent_header(name: &str, target: &str) -> Value {
    header_with(
        name,
        &format!("RFC 8941 dictionary, `profile=\"https://…\"` -> {target}."),
        json!({"type": "string", "pattern": r#"^profile="https://[a-z0-9]+(\.[a-z0-9]+)*(/[A-Za-z0-9._~-]+)*"$"#}),
    )
}

/// The request headers the binding turns into metadata.
fn headers(binding: &Binding) -> Vec<Value> {
    match binding.kind {
        Kind::Usp => vec![
            agent_header("USP-Agent", "`_meta.usp.profile`"),
            header("Idempotency-Key", "-> `_meta.usp.idempotency_key`."),
            header("USP-Correlation-Id", "-> `_meta.usp.correlation_id`."),
            header("If-Match", "-> `_meta.usp.if_match`."),
        ],
        Kind::Ucp => vec![
            agent_header("UCP-Agent", "`meta[\"ucp-agent\"].profile`"),
            header("Idempotency-Key", "-> `meta[\"idempotency-key\"]`."),
        ],
        Kind::Plain | Kind::Autonym => Vec::new(),
    }
}

fn query_schema(t: QueryType) -> Value {
    match t {
        QueryType::String => json!({"type": "string"}),
        QueryType::Integer => json!({"type": "integer"}),
        QueryType::Number => json!({"type": "number"}),
        QueryType::Boolean => json!({"type": "boolean"}),
    }
}

fn operation(binding: &Binding, r: &Route, tool_error_status: u16) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), Value::String(r.tool.clone()));
    let summary = r
        .doc
        .as_ref()
        .and_then(|d| d.summary.clone())
        .unwrap_or_else(|| format!("Calls the MCP tool `{}`", r.tool));
    op.insert("summary".into(), Value::String(summary));
    if let Some(d) = r.doc.as_ref().and_then(|d| d.description.clone()) {
        op.insert("description".into(), Value::String(d));
    }
    let mut params: Vec<Value> = r
        .template
        .segments
        .iter()
        .filter_map(|s| match s {
            Segment::Param(p) => Some(json!({"name": p, "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}})),
            Segment::Literal(_) => None,
        })
        .collect();
    params.extend(r.query.iter().map(
        |(n, t)| json!({"name": n, "in": "query", "required": false, "schema": query_schema(*t)}),
    ));
    params.extend(headers(binding));
    if !params.is_empty() {
        op.insert("parameters".into(), Value::Array(params));
    }
    let body = match (&r.doc, &r.body) {
        (Some(d), Body::Flatten) => Some(d.body.clone()),
        (None, Body::Flatten) => Some(json!({"type": "object"})),
        (_, Body::Argument(_)) => Some(json!({})),
    };
    let has_body = !matches!(r.method, http::Method::GET | http::Method::HEAD);
    if let (Some(schema), true) = (body, has_body) {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        op.insert(
            "requestBody".into(),
            json!({"required": required, "content": {"application/json": {"schema": schema}}}),
        );
    }
    let mut responses = Map::new();
    let result = r
        .doc
        .as_ref()
        .map(|d| d.result.clone())
        .unwrap_or_else(|| json!({}));
    // Business outcomes are 200 answers too: the binding's own schema for them.
    let business = binding.business_schema();
    let success = if r.status == 204 {
        json!({"description": "Done (no body)."})
    } else {
        let schema = match (&business, r.status) {
            (Some(b), 200) => json!({"anyOf": [result, b]}),
            _ => result,
        };
        json!({"description": "The tool's structured result.", "content": {"application/json": {"schema": schema}}})
    };
    responses.insert(r.status.to_string(), success);
    if let (Some(b), false) = (business, r.status == 200) {
        responses.insert(
            "200".into(),
            json!({"description": "A business outcome: processed, with `messages[]`.", "content": {"application/json": {"schema": b}}}),
        );
    }
    let problem = |d: &str| json!({"description": d, "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}}});
    responses.insert(
        "4XX".into(),
        problem("The request was refused (by portico or by the tool's protocol error table)."),
    );
    responses.insert(
        "5XX".into(),
        problem(&format!(
            "The upstream MCP server failed, was unreachable (502/503) or slow (504); a tool error is {tool_error_status}."
        )),
    );
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

/// The OpenAPI 3.1 document for `routes`; `components` holds the schemas the routes refer to.
pub fn document(
    name: &str,
    binding: &Binding,
    routes: &[Route],
    mut components: Map<String, Value>,
    tool_error_status: u16,
) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for r in routes {
        let item = paths
            .entry(r.template.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(item) = item {
            item.insert(
                r.method.as_str().to_ascii_lowercase(),
                operation(binding, r, tool_error_status),
            );
        }
    }
    components.insert("ProblemDetails".into(), problem_schema());
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": format!("{name} (portico REST facade)"),
            "version": env!("CARGO_PKG_VERSION"),
            "description": "REST routes that portico turns into MCP tool calls on an upstream MCP server."
        },
        "paths": paths,
        "components": { "schemas": components }
    })
}
