//! The demo (embedded legacy backend + portico) driven by the official Rust MCP client, rmcp 3.11,
//! over Streamable HTTP, in both protocol eras: stateless 2026-07-28 (`server/discover`, per-request
//! `_meta`, standard headers) and the 2025 session era (`initialize`, `Mcp-Session-Id`).
//!
//! Every test starts its own demo, so the backend's seed data is fresh and booking numbers start
//! at `A-1001`.

use portico::demo::{self, Demo};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ErrorCode,
    Implementation, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

type Client = RunningService<RoleClient, ClientConfig>;

/// Every tool the demo serves: 7 USP (Seaside Spa), 5 UCP lodging and 1 UCP ask (Harbour Hotel),
/// and the spa's long-running bookings report (plain binding).
const DEMO_TOOLS: [&str; 14] = [
    "usp_services_list",
    "usp_services_get",
    "usp_availability_query",
    "usp_bookings_create",
    "usp_bookings_get",
    "usp_bookings_cancel",
    "usp_bookings_reschedule",
    "create_booking_session",
    "get_booking_session",
    "update_booking_session",
    "complete_booking_session",
    "cancel_booking_session",
    "ask_business",
    "export_bookings_report",
];

const PROFILE: &str = "https://agent.example/profiles/scheduling-agent.json";

fn client_config(version: ProtocolVersion) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("portico-rmcp-test", "1.0.0"),
    )
    .with_protocol_version(version)
}

async fn start_demo() -> Demo {
    demo::start(0).await.expect("the demo starts")
}

/// 2026-07-28: `server/discover`, then stateless requests.
async fn connect_modern(demo: &Demo) -> Client {
    client_config(ProtocolVersion::V_2026_07_28)
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(demo.mcp_url()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp connects with server/discover")
}

/// 2025 session era: `initialize` + `notifications/initialized`, then `Mcp-Session-Id`.
async fn connect_legacy(demo: &Demo, version: ProtocolVersion) -> Client {
    client_config(version)
        .serve(StreamableHttpClientTransport::from_uri(demo.mcp_url()))
        .await
        .expect("rmcp connects with initialize")
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("arguments must be an object, got {other}"),
    }
}

async fn call(client: &Client, name: &'static str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e:?}"))
}

/// The result's structuredContent, after checking it is a success.
fn structured(name: &str, r: &CallToolResult) -> Value {
    assert_ne!(
        r.is_error,
        Some(true),
        "{name} returned a tool error: {r:?}"
    );
    r.structured_content
        .clone()
        .unwrap_or_else(|| panic!("{name}: no structuredContent in {r:?}"))
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_server_identity(client: &Client, expected_version: &ProtocolVersion) {
    let info = client.peer_info().expect("the client recorded the server");
    assert_eq!(&info.protocol_version, expected_version);
    let server = info
        .server_info
        .as_ref()
        .expect("portico names itself (serverInfo)");
    assert_eq!(server.name, "portico-demo");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    let instructions = info.instructions.as_deref().unwrap_or_default();
    assert!(
        instructions.contains("Seaside Spa") && instructions.contains("Harbour Hotel"),
        "instructions: {instructions:?}"
    );
    assert!(
        info.capabilities.tools.is_some(),
        "portico must advertise tools: {:?}",
        info.capabilities
    );
}

async fn assert_tool_list(client: &Client) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(tools.len(), 14, "tools: {names:?}");
    let got: BTreeSet<&str> = names.iter().copied().collect();
    let want: BTreeSet<&str> = DEMO_TOOLS.into_iter().collect();
    assert_eq!(got, want);

    let create = tools
        .iter()
        .find(|t| t.name == "usp_bookings_create")
        .expect("usp_bookings_create listed");
    let required: BTreeSet<&str> = create.input_schema["required"]
        .as_array()
        .expect("inputSchema.required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        required,
        BTreeSet::from(["_meta", "service_id", "slot_id", "buyer"])
    );
    assert!(
        create.output_schema.is_some(),
        "USP tools have an outputSchema"
    );
    let list = tools
        .iter()
        .find(|t| t.name == "usp_services_list")
        .expect("usp_services_list listed");
    let annotations = list.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(
        create.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(false)
    );
}

async fn assert_services_list(client: &Client) {
    let r = call(client, "usp_services_list", json!({})).await;
    let sc = structured("usp_services_list", &r);
    assert_eq!(sc["usp"]["version"], "2026-08-20", "{sc:#}");
    assert_eq!(
        sc["usp"]["capabilities"]["dev.usp-protocol.services.catalog"][0]["version"],
        "2026-08-20"
    );
    let services = sc["services"].as_array().expect("services[]");
    let ids: Vec<&str> = services.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, ["MASSAGE-60", "FACIAL-45", "SAUNA-30"]);
    let massage = &services[0];
    assert_eq!(massage["name"], "Deep tissue massage");
    assert_eq!(massage["duration"]["fixed"], "PT60M");
    assert_eq!(massage["pricing"]["amount"], 9000);
    assert_eq!(massage["pricing"]["currency"], "EUR");
    assert_eq!(services[1]["name"], "Sea-mineral facial");
    assert_eq!(services[1]["pricing"]["amount"], 7000);
    assert_eq!(services[2]["name"], "Private sauna session");
    assert_eq!(services[2]["duration"]["fixed"], "PT30M");
    assert_eq!(sc["messages"], json!([]));
    assert_eq!(sc["pagination"]["has_more"], false);
    assert_eq!(
        text(&r),
        "3 services: Deep tissue massage (MASSAGE-60), Sea-mineral facial (FACIAL-45), Private sauna session (SAUNA-30)."
    );
}

async fn assert_booking_lifecycle(client: &Client) {
    // Create.
    let r = call(
        client,
        "usp_bookings_create",
        json!({
            "service_id": "MASSAGE-60",
            "slot_id": "MASSAGE-60@2026-12-01T09:00",
            "buyer": {
                "first_name": "Alice",
                "last_name": "Example",
                "email": "alice@example.com",
                "phone_number": "+351210000000"
            },
            "notes": "first visit",
            "_meta": { "usp": {
                "profile": PROFILE,
                "idempotency_key": "550e8400-e29b-41d4-a716-446655440000"
            } }
        }),
    )
    .await;
    let sc = structured("usp_bookings_create", &r);
    assert_eq!(sc["usp"]["version"], "2026-08-20");
    assert_eq!(sc["messages"], json!([]));
    let booking = &sc["booking"];
    assert_eq!(booking["id"], "A-1001", "{sc:#}");
    assert_eq!(booking["service_id"], "MASSAGE-60");
    assert_eq!(booking["service_name"], "Deep tissue massage");
    assert_eq!(booking["status"], "confirmed");
    assert_eq!(booking["confirmation_mode"], "auto");
    assert_eq!(booking["party_size"], 1);
    assert_eq!(booking["revision"], "0");
    assert_eq!(
        booking["slot"],
        json!({
            "id": "MASSAGE-60@2026-12-01T09:00",
            "start": "2026-12-01T09:00:00+00:00",
            "end": "2026-12-01T10:00:00+00:00",
            "duration": "PT60M"
        })
    );
    assert_eq!(
        booking["buyer"],
        json!({
            "first_name": "Alice",
            "last_name": "Example",
            "email": "alice@example.com",
            "phone_number": "+351210000000"
        })
    );
    assert_eq!(
        text(&r),
        "Booked Deep tissue massage at 2026-12-01T09:00:00+00:00: booking A-1001 is confirmed."
    );

    // Get.
    let r = call(
        client,
        "usp_bookings_get",
        json!({ "booking_id": "A-1001", "_meta": { "usp": { "profile": PROFILE } } }),
    )
    .await;
    let got = structured("usp_bookings_get", &r);
    assert_eq!(got["booking"], *booking, "get returns what create returned");

    // Cancel.
    let r = call(
        client,
        "usp_bookings_cancel",
        json!({
            "booking_id": "A-1001",
            "reason": "plans changed",
            "_meta": { "usp": { "profile": PROFILE } }
        }),
    )
    .await;
    let canceled = structured("usp_bookings_cancel", &r);
    assert_eq!(canceled["booking"]["id"], "A-1001");
    assert_eq!(canceled["booking"]["status"], "canceled");
    assert_eq!(text(&r), "Booking A-1001 is canceled.");

    // The cancellation sticks.
    let r = call(
        client,
        "usp_bookings_get",
        json!({ "booking_id": "A-1001", "_meta": { "usp": { "profile": PROFILE } } }),
    )
    .await;
    assert_eq!(
        structured("usp_bookings_get", &r)["booking"]["status"],
        "canceled"
    );

    // Canceling again is a business outcome (a result with messages[]), not a JSON-RPC error.
    let r = call(
        client,
        "usp_bookings_cancel",
        json!({ "booking_id": "A-1001", "_meta": { "usp": { "profile": PROFILE } } }),
    )
    .await;
    let again = structured("usp_bookings_cancel", &r);
    assert_eq!(again["usp"]["version"], "2026-08-20");
    assert_eq!(
        again["messages"][0]["code"], "cancellation_not_allowed",
        "{again:#}"
    );
    assert!(again.get("booking").is_none(), "{again:#}");
}

async fn assert_unknown_tool_is_invalid_params(client: &Client) {
    let err = client
        .call_tool(CallToolRequestParams::new("no_such_tool").with_arguments(Map::new()))
        .await
        .expect_err("an unknown tool is a JSON-RPC error");
    match err {
        ServiceError::McpError(e) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(e.code.0, -32602);
            assert!(e.message.contains("no_such_tool"), "message: {}", e.message);
        }
        other => panic!("expected a JSON-RPC error -32602, got {other:?}"),
    }
}

#[tokio::test]
async fn modern_era_discover_tools_and_usp_booking_lifecycle() {
    let demo = start_demo().await;
    let client = connect_modern(&demo).await;
    assert_server_identity(&client, &ProtocolVersion::V_2026_07_28);
    assert_tool_list(&client).await;
    assert_services_list(&client).await;
    assert_booking_lifecycle(&client).await;
    assert_unknown_tool_is_invalid_params(&client).await;
    // The connection is still usable after an error.
    assert_services_list(&client).await;
    client.cancel().await.expect("client closes");
    demo.stop().await;
}

#[tokio::test]
async fn legacy_era_initialize_tools_and_usp_booking_lifecycle() {
    let demo = start_demo().await;
    let client = connect_legacy(&demo, ProtocolVersion::V_2025_11_25).await;
    assert_server_identity(&client, &ProtocolVersion::V_2025_11_25);
    assert_tool_list(&client).await;
    assert_services_list(&client).await;
    assert_booking_lifecycle(&client).await;
    assert_unknown_tool_is_invalid_params(&client).await;
    client.cancel().await.expect("client closes");
    demo.stop().await;
}

#[tokio::test]
async fn legacy_initialize_echoes_an_older_supported_version() {
    let demo = start_demo().await;
    let client = connect_legacy(&demo, ProtocolVersion::V_2025_06_18).await;
    assert_server_identity(&client, &ProtocolVersion::V_2025_06_18);
    assert_services_list(&client).await;
    client.cancel().await.expect("client closes");
    demo.stop().await;
}

#[tokio::test]
async fn taken_slot_is_a_business_outcome_not_an_error() {
    let demo = start_demo().await;
    let client = connect_modern(&demo).await;
    // Seeded as taken by the demo backend.
    let r = call(
        &client,
        "usp_bookings_create",
        json!({
            "service_id": "MASSAGE-60",
            "slot_id": "MASSAGE-60@2026-12-01T11:00",
            "buyer": { "first_name": "Bob", "email": "bob@example.com" },
            "_meta": { "usp": { "profile": PROFILE } }
        }),
    )
    .await;
    let sc = structured("usp_bookings_create", &r);
    assert_eq!(sc["usp"]["version"], "2026-08-20");
    assert_eq!(sc["messages"][0]["type"], "error", "{sc:#}");
    assert_eq!(sc["messages"][0]["code"], "slot_unavailable");
    assert_eq!(
        sc["messages"][0]["content"],
        "The requested slot is no longer available."
    );
    assert!(sc.get("booking").is_none());
    client.cancel().await.expect("client closes");
    demo.stop().await;
}

/// A booking names its service as the catalog does (`usp_services_get` / `usp_services_list`).
#[tokio::test]
async fn booking_service_name_matches_the_catalog_name() {
    let demo = start_demo().await;
    let client = connect_modern(&demo).await;
    let mut mismatches = Vec::new();
    for service in ["MASSAGE-60", "FACIAL-45", "SAUNA-30"] {
        let r = client
            .call_tool(
                CallToolRequestParams::new("usp_services_get")
                    .with_arguments(args(json!({ "service_id": service }))),
            )
            .await
            .expect("usp_services_get");
        let catalog = structured("usp_services_get", &r)["service"]["name"].clone();
        let r = client
            .call_tool(
                CallToolRequestParams::new("usp_bookings_create").with_arguments(args(json!({
                    "service_id": service,
                    "slot_id": format!("{service}@2026-12-02T14:00"),
                    "buyer": { "first_name": "Carol", "email": "carol@example.com" },
                    "_meta": { "usp": { "profile": PROFILE } }
                }))),
            )
            .await
            .expect("usp_bookings_create");
        let booked = structured("usp_bookings_create", &r)["booking"]["service_name"].clone();
        if booked != catalog {
            mismatches.push(format!(
                "{service}: catalog name {catalog}, booking.service_name {booked}"
            ));
        }
    }
    client.cancel().await.expect("client closes");
    demo.stop().await;
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
