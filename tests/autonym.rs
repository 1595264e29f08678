//! The autonym binding (B3, spec 1.0-draft-1) over Streamable HTTP against the scriptable
//! backend on 127.0.0.1: B3.4 error forms, Problem Details, resources, prompt, stateless only.

mod common;
use common::*;
use serde_json::{Value, json};

/// The only content of an autonym tool failure, parsed.
fn problem_of(a: &Answer) -> Value {
    let r = a.result();
    assert_eq!(r["isError"], true, "{}", a.text);
    assert!(
        r.get("structuredContent").is_none(),
        "no structuredContent: {r}"
    );
    let content = r["content"].as_array().unwrap();
    assert_eq!(content.len(), 1);
    serde_json::from_str(content[0]["text"].as_str().unwrap()).expect("Problem Details JSON")
}

#[tokio::test]
async fn tool_results_and_failures_follow_b3_4() {
    let (g, _, c, url) = gateway_on_test_backend("autonym").await;
    let ok = call(&c, &url, "get_context", json!({"domain": "travel"})).await;
    assert_eq!(ok.sc()["signature"], "sig-travel");
    let text: Value =
        serde_json::from_str(ok.result()["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, ok.sc(), "the same JSON as text content");

    // A registered backend problem is passed on as the only content.
    let a = call(&c, &url, "get_context", json!({"domain": "health"})).await;
    let p = problem_of(&a);
    assert_eq!(p["code"], "domain_not_granted");
    assert_eq!(p["status"], 403);

    // An unregistered 404 becomes `not_found`, without the backend's text.
    let a = call(&c, &url, "get_context", json!({"domain": "gone"})).await;
    let p = problem_of(&a);
    assert_eq!(p["code"], "not_found");
    assert!(!a.text.contains("no such domain"));

    // Invalid arguments: `invalid_request`, and the submitted value appears nowhere.
    let secret = "x".repeat(65) + "-SUBMITTED";
    let a = call(&c, &url, "get_context", json!({"domain": secret})).await;
    assert_eq!(problem_of(&a)["code"], "invalid_request");
    assert!(!a.text.contains("SUBMITTED"), "{}", a.text);

    // A backend crash: JSON-RPC -32603, the registered title only, Problem Details as data.
    let a = call(&c, &url, "get_context", json!({"domain": "boom"})).await;
    assert_eq!(a.error_code(), Some(-32603));
    assert_eq!(a.body["error"]["message"], "Internal error");
    assert_eq!(a.body["error"]["data"]["code"], "internal_error");
    assert!(!a.text.contains("secrets"));
    g.stop().await.unwrap();
}

#[tokio::test]
async fn rate_limits_answer_in_http_with_retry_after() {
    let (g, _, c, url) = gateway_on_test_backend("autonym").await;
    let a = call(&c, &url, "get_context", json!({"domain": "busy"})).await;
    assert_eq!(a.status, 429);
    assert_eq!(a.headers["content-type"], "application/problem+json");
    assert_eq!(a.headers["retry-after"], "7");
    assert_eq!(a.body["code"], "rate_limited");
    assert!(a.body.get("jsonrpc").is_none(), "not a JSON-RPC message");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn resources_and_prompt_map_onto_rest() {
    let (g, _, c, url) = gateway_on_test_backend("autonym").await;
    let read = |id: i64, uri: &str| modern(&c, &url, id, "resources/read", json!({"uri": uri}));
    let a = send(read(1, "autonym://context/travel")).await;
    let contents = &a.result()["contents"][0];
    assert_eq!(contents["mimeType"], "application/json");
    let signed: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(signed["signature"], "sig-travel");
    assert_eq!(a.result()["ttlMs"], 0);
    assert_eq!(a.result()["cacheScope"], "private");

    // No grant, no read: -32602, the registered title, the Problem Details as data.
    let a = send(read(2, "autonym://context/health")).await;
    assert_eq!(a.error_code(), Some(-32602));
    assert_eq!(a.body["error"]["message"], "Domain not granted");
    assert_eq!(a.body["error"]["data"]["code"], "domain_not_granted");
    assert!(
        !a.text.contains("autonym://context/health"),
        "no submitted value"
    );
    let a = send(read(3, "autonym://context/boom")).await;
    assert_eq!(a.error_code(), Some(-32603));
    assert_eq!(a.body["error"]["message"], "Internal error");

    // Grant-dependent lists are private.
    for (id, m) in [(4, "resources/list"), (5, "resources/templates/list")] {
        let a = send(modern(&c, &url, id, m, json!({}))).await;
        assert_eq!(a.result()["cacheScope"], "private", "{m}");
    }
    let a = send(modern(&c, &url, 6, "tools/list", json!({}))).await;
    assert_eq!(
        a.result()["cacheScope"],
        "public",
        "tool lists are fixed and public"
    );

    let a = send(modern(
        &c,
        &url,
        7,
        "prompts/get",
        json!({"name": "autonym_briefing"}),
    ))
    .await;
    let msg = &a.result()["messages"][0]["content"];
    assert_eq!(msg["type"], "text");
    let signed: Value = serde_json::from_str(msg["text"].as_str().unwrap()).unwrap();
    assert_eq!(signed["signature"], "sig-briefing");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn legacy_sessions_do_not_see_autonym_tools() {
    let (g, _, c, url) = gateway_on_test_backend("autonym").await;
    let (sid, _) = initialize(&c, &url, "2025-11-25").await;
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
    ))
    .await;
    assert_eq!(a.result()["tools"], json!([]));
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_context","arguments":{"domain":"travel"}}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32602));
    // Nor its resources and prompts.
    for (id, method, key) in [
        (3, "resources/list", "resources"),
        (4, "resources/templates/list", "resourceTemplates"),
        (5, "prompts/list", "prompts"),
    ] {
        let a = send(legacy(
            &c,
            &url,
            &sid,
            json!({"jsonrpc":"2.0","id":id,"method":method}),
        ))
        .await;
        assert_eq!(a.result()[key], json!([]), "{method}");
    }
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"autonym://context/travel"}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32002));
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"autonym_briefing"}}),
    ))
    .await;
    assert_eq!(a.error_code(), Some(-32602));
    g.stop().await.unwrap();
}

#[tokio::test]
async fn an_oversized_body_is_payload_too_large_problem_details() {
    let (g, _, c, url) = gateway_on_test_backend("autonym").await;
    let big = "x".repeat(2 << 20);
    let a = send(modern(
        &c,
        &url,
        1,
        "tools/call",
        json!({"name": "get_context", "arguments": {"domain": big}}),
    ))
    .await;
    assert_eq!(a.status, 413);
    assert_eq!(a.headers["content-type"], "application/problem+json");
    assert_eq!(a.body["code"], "payload_too_large");
    assert_eq!(a.body["status"], 413);
    g.stop().await.unwrap();
}
