//! The demo shop's catalog: its fixed products and the UCP product, variant and search shapes.
//! Must never hold checkout state or read the clock.

use serde_json::{Value, json};

/// The shop's currency (ISO 4217).
pub const CURRENCY: &str = "USD";

/// One sellable variant of the catalog (one product has one variant here).
pub struct Entry {
    pub product_id: &'static str,
    pub variant_id: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// Minor units of [`CURRENCY`].
    pub price: i64,
    /// Units in stock when the shop starts.
    pub stock: i64,
}

/// The seeded catalog.
pub const ENTRIES: &[Entry] = &[
    Entry {
        product_id: "prod_jeans",
        variant_id: "item_123",
        title: "Blue Jeans",
        description: "Straight-cut denim jeans.",
        price: 5000,
        stock: 20,
    },
    Entry {
        product_id: "prod_tee",
        variant_id: "item_456",
        title: "Harbour T-Shirt",
        description: "A cotton T-shirt with a harbour print.",
        price: 2000,
        stock: 20,
    },
    Entry {
        product_id: "prod_scarf",
        variant_id: "item_789",
        title: "Sea Scarf",
        description: "A wool scarf in sea blue. Sold out.",
        price: 3500,
        stock: 0,
    },
];

/// The entry a product or variant id names.
pub fn find(id: &str) -> Option<&'static Entry> {
    ENTRIES
        .iter()
        .find(|e| e.product_id == id || e.variant_id == id)
}

fn price(amount: i64) -> Value {
    json!({ "amount": amount, "currency": CURRENCY })
}

/// The variant's UCP shape; `inputs` (lookup correlation) when given.
fn variant(e: &Entry, available: bool, inputs: Option<Value>) -> Value {
    let mut v = json!({
        "id": e.variant_id,
        "title": e.title,
        "description": { "plain": e.description },
        "price": price(e.price),
        "availability": {
            "available": available,
            "status": if available { "in_stock" } else { "out_of_stock" },
        },
    });
    if let (Some(inputs), Some(m)) = (inputs, v.as_object_mut()) {
        m.insert("inputs".into(), inputs);
    }
    v
}

/// The product's UCP shape with its variants.
pub fn product(e: &Entry, available: bool, inputs: Option<Value>) -> Value {
    json!({
        "id": e.product_id,
        "title": e.title,
        "description": { "plain": e.description },
        "price_range": { "min": price(e.price), "max": price(e.price) },
        "variants": [variant(e, available, inputs)],
    })
}

/// Whether `e` matches a free-text query (case-insensitive, any word of title or description).
pub fn matches(e: &Entry, query: &str) -> bool {
    let text = format!("{} {}", e.title, e.description).to_lowercase();
    query
        .split_whitespace()
        .all(|w| text.contains(&w.to_lowercase()))
}
