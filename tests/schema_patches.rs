//! Schema patches (`schema_patches:`): a mapping patches a param's or the result's schema by JSON
//! pointer without editing the published OpenRPC file, and the served `inputSchema` /
//! `outputSchema` and the validation of calls and answers follow the patch. Against a real HTTP
//! backend on 127.0.0.1 that echoes the checkout it is sent.

mod common;

use bytes::Bytes;
use common::{call, gateway, modern, send, serve_with};
use http_body_util::{BodyExt, Full};
use hyper::Response;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The published file: a note of at most 5 characters, a quantity of at least 1, and a result
/// without `total`.
const OPENRPC: &str = r##"{
  "openrpc": "1.3.2",
  "info": {"title": "notes", "version": "1.0.0"},
  "methods": [
    {"name": "set_note", "paramStructure": "by-name",
     "params": [{"name": "checkout", "required": true, "schema": {"$ref": "#/components/schemas/Checkout"}},
                {"name": "quantity", "required": false, "schema": {"type": "integer", "minimum": 1}}],
     "result": {"name": "checkout", "schema": {"$ref": "#/components/schemas/Checkout"}}}
  ],
  "components": {"schemas": {"Checkout": {
    "type": "object", "required": ["id"],
    "properties": {"id": {"type": "string"}, "note": {"type": "string", "maxLength": 5}}
  }}}
}"##;

const PATCHES: &str = r#"    schema_patches:
      - {target: params.checkout, op: replace, pointer: /properties/note/maxLength, value: 40}
      - {target: params.checkout, op: add, pointer: /required/-, value: note}
      - {target: params.quantity, op: remove, pointer: /minimum}
      - {target: result, op: add, pointer: /properties/total, value: {type: integer}}
      - {target: result, op: add, pointer: /required/-, value: total}
"#;

/// Echoes the request body's checkout; adds `total` unless the note starts `no-to`.
async fn backend() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    serve_with(
        listener,
        |req: hyper::Request<hyper::body::Incoming>| async move {
            let bytes = req.into_body().collect().await.unwrap().to_bytes();
            let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let mut checkout = sent["checkout"].clone();
            // The shop keeps 5 characters of a note, as its own (result) schema says.
            if let Some(note) = checkout["note"].as_str() {
                checkout["note"] = json!(note.chars().take(5).collect::<String>());
            }
            if checkout["note"] != "no-to" {
                checkout["total"] = json!(sent["quantity"].as_i64().unwrap_or(1) * 100);
            }
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(
                    json!({"checkout": checkout}).to_string(),
                )))
                .unwrap()
        },
    );
    addr
}

fn mapping(addr: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("portico-patches-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.openrpc.json"), OPENRPC).unwrap();
    let yaml = format!(
        "business: notes\nbinding: plain\nopenrpc: notes.openrpc.json\nbackend:\n  url: http://{addr}/api\n  timeout: 2s\ntools:\n  set_note:\n    http: POST /notes\n    result: .checkout\n{PATCHES}"
    );
    std::fs::write(dir.join("notes.yaml"), yaml).unwrap();
    dir.join("notes.yaml")
}

/// The node `schema` names at `pointer`, through one local `$ref`.
fn deref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => root.pointer(r.trim_start_matches('#')).unwrap(),
        None => node,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_schemas_and_validation_follow_the_patches() {
    let addr = backend().await;
    let file = mapping(&addr);
    let g = gateway(std::slice::from_ref(&file)).await;
    let url = g.mcp_url();
    let client = reqwest::Client::new();

    // tools/list: the patched schemas, the published file untouched.
    let listed = send(modern(&client, &url, 1, "tools/list", json!({}))).await;
    let tool = &listed.result()["tools"][0];
    let input = &tool["inputSchema"];
    let checkout = deref(input, &input["properties"]["checkout"]);
    assert_eq!(checkout["properties"]["note"]["maxLength"], 40, "{input}");
    assert_eq!(checkout["required"], json!(["id", "note"]), "{input}");
    assert_eq!(
        input["properties"]["quantity"],
        json!({"type": "integer"}),
        "{input}"
    );
    let output = &tool["outputSchema"];
    let result = deref(output, output);
    assert_eq!(result["required"], json!(["id", "total"]), "{output}");
    assert_eq!(result["properties"]["total"], json!({"type": "integer"}));
    // The output's own copy of `Checkout` keeps the published note limit.
    assert_eq!(result["properties"]["note"]["maxLength"], 5, "{output}");
    let published: Value = serde_json::from_str(
        &std::fs::read_to_string(file.with_file_name("notes.openrpc.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        published["components"]["schemas"]["Checkout"]["required"],
        json!(["id"])
    );

    // A note the published schema refuses (longer than 5) and a quantity of 0 pass the patched
    // one; the answer carries the `total` the patched result requires.
    let ok = call(
        &client,
        &url,
        "set_note",
        json!({"checkout": {"id": "c-1", "note": "leave at door"}, "quantity": 0}),
    )
    .await;
    assert_eq!(ok.result()["isError"], Value::Null, "{}", ok.text);
    assert_eq!(ok.sc(), &json!({"id": "c-1", "note": "leave", "total": 0}));

    // The patched `required`: a checkout without a note is refused.
    let missing = call(
        &client,
        &url,
        "set_note",
        json!({"checkout": {"id": "c-1"}}),
    )
    .await;
    assert_eq!(missing.result()["isError"], true, "{}", missing.text);
    assert!(
        missing
            .text
            .contains(r#"arguments/checkout: \"note\" is a required property"#),
        "{}",
        missing.text
    );

    // The patched result: an answer without `total` does not match the outputSchema.
    let bad = call(
        &client,
        &url,
        "set_note",
        json!({"checkout": {"id": "c-1", "note": "no-total"}}),
    )
    .await;
    assert_eq!(bad.result()["isError"], true, "{}", bad.text);
    assert!(
        bad.text.contains("does not fit the tool's output schema") && bad.text.contains("total"),
        "{}",
        bad.text
    );
    drop(g);
}
