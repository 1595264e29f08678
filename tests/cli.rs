//! The `portico` command line as users run it (the built binary): every subcommand's `--help`
//! shows examples and an environment variable for each flag, environment variables set flags,
//! exit codes follow the documented table, and `serve` announces endpoints, businesses and tools.
#![cfg(unix)]

mod common;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn portico() -> Command {
    Command::new(env!("CARGO_BIN_EXE_portico"))
}

fn run(args: &[&str]) -> Output {
    portico().args(args).output().expect("portico runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The subcommands `portico --help` lists (without `help`).
fn subcommands() -> Vec<String> {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let listed = help
        .split("Commands:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands section: {help}"));
    listed
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_subcommand_help_shows_examples_and_an_env_variable_per_flag() {
    let subs = subcommands();
    for expected in ["serve", "stdio", "demo", "facade", "check", "health"] {
        assert!(subs.iter().any(|s| s == expected), "{expected} in {subs:?}");
    }
    for sub in &subs {
        let out = run(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub}: {}", text(&out));
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`portico {sub} --help` has no Examples: {help}"));
        assert!(
            examples
                .lines()
                .any(|l| l.contains(&format!("portico {sub}"))),
            "`portico {sub} --help` has no example of `portico {sub}`: {examples}"
        );
        // Each flag's block (from its `--name` line to the next argument) names its variable.
        let mut blocks: Vec<String> = Vec::new();
        for line in help.split("Examples:\n").next().unwrap_or("").lines() {
            let indent = line.len() - line.trim_start().len();
            let starts_arg = indent > 0 && indent < 8 && !line.trim().is_empty();
            if starts_arg {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        let mut flags = 0;
        for block in &blocks {
            let first = block.trim_start();
            let is_flag = first.starts_with('-')
                && !first.starts_with("-h, --help")
                && !first.starts_with("-V, --version");
            if is_flag {
                flags += 1;
                assert!(
                    block.contains("[env: "),
                    "`portico {sub}`: a flag without an environment variable:\n{block}"
                );
            }
        }
        // Every subcommand but `openapi` (one positional argument) has flags.
        assert!(
            flags > 0 || sub == "openapi",
            "{sub}: no flags found in {help}"
        );
    }
}

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Reads `name: url` lines from a child's stdout until `want` were read.
fn stdout_urls(child: &mut Child, want: usize) -> Vec<(String, String)> {
    BufReader::new(child.stdout.take().unwrap())
        .lines()
        .take(want)
        .map(|l| {
            let l = l.unwrap();
            let (name, url) = l
                .split_once(": ")
                .unwrap_or_else(|| panic!("unexpected line: {l:?}"));
            (name.to_string(), url.trim().to_string())
        })
        .collect()
}

fn plain_fixture() -> PathBuf {
    // No backend needs to answer for these tests: portico starts with its backends down.
    common::fixture_with_backend("gateway", "127.0.0.1:9").join("plain.yaml")
}

#[test]
fn environment_variables_set_flags_and_the_command_line_wins() {
    let port = free_port();
    let mut child = portico()
        .arg("serve")
        .env("PORTICO_CONFIG", plain_fixture())
        .env("PORTICO_LISTEN", format!("127.0.0.1:{port}"))
        .env("PORTICO_ADMIN_ADDR", "127.0.0.1:0")
        .env("PORTICO_RELOAD_INTERVAL", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let urls = stdout_urls(&mut child, 2);
    assert_eq!(urls[0].0, "mcp");
    assert_eq!(urls[0].1, format!("http://127.0.0.1:{port}/mcp"));
    assert_eq!(
        urls[1].0, "admin",
        "PORTICO_ADMIN_ADDR turned the admin listener on"
    );
    common::terminate(child);

    // A flag on the command line wins over its variable.
    let mut child = portico()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg(plain_fixture())
        .env("PORTICO_LISTEN", format!("127.0.0.1:{port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let urls = stdout_urls(&mut child, 1);
    assert_ne!(urls[0].1, format!("http://127.0.0.1:{port}/mcp"));
    common::terminate(child);

    // A variable's value is checked like the flag's: a bad one is a usage error.
    let out = portico()
        .arg("serve")
        .arg(plain_fixture())
        .env("PORTICO_LISTEN", "not-an-address")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not-an-address"), "{}", text(&out));
}

/// The documented table (README "Exit codes"): 0 ok, 1 input refused, 2 usage, 3 cannot start.
#[test]
fn exit_codes_follow_the_documented_table() {
    let code = |out: &Output| out.status.code();
    // 0: help, version, a clean check.
    assert_eq!(code(&run(&["--help"])), Some(0));
    assert_eq!(code(&run(&["serve", "--help"])), Some(0));
    assert_eq!(code(&run(&["--version"])), Some(0));
    let fixture = plain_fixture();
    let fixture = fixture.to_str().unwrap();
    assert_eq!(code(&run(&["check", fixture])), Some(0));

    // 1: the configuration (or a file a flag names) is refused.
    let dir = fixture_dir();
    let broken = dir.join("broken.yaml");
    std::fs::write(&broken, "business: [unclosed\n").unwrap();
    let broken = broken.to_str().unwrap();
    for args in [
        vec!["serve", broken, "--listen", "127.0.0.1:0"],
        vec![
            "serve",
            "/no/such/portico/config",
            "--listen",
            "127.0.0.1:0",
        ],
        vec!["stdio", broken],
        vec!["check", broken],
        vec!["facade", broken, "--listen", "127.0.0.1:0"],
        vec!["openapi", broken],
        vec![
            "serve",
            fixture,
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "/no/such.crt",
            "--tls-key",
            "/no/such.key",
        ],
        vec!["serve", fixture, "--otlp-endpoint", "not a url"],
        // MCP authorization: `serve` trusts https issuers only; a resource must be a URI.
        vec![
            "serve",
            fixture,
            "--listen",
            "127.0.0.1:0",
            "--oauth-issuer",
            "http://127.0.0.1:9400",
        ],
        vec![
            "serve",
            fixture,
            "--listen",
            "127.0.0.1:0",
            "--oauth-issuer",
            "https://as.example",
            "--oauth-resource",
            "mcp",
        ],
        vec!["demo", "--port", "0", "--oauth-issuer", "http://as.example"],
    ] {
        let out = run(&args);
        assert_eq!(code(&out), Some(1), "{args:?}: {}", text(&out));
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    let (refused, _held) = common::refused_addr();
    let out = run(&["health", "--url", &format!("http://{refused}/healthz")]);
    assert_eq!(code(&out), Some(1), "{}", text(&out));

    // 2: usage.
    for args in [
        vec!["frobnicate"],
        vec!["serve"],
        vec!["serve", fixture, "--no-such-flag"],
        vec!["serve", fixture, "--listen", "nowhere"],
        vec!["serve", fixture, "--shutdown-timeout", "soon"],
        vec!["serve", fixture, "--webhook-dedupe-window", "721h"],
        vec!["serve", fixture, "--webhook-dedupe-window", "0h"],
        vec!["serve", fixture, "--webhook-replay", "0"],
        vec!["serve", fixture, "--webhook-latest", "0"],
        vec!["serve", fixture, "--tls-cert", "only.crt"],
        vec![],
    ] {
        let out = run(&args);
        assert_eq!(code(&out), Some(2), "{args:?}: {}", text(&out));
    }

    // 3: an address that is taken (MCP listener, admin listener, facade listener).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let facade = dir.join("facade.yaml");
    std::fs::write(
        &facade,
        "facade: f\nbinding: usp\nupstream:\n  url: http://127.0.0.1:9/mcp\nroutes:\n  GET /x: echo_get\n",
    )
    .unwrap();
    let facade = facade.to_str().unwrap();
    for args in [
        vec!["serve", fixture, "--listen", &taken],
        vec![
            "serve",
            fixture,
            "--listen",
            "127.0.0.1:0",
            "--admin-addr",
            &taken,
        ],
        vec!["facade", facade, "--listen", &taken],
    ] {
        let out = run(&args);
        assert_eq!(code(&out), Some(3), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("cannot listen on"), "{}", text(&out));
        assert!(
            text(&out).contains(&taken),
            "names the address: {}",
            text(&out)
        );
    }
}

fn fixture_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "portico-cli-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The JSON log lines of `child`'s stderr up to the banner's last business line.
fn banner_lines(child: &mut Child, businesses: usize) -> Vec<Value> {
    let mut lines = Vec::new();
    let mut seen = 0;
    for l in BufReader::new(child.stderr.take().unwrap()).lines() {
        let l = l.unwrap();
        let v: Value =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"));
        if v["fields"]["message"] == "business loaded" {
            seen += 1;
        }
        lines.push(v);
        if seen == businesses {
            break;
        }
    }
    lines
}

#[test]
fn serve_announces_endpoints_businesses_and_tools_on_the_log() {
    let mappings = Path::new(env!("CARGO_MANIFEST_DIR")).join("mappings");
    // What the banner must say, from the configuration itself.
    let expected = portico::config::load(std::slice::from_ref(&mappings)).expect("mappings load");
    assert!(expected.businesses.len() > 1);
    let mut child = portico()
        .arg("serve")
        .arg(&mappings)
        .args(["--listen", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--reload-interval", "off"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let urls = stdout_urls(&mut child, 2);
    let lines = banner_lines(&mut child, expected.businesses.len());
    let ready = lines
        .iter()
        .find(|v| v["fields"]["message"] == "portico ready")
        .unwrap_or_else(|| panic!("no `portico ready` line: {lines:?}"));
    let endpoints = ready["fields"]["endpoints"].as_str().unwrap();
    for (name, url) in &urls {
        assert!(
            endpoints.contains(&format!("{name}={url}")),
            "{name} in {endpoints}"
        );
    }
    assert!(endpoints.contains("webhooks="), "{endpoints}");
    assert_eq!(ready["fields"]["tools"], expected.tools.len());
    assert_eq!(ready["fields"]["businesses"], expected.businesses.len());
    for b in &expected.businesses {
        let line = lines
            .iter()
            .find(|v| {
                v["fields"]["message"] == "business loaded" && v["fields"]["business"] == b.name
            })
            .unwrap_or_else(|| panic!("no banner line for {}: {lines:?}", b.name));
        let mut want: Vec<&str> = expected
            .tools
            .values()
            .filter(|t| t.business.name == b.name)
            .map(|t| t.name.as_str())
            .collect();
        let tools = line["fields"]["tools"].as_str().unwrap();
        let mut got: Vec<&str> = tools.split(',').collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "tools of {}", b.name);
        assert_eq!(line["fields"]["backend"], b.backend.base.as_str());
    }
    common::terminate(child);
}

/// `PORTICO_OAUTH_ISSUER` is `--oauth-issuer` (comma-separated): each value is checked.
#[test]
fn the_oauth_issuer_variable_sets_the_flag() {
    let fixture = plain_fixture();
    let out = portico()
        .args([
            "serve",
            fixture.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env(
            "PORTICO_OAUTH_ISSUER",
            "https://as.example,http://as2.example",
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("--oauth-issuer: issuer `http://as2.example` must be https"),
        "{}",
        text(&out)
    );
}
