//! The demo shop's state and business rules: stock, carts, checkout sessions (fulfillment
//! options, discount codes, the card payment handler) and orders, answered in UCP's REST shapes.
//! Must never read the clock or randomness, or panic on request input.

use super::catalog::{CURRENCY, ENTRIES, Entry, find};
use http::StatusCode;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// A status and a JSON body.
pub type Reply = (StatusCode, Value);

/// The shop's public site, for links, permalinks and continue URLs.
pub const SITE: &str = "https://shop.portico-demo.example";

/// The payment handler the shop accepts: its id in the handler registry, and the card token that
/// the issuer always declines (any other token is approved).
pub const HANDLER_ID: &str = "card_handler";
pub const DECLINED_TOKEN: &str = "tok_declined";

/// A discount code and its percentage off the items.
const DISCOUNTS: &[(&str, &str, i64)] = &[("SAVE10", "10% off everything", 10)];

/// Fulfillment options: id, title, description, price.
const OPTIONS: &[(&str, &str, &str, i64)] = &[
    (
        "standard",
        "Standard Shipping",
        "Arrives in 5-7 business days",
        500,
    ),
    (
        "express",
        "Express Shipping",
        "Arrives in 2-3 business days",
        1000,
    ),
];

/// A business failure as the shop's REST API answers it: 4xx `{detail, code}`.
fn failure(status: StatusCode, code: &str, detail: impl Into<String>) -> Reply {
    (status, json!({ "code": code, "detail": detail.into() }))
}

fn not_found(kind: &str, id: &str) -> Reply {
    failure(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        format!("no {kind} with id {id}"),
    )
}

fn invalid(detail: impl Into<String>) -> Reply {
    failure(StatusCode::BAD_REQUEST, "INVALID_REQUEST", detail)
}

#[derive(Clone)]
struct Line {
    id: String,
    entry: &'static Entry,
    quantity: i64,
}

struct Cart {
    id: String,
    lines: Vec<Line>,
    buyer: Option<Value>,
    canceled: bool,
}

#[derive(Default)]
struct Fulfillment {
    destinations: Vec<Value>,
    selected_destination: Option<String>,
    selected_option: Option<String>,
}

struct Checkout {
    id: String,
    lines: Vec<Line>,
    buyer: Option<Value>,
    fulfillment: Fulfillment,
    codes: Vec<String>,
    /// `completed` or `canceled` once final.
    closed: Option<&'static str>,
    messages: Vec<Value>,
    order: Option<String>,
}

/// The whole shop.
pub struct Shop {
    stock: HashMap<&'static str, i64>,
    carts: HashMap<String, Cart>,
    checkouts: HashMap<String, Checkout>,
    orders: HashMap<String, Value>,
    next: u64,
}

impl Default for Shop {
    fn default() -> Self {
        Self::new()
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Reads `line_items` of a request: `[{item: {id}, quantity}]`.
fn requested_lines(body: &Value) -> Result<Vec<(&'static Entry, i64)>, Reply> {
    let Some(items) = body.get("line_items").and_then(Value::as_array) else {
        return Err(invalid("line_items is required"));
    };
    if items.is_empty() {
        return Err(invalid("line_items must not be empty"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, li)| {
            let id = li
                .get("item")
                .and_then(|it| str_at(it, "id"))
                .ok_or_else(|| invalid(format!("line_items[{i}].item.id is required")))?;
            let quantity = li.get("quantity").and_then(Value::as_i64).unwrap_or(1);
            if quantity < 1 {
                return Err(invalid(format!(
                    "line_items[{i}].quantity must be at least 1"
                )));
            }
            let entry = find(id).ok_or_else(|| {
                failure(
                    StatusCode::BAD_REQUEST,
                    "ITEM_UNAVAILABLE",
                    format!("the shop does not sell {id}"),
                )
            })?;
            Ok((entry, quantity))
        })
        .collect()
}

fn lines_from(req: Vec<(&'static Entry, i64)>) -> Vec<Line> {
    req.into_iter()
        .enumerate()
        .map(|(i, (entry, quantity))| Line {
            id: format!("li_{}", i + 1),
            entry,
            quantity,
        })
        .collect()
}

fn line_json(l: &Line) -> Value {
    let amount = l.entry.price * l.quantity;
    json!({
        "id": l.id,
        "item": { "id": l.entry.variant_id, "title": l.entry.title, "price": l.entry.price },
        "quantity": l.quantity,
        "totals": [{"type": "subtotal", "amount": amount}, {"type": "total", "amount": amount}],
    })
}

fn subtotal(lines: &[Line]) -> i64 {
    lines.iter().map(|l| l.entry.price * l.quantity).sum()
}

fn links() -> Value {
    json!([
        {"type": "privacy_policy", "url": format!("{SITE}/privacy")},
        {"type": "terms_of_service", "url": format!("{SITE}/terms")},
    ])
}

impl Checkout {
    fn status(&self) -> &'static str {
        if let Some(closed) = self.closed {
            return closed;
        }
        let f = &self.fulfillment;
        let email = self
            .buyer
            .as_ref()
            .is_some_and(|b| str_at(b, "email").is_some());
        if email && f.selected_destination.is_some() && f.selected_option.is_some() {
            "ready_for_complete"
        } else {
            "incomplete"
        }
    }

    fn shipping(&self) -> Option<i64> {
        let chosen = self.fulfillment.selected_option.as_deref()?;
        OPTIONS.iter().find(|o| o.0 == chosen).map(|o| o.3)
    }

    /// Applied discounts: `(code, title, amount off)`.
    fn applied(&self) -> Vec<(&'static str, &'static str, i64)> {
        let base = subtotal(&self.lines);
        DISCOUNTS
            .iter()
            .filter(|(code, ..)| self.codes.iter().any(|c| c.eq_ignore_ascii_case(code)))
            .map(|(code, title, pct)| (*code, *title, base * pct / 100))
            .filter(|d| d.2 > 0)
            .collect()
    }

    fn to_json(&self) -> Value {
        let sub = subtotal(&self.lines);
        let applied = self.applied();
        let off: i64 = applied.iter().map(|d| d.2).sum();
        let mut totals = vec![json!({"type": "subtotal", "amount": sub})];
        if off > 0 {
            totals.push(json!({"type": "discount", "display_text": "Discounts", "amount": -off}));
        }
        let shipping = self.shipping();
        if let Some(s) = shipping {
            totals.push(json!({"type": "fulfillment", "display_text": "Shipping", "amount": s}));
        }
        totals.push(json!({"type": "total", "amount": sub - off + shipping.unwrap_or(0)}));
        let ids: Vec<&str> = self.lines.iter().map(|l| l.id.as_str()).collect();
        let f = &self.fulfillment;
        let mut method = json!({
            "id": "shipping_1",
            "type": "shipping",
            "line_item_ids": ids,
            "destinations": f.destinations,
        });
        if let (Some(m), Some(d)) = (method.as_object_mut(), &f.selected_destination) {
            m.insert("selected_destination_id".into(), json!(d));
            let options: Vec<Value> = OPTIONS
                .iter()
                .map(|(id, title, description, amount)| {
                    json!({"id": id, "title": title, "description": {"plain": description},
                           "totals": [{"type": "total", "amount": amount}]})
                })
                .collect();
            let mut group = json!({"id": "package_1", "line_item_ids": ids, "options": options});
            if let (Some(o), Some(g)) = (&f.selected_option, group.as_object_mut()) {
                g.insert("selected_option_id".into(), json!(o));
            }
            m.insert("groups".into(), json!([group]));
        }
        let mut c = json!({
            "id": self.id,
            "status": self.status(),
            "currency": CURRENCY,
            "line_items": self.lines.iter().map(line_json).collect::<Vec<_>>(),
            "totals": totals,
            "fulfillment": { "methods": [method] },
            "discounts": {
                "codes": self.codes,
                "applied": applied.iter().map(|(code, title, amount)| {
                    json!({"code": code, "title": title, "amount": amount})
                }).collect::<Vec<_>>(),
            },
            "links": links(),
            "continue_url": format!("{SITE}/checkout-sessions/{}", self.id),
        });
        if let Some(m) = c.as_object_mut() {
            if let Some(b) = &self.buyer {
                m.insert("buyer".into(), b.clone());
            }
            if !self.messages.is_empty() {
                m.insert("messages".into(), json!(self.messages));
            }
            if let Some(o) = &self.order {
                m.insert(
                    "order".into(),
                    json!({"id": o, "permalink_url": format!("{SITE}/orders/{o}")}),
                );
            }
        }
        c
    }
}

impl Shop {
    /// The seeded shop: full stock, no carts, checkouts or orders.
    pub fn new() -> Self {
        Self {
            stock: ENTRIES.iter().map(|e| (e.variant_id, e.stock)).collect(),
            carts: HashMap::new(),
            checkouts: HashMap::new(),
            orders: HashMap::new(),
            next: 0,
        }
    }

    fn mint(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}_{:04}", self.next)
    }

    fn in_stock(&self, e: &Entry, quantity: i64) -> bool {
        self.stock.get(e.variant_id).copied().unwrap_or(0) >= quantity
    }

    /// `POST /catalog/search`: `{query?, pagination?}`.
    pub fn search(&self, body: &Value) -> Reply {
        let query = str_at(body, "query").unwrap_or("");
        let products: Vec<Value> = ENTRIES
            .iter()
            .filter(|e| super::catalog::matches(e, query))
            .map(|e| super::catalog::product(e, self.in_stock(e, 1), None))
            .collect();
        (StatusCode::OK, json!({ "products": products }))
    }

    /// `POST /catalog/lookup`: `{ids}`; unknown ids get a warning message.
    pub fn lookup(&self, body: &Value) -> Reply {
        let Some(ids) = body.get("ids").and_then(Value::as_array) else {
            return invalid("ids is required");
        };
        let mut products = Vec::new();
        let mut messages = Vec::new();
        for id in ids.iter().filter_map(Value::as_str) {
            match find(id) {
                Some(e) => {
                    let how = if e.variant_id == id {
                        "exact"
                    } else {
                        "featured"
                    };
                    let inputs = json!([{ "id": id, "match": how }]);
                    products.push(super::catalog::product(
                        e,
                        self.in_stock(e, 1),
                        Some(inputs),
                    ));
                }
                None => messages.push(json!({"type": "warning", "code": "not_found",
                                             "content": format!("no product or variant {id}")})),
            }
        }
        let mut out = json!({ "products": products });
        if let (false, Some(m)) = (messages.is_empty(), out.as_object_mut()) {
            m.insert("messages".into(), json!(messages));
        }
        (StatusCode::OK, out)
    }

    /// `POST /catalog/product`: `{id}`.
    pub fn product(&self, body: &Value) -> Reply {
        let Some(id) = str_at(body, "id") else {
            return invalid("id is required");
        };
        match find(id) {
            Some(e) => (
                StatusCode::OK,
                json!({ "product": super::catalog::product(e, self.in_stock(e, 1), None) }),
            ),
            None => not_found("product", id),
        }
    }

    fn cart_json(c: &Cart) -> Value {
        let sub = subtotal(&c.lines);
        let mut v = json!({
            "id": c.id,
            "currency": CURRENCY,
            "line_items": c.lines.iter().map(line_json).collect::<Vec<_>>(),
            "totals": [{"type": "subtotal", "amount": sub}, {"type": "total", "amount": sub}],
            "continue_url": format!("{SITE}/carts/{}", c.id),
        });
        if let (Some(b), Some(m)) = (&c.buyer, v.as_object_mut()) {
            m.insert("buyer".into(), b.clone());
        }
        v
    }

    /// `POST /carts`.
    pub fn create_cart(&mut self, body: &Value) -> Reply {
        let lines = match requested_lines(body) {
            Ok(l) => lines_from(l),
            Err(r) => return r,
        };
        let id = self.mint("cart");
        let cart = Cart {
            id: id.clone(),
            lines,
            buyer: body.get("buyer").cloned(),
            canceled: false,
        };
        let v = Self::cart_json(&cart);
        self.carts.insert(id, cart);
        (StatusCode::CREATED, v)
    }

    /// `GET /carts/{id}`.
    pub fn get_cart(&self, id: &str) -> Reply {
        match self.carts.get(id).filter(|c| !c.canceled) {
            Some(c) => (StatusCode::OK, Self::cart_json(c)),
            None => not_found("cart", id),
        }
    }

    /// `PUT /carts/{id}`: full replacement of the line items.
    pub fn update_cart(&mut self, id: &str, body: &Value) -> Reply {
        let lines = match requested_lines(body) {
            Ok(l) => lines_from(l),
            Err(r) => return r,
        };
        match self.carts.get_mut(id).filter(|c| !c.canceled) {
            Some(c) => {
                c.lines = lines;
                if let Some(b) = body.get("buyer") {
                    c.buyer = Some(b.clone());
                }
                (StatusCode::OK, Self::cart_json(c))
            }
            None => not_found("cart", id),
        }
    }

    /// `POST /carts/{id}/cancel`.
    pub fn cancel_cart(&mut self, id: &str) -> Reply {
        match self.carts.get_mut(id).filter(|c| !c.canceled) {
            Some(c) => {
                let v = Self::cart_json(c);
                c.canceled = true;
                (StatusCode::OK, v)
            }
            None => not_found("cart", id),
        }
    }

    /// `POST /checkout-sessions`: from `line_items` or a `cart_id`. Every item sold out: 400
    /// `OUT_OF_STOCK`, no checkout; some sold out: the checkout with an error message per line.
    pub fn create_checkout(&mut self, body: &Value) -> Reply {
        let (lines, cart_buyer) = match str_at(body, "cart_id") {
            Some(cid) => match self.carts.get(cid).filter(|c| !c.canceled) {
                Some(c) => (c.lines.clone(), c.buyer.clone()),
                None => return not_found("cart", cid),
            },
            None => match requested_lines(body) {
                Ok(l) => (lines_from(l), None),
                Err(r) => return r,
            },
        };
        let sold_out: Vec<usize> = (0..lines.len())
            .filter(|&i| !self.in_stock(lines[i].entry, lines[i].quantity))
            .collect();
        if sold_out.len() == lines.len() {
            return failure(
                StatusCode::BAD_REQUEST,
                "OUT_OF_STOCK",
                "All requested items are currently out of stock",
            );
        }
        let messages = sold_out
            .iter()
            .map(|&i| {
                json!({"type": "error", "code": "out_of_stock", "path": format!("$.line_items[{i}]"),
                       "content": format!("{} is out of stock", lines[i].entry.title),
                       "severity": "recoverable"})
            })
            .collect();
        let id = self.mint("chk");
        let mut c = Checkout {
            id: id.clone(),
            lines,
            buyer: body.get("buyer").cloned().or(cart_buyer),
            fulfillment: Fulfillment::default(),
            codes: Vec::new(),
            closed: None,
            messages,
            order: None,
        };
        apply_fulfillment(&mut c, body);
        apply_discounts(&mut c, body);
        let v = c.to_json();
        self.checkouts.insert(id, c);
        (StatusCode::CREATED, v)
    }

    /// `GET /checkout-sessions/{id}`.
    pub fn get_checkout(&self, id: &str) -> Reply {
        match self.checkouts.get(id) {
            Some(c) => (StatusCode::OK, c.to_json()),
            None => not_found("checkout session", id),
        }
    }

    fn open_checkout(&mut self, id: &str) -> Result<&mut Checkout, Reply> {
        let Some(c) = self.checkouts.get_mut(id) else {
            return Err(not_found("checkout session", id));
        };
        if let Some(closed) = c.closed {
            return Err(failure(
                StatusCode::CONFLICT,
                "CHECKOUT_NOT_MODIFIABLE",
                format!("checkout session {id} is {closed}"),
            ));
        }
        Ok(c)
    }

    /// `PUT /checkout-sessions/{id}`: line items, buyer, fulfillment and discount codes.
    pub fn update_checkout(&mut self, id: &str, body: &Value) -> Reply {
        let lines = match body.get("line_items") {
            Some(_) => match requested_lines(body) {
                Ok(l) => Some(lines_from(l)),
                Err(r) => return r,
            },
            None => None,
        };
        let c = match self.open_checkout(id) {
            Ok(c) => c,
            Err(r) => return r,
        };
        if let Some(lines) = lines {
            c.lines = lines;
        }
        if let Some(b) = body.get("buyer") {
            c.buyer = Some(b.clone());
        }
        c.messages.clear();
        apply_fulfillment(c, body);
        apply_discounts(c, body);
        (StatusCode::OK, c.to_json())
    }

    /// `POST /checkout-sessions/{id}/complete`: `{payment: {instruments: [...]}}` with one
    /// selected instrument of [`HANDLER_ID`]. A declined card: 200 and the checkout, unchanged,
    /// with a `payment_declined` error message.
    pub fn complete_checkout(&mut self, id: &str, body: &Value) -> Reply {
        let instrument = body
            .get("payment")
            .and_then(|p| p.get("instruments"))
            .and_then(Value::as_array)
            .and_then(|list| {
                list.iter()
                    .find(|i| i.get("selected") == Some(&Value::Bool(true)))
                    .or_else(|| list.first())
            })
            .cloned();
        let stock = self.stock.clone();
        let c = match self.open_checkout(id) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let Some(instrument) = instrument else {
            return invalid("payment.instruments needs one instrument");
        };
        if str_at(&instrument, "handler_id") != Some(HANDLER_ID) {
            return invalid(format!(
                "the shop accepts instruments of handler {HANDLER_ID} only"
            ));
        }
        if c.status() != "ready_for_complete" {
            c.messages = vec![json!({"type": "error", "code": "missing",
                "content": "buyer email, shipping destination and option are needed first",
                "severity": "recoverable"})];
            return (StatusCode::OK, c.to_json());
        }
        if let Some(line) = c
            .lines
            .iter()
            .find(|l| stock.get(l.entry.variant_id).copied().unwrap_or(0) < l.quantity)
        {
            return failure(
                StatusCode::BAD_REQUEST,
                "OUT_OF_STOCK",
                format!("{} sold out before the order was placed", line.entry.title),
            );
        }
        let token = instrument
            .get("credential")
            .and_then(|cr| str_at(cr, "token"))
            .unwrap_or("");
        if token == DECLINED_TOKEN {
            c.messages = vec![json!({"type": "error", "code": "payment_declined",
                "content": "The card issuer declined the payment.", "severity": "recoverable"})];
            return (StatusCode::OK, c.to_json());
        }
        c.messages.clear();
        c.closed = Some("completed");
        let snapshot = c.to_json();
        let lines = c.lines.clone();
        let destination = c
            .fulfillment
            .selected_destination
            .as_ref()
            .and_then(|d| {
                c.fulfillment
                    .destinations
                    .iter()
                    .find(|x| str_at(x, "id") == Some(d))
            })
            .cloned();
        let checkout_id = c.id.clone();
        for l in &lines {
            if let Some(n) = self.stock.get_mut(l.entry.variant_id) {
                *n -= l.quantity;
            }
        }
        let order_id = self.mint("ord");
        let order = order_json(&order_id, &checkout_id, &lines, &snapshot, destination);
        self.orders.insert(order_id.clone(), order);
        let Some(c) = self.checkouts.get_mut(id) else {
            return not_found("checkout session", id);
        };
        c.order = Some(order_id);
        (StatusCode::OK, c.to_json())
    }

    /// `POST /checkout-sessions/{id}/cancel`.
    pub fn cancel_checkout(&mut self, id: &str) -> Reply {
        match self.open_checkout(id) {
            Ok(c) => {
                c.closed = Some("canceled");
                c.messages.clear();
                (StatusCode::OK, c.to_json())
            }
            Err(r) => r,
        }
    }

    /// `GET /orders/{id}`.
    pub fn get_order(&self, id: &str) -> Reply {
        match self.orders.get(id) {
            Some(o) => (StatusCode::OK, o.clone()),
            None => not_found("order", id),
        }
    }
}

fn order_json(
    id: &str,
    checkout_id: &str,
    lines: &[Line],
    checkout: &Value,
    destination: Option<Value>,
) -> Value {
    let items: Vec<Value> = lines
        .iter()
        .map(|l| {
            let mut v = line_json(l);
            if let Some(m) = v.as_object_mut() {
                m.insert(
                    "quantity".into(),
                    json!({"original": l.quantity, "total": l.quantity, "fulfilled": 0}),
                );
                m.insert("status".into(), json!("processing"));
            }
            v
        })
        .collect();
    let mut expectation = json!({
        "id": "exp_1",
        "line_items": lines.iter().map(|l| json!({"id": l.id, "quantity": l.quantity})).collect::<Vec<_>>(),
        "method_type": "shipping",
    });
    if let (Some(mut d), Some(m)) = (destination, expectation.as_object_mut()) {
        if let Some(dm) = d.as_object_mut() {
            dm.remove("id");
            dm.remove("type");
        }
        m.insert("destination".into(), d);
    }
    json!({
        "id": id,
        "checkout_id": checkout_id,
        "permalink_url": format!("{SITE}/orders/{id}"),
        "line_items": items,
        "fulfillment": { "expectations": [expectation], "events": [] },
        "currency": CURRENCY,
        "totals": checkout.get("totals").cloned().unwrap_or(Value::Null),
    })
}

/// Applies `fulfillment.methods[0]` of a request: destinations (each given an id when it has
/// none), the selected destination, and the selected option of its first group.
fn apply_fulfillment(c: &mut Checkout, body: &Value) {
    let Some(method) = body
        .pointer("/fulfillment/methods/0")
        .and_then(Value::as_object)
    else {
        return;
    };
    if let Some(dests) = method.get("destinations").and_then(Value::as_array) {
        c.fulfillment.destinations = dests
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let mut d: Map<String, Value> = d.as_object()?.clone();
                d.entry("id")
                    .or_insert_with(|| json!(format!("dest_{}", i + 1)));
                d.insert("type".into(), json!("shipping_address"));
                Some(Value::Object(d))
            })
            .collect();
        c.fulfillment.selected_destination = None;
        c.fulfillment.selected_option = None;
        if c.fulfillment.destinations.len() == 1 {
            c.fulfillment.selected_destination =
                str_at(&c.fulfillment.destinations[0], "id").map(str::to_string);
        }
    }
    if let Some(d) = method
        .get("selected_destination_id")
        .and_then(Value::as_str)
    {
        if c.fulfillment
            .destinations
            .iter()
            .any(|x| str_at(x, "id") == Some(d))
        {
            c.fulfillment.selected_destination = Some(d.to_string());
        } else {
            c.messages.push(json!({"type": "error", "code": "invalid", "path": "$.fulfillment.methods[0].selected_destination_id",
                "content": format!("no destination {d}"), "severity": "recoverable"}));
        }
    }
    let option = method
        .get("groups")
        .and_then(|g| g.get(0))
        .and_then(|g| g.get("selected_option_id"))
        .and_then(Value::as_str);
    if let Some(o) = option {
        if c.fulfillment.selected_destination.is_some() && OPTIONS.iter().any(|x| x.0 == o) {
            c.fulfillment.selected_option = Some(o.to_string());
        } else {
            c.messages.push(json!({"type": "error", "code": "invalid", "path": "$.fulfillment.methods[0].groups[0].selected_option_id",
                "content": format!("no fulfillment option {o} for this destination"), "severity": "recoverable"}));
        }
    }
}

/// Applies `discounts.codes` (replacing earlier codes); an unknown code gets a warning.
fn apply_discounts(c: &mut Checkout, body: &Value) {
    let Some(codes) = body.pointer("/discounts/codes").and_then(Value::as_array) else {
        return;
    };
    c.codes = codes
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    for code in &c.codes {
        if !DISCOUNTS.iter().any(|d| d.0.eq_ignore_ascii_case(code)) {
            c.messages
                .push(json!({"type": "warning", "code": "discount_code_invalid",
                "content": format!("the code {code} is not valid")}));
        }
    }
}
