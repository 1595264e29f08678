//! TLS on the MCP and facade listeners with generated certificates and real clients: MCP and
//! REST calls over HTTPS (HTTP/1.1 and HTTP/2), no plaintext on a TLS port, the certificate
//! swapped when its files change, a broken new pair refused while the previous one keeps serving.

mod common;

use common::*;
use portico::ops::tls::{Tls, TlsError, TlsFiles};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

struct Pair {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

fn pair() -> Pair {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    Pair {
        cert_pem: c.cert.pem(),
        key_pem: c.signing_key.serialize_pem(),
        der: c.cert.der().clone(),
    }
}

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("portico-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, p: &Pair) -> TlsFiles {
    let files = TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    std::fs::write(&files.cert, &p.cert_pem).unwrap();
    std::fs::write(&files.key, &p.key_pem).unwrap();
    files
}

/// The certificate the server presents in a fresh handshake (trusting `roots`).
async fn presented(
    addr: std::net::SocketAddr,
    roots: &[&Pair],
) -> Result<CertificateDer<'static>, String> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.der.clone()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let s = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(s.get_ref().1.peer_certificates().unwrap()[0].clone())
}

fn https_client(roots: &[&Pair], h2: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder().timeout(Duration::from_secs(20));
    for r in roots {
        b = b.add_root_certificate(reqwest::Certificate::from_pem(r.cert_pem.as_bytes()).unwrap());
    }
    if h2 {
        b = b.http2_prior_knowledge();
    } else {
        b = b.http1_only();
    }
    b.build().unwrap()
}

async fn start_tls(files: TlsFiles) -> portico::app::Running {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let mapping = dir.join("plain.yaml");
    let g = portico::config::load(std::slice::from_ref(&mapping)).expect("fixture loads");
    let opts = portico::mcp::http::HttpOptions {
        tls: Some(Tls::load(files).expect("the pair loads")),
        ..portico::mcp::http::HttpOptions::default()
    };
    let ops = portico::app::Ops {
        watch: Some(portico::ops::reload::Watch {
            paths: vec![mapping],
            interval: Some(Duration::from_millis(50)),
            sighup: false,
        }),
        ..portico::app::Ops::default()
    };
    portico::app::start_with(
        g,
        "127.0.0.1:0".parse().unwrap(),
        opts,
        portico::mcp::handler::ServerInfo::default(),
        ops,
    )
    .await
    .expect("gateway starts")
}

fn tls_reloads(result: &str) -> f64 {
    sample(
        &portico::ops::metrics::render(),
        &format!("portico_tls_reloads_total{{result=\"{result}\"}}"),
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_https_with_certificate_reload() {
    let (a, b) = (pair(), pair());
    let dir = temp_dir();
    let files = write(&dir, &a);
    let g = start_tls(files.clone()).await;
    let url = g.mcp_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // A real MCP call over HTTPS, on HTTP/1.1 and on HTTP/2 (ALPN offers both).
    for h2 in [false, true] {
        let c = https_client(&[&a], h2);
        let r = call(&c, &url, "echo_get", json!({"id": "tls"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.sc()["path"], "/t/echo/items/tls", "{}", r.text);
    }
    // No plaintext on the TLS port.
    let plain = url.replacen("https://", "http://", 1);
    let r = reqwest::Client::new()
        .post(&plain)
        .body("{}")
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(r.is_err(), "plain HTTP was answered: {r:?}");
    assert_eq!(presented(g.addr, &[&a]).await.unwrap(), a.der);

    swap_to(g.addr, &dir, &a, &b).await;
    let c = https_client(&[&b], false);
    let r = call(&c, &url, "echo_get", json!({"id": "b"})).await;
    assert_eq!(r.sc()["path"], "/t/echo/items/b", "{}", r.text);

    refuse_broken(g.addr, &files, &b).await;
    g.stop().await.unwrap();
}

/// New files (`b` replacing `a`): the next handshakes on `addr` get `b`, and `a` is gone.
async fn swap_to(addr: std::net::SocketAddr, dir: &Path, a: &Pair, b: &Pair) {
    write(dir, b);
    let mut swapped = false;
    for _ in 0..200 {
        if presented(addr, &[a, b]).await.unwrap() == b.der {
            swapped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(swapped, "the new certificate was never served");
    assert!(tls_reloads("applied") >= 1.0);
    let err = presented(addr, &[a])
        .await
        .expect_err("the old one is gone");
    assert!(err.contains("certificate"), "{err}");
}

/// A broken certificate file is refused; the working certificate (`current`) stays.
async fn refuse_broken(addr: std::net::SocketAddr, files: &TlsFiles, current: &Pair) {
    let refused = tls_reloads("refused");
    std::fs::write(&files.cert, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    for _ in 0..200 {
        if tls_reloads("refused") > refused {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        tls_reloads("refused") > refused,
        "the broken file was not seen"
    );
    assert_eq!(presented(addr, &[current]).await.unwrap(), current.der);
}

/// The REST facade over HTTPS in front of a (plain) gateway: REST calls on HTTP/1.1 and HTTP/2,
/// no plaintext, the certificate reloaded on change and a broken one refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facade_over_https_with_certificate_reload() {
    let (a, b) = (pair(), pair());
    let dir = temp_dir();
    let files = write(&dir, &a);
    let (g, _seen, _client, mcp) = gateway_on_test_backend("plain").await;
    let mapping = dir.join("facade.yaml");
    std::fs::write(
        &mapping,
        format!(
            "facade: secure\nbinding: usp\nupstream:\n  url: {mcp}\n  timeout: 10s\nroutes:\n  GET /items/{{id}}: echo_get\n"
        ),
    )
    .unwrap();
    let f = portico::facade::config::load(&mapping).unwrap_or_else(|d| panic!("{d:?}"));
    let listen = portico::facade::http::Listen {
        tls: Some(Tls::load(files.clone()).expect("the pair loads")),
        tls_reload: Duration::from_millis(50),
        ..portico::facade::http::Listen::default()
    };
    let facade = portico::facade::http::start_with(f, "127.0.0.1:0".parse().unwrap(), listen)
        .await
        .expect("facade starts");
    let url = facade.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let get = |c: reqwest::Client, id: &'static str| {
        let url = format!("{url}/items/{id}");
        async move {
            let r = c.get(url).send().await.expect("HTTPS answer");
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    for h2 in [false, true] {
        let (status, body) = get(https_client(&[&a], h2), "tls").await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("/t/echo/items/tls"), "{body}");
    }
    let plain = reqwest::Client::new()
        .get(format!("http://{}/items/x", facade.addr))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");

    swap_to(facade.addr, &dir, &a, &b).await;
    let (status, body) = get(https_client(&[&b], false), "b").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/t/echo/items/b"), "{body}");

    refuse_broken(facade.addr, &files, &b).await;
    facade.stop().await.unwrap();
    g.stop().await.unwrap();
}

#[test]
fn bad_pairs_are_refused_at_start_with_the_reason() {
    let (a, b) = (pair(), pair());
    let dir = temp_dir();
    let files = write(&dir, &a);
    std::fs::write(&files.key, &b.key_pem).unwrap();
    let e = Tls::load(files.clone()).expect_err("mismatch");
    assert!(matches!(e, TlsError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("does not match"), "{e}");

    std::fs::write(&files.key, "no key here").unwrap();
    let e = Tls::load(files.clone()).expect_err("no key");
    assert!(matches!(e, TlsError::BadKey { .. }), "{e}");

    std::fs::write(&files.cert, "").unwrap();
    let e = Tls::load(files.clone()).expect_err("no certificate");
    assert!(matches!(e, TlsError::NoCertificate { .. }), "{e}");

    let e = Tls::load(TlsFiles {
        cert: dir.join("missing.crt"),
        key: files.key,
    })
    .expect_err("missing file");
    assert!(e.to_string().contains("missing.crt"), "{e}");
}

/// `portico serve --tls-cert/--tls-key` as a process: a good pair serves HTTPS (its `mcp:` line
/// says so and a call answers); a mismatched pair stops the start with the reason, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_command_takes_a_certificate() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let (a, b) = (pair(), pair());
    let dir = temp_dir();
    let files = write(&dir, &a);
    let (backend, _seen) = test_backend().await;
    let mapping = fixture_with_backend("gateway", &backend.to_string()).join("plain.yaml");
    let args = |files: &TlsFiles| {
        vec![
            "serve".to_string(),
            mapping.display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tls-cert".into(),
            files.cert.display().to_string(),
            "--tls-key".into(),
            files.key.display().to_string(),
        ]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(args(&files))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("mcp: ")
        .unwrap_or_default()
        .to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    let r = call(
        &https_client(&[&a], false),
        &url,
        "echo_get",
        json!({"id": "p"}),
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.sc()["path"], "/t/echo/items/p", "{}", r.text);

    std::fs::write(&files.key, &b.key_pem).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_portico"))
        .args(args(&files))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS: the key in"), "{err}");
}
