//! What the MCP HTTP edge calls: reading a webhook request, booking-resource reads/subscriptions, `subscriptions/listen`.
//! It holds no state of its own and never interprets tools.

use super::ingress::{Ingress, Reply};
use super::sig::RequestParts;
use crate::config::Gateway;
use crate::mcp::handler::Answer;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

/// Reads the request (raw bytes, at most `max_body`) and hands it to the ingress.
pub async fn receive(
    ingress: &Ingress,
    gateway: &Gateway,
    business: &str,
    req: Request<Incoming>,
    max_body: usize,
) -> Reply {
    let refuse = |status: StatusCode, detail: &str| Reply {
        status,
        body: json!({"title": "webhook refused", "status": status.as_u16(), "detail": detail}),
    };
    if req.method() != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "webhooks are POSTed");
    }
    if business.is_empty() || business.contains('/') {
        return refuse(StatusCode::NOT_FOUND, "use POST /webhooks/{business}");
    }
    let (parts, body) = req.into_parts();
    if let Err(reply) = ingress.precheck(gateway, business, &parts.headers) {
        return reply;
    }
    let read = Limited::new(body, max_body).collect();
    let bytes = match crate::ops::limits::within_body_deadline(&parts.extensions, read).await {
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(_)) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body too large or unreadable",
            );
        }
        Err(timed_out) => return refuse(StatusCode::REQUEST_TIMEOUT, &timed_out.to_string()),
    };
    let authority = parts
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| parts.uri.authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let rp = RequestParts {
        method: parts.method.as_str(),
        authority: &authority,
        path: parts.uri.path(),
        query: parts.uri.query(),
        headers: &parts.headers,
    };
    ingress.receive(gateway, business, &rp, &bytes).await
}

/// True when `uri` is a booking resource some business's webhooks feed.
fn is_webhook_resource(gateway: &Gateway, uri: &str) -> bool {
    gateway
        .businesses
        .iter()
        .filter_map(|b| b.webhooks.as_ref())
        .any(|w| uri.starts_with(w.uri_prefix()))
}

/// Answers booking-resource requests of a 2025-era session; `None` leaves the request to the
/// MCP handler (mapped resources, or not found).
pub fn intercept(
    ingress: &Ingress,
    gateway: &Gateway,
    session: &str,
    method: &str,
    params: Option<&Value>,
) -> Option<Answer> {
    if !matches!(
        method,
        "resources/read" | "resources/subscribe" | "resources/unsubscribe"
    ) {
        return None;
    }
    let uri = params?.get("uri")?.as_str()?;
    if !is_webhook_resource(gateway, uri) {
        return None;
    }
    match method {
        "resources/read" => {
            let latest = ingress.hub.latest(uri)?;
            Some(Answer::Result(json!({"contents": [{
                "uri": uri,
                "mimeType": "application/json",
                "text": latest.to_string(),
            }]})))
        }
        _ => {
            ingress
                .hub
                .set_subscription(session, uri, method == "resources/subscribe");
            Some(Answer::Result(json!({})))
        }
    }
}

/// The extension key of a `subscriptions/listen` filter that asks for the webhook
/// notifications themselves (`true`, or `{"business": [...], "events": [...]}`).
pub const LISTEN_WEBHOOKS: &str = "dev.portico/webhooks";

/// Opens a 2026-07-28 `subscriptions/listen` stream for request `id`: the acknowledgement
/// frame (the honoured subset of the filter) followed by the hub's frames. Portico honours
/// `resourceSubscriptions` for booking resources and the `dev.portico/webhooks` extension; it
/// sends no list-changed notifications, so those filter keys are left out of the ack.
pub fn listen(
    ingress: &Ingress,
    gateway: &Gateway,
    id: &Value,
    params: Option<&Value>,
) -> Result<impl futures_util::Stream<Item = bytes::Bytes> + Send + 'static, Answer> {
    use futures_util::StreamExt;
    let invalid = |m: &str| Answer::Error {
        code: crate::mcp::jsonrpc::INVALID_PARAMS,
        message: m.to_string(),
        data: None,
        http_status: None,
    };
    if id.is_null() {
        return Err(invalid("subscriptions/listen needs a request id"));
    }
    let filter = params
        .and_then(|p| p.get("notifications"))
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("subscriptions/listen needs a `notifications` object"))?;
    let uris: std::collections::HashSet<String> = filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|u| is_webhook_resource(gateway, u))
        .map(str::to_string)
        .collect();
    let any_webhooks = gateway.businesses.iter().any(|b| b.webhooks.is_some());
    let webhooks = match filter.get(LISTEN_WEBHOOKS) {
        Some(Value::Bool(true)) if any_webhooks => Some(super::hub::Filter::default()),
        Some(Value::Object(o)) if any_webhooks => {
            let list = |k: &str| -> Vec<String> {
                o.get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            };
            Some(super::hub::Filter {
                businesses: list("business"),
                events: list("events"),
            })
        }
        _ => None,
    };
    let meta = json!({ "io.modelcontextprotocol/subscriptionId": id });
    let mut honored = serde_json::Map::new();
    if !uris.is_empty() {
        let mut sorted: Vec<&String> = uris.iter().collect();
        sorted.sort();
        honored.insert("resourceSubscriptions".into(), json!(sorted));
    }
    if webhooks.is_some()
        && let Some(v) = filter.get(LISTEN_WEBHOOKS)
    {
        honored.insert(LISTEN_WEBHOOKS.into(), v.clone());
    }
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"notifications": honored, "_meta": meta}});
    let ack = bytes::Bytes::from(format!("event: message\ndata: {ack}\n\n"));
    let events = ingress.hub.listen_modern(meta, uris, webhooks);
    Ok(futures_util::stream::once(async move { ack }).chain(events))
}
