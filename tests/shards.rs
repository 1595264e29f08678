//! Connection shards (`--shards`) against a scriptable backend on 127.0.0.1: with no shards, one
//! and several, concurrent clients each get the answers to their own calls.

mod common;
use common::*;
use serde_json::json;

async fn gateway_with_shards(shards: usize, backend: &str) -> portico::app::Running {
    let dir = fixture_with_backend("gateway", backend);
    let g = portico::config::load(&[dir.join("plain.yaml")]).expect("fixture loads");
    let opts = portico::mcp::http::HttpOptions {
        shards,
        ..portico::mcp::http::HttpOptions::default()
    };
    portico::app::start(
        g,
        "127.0.0.1:0".parse().expect("address"),
        opts,
        portico::mcp::handler::ServerInfo::default(),
    )
    .await
    .expect("gateway starts")
}

#[tokio::test]
async fn concurrent_connections_get_their_own_answers_with_and_without_shards() {
    let (backend, seen) = test_backend().await;
    let mut total = 0;
    for shards in [0, 1, 3] {
        let g = gateway_with_shards(shards, &backend.to_string()).await;
        let url = g.mcp_url();
        let clients = (0..6).map(|c| {
            let url = url.clone();
            tokio::spawn(async move {
                // One keep-alive connection per client, so its calls land on one shard.
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .http1_only()
                    .build()
                    .expect("client");
                for n in 0..5 {
                    let id = format!("s{shards}-c{c}-n{n}");
                    let a = call(&client, &url, "echo_get", json!({ "id": id })).await;
                    assert_eq!(a.status, 200, "{}", a.text);
                    assert_eq!(
                        a.sc()["path"],
                        json!(format!("/t/echo/items/{id}")),
                        "each call gets its own backend answer: {}",
                        a.text
                    );
                }
            })
        });
        for c in clients.collect::<Vec<_>>() {
            c.await.expect("client task");
        }
        total += 30;
        assert_eq!(seen.requests.lock().expect("lock").len(), total);
    }
}
