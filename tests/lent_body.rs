//! A `body` that is a path into the arguments is sent as the client's own text of that value
//! (`translate::lent`), over real HTTP both ways: the backend receives the bytes the client
//! wrote, spacing and escapes included; text another JSON reader could read as another value
//! than the one validated (a repeated key, a number not in the writer's form) is written
//! again instead, as the value the input schema checked.

mod common;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const OPENRPC: &str = r#"{"openrpc":"1.3.2","info":{"title":"docs","version":"1"},"methods":[
 {"name":"put","paramStructure":"by-name","params":[
   {"name":"folder_id","required":true,"schema":{"type":"string"}},
   {"name":"document","required":true,"schema":{"type":"object","properties":{"n":{"type":"integer"}}}}],
  "result":{"name":"r","schema":{"type":"object"}}},
 {"name":"whole","paramStructure":"by-name","params":[
   {"name":"document","required":true,"schema":{"type":"object"}}],
  "result":{"name":"r","schema":{"type":"object"}}}]}"#;

/// portico on a plain mapping (`put`: body `.document`; `whole`: the whole arguments) in
/// front of a backend that keeps every request body it receives.
async fn setup() -> (portico::app::Running, Arc<Mutex<Vec<Bytes>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend = listener.local_addr().unwrap();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    common::serve_with(listener, move |req: Request<hyper::body::Incoming>| {
        let kept = kept.clone();
        async move {
            let body = req.into_body().collect().await.unwrap().to_bytes();
            kept.lock().unwrap().push(body);
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from_static(b"{\"ok\":true}")))
                .unwrap()
        }
    });
    let dir = std::env::temp_dir().join(format!("portico-lent-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("docs.openrpc.json"), OPENRPC).unwrap();
    let mapping = format!(
        "business: docs\nbinding: plain\nopenrpc: docs.openrpc.json\n\
         backend:\n  url: http://{backend}/v1\n  timeout: 5s\n\
         tools:\n  put:\n    http: PUT /folders/{{folder_id}}/documents\n    body: .document\n\
         \x20 whole:\n    http: POST /whole\n    body: .\n"
    );
    std::fs::write(dir.join("docs.yaml"), mapping).unwrap();
    let g = common::gateway(&[dir.join("docs.yaml")]).await;
    let _ = std::fs::remove_dir_all(&dir);
    (g, bodies)
}

/// `tools/call` of `tool` at 2026-07-28 with `arguments` as this exact text.
async fn call(g: &portico::app::Running, tool: &str, arguments: &str) -> Value {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": common::MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}
    });
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{meta}}}}}"#
    );
    let answer = reqwest::Client::new()
        .post(g.mcp_url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", common::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(text)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

fn last(bodies: &Mutex<Vec<Bytes>>) -> Bytes {
    bodies
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the backend was called")
}

#[tokio::test]
async fn the_backend_receives_the_clients_own_text_of_the_value() {
    let (g, bodies) = setup().await;
    let document = "{ \"title\" : \"caf\\u00e9 \\\"log\\\"\",\n  \"n\": 3, \"tags\" : [ 1, 2.5, -0.0, null, true ] }";
    let answer = call(
        &g,
        "put",
        &format!(r#"{{"folder_id":"F-1","document":{document}}}"#),
    )
    .await;
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"ok": true}),
        "{answer}"
    );
    assert_eq!(
        last(&bodies),
        document.as_bytes(),
        "lent as written by the client"
    );
    // The whole arguments are not lent: the call's are what the binding left of them.
    call(&g, "whole", &format!(r#"{{ "document" : {document} }}"#)).await;
    let sent: Value = serde_json::from_slice(&last(&bodies)).unwrap();
    let doc: Value = serde_json::from_str(document).unwrap();
    assert_eq!(sent, json!({"document": doc}));
    assert_ne!(
        last(&bodies),
        format!(r#"{{ "document" : {document} }}"#).as_bytes()
    );
}

#[tokio::test]
async fn text_another_reader_could_read_otherwise_is_written_as_the_value_checked() {
    let (g, bodies) = setup().await;
    // A repeated key: the input schema saw the last `n` (an integer); the first would not pass.
    call(&g, "put", r#"{"folder_id":"F","document":{"n":"x","n":2}}"#).await;
    assert_eq!(&last(&bodies)[..], br#"{"n":2}"#);
    // The path's own key repeated: the value checked is the last one.
    call(
        &g,
        "put",
        r#"{"folder_id":"F","document":{"n":"x"},"document":{"n":1}}"#,
    )
    .await;
    assert_eq!(&last(&bodies)[..], br#"{"n":1}"#);
    // Numbers in another form than the writer's: sent as the value read.
    call(
        &g,
        "put",
        r#"{"folder_id":"F","document":{"a":1E2,"b":0.10000000000000000001}}"#,
    )
    .await;
    assert_eq!(&last(&bodies)[..], br#"{"a":100.0,"b":0.1}"#);
    // Refused arguments reach no backend.
    let before = bodies.lock().unwrap().len();
    let refused = call(&g, "put", r#"{"folder_id":"F","document":{"n":"x"}}"#).await;
    assert!(
        refused["result"]["isError"] == true || refused["error"].is_object(),
        "{refused}"
    );
    assert_eq!(bodies.lock().unwrap().len(), before);
}
