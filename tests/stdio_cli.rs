//! `portico stdio`: a real child process speaking MCP on its stdin/stdout to the demo backend.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[tokio::test]
async fn stdio_serves_the_demo_mappings() {
    let (addr, _task) = portico::demo::backend::spawn("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = portico::demo::write_files(addr, None).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("stdio")
        .args(["--server-name", "autonym"])
        .arg(dir.join("mappings"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("portico stdio starts");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"usp_services_list","arguments":{}}}),
    ];
    let reader = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .take(2)
            .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
            .collect::<Vec<_>>()
    });
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    stdin.flush().unwrap();
    let out = reader.await.unwrap();
    drop(stdin);
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
    let status = child.wait().unwrap();
    assert!(status.success(), "portico stdio exits 0 when stdin closes");
}
