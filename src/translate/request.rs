//! Builds the backend HTTP request for a call: path segments, query, headers, JSON body.
//! Arguments never choose the host, never add path segments and never inject header lines.

use super::transform::Vars3;
use crate::config::Tool;
use crate::model::{Call, Failure};
use http::{HeaderMap, HeaderValue, Method};
use serde_json::{Value, json};

/// A request ready for the REST client.
#[derive(Debug, Clone)]
pub struct RestRequest {
    pub method: Method,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Option<Vec<u8>>,
}

/// `$meta` for `tool`'s transforms: null when none of them names it (most mappings).
pub fn meta_for(tool: &Tool, call: &Call) -> Value {
    if tool.meta_used {
        meta_json(call)
    } else {
        Value::Null
    }
}

/// JSON view of the metadata for transforms (`$meta`).
pub fn meta_json(call: &Call) -> Value {
    json!({
        "profile": call.meta.profile,
        "idempotency_key": call.meta.idempotency_key,
        "correlation_id": call.meta.correlation_id,
    })
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Builds the request for `call` on `tool`'s backend.
pub fn build(tool: &Tool, call: &Call) -> Result<RestRequest, Failure> {
    let backend = &tool.business.backend;
    let binding = &tool.business.binding;
    let meta = meta_for(tool, call);
    let vars = Vars3 {
        args: &call.args,
        status: 0,
        meta: &meta,
    };
    // A request transform fails on arguments it cannot map (jq `error("...")` included):
    // that is the caller's input, so it is answered as invalid arguments.
    let transform_err = |e: super::transform::RunError| binding.invalid_arguments(e.message);

    let path = tool
        .path
        .render(&call.args)
        .map_err(|e| binding.invalid_arguments(e.to_string()))?;
    let mut url = format!("{}{}", backend.base, path);

    let mut pairs: Vec<(String, String)> = Vec::new();
    for (name, t) in &tool.query {
        match t.run(&call.args, vars).map_err(transform_err)? {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let s = scalar(&item).ok_or_else(|| {
                        binding.invalid_arguments(format!(
                            "query parameter `{name}` must be a list of scalars"
                        ))
                    })?;
                    pairs.push((name.clone(), s));
                }
            }
            Some(v) => {
                let s = scalar(&v).ok_or_else(|| {
                    binding.invalid_arguments(format!(
                        "query parameter `{name}` must be a scalar, not an object"
                    ))
                })?;
                pairs.push((name.clone(), s));
            }
        }
    }
    if !pairs.is_empty() {
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&pairs)
            .finish();
        url.push('?');
        url.push_str(&q);
    }

    let mut headers = HeaderMap::new();
    // Allowlisted client headers first: the mapping's own headers below win over them.
    if !backend.forward_headers.is_empty()
        && let Some(info) = crate::auth::transport::request()
    {
        for name in &backend.forward_headers {
            for v in info.headers.get_all(name) {
                // Visible ASCII, space and tab only: nothing a backend could read as a new line.
                if !v
                    .as_bytes()
                    .iter()
                    .all(|b| *b == b'\t' || (0x20..0x7f).contains(b))
                {
                    return Err(binding.invalid_arguments(format!(
                        "the `{name}` header holds characters portico does not forward"
                    )));
                }
                let mut v = v.clone();
                v.set_sensitive(matches!(
                    name.as_str(),
                    "authorization" | "x-api-key" | "cookie"
                ));
                headers.append(name.clone(), v);
            }
        }
    }
    for (k, v) in &backend.headers {
        headers.insert(k.clone(), v.clone());
    }
    for (k, v) in binding.headers(&call.meta)? {
        headers.insert(k, v);
    }
    for (name, t) in &tool.headers {
        let Some(v) = t.run(&call.args, vars).map_err(transform_err)? else {
            continue;
        };
        if v.is_null() {
            continue;
        }
        let s = scalar(&v).ok_or_else(|| {
            binding.invalid_arguments(format!("header `{name}` must be a scalar"))
        })?;
        let hv = HeaderValue::from_str(&s).map_err(|_| {
            binding.invalid_arguments(format!(
                "the value for header `{name}` contains CR, LF or other control characters"
            ))
        })?;
        headers.insert(name.clone(), hv);
    }

    let body = if matches!(tool.method, Method::POST | Method::PUT | Method::PATCH) {
        let value = match &tool.body {
            Some(t) => t
                .run(&call.args, vars)
                .map_err(transform_err)?
                .unwrap_or(Value::Null),
            None => {
                let mut v = call.args.clone();
                if let Value::Object(obj) = &mut v {
                    for var in tool.path.variables() {
                        obj.remove(var);
                    }
                }
                v
            }
        };
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Some(crate::json_text::to_vec(&value))
    } else {
        None
    };
    // Tools mapped by media type take any answer; the rest expect JSON.
    let accept = if tool.content.is_some() {
        "*/*"
    } else {
        "application/json"
    };
    headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
    Ok(RestRequest {
        method: tool.method.clone(),
        url,
        headers,
        body,
    })
}
