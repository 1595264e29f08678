//! The admin status page (`/`) rendered by headless Chromium (Debian `chromium`, installed by
//! scripts/test) with a screenshot and checks of its text: businesses and tools, backend health
//! and an open breaker, recent calls, webhooks, reload history. Chromium runs with external
//! name resolution disabled, so the page must render from the admin listener alone.

mod common;

use common::*;
use portico::app::Ops;
use portico::ops::reload::Watch;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs headless Chromium on `url` with a fresh profile; `extra` picks the output.
fn chromium(url: &str, extra: &[String]) -> std::process::Output {
    let profile = std::env::temp_dir().join(format!(
        "portico-chromium-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let mut args: Vec<String> = [
        "120", // failure guard only: a hung browser ends the test instead of blocking it
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        // Nothing but the admin listener resolves: the page must need no network.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.extend(extra.iter().cloned());
    args.push(url.to_string());
    let out = Command::new("timeout").args(&args).output().expect(
        "chromium runs (Debian package `chromium`; scripts/test installs it): cannot start it",
    );
    let _ = std::fs::remove_dir_all(&profile);
    out
}

/// The visible text of an HTML document: the style sheet and tags dropped (inline tags without
/// a gap, others as a space), the entities the page escapes decoded, whitespace collapsed.
fn text_of(html: &str) -> String {
    let html = match (html.find("<style>"), html.find("</style>")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &html[..a], &html[b..]),
        _ => html.to_string(),
    };
    let mut out = String::new();
    let mut rest = html.as_str();
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = rest[open + 1..open + close].trim_start_matches('/');
        let name = tag.split([' ', '>']).next().unwrap_or("");
        if !matches!(name, "code" | "span" | "a") {
            out.push(' ');
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..400 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_renders_in_headless_chromium() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    // usp: a backend that is down, with a breaker that opens on the first failure.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Tool names are unique across files: usp serves `slow`, plain the others.
    std::fs::write(
        dir.join("usp.yaml"),
        format!(
            "business: status-usp\nbinding: usp\nopenrpc: test.openrpc.json\nbackend:\n  url: http://{closed}/t\n  timeout: 400ms\n  breaker: {{ failures: 1, open_for: 1m }}\nprotocol:\n  version: \"2026-08-20\"\ntools:\n  slow:\n    http: GET /slow/{{ms}}\n"
        ),
    )
    .unwrap();
    let plain = dir.join("plain.yaml");
    let plain_text = std::fs::read_to_string(&plain).unwrap();
    let slow = "  slow:\n    http: GET /slow/{ms}\n    progress_every: 50ms\n";
    assert!(plain_text.contains(slow), "fixture changed");
    let plain_text = plain_text
        .replace(slow, "")
        .replace("business: test-plain", "business: status-plain");
    std::fs::write(&plain, &plain_text).unwrap();
    std::fs::remove_file(dir.join("autonym.yaml")).unwrap();
    let g = gateway_ops(
        std::slice::from_ref(&dir),
        Ops {
            admin: Some("127.0.0.1:0".parse().unwrap()),
            watch: Some(Watch {
                paths: vec![dir.clone()],
                interval: Some(Duration::from_millis(50)),
                sighup: false,
            }),
            ..Ops::default()
        },
    )
    .await;
    let (url, admin) = (g.mcp_url(), g.admin_url().unwrap());
    let c = reqwest::Client::new();
    let ok = call(&c, &url, "echo_get", json!({"id": "page"})).await;
    assert!(ok.result().get("isError").is_none(), "{}", ok.text);
    let failed = call(&c, &url, "status", json!({"code": 502})).await;
    assert_eq!(failed.result()["isError"], true, "{}", failed.text);
    // The usp backend is down: the first call fails, and opens the breaker.
    let down = call(&c, &url, "slow", json!({"ms": 1})).await;
    assert_eq!(down.error_code(), Some(-32009), "{}", down.text);

    // A reload applied, then one refused (history, newest first).
    let reload = g.reload.clone();
    std::fs::write(&plain, format!("{plain_text}\n# touched\n")).unwrap();
    tokio::task::spawn_blocking({
        let reload = reload.clone();
        move || wait_for("a reload", || reload.report().generation >= 1)
    })
    .await
    .unwrap();
    std::fs::write(dir.join("broken.yaml"), "business: [not, a, name]\n").unwrap();
    tokio::task::spawn_blocking({
        let reload = reload.clone();
        move || wait_for("a refused reload", || reload.report().failures >= 1)
    })
    .await
    .unwrap();

    // The page as served: self-contained, and forbidding any fetch.
    let r = c.get(&admin).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    let served = r.text().await.unwrap();
    assert!(!served.contains("<script"), "no script on the page");
    assert!(!served.contains("src="), "no external resource on the page");

    let dom = {
        let admin = admin.clone();
        tokio::task::spawn_blocking(move || chromium(&admin, &["--dump-dom".to_string()]))
            .await
            .unwrap()
    };
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let text = text_of(&String::from_utf8_lossy(&dom.stdout));
    for expected in [
        "portico status",
        "not ready",
        "Businesses and backends",
        "status-plain plain",
        "status-usp usp",
        "echo_get, echo_post, status, text, shape",
        &format!("http://{backend}/t"),
        &format!("connect to 127.0.0.1:{} failed", closed.port()),
        "open (trial in",
        "Recent calls",
        "status-plain echo_get ok 200",
        "status-plain status tool_error 200",
        "status-usp slow error 200 -32009",
        "Webhooks",
        "No webhook accepted yet.",
        "No dead letters.",
        "Configuration reloads",
        "refused reload(s)",
        "applied 1",
        "refused 1",
        "broken.yaml",
    ] {
        assert!(
            text.contains(expected),
            "`{expected}` missing from:\n{text}"
        );
    }

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = {
        let (admin, shot) = (admin.clone(), shot.clone());
        tokio::task::spawn_blocking(move || {
            chromium(
                &admin,
                &[
                    format!("--screenshot={}", shot.display()),
                    "--window-size=1280,1400".to_string(),
                ],
            )
        })
        .await
        .unwrap()
    };
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    // IHDR: width and height as asked.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1280);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 1400);
    println!("status page screenshot: {}", shot.display());
    g.stop().await.unwrap();
}
