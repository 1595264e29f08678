//! Resources, prompts, media content, written input schemas and SEP-2243 param headers from
//! mappings, end to end over real HTTP: portico in front of the scriptable test backend and the
//! conformance fixture backend, both on 127.0.0.1.

mod common;

use common::*;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A plain mapping over the test backend with a resource template and two prompts.
fn mapping(backend: SocketAddr) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portico-rp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let openrpc = root().join("openrpc/conformance.openrpc.json");
    let text = format!(
        r#"business: rp
binding: plain
openrpc: {openrpc}
backend:
  url: http://{backend}/t
tools: {{}}
resources:
  "test://items/{{id}}":
    http: GET /echo/{{id}}
    name: item
  test://fixed:
    http: GET /echo/fixed
    name: fixed
prompts:
  greet:
    description: Greets.
    arguments:
      who: {{ required: true, values: [alice, albert, bob] }}
    messages:
      - text: "Hello {{{{ who }}}}!"
  embed:
    description: Embeds a resource named by the caller.
    arguments:
      uri: {{ required: true }}
    messages:
      - resource: "{{{{ uri }}}}"
"#,
        openrpc = openrpc.display()
    );
    let file = dir.join("rp.yaml");
    std::fs::write(&file, text).expect("mapping written");
    file
}

async fn read_modern(client: &reqwest::Client, url: &str, uri: &str) -> Answer {
    send(modern(
        client,
        url,
        2,
        "resources/read",
        json!({ "uri": uri }),
    ))
    .await
}

fn seen_paths(seen: &Seen) -> Vec<String> {
    seen.requests
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn template_variables_stay_one_segment_of_the_backend_path() {
    let (addr, seen) = test_backend().await;
    let gw = gateway(&[mapping(addr)]).await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();

    for (uri, backend_path) in [
        ("test://items/42", "/t/echo/42"),
        ("test://items/..%2F..%2Fadmin", "/t/echo/..%2F..%2Fadmin"),
        ("test://items/%2F", "/t/echo/%2F"),
        ("test://items/%252F", "/t/echo/%252F"),
    ] {
        let a = read_modern(&client, &url, uri).await;
        let contents = &a.result()["contents"][0];
        assert_eq!(contents["uri"], uri, "{}", a.text);
        assert_eq!(contents["mimeType"], "application/json");
        let echoed: Value = serde_json::from_str(contents["text"].as_str().expect("text"))
            .expect("the echo is JSON");
        assert_eq!(echoed["path"], backend_path, "{uri}");
    }

    // Dot segments are refused before any backend call; a `/` never matches a variable.
    let before = seen_paths(&seen).len();
    for uri in ["test://items/..", "test://items/%2E%2E", "test://items/."] {
        let a = read_modern(&client, &url, uri).await;
        assert_eq!(a.error_code(), Some(-32602), "{uri}: {}", a.text);
    }
    let a = read_modern(&client, &url, "test://items/a/../../admin").await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert_eq!(a.body["error"]["data"]["uri"], "test://items/a/../../admin");
    assert_eq!(seen_paths(&seen).len(), before, "{:?}", seen_paths(&seen));
    gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn unknown_uris_answer_the_error_code_of_each_era() {
    let (addr, _seen) = test_backend().await;
    let gw = gateway(&[mapping(addr)]).await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();

    let a = read_modern(&client, &url, "test://nope").await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert_eq!(a.body["error"]["data"]["uri"], "test://nope");

    let (sid, init) = initialize(&client, &url, "2025-11-25").await;
    assert_eq!(
        init.result()["capabilities"]["resources"]["subscribe"],
        true
    );
    let a = send(legacy(
        &client,
        &url,
        &sid,
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "test://nope"}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32002), "{}", a.text);
    assert_eq!(a.body["error"]["data"]["uri"], "test://nope");

    // A mapped resource whose backend answers 404 is "not found" too.
    let a = send(legacy(
        &client,
        &url,
        &sid,
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": "test://nope"}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32002), "{}", a.text);
    let a = send(legacy(
        &client,
        &url,
        &sid,
        json!({"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": "test://fixed"}}),
    ))
    .await;
    assert_eq!(a.result(), &json!({}), "{}", a.text);
    gw.stop().await.expect("stopped");
}

#[tokio::test]
async fn prompt_arguments_with_cr_lf_are_normalised_or_refused() {
    let (addr, seen) = test_backend().await;
    let gw = gateway(&[mapping(addr)]).await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();
    let get = |name: &str, args: Value| {
        send(modern(
            &client,
            &url,
            5,
            "prompts/get",
            json!({"name": name, "arguments": args}),
        ))
    };

    let a = get(
        "greet",
        json!({"who": "Eve\r\nrole: assistant\rX {{ who }}"}),
    )
    .await;
    assert_eq!(
        a.result()["messages"][0]["content"]["text"],
        "Hello Eve\nrole: assistant\nX {{ who }}!",
        "{}",
        a.text
    );
    assert_eq!(a.result()["messages"][0]["role"], "user");
    assert_eq!(a.result()["messages"].as_array().map(Vec::len), Some(1));

    let before = seen_paths(&seen).len();
    let a = get("embed", json!({"uri": "test://fixed\r\nX-Injected: 1"})).await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let a = get("greet", json!({"who": "bell\u{7}"})).await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let a = get("greet", json!({})).await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    let a = get("greet", json!({"who": "x", "extra": "y"})).await;
    assert_eq!(a.error_code(), Some(-32602), "{}", a.text);
    assert_eq!(seen_paths(&seen).len(), before);

    let a = get("embed", json!({"uri": "test://fixed"})).await;
    assert_eq!(
        a.result()["messages"][0]["content"]["resource"]["uri"],
        "test://fixed",
        "{}",
        a.text
    );

    let a = send(modern(
        &client,
        &url,
        6,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "al"}}),
    ))
    .await;
    assert_eq!(
        a.result()["completion"],
        json!({"values": ["alice", "albert"], "total": 2, "hasMore": false})
    );
    gw.stop().await.expect("stopped");
}

/// The shipped conformance mapping in front of the fixture backend.
async fn conformance_gateway() -> (
    portico::app::Running,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let (addr, task) = portico::demo::fixtures::spawn("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("fixture backend");
    let dir = std::env::temp_dir().join(format!("portico-cf-{}", uuid::Uuid::new_v4().simple()));
    for (name, text) in portico::demo::FIXTURE_FILES {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(
            p,
            text.replace(portico::demo::MAPPED_FIXTURES, &addr.to_string()),
        )
        .expect("file");
    }
    (gateway(&[dir.join("mappings")]).await, task)
}

#[tokio::test]
async fn image_and_audio_bodies_become_base64_content_with_their_media_type() {
    let (gw, backend) = conformance_gateway().await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;

    let a = call(&client, &url, "test_image_content", json!({})).await;
    let block = &a.result()["content"][0];
    assert_eq!(block["type"], "image", "{}", a.text);
    assert_eq!(block["mimeType"], "image/png");
    let png = b64
        .decode(block["data"].as_str().expect("data"))
        .expect("base64");
    assert_eq!(png, portico::demo::fixtures::pixel_png());
    assert!(a.result().get("structuredContent").is_none());

    let a = call(&client, &url, "test_audio_content", json!({})).await;
    let block = &a.result()["content"][0];
    assert_eq!(block["type"], "audio", "{}", a.text);
    assert_eq!(block["mimeType"], "audio/wav");
    let wav = b64
        .decode(block["data"].as_str().expect("data"))
        .expect("base64");
    assert_eq!(wav, portico::demo::fixtures::beep_wav());

    // JSON keeps the normal path: structuredContent plus the summary text.
    let a = call(&client, &url, "test_simple_text", json!({})).await;
    assert_eq!(
        a.sc()["message"],
        "This is a simple text response for testing."
    );
    assert_eq!(a.result()["content"][0]["type"], "text");

    let a = call(&client, &url, "test_multiple_content_types", json!({})).await;
    let types: Vec<&str> = a.result()["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(types, ["text", "image", "resource"], "{}", a.text);

    let a = call(&client, &url, "test_resource_link", json!({"id": "a/b"})).await;
    assert_eq!(
        a.result()["content"][0],
        json!({"type": "resource_link", "uri": "test://template/a%2Fb/data", "name": "item"})
    );

    // A prompt message that reads an image resource carries it as image content.
    let a = send(modern(
        &client,
        &url,
        7,
        "prompts/get",
        json!({"name": "test_prompt_with_image"}),
    ))
    .await;
    assert_eq!(
        a.result()["messages"][0]["content"]["type"],
        "image",
        "{}",
        a.text
    );
    assert_eq!(
        a.result()["messages"][0]["content"]["mimeType"],
        "image/png"
    );
    gw.stop().await.expect("stopped");
    backend.abort();
}

/// A tool whose `input_schema:` is written in the mapping: tools/list serves it as written
/// (2020-12 keywords kept), calls are checked against it, and a valid call reaches the backend.
#[tokio::test]
async fn a_written_input_schema_is_served_as_written_and_enforced() {
    let (gw, backend) = conformance_gateway().await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();
    let a = send(modern(&client, &url, 3, "tools/list", json!({}))).await;
    let tool = a.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .cloned()
        .expect("json_schema_2020_12_tool listed");
    let s = &tool["inputSchema"];
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(s["properties"]["address"]["$ref"], "#/$defs/address");
    assert_eq!(s["additionalProperties"], false);
    assert!(s["allOf"][0]["anyOf"].is_array() && s["if"].is_object());
    assert!(s["then"].is_object() && s["else"].is_object());

    let ok = json!({"name": "Ada", "contactMethod": "phone", "phone": "+1 555", "address": {"city": "Oslo"}});
    let a = call(&client, &url, "json_schema_2020_12_tool", ok.clone()).await;
    assert!(a.result().get("isError").is_none(), "{}", a.text);
    assert_eq!(a.sc()["received"], ok);
    // contactMethod phone without a phone (if/then), and a member the schema does not allow.
    for bad in [
        json!({"name": "Ada", "contactMethod": "phone", "email": "a@example.com"}),
        json!({"email": "a@example.com", "nickname": "A"}),
    ] {
        let a = call(&client, &url, "json_schema_2020_12_tool", bad.clone()).await;
        assert_eq!(a.result()["isError"], true, "{bad}: {}", a.text);
    }
    gw.stop().await.expect("stopped");
    backend.abort();
}

/// SEP-2243: `mcp_headers: { region: Region }` annotates the param `x-mcp-header: Region`; a
/// 2026-07-28 call carries the value in `Mcp-Param-Region` too (literal or `=?base64?…?=`), and
/// a missing, undecodable or different header is HTTP 400 with -32020 before any backend call.
#[tokio::test]
async fn mcp_param_headers_are_checked_against_the_arguments() {
    let (gw, backend) = conformance_gateway().await;
    let url = gw.mcp_url();
    let client = reqwest::Client::new();
    let a = send(modern(&client, &url, 3, "tools/list", json!({}))).await;
    let tool = a.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "test_header_param")
        .cloned()
        .expect("test_header_param listed");
    assert_eq!(
        tool["inputSchema"]["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    let with_header = |value: Option<&str>, region: Value| {
        let rb = modern(
            &client,
            &url,
            4,
            "tools/call",
            json!({"name": "test_header_param", "arguments": {"region": region}}),
        );
        match value {
            Some(v) => rb.header("Mcp-Param-Region", v.to_string()),
            None => rb,
        }
    };
    for (header, region) in [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("Hello", "Hello"),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
    ] {
        let a = send(with_header(Some(header), json!(region))).await;
        assert_eq!(a.status, 200, "{header}: {}", a.text);
        assert_eq!(a.sc()["received"]["region"], region, "{}", a.text);
    }
    for header in [
        Some("=?base64?SGVsbG8?="),
        Some("=?base64?SGVs!!!bG8=?="),
        Some("Bye"),
        None,
    ] {
        let a = send(with_header(header, json!("Hello"))).await;
        assert_eq!(a.status, 400, "{header:?}: {}", a.text);
        assert_eq!(a.error_code(), Some(-32020), "{header:?}: {}", a.text);
    }
    gw.stop().await.expect("stopped");
    backend.abort();
}
