//! The demo backend's request handler: reads a request, checks the key, dispatches it, writes JSON.
//! Must never hold business rules of the spa or hotel, or panic on request input.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::answer::Reply;
use super::routes::{ROUTES, Resolved, RouteId, resolve};
use super::spa::{get_treatment, list_treatments};
use super::state::State;
use crate::demo::shop::{self, ShopState};

pub(super) const API_KEY: &str = "demo-key";
pub(super) const MAX_BODY: usize = 1024 * 1024;

pub(super) fn lock(shared: &Mutex<State>) -> MutexGuard<'_, State> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn has_key(headers: &HeaderMap) -> bool {
    headers
        .get("x-api-key")
        .is_some_and(|v| v.as_bytes() == API_KEY.as_bytes())
}

pub(super) async fn handle(
    shared: Arc<Mutex<State>>,
    shop: Arc<Mutex<ShopState>>,
    outbox: Option<mpsc::Sender<Value>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path().starts_with(shop::PREFIX) {
        return Ok(handle_shop(&shop, req).await);
    }
    Ok(handle_inner(&shared, outbox.as_ref(), req).await)
}

/// A request to the UCP shop (`crate::demo::shop`): its JSON body and `Idempotency-Key`.
async fn handle_shop(shop: &Mutex<ShopState>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match read_json_object(req).await {
        Ok(obj) => Value::Object(obj),
        Err(resp) => return resp,
    };
    let (status, value) = {
        let mut state = shop.lock().unwrap_or_else(|p| p.into_inner());
        shop::answer(&mut state, &method, &path, key.as_deref(), &body)
    };
    json_response(status, &value)
}

/// The legacy webhook kind a successful appointment change emits.
pub(super) fn webhook_kind(id: RouteId, status: StatusCode) -> Option<&'static str> {
    match (id, status) {
        (RouteId::CreateAppointment, StatusCode::CREATED) => Some("appointment.booked"),
        (RouteId::CancelAppointment, StatusCode::OK) => Some("appointment.cancelled"),
        (RouteId::MoveAppointment, StatusCode::OK) => Some("appointment.moved"),
        _ => None,
    }
}

pub(super) async fn handle_inner(
    shared: &Mutex<State>,
    outbox: Option<&mpsc::Sender<Value>>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (idx, params) = match resolve(req.method(), req.uri().path()) {
        Resolved::Found(idx, params) => (idx, params),
        Resolved::NoRoute => {
            return json_response(StatusCode::NOT_FOUND, &json!({"error": "NO_ROUTE"}));
        }
        Resolved::WrongMethod(allowed) => {
            let mut resp =
                json_response(StatusCode::METHOD_NOT_ALLOWED, &json!({"error": "METHOD"}));
            if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
                resp.headers_mut().insert(header::ALLOW, v);
            }
            return resp;
        }
    };
    let def = &ROUTES[idx];
    if def.counted {
        lock(shared).calls[idx] += 1;
    }
    if def.keyed && !has_key(req.headers()) {
        return json_response(StatusCode::UNAUTHORIZED, &json!({"error": "NO_AUTH"}));
    }
    let query = req.uri().query().map(str::to_owned);

    let body = if def.method == Method::POST || def.method == Method::PUT {
        match read_json_object(req).await {
            Ok(obj) => obj,
            Err(resp) => return resp,
        }
    } else {
        Map::new()
    };

    let (status, value) = {
        let mut state = lock(shared);
        let reply = dispatch(&mut state, def.id, &params, query.as_deref(), &body);
        // Emitted under the state lock, so events leave in the order the changes happened.
        if let (Some(tx), Some(kind), Some(a)) = (
            outbox,
            webhook_kind(def.id, reply.0),
            reply.1.get("appointment"),
        ) {
            let _ = tx.try_send(json!({"kind": kind, "appointment": a}));
        }
        reply
    };
    let mut resp = json_response(status, &value);
    // An accepted long-running operation (a bookings report): where to poll it.
    if status == StatusCode::ACCEPTED
        && let Some(url) = value
            .pointer("/report/links/status")
            .and_then(Value::as_str)
        && let Ok(v) = HeaderValue::from_str(url)
    {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

pub(super) fn too_big() -> Response<Full<Bytes>> {
    json_response(StatusCode::PAYLOAD_TOO_LARGE, &json!({"error": "TOO_BIG"}))
}

pub(super) fn bad_json(detail: &str) -> Response<Full<Bytes>> {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": "BAD_JSON", "detail": detail}),
    )
}

/// Reads a body of at most [`MAX_BODY`] bytes as a JSON object; an empty body counts as `{}`.
pub(super) async fn read_json_object(
    req: Request<Incoming>,
) -> Result<Map<String, Value>, Response<Full<Bytes>>> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_big());
    }
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_big()),
        Err(e) => return Err(bad_json(&format!("could not read the body: {e}"))),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(bad_json("the body must be a JSON object")),
        Err(e) => Err(bad_json(&e.to_string())),
    }
}

pub(super) fn dispatch(
    state: &mut State,
    id: RouteId,
    params: &[String],
    query: Option<&str>,
    body: &Map<String, Value>,
) -> Reply {
    let param = params.first().map(String::as_str).unwrap_or_default();
    match id {
        RouteId::Treatments => list_treatments(query),
        RouteId::Treatment => get_treatment(param),
        RouteId::Openings => state.openings(param, query),
        RouteId::CreateAppointment => state.create_appointment(body),
        RouteId::GetAppointment => state.get_appointment(param),
        RouteId::CancelAppointment => state.cancel_appointment(param, body),
        RouteId::MoveAppointment => state.move_appointment(param, body),
        RouteId::CreateReport => state.create_report(body),
        RouteId::GetReport => state.read_report(param),
        RouteId::CancelReport => state.cancel_report(param),
        RouteId::CreateQuote => state.create_quote(body),
        RouteId::GetQuote => state.get_quote(param),
        RouteId::PutQuote => state.put_quote(param, body),
        RouteId::ConfirmQuote => state.confirm_quote(param, body),
        RouteId::VoidQuote => state.void_quote(param),
        RouteId::Concierge => state.concierge(body),
        RouteId::Stats => state.stats(),
        RouteId::Reset => {
            *state = State::seeded();
            (StatusCode::OK, json!({"ok": true}))
        }
    }
}
