//! `portico stdio`: a real child process speaking MCP on its stdin/stdout to the demo backend.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Runs `portico stdio [args] <dir>/mappings`, writes `requests`, reads `answers` lines; the exit
/// status once stdin closes.
async fn run_stdio(
    dir: &std::path::Path,
    args: &[&str],
    requests: Vec<Value>,
    answers: usize,
) -> (Vec<Value>, std::process::ExitStatus) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("stdio")
        .args(args)
        .arg(dir.join("mappings"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("portico stdio starts");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .take(answers)
            .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
            .collect::<Vec<_>>()
    });
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    stdin.flush().unwrap();
    let out = reader.await.unwrap();
    drop(stdin);
    (out, child.wait().unwrap())
}

#[tokio::test]
async fn stdio_serves_the_demo_mappings() {
    let (addr, _task) = portico::demo::backend::spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = portico::demo::write_files(addr, None).unwrap();
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"usp_services_list","arguments":{}}}),
    ];
    let (out, status) = run_stdio(&dir, &["--server-name", "autonym"], requests.to_vec(), 2).await;
    assert_eq!(out[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        out[0]["result"]["serverInfo"]["name"], "autonym",
        "--server-name"
    );
    let services = out[1]["result"]["structuredContent"]["services"]
        .as_array()
        .unwrap();
    assert_eq!(
        services
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["MASSAGE-60", "FACIAL-45", "SAUNA-30"]
    );
    assert!(status.success(), "portico stdio exits 0 when stdin closes");
}

/// `portico stdio --webhook-listen`: a signed webhook POSTed to its listener comes out on stdout
/// as a notification of the initialized 2025 session, and nothing else ever does.
#[tokio::test]
async fn stdio_writes_webhook_notifications_to_stdout() {
    use portico::webhook::keys::{Alg, SigningKey};
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "biz").unwrap();
    let dir = std::env::temp_dir().join(format!(
        "portico-stdio-wh-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("keys.json"),
        json!({"keys": [key.verifying_key().jwk()]}).to_string(),
    )
    .unwrap();
    let openrpc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openrpc/usp.openrpc.json");
    std::fs::write(
        dir.join("spa.yaml"),
        format!(
            "business: spa\nbinding: usp\nopenrpc: {}\nbackend:\n  url: http://127.0.0.1:9/spa\ntools: {{}}\nwebhooks:\n  jwks: keys.json\n  algorithms: [ecdsa-p256-sha256]\n  transform: '{{ event: \"booking.confirmed\", event_id: .id, booking_id: .booking, timestamp: .at }}'\n",
            openrpc.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("stdio")
        .arg(dir.join("spa.yaml"))
        .args(["--webhook-listen", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("portico stdio starts");
    let stderr = child.stderr.take().unwrap();
    let webhooks = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr).lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("webhooks: ").map(str::to_string))
            .expect("the webhook URL on stderr");
        // Keep draining stderr so the child never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        url
    })
    .await
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&l).expect("stdout carries JSON only"));
        }
    });
    let next = |lines: &mut tokio::sync::mpsc::UnboundedReceiver<Value>| {
        let got = lines.try_recv();
        got.ok()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}});
    writeln!(stdin, "{init}").unwrap();
    stdin.flush().unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), lines.recv())
        .await
        .expect("initialize answered")
        .unwrap();
    assert_eq!(answer["id"], 1);

    let url = url::Url::parse(&format!("{webhooks}spa")).unwrap();
    let body = json!({"id": "wh-stdio", "booking": "B-9", "at": "2026-12-01T09:00:00Z"})
        .to_string()
        .into_bytes();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let headers = portico::webhook::sig::sign_webhook(&key, &url, &body, now).unwrap();
    let status = reqwest::Client::new()
        .post(url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 202);
    let note = tokio::time::timeout(std::time::Duration::from_secs(10), lines.recv())
        .await
        .expect("the notification on stdout")
        .unwrap();
    assert_eq!(note["method"], "usp_webhook", "{note}");
    assert!(note.get("id").is_none(), "a notification has no id");
    assert_eq!(note["params"]["event_id"], "wh-stdio");
    assert_eq!(note["params"]["booking_id"], "B-9");
    assert_eq!(next(&mut lines), None, "one event, one line");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// Over stdio there are no HTTP headers: credentials ride in `_meta.usp.authorization`.
#[tokio::test]
async fn stdio_takes_credentials_from_meta_usp_authorization() {
    let (addr, _task) = portico::demo::backend::spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = portico::demo::write_files(addr, None).unwrap();
    portico::demo::secure_files(&dir).unwrap();
    let get = |id: i64, auth: Value| {
        let mut usp = json!({"profile": "https://agent.example/p.json"});
        if !auth.is_null() {
            usp["authorization"] = auth;
        }
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"usp_bookings_get",
               "arguments":{"booking_id":"A-9999","_meta":{"usp": usp}}}})
    };
    let key = portico::demo::SECURE_API_KEY;
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        get(2, Value::Null),
        get(3, json!({"mechanism": "api_key", "credential": key})),
        get(
            4,
            json!({"mechanism": "api_key", "credential": "not-the-demo-key-000"}),
        ),
    ];
    let (out, status) = run_stdio(&dir, &[], requests.to_vec(), 4).await;
    let by_id = |id: i64| out.iter().find(|m| m["id"] == id).unwrap().clone();
    assert_eq!(by_id(2)["error"]["code"], -32006, "anonymous: {}", by_id(2));
    assert!(
        by_id(3)["result"]["structuredContent"].is_object(),
        "{}",
        by_id(3)
    );
    assert_eq!(by_id(4)["error"]["data"]["code"], "authentication_required");
    assert!(
        !by_id(4).to_string().contains("not-the-demo-key"),
        "never echoed"
    );
    assert!(status.success());
}
