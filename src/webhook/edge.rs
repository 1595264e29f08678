//! What the MCP HTTP edge calls: reading a webhook request, booking-resource reads/subscriptions/listing, `subscriptions/listen`.
//! It holds no state of its own, never interprets tools, and serves a booking only as `auth::access` decides.

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

/// The business whose webhooks feed the booking resource `uri`.
fn webhook_business<'g>(gateway: &'g Gateway, uri: &str) -> Option<&'g crate::config::Business> {
    gateway.businesses.iter().map(|b| &**b).find(|b| {
        b.webhooks
            .as_ref()
            .is_some_and(|w| uri.starts_with(w.uri_prefix()))
    })
}

/// Whether the current request may read the booking resource `uri` of `business`
/// (`auth::access`): `Err` is the answer to give instead.
async fn may_read(
    business: &crate::config::Business,
    uri: &str,
    modern: bool,
) -> Result<(), Answer> {
    let id = business.webhooks.as_ref().and_then(|w| w.id_of(uri));
    let tier = crate::auth::policy::Tier::Scoped;
    match crate::auth::access::read(business, tier, id.as_deref()).await {
        Ok(()) => Ok(()),
        // Another principal's booking is answered as no booking at all.
        Err(r) if r.kind == crate::model::FailureKind::Forbidden => Err(Answer::Error {
            // The era's "resource not found" (-32002 before 2026-07-28).
            code: if modern {
                crate::mcp::jsonrpc::INVALID_PARAMS
            } else {
                -32002
            },
            message: format!("Resource not found: {uri}"),
            data: Some(json!({ "uri": uri })),
            http_status: None,
        }),
        Err(r) => Err(crate::auth::render_for(business, r).into()),
    }
}

/// Answers booking-resource requests of a 2025-era session; `None` leaves the request to the
/// MCP handler (mapped resources, or not found). A booking the caller may not read is
/// answered as not found (another principal's) or with the binding's authentication refusal.
pub async fn intercept(
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
    let business = webhook_business(gateway, uri)?;
    if method != "resources/unsubscribe"
        && let Err(refused) = may_read(business, uri, session.is_empty()).await
    {
        return Some(refused);
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

/// The `resources/list` entries of the booking resources the caller owns (with an event to
/// read), for every business whose webhooks feed booking resources and that has a policy.
pub async fn owned_resources(
    ingress: &Ingress,
    gateway: &Gateway,
    audience: &crate::auth::access::Audience,
) -> Vec<Value> {
    let mut out = Vec::new();
    for b in &gateway.businesses {
        let (Some(w), Some(_)) = (&b.webhooks, &b.auth) else {
            continue;
        };
        for id in audience.owned(&b.name).await {
            let uri = w.uri_for(&id);
            if ingress.hub.latest(&uri).is_some() {
                out.push(json!({"uri": uri, "name": format!("booking {id}"),
                                "mimeType": "application/json"}));
            }
        }
    }
    out
}

/// Frames another part of portico adds to a `subscriptions/listen` stream, and the filter entry
/// (key, honoured value) its acknowledgement reports for them.
pub type Also = (
    &'static str,
    Value,
    std::pin::Pin<Box<dyn futures_util::Stream<Item = bytes::Bytes> + Send + Sync>>,
);

/// Opens a 2026-07-28 `subscriptions/listen` stream for request `id`: the acknowledgement
/// frame (the honoured subset of the filter) followed by the hub's frames, each passed by
/// `gate` (the caller's `auth::access` audience), and those of `also` (task notifications,
/// vetted by their maker). Portico honours `resourceSubscriptions` for booking resources the
/// caller may read and the `dev.portico/webhooks` extension; it sends no list-changed
/// notifications, so those filter keys are left out of the ack.
pub async fn listen(
    ingress: &Ingress,
    gateway: &Gateway,
    id: &Value,
    params: Option<&Value>,
    gate: Option<std::sync::Arc<dyn super::hub::Gate>>,
    also: Option<Also>,
) -> Result<impl futures_util::Stream<Item = bytes::Bytes> + Send + Sync + 'static, Answer> {
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
    let mut uris = std::collections::HashSet::new();
    for u in filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some(b) = webhook_business(gateway, u)
            && may_read(b, u, true).await.is_ok()
        {
            uris.insert(u.to_string());
        }
    }
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
    let extra = match also {
        Some((key, value, frames)) => {
            honored.insert(key.into(), value);
            frames
        }
        None => Box::pin(futures_util::stream::empty()),
    };
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"notifications": honored, "_meta": meta}});
    let ack = bytes::Bytes::from(format!("event: message\ndata: {ack}\n\n"));
    let events = ingress.hub.listen_modern(meta, uris, webhooks, gate);
    Ok(futures_util::stream::once(async move { ack })
        .chain(futures_util::stream::select(events, extra)))
}
