//! docs/tutorial.md's OpenAPI path, run as written: the demo spa's OpenAPI document
//! (`examples/seaside-spa/openapi.yaml`) -> `portico init` -> `check` -> a dry run -> served ->
//! called by an MCP client (rmcp) against the real demo backend on 127.0.0.1, writes included.
//! It prints the time from `init` to the first successful MCP call.

mod common;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_portico");
const KEY_VAR: &str = "SEASIDE_SPA_X_API_KEY";

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tutorial_api_goes_from_its_openapi_document_to_mcp_calls() {
    // SAFETY: set once, before this test binary's only test starts any other thread that reads it.
    unsafe { std::env::set_var(KEY_VAR, "demo-key") };
    let (addr, _task) = portico::demo::backend::spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("portico-tutorial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let started = Instant::now();

    // 1. init
    let o = Command::new(BIN)
        .current_dir(root)
        .args([
            "init",
            "--openapi",
            "examples/seaside-spa/openapi.yaml",
            "--backend",
        ])
        .arg(format!("http://{addr}/spa/v1"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("6 tool(s), 0 operation(s) skipped"), "{said}");

    // 2. the one edit: the credentials the document's security scheme names.
    let mapping = out.join("seaside-spa.yaml");
    let text = std::fs::read_to_string(&mapping).unwrap();
    let edited = text.replace(
        "  # headers:\n  #   X-Api-Key: \"${SEASIDE_SPA_X_API_KEY}\"",
        "  headers:\n    X-Api-Key: \"${SEASIDE_SPA_X_API_KEY}\"",
    );
    assert_ne!(
        text, edited,
        "the credentials line is where the tutorial says"
    );
    std::fs::write(&mapping, edited).unwrap();

    // 3. check with a dry run: the request, key masked, nothing sent.
    let o = Command::new(BIN)
        .arg("check")
        .arg(&out)
        .args(["--try", "list_openings", "--args"])
        .arg(r#"{"code":"MASSAGE-60","from":"2026-12-01","to":"2026-12-01"}"#)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{said}");
    assert!(said.contains(&format!(
        "GET http://{addr}/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-01"
    )));
    assert!(said.contains("x-api-key: *** (masked)"), "{said}");

    // 4. serve, 5. call.
    let gw = common::gateway(std::slice::from_ref(&out)).await;
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("portico-tutorial-test", "1.0.0"),
    )
    .serve(StreamableHttpClientTransport::from_uri(format!(
        "http://{}/mcp",
        gw.addr
    )))
    .await
    .expect("rmcp connects");
    let call = |name: &'static str, a: Value| {
        let client = &client;
        async move {
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(a)))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:?}"))
        }
    };
    let r = call("get_treatment", json!({"code": "MASSAGE-60"})).await;
    let first_call = started.elapsed();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(
        r.structured_content.as_ref().unwrap()["treatment"]["title"],
        "Deep tissue massage"
    );
    eprintln!(
        "tutorial: init to first successful MCP call in {} ms (init, edit, check --try, load, connect, call)",
        first_call.as_millis()
    );
    let r = call("list_treatments", json!({"category": "facial"})).await;
    let sc = r.structured_content.unwrap();
    assert_eq!(sc["treatments"].as_array().unwrap().len(), 1, "{sc}");
    let r = call(
        "list_openings",
        json!({"code": "MASSAGE-60", "from": "2026-12-01", "to": "2026-12-01"}),
    )
    .await;
    let sc = r.structured_content.unwrap();
    assert_eq!(
        sc["openings"][1]["free"], false,
        "the seeded taken opening: {sc}"
    );
    // A write through the key the mapping now sends.
    let r = call(
        "book_appointment",
        json!({"treatment": "MASSAGE-60", "opening": "MASSAGE-60@2026-12-01T09:00",
               "client": {"name": "Ann Lee", "email": "ann@example.com"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let number = r.structured_content.unwrap()["appointment"]["number"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call("get_appointment", json!({"number": number})).await;
    assert_eq!(
        r.structured_content.unwrap()["appointment"]["status"],
        "BOOKED"
    );
    let r = call(
        "cancel_appointment",
        json!({"number": number, "reason": "test"}),
    )
    .await;
    assert_eq!(
        r.structured_content.unwrap()["appointment"]["status"],
        "CANCELLED"
    );
    let _ = client.cancel().await;
}
