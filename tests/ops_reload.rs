//! Hot reload over real HTTP: a changed mapping adds a tool, a broken one is refused (old
//! configuration keeps serving; the failure shows in /metrics and /readyz), a deleted
//! configuration folder is refused the same way, and a Kubernetes ConfigMap-style `..data`
//! symlink swap is picked up.

mod common;

use common::*;
use portico::app::{Ops, Running};
use portico::ops::reload::Watch;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The fixture's `text` tool: removed before start, added back to simulate a new tool (every
/// tool must be a method of the fixture's OpenRPC document).
const NEW_TOOL: &str = "  text:\n    http: GET /text\n";

fn remove_tool(file: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(NEW_TOOL), "fixture changed: {text}");
    std::fs::write(file, text.replace(NEW_TOOL, "")).unwrap();
}

async fn watched(paths: Vec<PathBuf>) -> Running {
    let ops = Ops {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        watch: Some(Watch {
            paths: paths.clone(),
            interval: Some(Duration::from_millis(50)),
            sighup: false,
        }),
        ..Ops::default()
    };
    gateway_ops(&paths, ops).await
}

async fn readyz(client: &reqwest::Client, admin: &str) -> (u16, Value) {
    let r = client.get(format!("{admin}readyz")).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn tool_names(client: &reqwest::Client, url: &str) -> Vec<String> {
    let a = send(modern(client, url, 1, "tools/list", json!({}))).await;
    a.result()["tools"]
        .as_array()
        .expect("tools/list answers")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// Polls `check` until it holds; fails the test after a generous bound (not a timing assertion:
/// the bound only stops a broken reloader from hanging the suite).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never happened: {what}");
}

/// Waits until `tools/list` names the re-added tool.
async fn until_listed(client: &reqwest::Client, url: &str, what: &str) {
    eventually(what, || async {
        tool_names(client, url).await.contains(&"text".to_string())
    })
    .await;
}

fn add_tool(file: &Path) {
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str(NEW_TOOL);
    std::fs::write(file, text).unwrap();
}

#[tokio::test]
async fn a_changed_mapping_file_adds_a_tool() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let file = dir.join("plain.yaml");
    remove_tool(&file);
    let gw = watched(vec![file.clone()]).await;
    let client = reqwest::Client::new();
    let url = gw.mcp_url();
    assert!(
        !tool_names(&client, &url)
            .await
            .contains(&"text".to_string())
    );

    add_tool(&file);
    until_listed(&client, &url, "the new tool is listed").await;
    let a = call(&client, &url, "text", json!({})).await;
    // Served by the new configuration: a tool result, not "Unknown tool".
    assert!(a.error_code().is_none(), "{}", a.text);
    assert!(a.result()["content"].is_array(), "{}", a.text);
    assert_eq!(gw.reload.report().generation, 1);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn a_broken_mapping_is_refused_and_reported() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let file = dir.join("plain.yaml");
    remove_tool(&file);
    // Watch the folder (so the reloader lists it), holding one business only.
    std::fs::remove_file(dir.join("usp.yaml")).unwrap();
    let gw = watched(vec![dir.clone()]).await;
    let client = reqwest::Client::new();
    let url = gw.mcp_url();
    let admin = gw.admin_url().unwrap();

    std::fs::write(&file, "business: [this is not a mapping\n").unwrap();
    eventually("the failed reload shows in /readyz", || async {
        readyz(&client, &admin).await.1["config"]["reload"]["last_ok"] == false
    })
    .await;

    // The previous configuration keeps serving.
    let a = call(&client, &url, "echo_get", json!({"id": "still"})).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/still", "{}", a.text);

    let (status, body) = readyz(&client, &admin).await;
    assert_eq!(
        status, 200,
        "a refused reload does not make serving unready"
    );
    let reload = &body["config"]["reload"];
    assert_eq!(reload["generation"], 0);
    assert!(reload["failures"].as_u64().unwrap() >= 1, "{reload}");
    assert!(
        reload["last_error"]
            .as_str()
            .unwrap()
            .contains("plain.yaml"),
        "{reload}"
    );

    let metrics = client
        .get(format!("{admin}metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portico_config_reload_failures_total "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(failures.is_some_and(|f| f >= 1.0), "{metrics}");
    assert!(
        metrics.contains("portico_config_last_reload_success 0")
            || metrics.contains("portico_config_last_reload_success 1"),
        "{metrics}"
    );

    // Fixing the file is picked up again.
    let fixed = std::fs::read_to_string(fixtures().join("gateway/plain.yaml"))
        .unwrap()
        .replace("127.0.0.1:9101", &addr.to_string());
    std::fs::write(&file, fixed).unwrap();
    // `text` stayed listed all along (the old configuration kept serving): wait for the reload.
    let reload = gw.reload.clone();
    eventually("the fixed file is applied", || {
        let ok = reload.report().last_ok;
        async move { ok }
    })
    .await;
    until_listed(&client, &url, "the fixed configuration serves").await;
    gw.stop().await.unwrap();
}

/// The whole configuration folder disappears while portico serves (a volume unmounted, a
/// ConfigMap deleted): the reload is refused and the last good configuration keeps serving;
/// when the folder comes back it is applied.
#[tokio::test]
async fn a_deleted_config_directory_keeps_the_last_good_configuration() {
    let (addr, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let saved = fixture_with_backend("gateway", &addr.to_string());
    std::fs::remove_file(dir.join("usp.yaml")).unwrap();
    std::fs::remove_file(saved.join("usp.yaml")).unwrap();
    remove_tool(&dir.join("plain.yaml"));
    let gw = watched(vec![dir.clone()]).await;
    let client = reqwest::Client::new();
    let (url, admin) = (gw.mcp_url(), gw.admin_url().unwrap());
    let before = tool_names(&client, &url).await;
    assert!(before.contains(&"echo_get".to_string()), "{before:?}");

    std::fs::remove_dir_all(&dir).unwrap();
    eventually("the refused reload shows in /readyz", || async {
        readyz(&client, &admin).await.1["config"]["reload"]["last_ok"] == false
    })
    .await;
    let (status, body) = readyz(&client, &admin).await;
    assert_eq!(status, 200, "still ready: {body}");
    let reload = &body["config"]["reload"];
    assert_eq!(reload["generation"], 0, "{reload}");
    assert!(
        reload["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(&*dir.to_string_lossy())),
        "the error names the folder: {reload}"
    );
    // Same tools, and calls still reach the backend.
    assert_eq!(tool_names(&client, &url).await, before);
    let a = call(&client, &url, "echo_get", json!({"id": "kept"})).await;
    assert_eq!(a.sc()["path"], "/t/echo/items/kept", "{}", a.text);

    // The folder comes back (with one more tool): applied.
    std::fs::rename(&saved, &dir).unwrap();
    until_listed(&client, &url, "the restored folder is applied").await;
    assert_eq!(gw.reload.report().generation, 1);
    gw.stop().await.unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn a_configmap_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    let (addr, _seen) = test_backend().await;
    let src = fixture_with_backend("gateway", &addr.to_string());
    // The layout the kubelet writes: real files in a timestamped folder, `..data` pointing at
    // it, and each visible file a symlink through `..data`.
    let mount = std::env::temp_dir().join(format!("portico-cm-{}", uuid::Uuid::new_v4().simple()));
    let v1 = mount.join("..2026_11_30_v1");
    std::fs::create_dir_all(&v1).unwrap();
    for f in ["plain.yaml", "test.openrpc.json"] {
        std::fs::copy(src.join(f), v1.join(f)).unwrap();
        symlink(Path::new("..data").join(f), mount.join(f)).unwrap();
    }
    remove_tool(&v1.join("plain.yaml"));
    symlink("..2026_11_30_v1", mount.join("..data")).unwrap();

    let gw = watched(vec![mount.clone()]).await;
    let client = reqwest::Client::new();
    let url = gw.mcp_url();
    assert!(
        tool_names(&client, &url)
            .await
            .contains(&"echo_get".to_string())
    );

    let v2 = mount.join("..2026_11_30_v2");
    std::fs::create_dir_all(&v2).unwrap();
    for f in ["plain.yaml", "test.openrpc.json"] {
        std::fs::copy(v1.join(f), v2.join(f)).unwrap();
    }
    add_tool(&v2.join("plain.yaml"));
    symlink("..2026_11_30_v2", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();

    until_listed(&client, &url, "the swapped-in tool is listed").await;
    gw.stop().await.unwrap();
}

/// Issue 9's soak saw RSS step up at each hot reload under load. This proves the reload itself
/// leaves nothing behind: after each of several reloads made while a slow call, a keyed call
/// and a 2025 GET stream are in flight on the old configuration, the old `Gateway` (and its
/// tools and businesses) is freed once that work ends; nothing keeps it alive (no Arc cycle, no
/// task of its own, no global cache).
#[tokio::test]
async fn a_replaced_configuration_is_freed_once_its_in_flight_work_ends() {
    use portico::ops::reload::{ReloadStatus, reload_now};
    use std::sync::{Arc, Weak};
    let (addr, seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &addr.to_string());
    let file = dir.join("usp.yaml");
    let gw = gateway(std::slice::from_ref(&file)).await;
    let core = gw.server.core.clone();
    let status = ReloadStatus::default();
    let client = reqwest::Client::new();
    let url = gw.mcp_url();
    let meta = json!({"usp": {"profile": "https://agent.example/p.json"}});
    let mut old: Vec<(
        Weak<portico::config::Gateway>,
        Weak<portico::config::Tool>,
        Weak<portico::config::Business>,
    )> = Vec::new();
    for round in 0..5 {
        let g = core.gateway.load_full();
        let tool = g.tools.get("slow").expect("the fixture has `slow`");
        old.push((
            Arc::downgrade(&g),
            Arc::downgrade(tool),
            Arc::downgrade(&tool.business),
        ));
        drop(g);
        // In flight on this configuration: a slow call (seen by the backend before the
        // reload), a GET stream, then a keyed call.
        let slow_seen = || {
            seen.requests
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r["path"].as_str().is_some_and(|p| p.contains("/slow/")))
                .count()
        };
        let before = slow_seen();
        let slow = {
            let (client, url, meta) = (client.clone(), url.clone(), meta.clone());
            tokio::spawn(async move {
                call(&client, &url, "slow", json!({"ms": 300, "_meta": meta})).await
            })
        };
        eventually("the backend saw the slow call", || {
            let started = slow_seen() > before;
            async move { started }
        })
        .await;
        let (sid, _) = initialize(&client, &url, "2025-11-25").await;
        let stream = client
            .get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .expect("GET stream");
        assert_eq!(stream.status(), 200);
        let keyed = call(
            &client,
            &url,
            "echo_post",
            json!({"name": "x", "_meta": {"usp": {"profile": "https://agent.example/p.json", "idempotency_key": format!("k-{round}")}}}),
        )
        .await;
        assert!(keyed.result().is_object(), "{}", keyed.text);

        reload_now(&core, std::slice::from_ref(&file), &status).expect("the same files reload");
        assert_eq!(status.report().generation, round + 1);
        let after = call(
            &client,
            &url,
            "echo_get",
            json!({"id": "new", "_meta": meta}),
        )
        .await;
        assert_eq!(after.sc()["path"], "/t/echo/items/new", "{}", after.text);

        // The in-flight work ends: the slow call answers (a result, or the timeout error on a
        // loaded machine: either way it ran on the old configuration), the stream is closed.
        let answered = slow.await.expect("slow call task");
        assert!(
            answered.result().is_object() || answered.error_code().is_some(),
            "{}",
            answered.text
        );
        drop(stream);
        let _ = client
            .delete(&url)
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await;
        let (g, t, b) = old.last().cloned().expect("pushed above");
        eventually("the replaced configuration is freed", || {
            let freed = g.upgrade().is_none() && t.upgrade().is_none() && b.upgrade().is_none();
            async move { freed }
        })
        .await;
    }
    // Every replaced generation is gone; only the serving one is alive.
    assert!(
        old.iter()
            .all(|(g, t, b)| g.strong_count() + t.strong_count() + b.strong_count() == 0)
    );
    assert_eq!(
        Arc::strong_count(&core.gateway.load_full()),
        2,
        "the swap and this load"
    );
    gw.stop().await.unwrap();
}
