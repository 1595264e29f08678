//! The admin listener over real HTTP: health, readiness (backend up and down), Prometheus
//! metrics checked by `promtool`, and that none of it is reachable on the MCP port.

mod common;

use common::*;
use portico::app::{Ops, Running};
use serde_json::{Value, json};
use std::path::PathBuf;

async fn gateway_with_admin(files: &[PathBuf]) -> Running {
    let admin = Some("127.0.0.1:0".parse().unwrap());
    gateway_ops(
        files,
        Ops {
            admin,
            ..Ops::default()
        },
    )
    .await
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let r = client.get(url).send().await.expect("admin answers");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn healthz_readyz_and_metrics_on_the_admin_port() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let gw = gateway_with_admin(&[dir.join("plain.yaml")]).await;
    let admin = gw.admin_url().expect("admin listener runs");
    let client = reqwest::Client::new();

    assert_eq!(
        get(&client, &format!("{admin}healthz")).await,
        (200, "ok\n".into())
    );

    let (status, body) = get(&client, &format!("{admin}readyz")).await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["backends"][0]["business"], "test-plain");
    assert_eq!(body["backends"][0]["state"], "up");
    assert_eq!(body["config"]["reload"]["last_ok"], true);

    let ok = call(&client, &gw.mcp_url(), "echo_get", json!({"id": "a1"})).await;
    assert_eq!(ok.status, 200);
    let missing = call(&client, &gw.mcp_url(), "status", json!({"code": 404})).await;
    assert_eq!(missing.status, 200);

    let (status, metrics) = get(&client, &format!("{admin}metrics")).await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &metrics,
            r#"portico_requests_total{business="test-plain",tool="echo_get",outcome="ok",status="200"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"portico_upstream_requests_total{business="test-plain",tool="status",status="404"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"portico_request_duration_seconds_count{business="test-plain",tool="echo_get"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"portico_upstream_duration_seconds_count{business="test-plain",tool="echo_get"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE portico_sse_clients gauge"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE portico_config_reloads_total counter"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE portico_config_reload_failures_total counter"),
        "{metrics}"
    );
    promtool_accepts(&metrics);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn readyz_is_503_naming_an_unreachable_backend() {
    let (closed, _held) = refused_addr();
    let dir = fixture_with_backend("gateway", &closed.to_string());
    let gw = gateway_with_admin(&[dir.join("plain.yaml")]).await;
    let admin = gw.admin_url().unwrap();
    let (status, body) = get(&reqwest::Client::new(), &format!("{admin}readyz")).await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    let backend = &body["backends"][0];
    assert_eq!(backend["business"], "test-plain");
    assert_eq!(backend["state"], "down");
    assert!(
        backend["error"]
            .as_str()
            .unwrap()
            .contains(&closed.to_string()),
        "{backend}"
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn admin_routes_are_not_on_the_mcp_port() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let gw = gateway_with_admin(&[dir.join("plain.yaml")]).await;
    let client = reqwest::Client::new();
    let mcp_base = format!("http://{}", gw.addr);
    for path in ["/healthz", "/readyz", "/metrics", "/"] {
        let (status, body) = get(&client, &format!("{mcp_base}{path}")).await;
        assert_eq!(status, 404, "{path} on the MCP port: {body}");
        assert!(!body.contains("portico_"), "{path} leaked metrics: {body}");
    }
    // And the MCP endpoint is not on the admin port.
    let admin = gw.admin_url().unwrap();
    let a = call(
        &client,
        &format!("{admin}mcp"),
        "echo_get",
        json!({"id": "x"}),
    )
    .await;
    assert_eq!(a.status, 405, "{}", a.text);
    gw.stop().await.unwrap();
}

/// `portico health` (the container image's HEALTHCHECK): exit 0 on a 2xx, 1 with the reason
/// otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_command_checks_the_admin_listener() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let gw = gateway_with_admin(&[dir.join("plain.yaml")]).await;
    let admin = gw.admin_url().unwrap();
    let health = |url: String| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
                .args(["health", "--url", &url])
                .output()
                .unwrap()
        })
    };
    let ok = health(format!("{admin}healthz")).await.unwrap();
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("200 OK"));
    let missing = health(format!("{admin}nope")).await.unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"));
    gw.stop().await.unwrap();
    let down = health(format!("{admin}healthz")).await.unwrap();
    assert_eq!(down.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&down.stderr).contains("failed"));
}
