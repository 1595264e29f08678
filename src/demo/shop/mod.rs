//! The demo UCP shop: a small REST backend in the shapes of UCP's shopping `rest.openapi.json`
//! (catalog search/lookup/product, carts, checkout sessions, orders) under `/shop/v1`, with
//! backend idempotency keys. Served by the demo backend; must never depend on the gateway,
//! read the clock or randomness, or panic on request input.

pub mod catalog;
pub mod store;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use store::{Reply, Shop};

/// The path prefix the shop answers under.
pub const PREFIX: &str = "/shop/v1";

/// The shop and the answers it gave per idempotency key.
#[derive(Default)]
pub struct ShopState {
    shop: Shop,
    /// Idempotency key -> (method, path and body it was first used with; the answer).
    keys: HashMap<String, (String, Reply)>,
}

/// Operations that change state, and so honour `Idempotency-Key`.
fn is_write(method: &Method) -> bool {
    *method == Method::POST || *method == Method::PUT
}

/// Answers one request under [`PREFIX`] (`path` is the whole path). A write with an
/// `Idempotency-Key` seen before gets the first answer again when method, path and body are the
/// same, and 409 `IDEMPOTENCY_CONFLICT` otherwise.
pub fn answer(
    state: &mut ShopState,
    method: &Method,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> Reply {
    let key = key.filter(|_| is_write(method));
    let fingerprint = format!("{method} {path} {body}");
    if let Some((first, reply)) = key.and_then(|k| state.keys.get(k)) {
        return if *first == fingerprint {
            reply.clone()
        } else {
            (
                StatusCode::CONFLICT,
                json!({"code": "IDEMPOTENCY_CONFLICT",
                       "detail": "the idempotency key was used with another request"}),
            )
        };
    }
    let reply = route(&mut state.shop, method, path, body);
    // Keep an answer the client may rely on (success or a business failure), never a 5xx.
    if let (Some(k), false) = (key, reply.0.is_server_error()) {
        state
            .keys
            .insert(k.to_string(), (fingerprint, reply.clone()));
    }
    reply
}

fn route(shop: &mut Shop, method: &Method, path: &str, body: &Value) -> Reply {
    let rest = path.strip_prefix(PREFIX).unwrap_or("");
    let segs: Vec<&str> = rest.split('/').skip(1).collect();
    let m = method.as_str();
    match (m, segs.as_slice()) {
        ("POST", ["catalog", "search"]) => shop.search(body),
        ("POST", ["catalog", "lookup"]) => shop.lookup(body),
        ("POST", ["catalog", "product"]) => shop.product(body),
        ("POST", ["carts"]) => shop.create_cart(body),
        ("GET", ["carts", id]) => shop.get_cart(id),
        ("PUT", ["carts", id]) => shop.update_cart(id, body),
        ("POST", ["carts", id, "cancel"]) => shop.cancel_cart(id),
        ("POST", ["checkout-sessions"]) => shop.create_checkout(body),
        ("GET", ["checkout-sessions", id]) => shop.get_checkout(id),
        ("PUT", ["checkout-sessions", id]) => shop.update_checkout(id, body),
        ("POST", ["checkout-sessions", id, "complete"]) => shop.complete_checkout(id, body),
        ("POST", ["checkout-sessions", id, "cancel"]) => shop.cancel_checkout(id),
        ("GET", ["orders", id]) => shop.get_order(id),
        _ => (
            StatusCode::NOT_FOUND,
            json!({"code": "NO_ROUTE", "detail": format!("no route {m} {path}")}),
        ),
    }
}

#[cfg(test)]
mod tests;
