//! The JSON Schema of mapping files (`portico schema`), derived from their serde structs, so that
//! editors validate and complete them. It only describes the format; it never loads a mapping.

use crate::config::mapping::MappingFile;
use crate::facade::config::FacadeFile;
use serde_json::{Value, json};

/// The `$id` the schema announces.
pub const ID: &str = "https://portico.dev/schemas/mapping.schema.json";

/// The schema: a business mapping, or a facade mapping (a file with a top-level `facade:` key).
pub fn schema() -> Value {
    let mut generator = schemars::SchemaGenerator::default();
    let business = generator.subschema_for::<MappingFile>();
    let facade = generator.subschema_for::<FacadeFile>();
    let defs: serde_json::Map<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": ID,
        "title": "portico mapping file",
        "description": "A business mapping (tools mapped to a REST backend) or, with a top-level `facade:` key, a REST facade mapping. Reference: docs/mapping.md.",
        "if": { "type": "object", "required": ["facade"] },
        "then": facade.to_value(),
        "else": business.to_value(),
        "$defs": defs,
    })
}

/// The schema as pretty JSON text, ending in a newline.
pub fn text() -> String {
    let mut s = serde_json::to_string_pretty(&schema()).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
