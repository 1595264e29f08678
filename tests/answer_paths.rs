//! The hot path (`translate::answer`: no `serde_json` trees) against the tree path on the demo
//! backend's real answers: every reply the same value and the same bytes.
//!
//! Each call goes to the demo's legacy backend on 127.0.0.1 once; its answer is translated both
//! ways (`forward::translate_response`, which takes the hot path when it can, and
//! `forward::translate_response_tree`). The flows cover successes, business outcomes, errors and
//! the two bindings, and the test checks that the benchmarked call takes the hot path.
//!
//! The benchmark workloads (benches/fixtures/workloads/, scripts/bench-workloads) are checked
//! the same way on the fixed answers their backend serves, without a network.

mod common;

use portico::binding::Reply;
use portico::config::Gateway;
use portico::forward;
use portico::translate::request;
use portico::translate::response::RestResponse;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const PROFILE: &str = "https://agent.example/profiles/usp.json";
const UCP_PROFILE: &str = "https://platform.example/p.json";

/// The demo backend on an ephemeral port and the demo mappings pointing at it.
async fn demo() -> (portico::demo::Demo, Gateway) {
    let demo = portico::demo::start(0).await.expect("demo starts");
    let dir = portico::demo::write_files(demo.backend_addr, None).expect("demo files");
    let gateway = portico::config::load(&[dir.join("mappings")]).expect("demo mappings load");
    (demo, gateway)
}

/// The bytes a reply's result or error is sent as.
fn bytes_of(reply: &Reply) -> Vec<u8> {
    match reply {
        Reply::Written(w) => {
            let mut out = Vec::new();
            w.write(&mut out);
            out
        }
        Reply::Result(v) => portico::json_text::to_vec(v),
        Reply::Error(e) => format!("{e:?}").into_bytes(),
    }
}

/// How the hot path answered.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Took {
    /// It left the answer to the tree path.
    Tree,
    /// It wrote the answer from its document.
    Written,
    /// It passed the backend's object through in the backend's own text.
    Passed,
}

/// Checks the hot path's reply `fast` against the tree path's for the backend answer `body`:
/// the same value, and the same bytes, except that an object passed through keeps the
/// backend's own text (then `structuredContent` is the body without its surrounding
/// whitespace, and the text block is that text as a JSON string).
fn compare(name: &str, mut fast: Reply, tree: &Reply, body: &[u8]) -> Took {
    assert!(
        !matches!(tree, Reply::Written(_)),
        "{name}: the tree path wrote"
    );
    let path = match &fast {
        Reply::Written(w) if w.structured.as_deref() == Some(body.trim_ascii()) => {
            let content: Value =
                serde_json::from_slice(&w.content).expect("the text block is JSON");
            let text = std::str::from_utf8(body.trim_ascii()).expect("a UTF-8 body");
            assert_eq!(content[0]["text"], text, "{name}: the text block");
            Took::Passed
        }
        other => {
            assert_eq!(
                String::from_utf8_lossy(&bytes_of(other)),
                String::from_utf8_lossy(&bytes_of(tree)),
                "{name}: the hot path's bytes differ"
            );
            if matches!(other, Reply::Written(_)) {
                Took::Written
            } else {
                Took::Tree
            }
        }
    };
    fast.materialize();
    if let (Took::Passed, Reply::Result(f), Reply::Result(t)) = (path, &mut fast, tree) {
        // The text block holds the same JSON value in other text: compare it as a value.
        let text = |r: &Value| -> Value {
            let s = r["content"][0]["text"].as_str().expect("a text block");
            serde_json::from_str(s).expect("the text block is JSON text")
        };
        assert_eq!(text(f), text(t), "{name}: the text block's value differs");
        f["content"][0]["text"] = t["content"][0]["text"].clone();
    }
    assert_eq!(&fast, tree, "{name}: the hot path's value differs");
    path
}

/// Calls `tool` once and translates the answer both ways; returns the result (as the tree path
/// answers it) and whether the hot path answered.
async fn both(g: &Gateway, name: &str, args: Value) -> (Value, bool) {
    let tool = g.tools.get(name).expect("a demo tool");
    let call = match forward::prepare(tool, args) {
        Ok(c) => c,
        Err(r) => panic!("{name}: arguments refused: {r:?}"),
    };
    let resp = match forward::exchange(tool, &call).await {
        Ok(r) => r,
        Err(f) => panic!("{name}: backend exchange failed: {f:?}"),
    };
    let body = resp.body.clone();
    let fast = forward::translate_response(tool, &call, resp.clone());
    let tree = forward::translate_response_tree(tool, &call, resp);
    let hot = compare(name, fast, &tree, &body) != Took::Tree;
    let value = match tree {
        Reply::Result(v) => v,
        Reply::Error(e) => json!({ "error": e.code, "data": e.data }),
        Reply::Written(_) => Value::Null,
    };
    (value, hot)
}

fn usp(args: Value, key: Option<&str>) -> Value {
    let mut args = args;
    let mut meta = json!({ "usp": { "profile": PROFILE } });
    if let Some(k) = key {
        meta["usp"]["idempotency_key"] = json!(k);
    }
    args["_meta"] = meta;
    args
}

fn ucp(args: Value, key: Option<&str>) -> Value {
    let mut args = args;
    let mut meta = json!({ "ucp-agent": { "profile": UCP_PROFILE } });
    if let Some(k) = key {
        meta["idempotency-key"] = json!(k);
    }
    args["meta"] = meta;
    args
}

#[tokio::test]
async fn the_hot_path_answers_as_the_tree_path_on_the_usp_flow() {
    let (demo, g) = demo().await;
    let mut hot = Vec::new();
    let (r, h) = both(&g, "usp_services_list", json!({})).await;
    assert!(r["structuredContent"]["services"].is_array(), "{r}");
    hot.push(("usp_services_list", h));
    for id in ["MASSAGE-60", "NOPE"] {
        let (_, h) = both(&g, "usp_services_get", json!({ "service_id": id })).await;
        hot.push(("usp_services_get", h));
    }
    let mut slot = None;
    for (service, from, to) in [
        ("MASSAGE-60", "2026-12-01", "2026-12-02"),
        ("FACIAL-45", "2027-03-29", "2027-03-29"),
        ("SAUNA-30", "2027-03-27", "2027-03-28"),
        ("NOPE", "2026-12-01", "2026-12-01"),
    ] {
        let args = json!({ "service_id": service, "start_date": from, "end_date": to });
        let (r, h) = both(&g, "usp_availability_query", args).await;
        if service == "MASSAGE-60" {
            // The benchmarked call: it must take the hot path.
            assert!(h, "usp_availability_query took the tree path: {r}");
            slot = r["structuredContent"]["slots"][0]["id"]
                .as_str()
                .map(str::to_string);
        }
        hot.push(("usp_availability_query", h));
    }
    let slot = slot.expect("a free slot");
    let buyer = json!({ "first_name": "Ana", "last_name": "Silva \"Quoted\" \\ é", "email": "ana@example.com" });
    let create = json!({ "service_id": "MASSAGE-60", "slot_id": slot, "buyer": buyer });
    let (r, h) = both(&g, "usp_bookings_create", usp(create.clone(), Some("k-1"))).await;
    hot.push(("usp_bookings_create", h));
    let booking = r["structuredContent"]["booking"]["id"]
        .as_str()
        .expect("a booking id")
        .to_string();
    // The same slot again: taken, a business outcome.
    let (r, h) = both(&g, "usp_bookings_create", usp(create, Some("k-2"))).await;
    assert!(
        r["structuredContent"]["messages"][0]["code"].is_string(),
        "{r}"
    );
    assert!(!h, "a business outcome is the tree path's");
    for (name, args) in [
        ("usp_bookings_get", json!({ "booking_id": booking })),
        ("usp_bookings_get", json!({ "booking_id": "A-0" })),
        (
            "usp_bookings_cancel",
            json!({ "booking_id": booking, "reason": "plans changed" }),
        ),
        ("usp_bookings_cancel", json!({ "booking_id": booking })),
    ] {
        let (_, h) = both(&g, name, usp(args, None)).await;
        hot.push((name, h));
    }
    // A correlation id goes into `_meta` on both paths.
    let mut args = usp(json!({ "booking_id": booking }), None);
    args["_meta"]["usp"]["correlation_id"] = json!("corr-7");
    let (r, h) = both(&g, "usp_bookings_get", args).await;
    assert_eq!(r["_meta"]["usp"]["correlation_id"], "corr-7", "{r}");
    assert!(h, "a get with a correlation id took the tree path");
    // `usp_services_list`'s summary loops: MiniJinja renders it, on the tree path.
    assert_eq!(hot[0], ("usp_services_list", false));
    for name in [
        "usp_services_get",
        "usp_bookings_create",
        "usp_bookings_get",
        "usp_bookings_cancel",
    ] {
        assert!(
            hot.iter().any(|(n, h)| *n == name && *h),
            "{name} never took the hot path: {hot:?}"
        );
    }
    demo.stop().await;
}

#[tokio::test]
async fn the_hot_path_answers_as_the_tree_path_on_the_ucp_flows() {
    let (demo, g) = demo().await;
    let booking = json!({
        "property": { "id": "HH-LIS" },
        "stays": [{
            "accommodation_type": { "id": "DBL" },
            "rate_plan": { "id": "FLEX" },
            "occupancy": { "adults": 2, "children": 0 },
            "stay_dates": { "start_date": "2027-01-20", "end_date": "2027-01-23" }
        }]
    });
    let (r, create_hot) = both(
        &g,
        "create_booking_session",
        ucp(json!({ "booking": booking }), None),
    )
    .await;
    let id = r["structuredContent"]["id"]
        .as_str()
        .expect("a session id")
        .to_string();
    let booker =
        json!({ "first_name": "Carla", "last_name": "Mendes", "email": "carla@example.com" });
    let mut with_booker = booking.clone();
    with_booker["booker"] = booker;
    let payment = json!({ "payment": { "instruments": [{ "id": "pi_1", "type": "card",
        "credential": { "type": "PAYMENT_GATEWAY", "token": "tok_visa_4242" } }] } });
    let mut hot = vec![create_hot];
    for (name, args) in [
        (
            "update_booking_session",
            ucp(json!({ "id": id, "booking": with_booker }), None),
        ),
        (
            "complete_booking_session",
            ucp(json!({ "id": id, "booking": payment }), Some("k-3")),
        ),
        ("get_booking_session", ucp(json!({ "id": id }), None)),
        (
            "cancel_booking_session",
            ucp(json!({ "id": id }), Some("k-4")),
        ),
        ("get_booking_session", ucp(json!({ "id": "Q-0" }), None)),
        (
            "ask_business",
            ucp(json!({ "ask": { "query": "Can I bring my dog?" } }), None),
        ),
    ] {
        let (_, h) = both(&g, name, args).await;
        hot.push(h);
    }
    // A sold-out room: the UCP error shape, a business outcome.
    let mut sold_out = booking;
    sold_out["stays"][0]["accommodation_type"]["id"] = json!("SGL");
    sold_out["stays"][0]["occupancy"]["adults"] = json!(1);
    sold_out["stays"][0]["stay_dates"] =
        json!({ "start_date": "2027-01-05", "end_date": "2027-01-06" });
    both(
        &g,
        "create_booking_session",
        ucp(json!({ "booking": sold_out }), None),
    )
    .await;
    // create, update, complete, get (the schemas' `if`/`then`/`else` are checked natively).
    assert_eq!(&hot[..4], &[true; 4], "UCP calls on the hot path: {hot:?}");
    assert!(hot[6], "ask_business took the tree path: {hot:?}");
    demo.stop().await;
}

// ---- the benchmark workloads, on their fixed answers

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("benches/fixtures/workloads").join(name)).expect("fixture")
}

fn openapi_mapping(dir: &Path) -> PathBuf {
    portico::init::run(&portico::init::Options {
        openapi: root().join("examples/seaside-spa/openapi.yaml"),
        backend: Some("http://127.0.0.1:9/spa/v1".into()),
        out: dir.to_path_buf(),
        ..Default::default()
    })
    .expect("init writes a mapping")
    .mapping
}

/// Translates `answer` for `tool` both ways; returns the tree path's result and how the hot
/// path answered.
fn both_fixed(
    mapping: PathBuf,
    tool: &str,
    args: Value,
    status: u16,
    answer: Vec<u8>,
) -> (Value, Took) {
    // SAFETY: set before any thread of this test reads the environment for the mapping.
    unsafe { std::env::set_var("PORTICO_BENCH_BACKEND_PORT", "9") };
    let g = portico::config::load(&[mapping]).expect("workload mapping loads");
    let t = g.tools.get(tool).expect("workload tool");
    let Ok(call) = forward::prepare(t, args) else {
        panic!("{tool}: arguments refused")
    };
    assert!(request::build(t, &call).is_ok(), "{tool}: no request");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/json"),
    );
    let resp = RestResponse {
        status,
        headers,
        body: answer.clone().into(),
    };
    let fast = forward::translate_response(t, &call, resp.clone());
    let tree = forward::translate_response_tree(t, &call, resp);
    let path = compare(tool, fast, &tree, &answer);
    let Reply::Result(v) = tree else {
        panic!("{tool}: not a result: {tree:?}")
    };
    (v, path)
}

/// Whether `tool`'s output schema check passes `answer` as its text is read, with no tree
/// built (`translate::doc_schema::object_passes`, the hot path's first try).
fn checked_as_read(mapping: PathBuf, tool: &str, answer: &[u8]) -> bool {
    // SAFETY: set before any thread of this test reads the environment for the mapping.
    unsafe { std::env::set_var("PORTICO_BENCH_BACKEND_PORT", "9") };
    let g = portico::config::load(&[mapping]).expect("workload mapping loads");
    let t = g.tools.get(tool).expect("workload tool");
    let check = t.output_check();
    assert!(check.is_some(), "{tool} has an output schema");
    portico::translate::doc_schema::object_passes(check, answer).is_some()
}

fn workload_ucp_args() -> Value {
    json!({"id": "Q-5001", "meta": {"ucp-agent": {"profile": "https://platform.example/p.json"}},
        "booking": {"property": {"id": "HH-LIS"}, "stays": [{"accommodation_type": {"id": "DBL"},
        "rate_plan": {"id": "FLEX"}, "occupancy": {"adults": 2},
        "stay_dates": {"start_date": "2026-12-10", "end_date": "2026-12-12"}}]}})
}

#[test]
fn the_openapi_workload_takes_the_hot_path_and_answers_as_the_tree_path() {
    let dir = std::env::temp_dir().join(format!("portico-workloads-{}", std::process::id()));
    let args = json!({"code": "MASSAGE-60", "from": "2026-12-01", "to": "2026-12-02"});
    let mapping = openapi_mapping(&dir);
    let (v, path) = both_fixed(
        mapping.clone(),
        "list_openings",
        args.clone(),
        200,
        fixture("openings.json"),
    );
    assert_eq!(
        path,
        Took::Passed,
        "a tool without `result` passes the backend's object through"
    );
    assert_eq!(
        v["structuredContent"]["openings"][0]["ref"],
        "MASSAGE-60@2026-12-01T09:00"
    );
    assert!(
        checked_as_read(mapping.clone(), "list_openings", &fixture("openings.json")),
        "the generated schema is checked on the text, no tree built"
    );
    // Integers past i64 and past u64: whichever path answers, both agree; neither text is
    // passed through (another reader could round it).
    for n in ["9223372036854775808", "18446744073709551616"] {
        let wide = format!(r#"{{"treatment":"MASSAGE-60","openings":[],"n":{n}}}"#).into_bytes();
        let (v, path) = both_fixed(mapping.clone(), "list_openings", args.clone(), 200, wide);
        assert_eq!(v["structuredContent"]["treatment"], "MASSAGE-60");
        assert_ne!(path, Took::Passed, "{n}");
    }
    // A repeated key: this reader keeps the last value, another may keep the first, so the
    // answer is written from the value checked, never passed through.
    let repeated = br#"{"treatment":"X","openings":[],"treatment":"MASSAGE-60"}"#.to_vec();
    let (v, path) = both_fixed(
        mapping.clone(),
        "list_openings",
        args.clone(),
        200,
        repeated,
    );
    assert_eq!(path, Took::Written);
    assert_eq!(v["structuredContent"]["treatment"], "MASSAGE-60");
    // Numbers in another form than the writer's: written from the value read.
    for n in [
        "1.50e2",
        "0.1000000000000000055511151231257827",
        "1E2",
        "-0",
    ] {
        let other = format!(r#"{{"treatment":"MASSAGE-60","openings":[],"n":{n}}}"#).into_bytes();
        let (_, path) = both_fixed(mapping.clone(), "list_openings", args.clone(), 200, other);
        assert_eq!(path, Took::Written, "{n}");
    }
    // Whitespace around and inside, members out of key order, escapes and a fraction in the
    // writer's form: passed through as the backend wrote it, without the outer whitespace.
    let pretty = b"\n  {\"treatment\": \"MASSAGE-60\",\n \"openings\": [],\n \"note\": \"caf\\u00e9 \\\"spa\\\"\", \"price\": 150.5, \"n\": -7}\r\n ".to_vec();
    let (v, path) = both_fixed(mapping.clone(), "list_openings", args.clone(), 200, pretty);
    assert_eq!(path, Took::Passed);
    assert_eq!(v["structuredContent"]["note"], "caf\u{e9} \"spa\"");
    assert_eq!(v["structuredContent"]["price"], 150.5);
    // Not JSON, and an error status: the tree path's answers.
    let (v, _) = both_fixed(
        mapping.clone(),
        "list_openings",
        args.clone(),
        200,
        b"<html>".to_vec(),
    );
    assert_eq!(v["isError"], true);
    let (v, _) = both_fixed(mapping.clone(), "list_openings", args, 404, b"{}".to_vec());
    assert_eq!(v["isError"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_ucp_workload_takes_the_hot_path_and_answers_as_the_tree_path() {
    let mapping = root().join("benches/fixtures/workloads/ucp.yaml");
    let (v, path) = both_fixed(
        mapping,
        "update_booking_session",
        workload_ucp_args(),
        200,
        fixture("quote.json"),
    );
    assert_eq!(path, Took::Written, "a result program's answer is written");
    assert_eq!(v["structuredContent"]["id"], "Q-5001");
}

#[test]
fn the_large_workload_takes_the_hot_path_and_answers_as_the_tree_path() {
    let mapping = root().join("benches/fixtures/workloads/documents.yaml");
    let sections: Vec<Value> = (0..44)
        .map(|i| json!({"heading": format!("Part {i}"), "text": "quay tide ".repeat(30)}))
        .collect();
    let args =
        json!({"folder_id": "F-1", "document": {"title": "Harbour log", "sections": sections}});
    let (v, path) = both_fixed(
        mapping.clone(),
        "put_document",
        args,
        200,
        fixture("documents.json"),
    );
    assert_eq!(path, Took::Passed);
    assert!(checked_as_read(
        mapping,
        "put_document",
        &fixture("documents.json")
    ));
    assert_eq!(v["structuredContent"]["documents"][95]["id"], "DOC-0095");
}

/// The large workload over HTTP: a 115 KB result written on the hot path (larger than the
/// room the response buffer starts with) arrives whole, with its `Content-Length`, as JSON
/// and as one SSE event, over HTTP/1.1 and HTTP/2, and holds the backend's answer in both its
/// places, line breaks and all.
#[tokio::test]
async fn a_large_answer_arrives_whole_over_http_as_json_and_as_one_sse_event() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // Pretty-printed: the answer passed through keeps its line breaks, which an SSE event's
    // `data:` line must not carry.
    let compact: Value = serde_json::from_slice(&fixture("documents.json")).expect("fixture");
    let answer = bytes::Bytes::from(serde_json::to_vec_pretty(&compact).expect("pretty"));
    assert!(answer.contains(&b'\n'));
    let served = answer.clone();
    common::serve_with(listener, move |_req| {
        let body = served.clone();
        async move {
            http::Response::builder()
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(body))
                .expect("response")
        }
    });
    // The workload's mapping, pointed at this backend (no environment: tests share it).
    let dir = std::env::temp_dir().join(format!("portico-large-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let src = root().join("benches/fixtures/workloads");
    let yaml = std::fs::read_to_string(src.join("documents.yaml")).expect("mapping");
    std::fs::write(
        dir.join("documents.yaml"),
        yaml.replace("${PORTICO_BENCH_BACKEND_PORT}", &port.to_string()),
    )
    .expect("write mapping");
    std::fs::copy(
        src.join("documents.openrpc.json"),
        dir.join("documents.openrpc.json"),
    )
    .expect("copy openrpc");
    let g = common::gateway(&[dir.join("documents.yaml")]).await;
    let url = g.mcp_url();
    let h1 = reqwest::Client::new();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("an HTTP/2 client");
    let expected: Value = serde_json::from_slice(&answer).expect("fixture json");
    let args = json!({"folder_id": "F-1", "document": {"title": "Harbour log", "sections": []}});
    let (v1, v2) = (reqwest::Version::HTTP_11, reqwest::Version::HTTP_2);
    let cases = [
        (&h1, v1, "application/json"),
        (&h1, v1, "text/event-stream"),
        (&h2, v2, "application/json"),
        (&h2, v2, "text/event-stream"),
    ];
    for (i, (client, version, accept)) in cases.into_iter().enumerate() {
        let params = json!({"name": "put_document", "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": common::MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}});
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", common::MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "put_document")
            .body(
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
                    .to_string(),
            )
            .send()
            .await
            .expect("sent");
        assert_eq!((resp.status().as_u16(), resp.version()), (200, version));
        let content_type = resp.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(content_type.starts_with(accept), "{content_type}");
        let length: usize = resp.headers()["content-length"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("a length");
        let text = resp.text().await.expect("body");
        assert_eq!(text.len(), length);
        assert!(
            text.len() > answer.len() * 2,
            "text block and structuredContent"
        );
        let json = match accept {
            "application/json" => text.as_str(),
            _ => text
                .strip_prefix("event: message\ndata: ")
                .and_then(|t| t.strip_suffix("\n\n"))
                .filter(|data| !data.contains(['\n', '\r']))
                .expect("one SSE event, its data on one line"),
        };
        let message: Value = serde_json::from_str(json).expect("one JSON-RPC message");
        assert_eq!(message["id"], i);
        let result = &message["result"];
        assert_eq!(result["structuredContent"], expected);
        let block: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().expect("a text block"))
                .expect("the text block holds JSON");
        assert_eq!(block, expected);
        assert_eq!(result["resultType"], "complete");
        assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
