//! A USP `_meta` mistake says in the JSON-RPC error message itself where the metadata was
//! expected (clients such as the Python SDK show only the message), while the code (-32600) and
//! `data` (`code`, `content`) stay as USP's MCP binding prescribes. Real HTTP on 127.0.0.1: the
//! demo's legacy backend and portico on the demo's USP spa mapping.

mod common;
use common::*;
use serde_json::{Value, json};

const PROFILE: &str = "https://agent.example/profiles/usp.json";
const KEY: &str = "550e8400-e29b-41d4-a716-446655440000";

/// The booking arguments, without metadata.
fn booking() -> Value {
    json!({
        "service_id": "MASSAGE-60",
        "slot_id": "MASSAGE-60@2026-12-01T09:00",
        "buyer": {"first_name": "Ann", "email": "ann@example.com"}
    })
}

fn with(mut args: Value, meta: Value) -> Value {
    args["_meta"] = meta;
    args
}

/// The error of an answer: (code, message, data.code, data.content).
fn error_of(a: &Answer) -> (i64, String, String, String) {
    let e = &a.body["error"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        e["code"].as_i64().unwrap_or_default(),
        s(&e["message"]),
        s(&e["data"]["code"]),
        s(&e["data"]["content"]),
    )
}

/// `tools/call` of `usp_bookings_create` at 2026-07-28 with `extra` merged into the request's own
/// `params._meta` (where the Python SDK's `call_tool(..., meta=...)` puts it).
async fn call_with_request_meta(
    c: &reqwest::Client,
    url: &str,
    args: Value,
    extra: Value,
) -> Answer {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}
    });
    if let (Some(m), Value::Object(e)) = (meta.as_object_mut(), extra) {
        m.extend(e);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "usp_bookings_create", "arguments": args, "_meta": meta}});
    send(
        c.post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "usp_bookings_create")
            .body(body.to_string()),
    )
    .await
}

#[tokio::test]
async fn a_usp_meta_mistake_names_where_the_metadata_was_expected_in_the_message() {
    let (addr, _backend) = portico::demo::backend::spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = portico::demo::write_files(addr, None).unwrap();
    let spa = dir.join("mappings/demo-spa.yaml");
    // One tool that requires the key, as a mapping may say.
    let text = std::fs::read_to_string(&spa).unwrap().replacen(
        "  usp_bookings_create:\n    http: POST /appointments\n",
        "  usp_bookings_create:\n    http: POST /appointments\n    idempotency: required\n",
        1,
    );
    assert!(text.contains("idempotency: required"));
    std::fs::write(&spa, text).unwrap();
    let g = gateway(&[spa]).await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();

    let cases = [
        // The metadata sent where an SDK's `meta=` option puts it (params._meta), not in the
        // arguments: the schema's required `_meta` is missing.
        (
            call_with_request_meta(
                &c,
                &url,
                booking(),
                json!({"usp": {"profile": PROFILE, "idempotency_key": KEY}}),
            )
            .await,
            "`_meta.usp` is required for `usp_bookings_create`; expected at params.arguments._meta.usp (USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)",
        ),
        // A misspelt member: a did-you-mean.
        (
            call(
                &c,
                &url,
                "usp_bookings_create",
                with(
                    booking(),
                    json!({"usp": {"profile": PROFILE, "idempotencyKey": KEY}}),
                ),
            )
            .await,
            "`_meta.usp` of `usp_bookings_create` has no member `idempotencyKey`; did you mean `idempotency_key`? expected at params.arguments._meta.usp (USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)",
        ),
        // The profile a privileged method requires is absent.
        (
            call(
                &c,
                &url,
                "usp_bookings_create",
                with(booking(), json!({"usp": {"idempotency_key": KEY}})),
            )
            .await,
            "`_meta.usp.profile` is required for `usp_bookings_create`; expected at params.arguments._meta.usp.profile (USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)",
        ),
        // The key the tool requires is absent (the schema only recommends it).
        (
            call(
                &c,
                &url,
                "usp_bookings_create",
                with(booking(), json!({"usp": {"profile": PROFILE}})),
            )
            .await,
            "`_meta.usp.idempotency_key` is required for `usp_bookings_create`; expected at params.arguments._meta.usp.idempotency_key (USP metadata is a tool argument, not the request's params._meta, which an SDK's `meta=` option fills)",
        ),
    ];
    for (a, why) in cases {
        let (code, message, slug, content) = error_of(&a);
        assert_eq!(code, -32600, "{}", a.text);
        assert_eq!(message, format!("invalid_request: {why}"), "{}", a.text);
        assert_eq!(slug, "invalid_request", "{}", a.text);
        assert_eq!(content, why, "{}", a.text);
    }

    // Argument mistakes that are not about the metadata keep USP's bare slug as the message.
    let mut args = with(
        booking(),
        json!({"usp": {"profile": PROFILE, "idempotency_key": KEY}}),
    );
    args.as_object_mut().unwrap().remove("slot_id");
    let a = call(&c, &url, "usp_bookings_create", args).await;
    let (code, message, slug, content) = error_of(&a);
    assert_eq!(
        (code, message.as_str()),
        (-32600, "invalid_request"),
        "{}",
        a.text
    );
    assert_eq!(slug, "invalid_request");
    assert!(content.contains("slot_id"), "{content}");

    // The metadata where USP puts it: the booking goes through.
    let a = call(
        &c,
        &url,
        "usp_bookings_create",
        with(
            booking(),
            json!({"usp": {"profile": PROFILE, "idempotency_key": KEY}}),
        ),
    )
    .await;
    assert!(a.body.get("error").is_none(), "{}", a.text);
    assert_eq!(a.sc()["booking"]["status"], "confirmed", "{}", a.text);
    g.stop().await.unwrap();
}
