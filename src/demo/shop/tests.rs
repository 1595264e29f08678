//! The shop's rules without HTTP: stock, fulfillment, discounts, payment and idempotency.

use super::{ShopState, answer};
use http::{Method, StatusCode};
use serde_json::{Value, json};

fn post(s: &mut ShopState, path: &str, key: Option<&str>, body: Value) -> (StatusCode, Value) {
    answer(s, &Method::POST, &format!("/shop/v1{path}"), key, &body)
}

fn put(s: &mut ShopState, path: &str, body: Value) -> (StatusCode, Value) {
    answer(s, &Method::PUT, &format!("/shop/v1{path}"), None, &body)
}

fn ready(s: &mut ShopState) -> String {
    let (st, c) = post(
        s,
        "/checkout-sessions",
        None,
        json!({"buyer": {"email": "jane@example.com"},
               "line_items": [{"item": {"id": "item_123"}, "quantity": 2}],
               "fulfillment": {"methods": [{"type": "shipping", "destinations": [
                   {"street_address": "1 Main St", "address_country": "US"}]}]}}),
    );
    assert_eq!(st, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().unwrap().to_string();
    let (_, c) = put(
        s,
        &format!("/checkout-sessions/{id}"),
        json!({"fulfillment": {"methods": [{"groups": [{"selected_option_id": "express"}]}]},
               "discounts": {"codes": ["save10"]}}),
    );
    assert_eq!(c["status"], "ready_for_complete", "{c}");
    // 2 x 5000, 10% off, express shipping 1000.
    assert_eq!(
        c["totals"].as_array().unwrap().last().unwrap()["amount"],
        10000
    );
    id
}

fn pay(token: &str) -> Value {
    json!({"payment": {"instruments": [{"id": "pi_1", "handler_id": "card_handler", "type": "card",
        "selected": true, "credential": {"type": "token", "token": token}}]}})
}

#[test]
fn a_checkout_completes_into_an_order_and_then_is_final() {
    let mut s = ShopState::default();
    let id = ready(&mut s);
    let (st, c) = post(
        &mut s,
        &format!("/checkout-sessions/{id}/complete"),
        None,
        pay("tok_declined"),
    );
    assert_eq!(st, StatusCode::OK);
    assert_eq!(c["messages"][0]["code"], "payment_declined");
    assert_eq!(c["status"], "ready_for_complete");
    let (st, c) = post(
        &mut s,
        &format!("/checkout-sessions/{id}/complete"),
        None,
        pay("tok_ok"),
    );
    assert_eq!(
        (st, &c["status"]),
        (StatusCode::OK, &json!("completed")),
        "{c}"
    );
    let order = c["order"]["id"].as_str().unwrap();
    let (st, o) = answer(
        &mut s,
        &Method::GET,
        &format!("/shop/v1/orders/{order}"),
        None,
        &json!({}),
    );
    assert_eq!(st, StatusCode::OK);
    assert_eq!(o["checkout_id"], id.as_str());
    assert_eq!(o["line_items"][0]["quantity"]["total"], 2);
    let (st, e) = post(
        &mut s,
        &format!("/checkout-sessions/{id}/cancel"),
        None,
        json!({}),
    );
    assert_eq!(
        (st, &e["code"]),
        (StatusCode::CONFLICT, &json!("CHECKOUT_NOT_MODIFIABLE"))
    );
}

#[test]
fn sold_out_items_and_unknown_ids_are_business_failures() {
    let mut s = ShopState::default();
    let (st, e) = post(
        &mut s,
        "/checkout-sessions",
        None,
        json!({"line_items": [{"item": {"id": "item_789"}, "quantity": 1}]}),
    );
    assert_eq!(
        (st, &e["code"]),
        (StatusCode::BAD_REQUEST, &json!("OUT_OF_STOCK"))
    );
    let (st, c) = post(
        &mut s,
        "/checkout-sessions",
        None,
        json!({"line_items": [{"item": {"id": "item_123"}, "quantity": 1},
                              {"item": {"id": "item_789"}, "quantity": 1}]}),
    );
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(c["messages"][0]["path"], "$.line_items[1]");
    let (st, e) = answer(
        &mut s,
        &Method::GET,
        "/shop/v1/checkout-sessions/nope",
        None,
        &json!({}),
    );
    assert_eq!(
        (st, &e["code"]),
        (StatusCode::NOT_FOUND, &json!("NOT_FOUND"))
    );
}

#[test]
fn an_idempotency_key_replays_its_answer_and_conflicts_on_another_request() {
    let mut s = ShopState::default();
    let body = json!({"line_items": [{"item": {"id": "item_456"}, "quantity": 1}]});
    let first = post(&mut s, "/carts", Some("k1"), body.clone());
    let again = post(&mut s, "/carts", Some("k1"), body);
    assert_eq!(first, again, "the same cart, not a second one");
    let (st, e) = post(
        &mut s,
        "/carts",
        Some("k1"),
        json!({"line_items": [{"item": {"id": "item_123"}}]}),
    );
    assert_eq!(
        (st, &e["code"]),
        (StatusCode::CONFLICT, &json!("IDEMPOTENCY_CONFLICT"))
    );
}
