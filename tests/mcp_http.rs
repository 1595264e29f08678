//! MCP Streamable HTTP against a real portico on 127.0.0.1: both eras, sessions, header rules,
//! Origin/Host checks, and the malformed-input answers.

mod common;
use common::*;
use serde_json::{Value, json};

async fn demo() -> (portico::demo::Demo, reqwest::Client, String) {
    let d = portico::demo::start(0).await.expect("demo starts");
    let url = d.mcp_url();
    (d, reqwest::Client::new(), url)
}

#[tokio::test]
async fn modern_discover_and_list_carry_required_fields() {
    let (d, c, url) = demo().await;
    let a = send(modern(&c, &url, 1, "server/discover", json!({}))).await;
    assert_eq!(a.status, 200);
    let r = a.result();
    assert_eq!(r["resultType"], "complete");
    assert!(r["ttlMs"].is_u64());
    assert_eq!(r["cacheScope"], "public");
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert_eq!(r["capabilities"]["tools"]["listChanged"], false);
    // Resources and prompts are declared and answer well-formed empty lists with cache hints.
    assert!(r["capabilities"]["prompts"].is_object() && r["capabilities"]["resources"].is_object());
    for (m, key) in [
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ] {
        let a = send(modern(&c, &url, 5, m, json!({}))).await;
        assert_eq!(a.result()[key], json!([]), "{m}");
        assert_eq!(a.result()["cacheScope"], "public", "{m}");
    }
    let a = send(modern(
        &c,
        &url,
        6,
        "resources/read",
        json!({"uri": "test://nope"}),
    ))
    .await;
    assert_eq!(
        (a.status, a.error_code()),
        (200, Some(-32602)),
        "2026-07-28: unknown resource is -32602"
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "portico-demo"
    );
    assert!(a.headers.get("mcp-session-id").is_none());

    let a = send(modern(&c, &url, 2, "tools/list", json!({}))).await;
    let tools = a.result()["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 14);
    for t in tools {
        assert!(
            t["description"].as_str().is_some_and(|s| !s.is_empty()),
            "{}",
            t["name"]
        );
        assert_eq!(t["inputSchema"]["type"], "object", "{}", t["name"]);
        assert_eq!(t["outputSchema"]["type"], "object", "{}", t["name"]);
        let name = t["name"].as_str().unwrap();
        assert!(
            name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        );
    }
    assert_eq!(a.result()["resultType"], "complete");
    assert_eq!(a.result()["cacheScope"], "public");
    // Stable order across calls.
    let again = send(modern(&c, &url, 3, "tools/list", json!({}))).await;
    assert_eq!(again.result()["tools"], a.result()["tools"]);
    d.stop().await;
}

#[tokio::test]
async fn tools_list_paginates_with_opaque_cursors() {
    let (backend, _) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let info = portico::mcp::handler::ServerInfo {
        page_size: 4,
        ..Default::default()
    };
    let g = gateway_with(&[dir.join("usp.yaml")], info).await;
    let (c, url) = (reqwest::Client::new(), g.mcp_url());
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..5 {
        let params = match &cursor {
            Some(cur) => json!({"cursor": cur}),
            None => json!({}),
        };
        let a = send(modern(&c, &url, page, "tools/list", params)).await;
        for t in a.result()["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        assert_eq!(
            a.result()["cacheScope"],
            "public",
            "same scope on every page"
        );
        match a.result()["nextCursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => break,
        }
    }
    assert_eq!(
        names,
        ["echo_get", "echo_post", "status", "slow", "text", "shape"]
    );
    let bad = send(modern(
        &c,
        &url,
        9,
        "tools/list",
        json!({"cursor": "bm90LWEtY3Vyc29y"}),
    ))
    .await;
    assert_eq!(bad.error_code(), Some(-32602));
    g.stop().await.unwrap();
}

#[tokio::test]
async fn modern_header_and_meta_rules() {
    let (d, c, url) = demo().await;
    let body = |m: &str, meta: Value| {
        json!({"jsonrpc":"2.0","id":7,"method":m,"params":{"name":"usp_services_list","arguments":{},"_meta":meta}}).to_string()
    };
    let good_meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let base = || {
        c.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
    };
    // Missing Mcp-Method.
    let a = send(
        base()
            .header("mcp-name", "usp_services_list")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32020)));
    assert_eq!(a.body["id"], 7, "errors echo the request id");
    // Mcp-Method mismatch.
    let a = send(
        base()
            .header("mcp-method", "tools/list")
            .header("mcp-name", "usp_services_list")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32020)));
    // Missing / mismatched Mcp-Name.
    let a = send(
        base()
            .header("mcp-method", "tools/call")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32020)));
    let a = send(
        base()
            .header("mcp-method", "tools/call")
            .header("mcp-name", "other")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32020)));
    // Base64-encoded Mcp-Name is decoded.
    let a = send(
        base()
            .header("mcp-method", "tools/call")
            .header("mcp-name", "=?base64?dXNwX3NlcnZpY2VzX2xpc3Q=?=")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.result()["resultType"], "complete");
    // Header version differs from _meta.
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "usp_services_list")
            .body(body("tools/call", good_meta.clone())),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32020)));
    // Unsupported version.
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "1900-01-01")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "usp_services_list")
            .body(body("tools/call", json!({"io.modelcontextprotocol/protocolVersion": "1900-01-01", "io.modelcontextprotocol/clientCapabilities": {}}))),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32022)));
    assert_eq!(a.body["error"]["data"]["requested"], "1900-01-01");
    assert_eq!(a.body["error"]["data"]["supported"], json!(["2026-07-28"]));
    // Missing clientCapabilities.
    let a = send(
        base()
            .header("mcp-method", "tools/call")
            .header("mcp-name", "usp_services_list")
            .body(body(
                "tools/call",
                json!({"io.modelcontextprotocol/protocolVersion": MODERN}),
            )),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32602)));
    // Unknown and removed methods: HTTP 404 + -32601.
    for m in ["nope/nothing", "ping", "logging/setLevel", "initialize"] {
        let a = send(modern(&c, &url, 3, m, json!({}))).await;
        assert_eq!((a.status, a.error_code()), (404, Some(-32601)), "{m}");
    }
    // GET and DELETE without a session: 405.
    let a = send(
        c.get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", MODERN),
    )
    .await;
    assert_eq!(a.status, 405);
    let a = send(c.delete(&url)).await;
    assert_eq!(a.status, 405);
    // Notifications: 202, no body.
    let a = send(modern(&c, &url, 0, "notifications/cancelled", json!({})).body(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta": good_meta}}).to_string(),
    ))
    .await;
    assert_eq!((a.status, a.text.as_str()), (202, ""));
    d.stop().await;
}

#[tokio::test]
async fn legacy_sessions_lifecycle() {
    let (d, c, url) = demo().await;
    let (sid, a) = initialize(&c, &url, "2025-06-18").await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.result()["protocolVersion"],
        "2025-06-18",
        "a supported version is echoed"
    );
    assert!(!sid.is_empty() && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    assert!(a.result()["capabilities"]["tools"].is_object());
    let (_, a) = initialize(&c, &url, "2099-01-01").await;
    assert_eq!(
        a.result()["protocolVersion"],
        "2025-11-25",
        "unknown versions get the newest"
    );

    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    ))
    .await;
    assert_eq!((a.status, a.text.as_str()), (202, ""));
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":"r1","result":{}}),
    ))
    .await;
    // Answers are routed to the call that asked (`mcp::input`); one nobody asked for is refused.
    assert_eq!(
        a.status, 400,
        "a response to a request portico never sent is refused"
    );
    assert_eq!(a.error_code(), Some(-32600));
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":1,"method":"ping"}),
    ))
    .await;
    assert_eq!(a.result(), &json!({}));
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    ))
    .await;
    assert_eq!(a.result()["tools"].as_array().unwrap().len(), 14);
    assert!(
        a.result().get("resultType").is_none(),
        "no 2026 fields in the 2025 era"
    );
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":31,"method":"resources/read","params":{"uri":"test://nope"}}),
    ))
    .await;
    assert_eq!(
        a.error_code(),
        Some(-32002),
        "2025 revisions: unknown resource is -32002"
    );
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":3,"method":"no/such"}),
    ))
    .await;
    assert_eq!((a.status, a.error_code()), (200, Some(-32601)));
    // tools/call without `arguments` is `{}`.
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"usp_services_list"}}),
    ))
    .await;
    assert_eq!(a.sc()["services"].as_array().unwrap().len(), 3);

    // Missing session: 400; unknown session: 404; bad version header: 400.
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .body(json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}).to_string()),
    )
    .await;
    assert_eq!(a.status, 400);
    let a = send(legacy(
        &c,
        &url,
        "no-such-session",
        json!({"jsonrpc":"2.0","id":6,"method":"tools/list"}),
    ))
    .await;
    assert_eq!(a.status, 404);
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "1999-01-01")
            .body(json!({"jsonrpc":"2.0","id":7,"method":"tools/list"}).to_string()),
    )
    .await;
    assert_eq!(a.status, 400);

    // Accept: text/event-stream only -> the answer comes as SSE.
    let only = |accept: &'static str, id: i64| {
        c.post(&url)
            .header("content-type", "application/json")
            .header("mcp-session-id", &sid)
            .header("accept", accept)
            .body(json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string())
    };
    let a = send(only("text/event-stream", 8)).await;
    assert!(
        a.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(a.body["id"], 8);
    // Accept that allows neither: 406.
    let a = send(only("text/html", 9)).await;
    assert_eq!(a.status, 406);

    // GET opens an SSE stream for the session.
    let resp = c
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(resp);
    let a = send(
        c.get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", "nope"),
    )
    .await;
    assert_eq!(a.status, 404);

    // Batches: refused in a 2025-11-25 session, served in a 2025-03-26 one.
    let batch = json!([{"jsonrpc":"2.0","id":"a","method":"ping"}, {"jsonrpc":"2.0","method":"notifications/initialized"}, {"jsonrpc":"2.0","id":"b","method":"no/such"}, {"jsonrpc":"1.0","id":"c","method":"ping"}]);
    let a = send(legacy(&c, &url, &sid, batch.clone())).await;
    assert_eq!((a.status, a.error_code()), (400, Some(-32600)));
    let (old, _) = initialize(&c, &url, "2025-03-26").await;
    let a = send(legacy(&c, &url, &old, batch)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let replies = a.body.as_array().expect("a batch answer is an array");
    assert_eq!(replies.len(), 3, "no reply for the notification");
    assert_eq!(replies[0], json!({"jsonrpc":"2.0","id":"a","result":{}}));
    assert_eq!(replies[1]["error"]["code"], -32601);
    assert_eq!(
        (
            replies[2]["id"].clone(),
            replies[2]["error"]["code"].clone()
        ),
        (json!("c"), json!(-32600))
    );
    let a = send(legacy(
        &c,
        &url,
        &old,
        json!([{"jsonrpc":"2.0","method":"notifications/initialized"}]),
    ))
    .await;
    assert_eq!(a.status, 202);
    let a = send(legacy(&c, &url, &old, json!([]))).await;
    assert_eq!(a.status, 400);

    // DELETE ends the session; afterwards it is 404.
    let a = send(c.delete(&url).header("mcp-session-id", &sid)).await;
    assert_eq!(a.status, 200);
    let a = send(legacy(
        &c,
        &url,
        &sid,
        json!({"jsonrpc":"2.0","id":10,"method":"ping"}),
    ))
    .await;
    assert_eq!(a.status, 404);
    let a = send(c.delete(&url).header("mcp-session-id", &sid)).await;
    assert_eq!(a.status, 404);
    d.stop().await;
}

#[tokio::test]
async fn origin_and_host_are_validated() {
    let (d, c, url) = demo().await;
    let ping = || {
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}).to_string()
    };
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("host", "evil.example.com")
            .body(ping()),
    )
    .await;
    assert_eq!(a.status, 403);
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("origin", "http://evil.example.com")
            .body(ping()),
    )
    .await;
    assert_eq!(a.status, 403);
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("origin", "http://localhost:3000")
            .body(ping()),
    )
    .await;
    assert_eq!(a.status, 200);
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let a = send(
        c.post(&url)
            .header("content-type", "application/json")
            .header("host", format!("localhost:{port}"))
            .body(ping()),
    )
    .await;
    assert_eq!(a.status, 200);
    d.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_protocol_errors_and_the_server_keeps_serving() {
    let (d, c, url) = demo().await;
    let post = |body: String| {
        c.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
    };
    let cases: Vec<(String, u16, i64)> = vec![
        ("{not json".into(), 400, -32700),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.into(),
            400,
            -32600,
        ),
        (r#"{"id":1,"method":"ping"}"#.into(), 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(),
            400,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.into(),
            400,
            -32600,
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#.into(), 400, -32600),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"a":{}1{}}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
            400,
            -32600,
        ),
    ];
    for (body, status, code) in cases {
        let a = send(post(body.clone())).await;
        assert_eq!(
            (a.status, a.error_code()),
            (status, Some(code)),
            "{body:.60}"
        );
    }
    let a = send(post(r#"{"jsonrpc":"2.0","id":42}"#.into())).await;
    assert_eq!(a.body["id"], 42, "the id is echoed when it can be read");
    // Oversized body: 413.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let a = send(post(big)).await;
    assert_eq!(a.status, 413);
    assert!(
        a.headers.get("connection").is_none(),
        "a body a little over the limit is read and dropped: the connection stays usable"
    );
    // Wrong content type: 415.
    let a = send(c.post(&url).header("content-type", "text/plain").body("{}")).await;
    assert_eq!(a.status, 415);
    // Other HTTP methods: 405 with Allow.
    let a = send(c.put(&url)).await;
    assert_eq!(a.status, 405);
    assert!(a.headers.get("allow").is_some());
    // Other paths: 404.
    let a = send(
        c.post(url.replace("/mcp", "/other"))
            .header("content-type", "application/json")
            .body("{}"),
    )
    .await;
    assert_eq!(a.status, 404);
    // Still serving.
    let a = call(&c, &url, "usp_services_list", json!({})).await;
    assert_eq!(a.sc()["services"].as_array().unwrap().len(), 3);
    d.stop().await;
}

#[tokio::test]
async fn a_body_far_over_the_limit_is_refused_unread_and_the_connection_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (d, _c, url) = demo().await;
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .expect("an http URL")
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    // 1 GiB announced, a few bytes sent: the answer must not wait for the rest.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: 1073741824\r\n\r\n{{\"jsonrpc\""
    );
    s.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        s.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(read.is_ok(), "the server closes the connection: {text}");
    assert!(text.starts_with("http/1.1 413"), "{text}");
    assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
    d.stop().await;
}
