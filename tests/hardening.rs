//! Smaller hostile-input refusals over real HTTP on 127.0.0.1: a NUL (or other control
//! character) in an argument that fills a path segment never reaches the backend; a request
//! without `Host` is refused on the MCP listener; the admin listener checks `Host` too.

mod common;
use common::*;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The status line of a raw HTTP/1.x request written to `addr`.
async fn raw_status(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn control_characters_in_path_arguments_never_reach_the_backend() {
    for binding in ["usp", "plain"] {
        let (g, seen, c, url) = gateway_on_test_backend(binding).await;
        let before = hits(&seen);
        for bad in ["a\u{0}b", "x\r\nHost: evil", "\u{7f}"] {
            let a = call(&c, &url, "echo_get", json!({"id": bad})).await;
            let refused = match binding {
                // The binding's invalid-arguments answer: a JSON-RPC error for USP, a tool
                // error for plain MCP (SEP-1303).
                "usp" => a.body["error"]["code"].is_i64(),
                _ => a.result()["isError"] == json!(true),
            };
            assert!(refused, "{binding} {bad:?}: {}", a.text);
            assert!(a.text.contains("control characters"), "{}", a.text);
        }
        assert_eq!(
            hits(&seen),
            before,
            "{binding}: nothing reached the backend"
        );
        // An ordinary value still goes through.
        let a = call(&c, &url, "echo_get", json!({"id": "b-1"})).await;
        assert!(a.body.get("result").is_some(), "{}", a.text);
        assert_eq!(hits(&seen), before + 1);
        g.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_request_without_host_is_refused_on_mcp_and_admin() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let g = gateway_ops(
        &[dir.join("usp.yaml")],
        portico::app::Ops {
            admin: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    let admin = g.admin_addr.expect("admin listener");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |host: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\n{host}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    // MCP: HTTP/1.0 without Host, and HTTP/1.1 with a foreign one, are refused; localhost passes
    // the Host check (whatever the method's answer).
    let no_host = post("").replacen("HTTP/1.1", "HTTP/1.0", 1);
    assert!(raw_status(g.addr, &no_host).await.contains(" 403"));
    assert!(
        raw_status(g.addr, &post("Host: evil.example\r\n"))
            .await
            .contains(" 403")
    );
    let ok = raw_status(g.addr, &post("Host: localhost\r\n")).await;
    assert!(!ok.contains(" 403") && ok.starts_with("HTTP/1.1"), "{ok}");
    // Admin: an IP literal or localhost passes; a foreign name or no Host is refused.
    let get = |host: &str| format!("GET /healthz HTTP/1.1\r\n{host}Connection: close\r\n\r\n");
    for (host, want) in [
        (format!("Host: {admin}\r\n"), " 200"),
        (format!("Host: localhost:{}\r\n", admin.port()), " 200"),
        ("Host: rebind.evil.example\r\n".to_string(), " 403"),
    ] {
        let got = raw_status(admin, &get(&host)).await;
        assert!(got.contains(want), "{host:?}: {got}");
    }
    let got = raw_status(admin, "GET /healthz HTTP/1.0\r\n\r\n").await;
    assert!(got.contains(" 403"), "no Host: {got}");
    g.stop().await.unwrap();
}
