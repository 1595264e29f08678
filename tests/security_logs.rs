//! Secrets never reach the logs or the answers: `portico serve` (debug logging) with an API key
//! from the environment, called with the right key, wrong keys and a bearer token; the captured
//! stderr and every answer are searched for each secret.

mod common;
use common::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const SECRET: &str = "configured-secret-5d1c7e0b9a";
const WRONG: &str = "presented-wrong-key-44b1e9c2";
const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJzZWNyZXQtdG9rZW4ifQ.c2VjcmV0LXNpZ25hdHVyZQ";

#[tokio::test]
async fn configured_and_presented_secrets_are_never_logged_or_echoed() {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let file = dir.join("usp.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\nauthorization:\n  accepted_mechanisms: [api_key]\n  api_keys:\n    - { name: agent, value: \"${PORTICO_TEST_API_KEY}\" }\n");
    std::fs::write(&file, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("serve")
        .arg(&file)
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .env("PORTICO_TEST_API_KEY", SECRET)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("portico serve starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_once(": ")
        .expect("an `mcp: url` line")
        .1
        .trim()
        .to_string();
    let c = reqwest::Client::new();
    let args = json!({"name": "x", "_meta": {"usp": {"profile": "https://agent.example/p.json"}}});
    let mut answers = Vec::new();
    for headers in [
        vec![("x-api-key", SECRET.to_string())],
        vec![("authorization", format!("Bearer {SECRET}"))],
        vec![("x-api-key", WRONG.to_string())],
        vec![("authorization", format!("Bearer {TOKEN}"))],
        vec![("authorization", format!("Basic {WRONG}"))],
    ] {
        let mut rb = modern(
            &c,
            &url,
            1,
            "tools/call",
            json!({"name": "echo_post", "arguments": args}),
        );
        for (k, v) in &headers {
            rb = rb.header(*k, v);
        }
        answers.push(send(rb).await);
    }
    let mut meta_args = args.clone();
    meta_args["_meta"]["usp"]["authorization"] =
        json!({"mechanism": "api_key", "credential": WRONG});
    answers.push(call(&c, &url, "echo_post", meta_args).await);
    assert!(
        answers[0].body.get("result").is_some(),
        "the right key passes: {}",
        answers[0].text
    );
    assert!(
        answers[1].body.get("result").is_some(),
        "{}",
        answers[1].text
    );
    for a in &answers[2..] {
        assert_eq!(
            a.body["error"]["data"]["code"], "authentication_required",
            "{}",
            a.text
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let stderr = child.stderr.take().unwrap();
    let logs = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n")
    })
    .await
    .unwrap();
    let _ = child.wait();
    assert!(logs.contains("tools/call"), "the calls were logged: {logs}");
    // Each refusal is logged with its code and reason: a wrong credential at WARN, a missing
    // one (the Basic scheme is not read) at INFO.
    let refusals: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "call refused")
        .collect();
    assert_eq!(refusals.len(), 4, "one line per refused call: {logs}");
    for r in &refusals {
        assert_eq!(r["fields"]["code"], "authentication_required", "{r}");
        assert!(
            r["fields"]["reason"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{r}"
        );
    }
    assert!(
        refusals.iter().any(|r| r["level"] == "WARN"),
        "a presented wrong key is a warning: {refusals:?}"
    );
    for secret in [SECRET, WRONG, TOKEN, "c2VjcmV0LXNpZ25hdHVyZQ"] {
        assert!(
            !logs.contains(secret),
            "`{secret}` appears in the logs:\n{logs}"
        );
        for a in &answers {
            assert!(
                !a.text.contains(secret),
                "`{secret}` appears in an answer: {}",
                a.text
            );
        }
    }
    // The backend got portico's own static header, never the client's credentials.
    let seen = _seen.requests.lock().unwrap();
    for r in seen.iter() {
        let h = r["headers"].to_string();
        assert!(!h.contains(SECRET) && !h.contains(WRONG), "forwarded: {h}");
    }
}
