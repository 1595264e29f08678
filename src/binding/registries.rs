//! UCP registries (`capabilities`, `services`, `payment_handlers`) as a business declares them,
//! turned into the form results carry. It never adds an entry the business did not declare.

use serde_json::{Map, Value};

/// The response form of declared UCP registries: each capability entry keeps `version` and
/// `extends` (a response confirms what is active), each payment handler everything but its
/// discovery-only `spec` and `schema` (a response may carry its runtime config); services stay
/// in the profile.
pub fn response_form(declared: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    let entries = |v: &Value, keep: &dyn Fn(&str) -> bool| -> Value {
        let Value::Object(reg) = v else {
            return v.clone();
        };
        let mut m = Map::new();
        for (name, list) in reg {
            let items = match list {
                Value::Array(items) => items
                    .iter()
                    .map(|e| match e {
                        Value::Object(fields) => Value::Object(
                            fields
                                .iter()
                                .filter(|(k, _)| keep(k))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect(),
                        ),
                        other => other.clone(),
                    })
                    .collect(),
                other => return other.clone(),
            };
            m.insert(name.clone(), Value::Array(items));
        }
        Value::Object(m)
    };
    if let Some(c) = declared.get("capabilities") {
        out.insert(
            "capabilities".into(),
            entries(c, &|k| k == "version" || k == "extends"),
        );
    }
    if let Some(p) = declared.get("payment_handlers") {
        out.insert(
            "payment_handlers".into(),
            entries(p, &|k| k != "spec" && k != "schema"),
        );
    }
    out
}
