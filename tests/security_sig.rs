//! Inbound RFC 9421 request signatures (`http_message_signature`, keys from the caller's profile
//! served on 127.0.0.1), TLS client certificates (`mtls`, a CA and certificates generated here,
//! real rustls clients), the backend header allowlist (`backend.forward_headers`) and signed
//! backend requests (`backend.sign_requests`), over real HTTP, with hostile cases and their codes.

mod common;
use common::*;
use http::{HeaderMap, HeaderValue};
use portico::webhook::keys::{Alg, SigningKey, VerifyingKey};
use portico::webhook::sig::{self, RequestParts};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A fixture gateway (`binding`.yaml) under a unique business name, edited by `edit`.
async fn gateway_edited(
    binding: &str,
    backend: &str,
    edit: impl FnOnce(String) -> String,
) -> portico::app::Running {
    let dir = fixture_with_backend("gateway", backend);
    let file = dir.join(format!("{binding}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap();
    let unique = format!("business: sec2-{}", uuid::Uuid::new_v4().simple());
    let text = text.replacen(text.lines().next().unwrap(), &unique, 1);
    std::fs::write(&file, edit(text)).unwrap();
    gateway(&[file]).await
}

/// Serves `doc` (a platform profile) at every path of a 127.0.0.1 port; counts fetches.
async fn profile_server(doc: Value) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (body, h) = (doc.to_string(), hits.clone());
    serve_with(listener, move |_req| {
        let body = body.clone();
        h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
    });
    (format!("http://{addr}/profiles/agent.json"), hits)
}

/// A 2026-07-28 `tools/call` body and its headers (no signature yet).
fn mcp_request(tool: &str, args: Value) -> (HeaderMap, Vec<u8>) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}}}});
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "accept",
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert("mcp-protocol-version", HeaderValue::from_static(MODERN));
    h.insert("mcp-method", HeaderValue::from_static("tools/call"));
    h.insert("mcp-name", HeaderValue::from_str(tool).unwrap());
    (h, body.to_string().into_bytes())
}

/// Adds `Content-Digest` and an RFC 9421 signature over `components` to `h`.
fn sign(
    url: &str,
    h: &mut HeaderMap,
    body: &[u8],
    key: &SigningKey,
    components: &[&str],
    created: i64,
) {
    let u = url::Url::parse(url).unwrap();
    let authority = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
    h.insert(
        "content-digest",
        HeaderValue::from_str(&sig::content_digest(body)).unwrap(),
    );
    let parts = RequestParts {
        method: "POST",
        authority: &authority,
        path: u.path(),
        query: u.query(),
        headers: h,
    };
    let s = sig::sign(&parts, components, key, created).unwrap();
    h.insert(
        "signature-input",
        HeaderValue::from_str(&s.signature_input).unwrap(),
    );
    h.insert("signature", HeaderValue::from_str(&s.signature).unwrap());
}

/// A signature with `keyid` and `alg` but no `created` (USP §9.1.4 allows it on requests).
fn sign_without_created(url: &str, h: &mut HeaderMap, body: &[u8], key: &SigningKey) {
    use base64::Engine;
    let u = url::Url::parse(url).unwrap();
    let authority = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
    h.insert(
        "content-digest",
        HeaderValue::from_str(&sig::content_digest(body)).unwrap(),
    );
    let line = format!(
        "(\"@method\" \"@authority\" \"@path\" \"content-digest\" \"content-type\");keyid=\"{}\";alg=\"{}\"",
        key.kid,
        key.alg.name()
    );
    let parts = RequestParts {
        method: "POST",
        authority: &authority,
        path: u.path(),
        query: None,
        headers: h,
    };
    let names: Vec<String> = USP.iter().map(|c| c.to_string()).collect();
    let base = sig::signature_base(&parts, &names, &line).unwrap();
    let signature =
        base64::engine::general_purpose::STANDARD.encode(key.sign(base.as_bytes()).unwrap());
    h.insert(
        "signature-input",
        HeaderValue::from_str(&format!("sig1={line}")).unwrap(),
    );
    h.insert(
        "signature",
        HeaderValue::from_str(&format!("sig1=:{signature}:")).unwrap(),
    );
}

/// Changes the call's `name` argument in the body bytes, as an intermediary might.
fn tamper(body: &mut Vec<u8>) {
    let text = String::from_utf8(body.clone()).unwrap();
    assert!(text.contains("\"x\""));
    *body = text.replace("\"x\"", "\"y\"").into_bytes();
}

const USP: [&str; 5] = [
    "@method",
    "@authority",
    "@path",
    "content-digest",
    "content-type",
];

async fn post(c: &reqwest::Client, url: &str, h: HeaderMap, body: Vec<u8>) -> Answer {
    send(c.post(url).headers(h).body(body)).await
}

fn data_code(a: &Answer) -> String {
    a.body["error"]["data"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// What a case got: `ok`, or the error's `data.code` (falling back to the JSON-RPC code).
fn outcome(a: &Answer) -> String {
    if a.body.get("result").is_some() && a.result()["isError"] != json!(true) {
        return "ok".into();
    }
    match data_code(a).as_str() {
        "" => format!("{:?}/{}", a.error_code(), a.status),
        c => c.to_string(),
    }
}

struct Platform {
    ec: SigningKey,
    ed: SigningKey,
    profile: String,
    fetches: Arc<std::sync::atomic::AtomicUsize>,
}

async fn platform() -> Platform {
    let ec = SigningKey::generate(Alg::EcdsaP256Sha256, "platform-ec").unwrap();
    let ed = SigningKey::generate(Alg::Ed25519, "platform-ed").unwrap();
    let (profile, fetches) = profile_server(json!({
        "name": "test agent",
        "keys": [ec.verifying_key().jwk(), ed.verifying_key().jwk()],
    }))
    .await;
    Platform {
        ec,
        ed,
        profile,
        fetches,
    }
}

const SIG_POLICY: &str = "\nauthorization:\n  accepted_mechanisms: [http_message_signature]\n  http_message_signature:\n    allow_hosts: [127.0.0.1]\n";

#[tokio::test]
async fn signed_requests_pass_and_hostile_signatures_get_their_codes() {
    let p = platform().await;
    let (backend, seen) = test_backend().await;
    let g = gateway_edited("usp", &backend.to_string(), |t| t + SIG_POLICY).await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();
    let args = |profile: &str| {
        json!({"name": "x", "_meta": {"usp": {"profile": profile,
            "idempotency_key": uuid::Uuid::new_v4().to_string()}}})
    };
    let t = now();

    // Valid signatures with both algorithms authenticate (the principal is the key).
    for key in [&p.ec, &p.ed] {
        let (mut h, body) = mcp_request("echo_post", args(&p.profile));
        sign(&url, &mut h, &body, key, &USP, t);
        let a = post(&c, &url, h, body).await;
        assert_eq!(outcome(&a), "ok", "{}", a.text);
    }
    // `created` is optional on request signatures (USP §9.1.4).
    let (mut h, body) = mcp_request("echo_post", args(&p.profile));
    sign_without_created(&url, &mut h, &body, &p.ec);
    let a = post(&c, &url, h.clone(), body.clone()).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    // ... but a `created` stripped from a signature that had it leaves a forgery.
    let (mut h, body) = mcp_request("echo_post", args(&p.profile));
    sign(&url, &mut h, &body, &p.ec, &USP, t);
    let stripped = h["signature-input"]
        .to_str()
        .unwrap()
        .replace(&format!(";created={t}"), "");
    h.insert("signature-input", HeaderValue::from_str(&stripped).unwrap());
    let a = post(&c, &url, h, body).await;
    assert_eq!(outcome(&a), "signature_invalid", "{}", a.text);
    let calls_before = hits(&seen);

    type Tweak = Box<dyn Fn(&mut HeaderMap, &mut Vec<u8>)>;
    let other_ec = SigningKey::generate(Alg::EcdsaP256Sha256, "platform-ec").unwrap();
    let unknown = SigningKey::generate(Alg::EcdsaP256Sha256, "nobody").unwrap();
    let mut cases: Vec<(&str, &str, Tweak)> = Vec::new();
    let u = url.clone();
    let ec = SigningKey::from_jwk(&p.ec.private_jwk().unwrap()).unwrap();
    let ec = Arc::new(ec);
    let signer = move |key: Arc<SigningKey>, comps: Vec<&'static str>, created: i64| -> Tweak {
        let u = u.clone();
        Box::new(move |h: &mut HeaderMap, b: &mut Vec<u8>| {
            sign(&u, h, b, &key, &comps, created);
        })
    };
    cases.push((
        "forged (a signature byte flipped)",
        "signature_invalid",
        Box::new({
            let s = signer(ec.clone(), USP.to_vec(), t);
            move |h, b| {
                use base64::Engine;
                let b64 = base64::engine::general_purpose::STANDARD;
                s(h, b);
                let v = h["signature"].to_str().unwrap().to_string();
                let mut bytes = b64
                    .decode(v.trim_start_matches("sig1=:").trim_end_matches(':'))
                    .unwrap();
                bytes[10] ^= 0x01;
                let forged = format!("sig1=:{}:", b64.encode(bytes));
                h.insert("signature", HeaderValue::from_str(&forged).unwrap());
            }
        }),
    ));
    cases.push((
        "expired (created 10 minutes ago)",
        "signature_expired",
        signer(ec.clone(), USP.to_vec(), t - 600),
    ));
    cases.push((
        "created 10 minutes ahead",
        "signature_expired",
        signer(ec.clone(), USP.to_vec(), t + 600),
    ));
    cases.push((
        "wrong key (the profile's kid, another private key)",
        "signature_invalid",
        signer(Arc::new(other_ec), USP.to_vec(), t),
    ));
    cases.push((
        "unknown key",
        "key_not_found",
        signer(Arc::new(unknown), USP.to_vec(), t),
    ));
    cases.push((
        "wrong algorithm (alg names ed25519 for an EC key)",
        "algorithm_unsupported",
        Box::new({
            let s = signer(ec.clone(), USP.to_vec(), t);
            move |h, b| {
                s(h, b);
                let v = h["signature-input"]
                    .to_str()
                    .unwrap()
                    .replace("ecdsa-p256-sha256", "ed25519");
                h.insert("signature-input", HeaderValue::from_str(&v).unwrap());
            }
        }),
    ));
    cases.push((
        "digest mismatch (body changed after signing)",
        "digest_mismatch",
        Box::new({
            let s = signer(ec.clone(), USP.to_vec(), t);
            move |h, b| {
                s(h, b);
                tamper(b);
            }
        }),
    ));
    cases.push((
        "digest rewritten to match a changed body",
        "signature_invalid",
        Box::new({
            let s = signer(ec.clone(), USP.to_vec(), t);
            move |h, b| {
                s(h, b);
                tamper(b);
                h.insert(
                    "content-digest",
                    HeaderValue::from_str(&sig::content_digest(b)).unwrap(),
                );
            }
        }),
    ));
    cases.push((
        "content-digest not covered",
        "signature_invalid",
        signer(
            ec.clone(),
            vec!["@method", "@authority", "@path", "content-type"],
            t,
        ),
    ));
    cases.push((
        "no Signature header",
        "signature_missing",
        Box::new({
            let s = signer(ec.clone(), USP.to_vec(), t);
            move |h, b| {
                s(h, b);
                h.remove("signature");
            }
        }),
    ));
    cases.push((
        "another authority signed",
        "signature_invalid",
        Box::new({
            let key = ec.clone();
            move |h, b| sign("http://evil.example:1/mcp", h, b, &key, &USP, t)
        }),
    ));

    let mut report = Vec::new();
    for (name, want, tweak) in &cases {
        let (mut h, mut body) = mcp_request("echo_post", args(&p.profile));
        tweak(&mut h, &mut body);
        let a = post(&c, &url, h, body).await;
        let got = outcome(&a);
        if got != *want {
            report.push(format!("{name}: want {want}, got {got} ({})", a.text));
        }
        if a.body["error"]["data"]["mechanism"] != "http_message_signature" {
            report.push(format!("{name}: no data.mechanism ({})", a.text));
        }
    }
    // A replayed request: the same signed bytes twice.
    let (mut h, body) = mcp_request("echo_post", args(&p.profile));
    sign(&url, &mut h, &body, &p.ed, &USP, t);
    let first = post(&c, &url, h.clone(), body.clone()).await;
    assert_eq!(outcome(&first), "ok", "{}", first.text);
    let replay = post(&c, &url, h, body).await;
    if outcome(&replay) != "signature_invalid" || !replay.text.contains("already used") {
        report.push(format!("replayed: got {}", replay.text));
    }
    // The mechanism declared in `_meta` without signature headers.
    let mut declared = args(&p.profile);
    declared["_meta"]["usp"]["authorization"] = json!({"mechanism": "http_message_signature"});
    let a = call(&c, &url, "echo_post", declared).await;
    if outcome(&a) != "signature_missing" {
        report.push(format!("declared, unsigned: got {}", a.text));
    }
    // Nothing presented: the usual authentication_required.
    let a = call(&c, &url, "echo_post", args(&p.profile)).await;
    if outcome(&a) != "authentication_required" {
        report.push(format!("anonymous: got {}", a.text));
    }
    // A profile that cannot be fetched.
    let (mut h, body) = mcp_request("echo_post", args("http://127.0.0.1:9/nothing.json"));
    sign(&url, &mut h, &body, &p.ec, &USP, t);
    let a = post(&c, &url, h, body).await;
    if outcome(&a) != "profile_unreachable" {
        report.push(format!("unreachable profile: got {}", a.text));
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    // No refused call reached the backend; the profile was fetched once and cached.
    assert_eq!(
        hits(&seen),
        calls_before + 1,
        "only the first of the replayed pair"
    );
    // Cached: one fetch, and at most one refetch for the unknown key (refetches of a profile
    // are at least 10 s apart).
    let fetches = p.fetches.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=2).contains(&fetches), "{fetches} profile fetches");
    g.stop().await.unwrap();
}

/// ECDSA malleability: a captured P-256 signature's high-S twin (s -> n - s) verifies for the
/// same request, so the replay cache must key on what was signed. Each order is tried: the twin
/// first (it verifies: accepted), then the original (a replay); and the original first, then the
/// twin (a replay). Refused replays never reach the backend.
#[tokio::test]
async fn the_high_s_twin_of_a_request_signature_is_a_replay() {
    let p = platform().await;
    let (backend, seen) = test_backend().await;
    let g = gateway_edited("usp", &backend.to_string(), |t| t + SIG_POLICY).await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();
    let signed = || {
        let args = json!({"name": "x", "_meta": {"usp": {"profile": p.profile,
            "idempotency_key": uuid::Uuid::new_v4().to_string()}}});
        let (mut h, body) = mcp_request("echo_post", args);
        sign(&url, &mut h, &body, &p.ec, &USP, now());
        let mut twin = h.clone();
        let original = h["signature"].to_str().unwrap().to_string();
        twin.insert(
            "signature",
            HeaderValue::from_str(&high_s_twin(&original)).unwrap(),
        );
        (h, twin, body)
    };
    let before = hits(&seen);
    let (h, twin, body) = signed();
    let a = post(&c, &url, twin, body.clone()).await;
    assert_eq!(outcome(&a), "ok", "the twin alone verifies: {}", a.text);
    let a = post(&c, &url, h, body).await;
    assert_eq!(outcome(&a), "signature_invalid", "{}", a.text);
    assert!(a.text.contains("already used"), "{}", a.text);

    let (h, twin, body) = signed();
    let a = post(&c, &url, h, body.clone()).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    let a = post(&c, &url, twin, body).await;
    assert_eq!(outcome(&a), "signature_invalid", "{}", a.text);
    assert!(a.text.contains("already used"), "{}", a.text);
    assert_eq!(hits(&seen), before + 2, "only the first of each pair ran");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn plain_binding_refuses_a_bad_signature_with_401_and_accepts_a_good_one() {
    let p = platform().await;
    let (backend, _seen) = test_backend().await;
    let g = gateway_edited("plain", &backend.to_string(), |t| {
        t + "\nauthorization:\n  accepted_mechanisms: [http_message_signature]\n  http_message_signature:\n    allow_hosts: [127.0.0.1]\n    algorithms: [ed25519]\n"
    })
    .await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();
    // Over plain the profile rides in the UCP-Agent header.
    let agent = format!("profile=\"{}\"", p.profile);
    let signed = |key: &SigningKey| {
        let (mut h, body) = mcp_request("echo_get", json!({"id": "7"}));
        h.insert("ucp-agent", HeaderValue::from_str(&agent).unwrap());
        let mut comps = USP.to_vec();
        comps.push("ucp-agent");
        sign(&url, &mut h, &body, key, &comps, now());
        (h, body)
    };
    // The agent header present but not covered: the signature is not enough.
    let (mut h, body) = mcp_request("echo_get", json!({"id": "7"}));
    h.insert("ucp-agent", HeaderValue::from_str(&agent).unwrap());
    sign(&url, &mut h, &body, &p.ed, &USP, now());
    let a = post(&c, &url, h, body).await;
    assert_eq!(
        (a.status, a.error_code()),
        (401, Some(-32001)),
        "{}",
        a.text
    );
    assert!(a.headers.contains_key("www-authenticate"));
    // Refused on what the request itself shows: the profile was not fetched for it.
    assert_eq!(p.fetches.load(std::sync::atomic::Ordering::SeqCst), 0);
    let (h, body) = signed(&p.ed);
    let a = post(&c, &url, h, body).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    // ECDSA is not among this business's algorithms.
    let (h, body) = signed(&p.ec);
    let a = post(&c, &url, h, body).await;
    assert_eq!(data_code(&a), "algorithm_unsupported", "{}", a.text);
    g.stop().await.unwrap();
}

// ---- mTLS ----

struct Pki {
    ca_pem: String,
    server_cert: String,
    server_key: String,
    /// Client identities: certificate + key PEM.
    client_a: String,
    client_b: String,
    stranger: String,
    client_a_sha256: String,
}

fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    let ca = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    };
    let (ours, theirs) = (ca("portico test CA"), ca("unknown CA"));
    let leaf = |issuer: &CertifiedIssuer<'_, KeyPair>, names: Vec<String>, client: bool| {
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, issuer).unwrap();
        (cert, key)
    };
    let (server, server_key) = leaf(&ours, vec!["127.0.0.1".into()], false);
    let identity = |issuer: &CertifiedIssuer<'_, KeyPair>, name: &str| {
        let (c, k) = leaf(issuer, vec![name.into()], true);
        let sha: String = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, c.der())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        (format!("{}{}", c.pem(), k.serialize_pem()), sha)
    };
    let (client_a, client_a_sha256) = identity(&ours, "a.client.example");
    let (client_b, _) = identity(&ours, "b.client.example");
    let (stranger, _) = identity(&theirs, "a.client.example");
    Pki {
        ca_pem: ours.pem(),
        server_cert: server.pem(),
        server_key: server_key.serialize_pem(),
        client_a,
        client_b,
        stranger,
        client_a_sha256,
    }
}

fn tls_client(pki: &Pki, identity: Option<&str>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap());
    if let Some(id) = identity {
        b = b.identity(reqwest::Identity::from_pem(id.as_bytes()).unwrap());
    }
    b.build().unwrap()
}

/// `echo_get` over a TLS connection presenting `identity` (or no certificate).
async fn call_as(pki: &Pki, url: &str, identity: Option<&str>) -> Answer {
    call(
        &tls_client(pki, identity),
        url,
        "echo_get",
        json!({"id": "1"}),
    )
    .await
}

async fn mtls_gateway(pki: &Pki, policy: &str) -> portico::app::Running {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let unique = format!("business: sec2-mtls-{}", uuid::Uuid::new_v4().simple());
    let text = text.replacen(text.lines().next().unwrap(), &unique, 1) + policy;
    std::fs::write(&file, text).unwrap();
    for (name, pem) in [
        ("tls.crt", &pki.server_cert),
        ("tls.key", &pki.server_key),
        ("ca.pem", &pki.ca_pem),
    ] {
        std::fs::write(dir.join(name), pem).unwrap();
    }
    let tls = portico::ops::tls::Tls::load_with(
        portico::ops::tls::TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        },
        Some(&dir.join("ca.pem")),
    )
    .expect("TLS with a client CA loads");
    let g = portico::config::load(&[file]).expect("mapping loads");
    portico::app::start(
        g,
        "127.0.0.1:0".parse().unwrap(),
        portico::mcp::http::HttpOptions {
            tls: Some(tls),
            ..Default::default()
        },
        portico::mcp::handler::ServerInfo::default(),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_accepts_ca_verified_client_certificates_and_refuses_the_rest() {
    let pki = pki();
    // Any certificate the CA verifies.
    let g = mtls_gateway(&pki, "\nauthorization:\n  accepted_mechanisms: [mtls]\n").await;
    let url = g.mcp_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    for id in [&pki.client_a, &pki.client_b] {
        let a = call_as(&pki, &url, Some(id)).await;
        assert_eq!((a.status, outcome(&a).as_str()), (200, "ok"), "{}", a.text);
    }
    // No certificate: the connection is made, the call is refused as unauthenticated.
    let a = call_as(&pki, &url, None).await;
    assert_eq!(
        (a.status, a.error_code()),
        (401, Some(-32001)),
        "{}",
        a.text
    );
    assert_eq!(a.headers["www-authenticate"], "Bearer");
    // A certificate from an unknown CA: the handshake fails; nothing reaches portico's handler.
    let r = tls_client(&pki, Some(&pki.stranger))
        .post(&url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await;
    assert!(r.is_err(), "a stranger's certificate was accepted: {r:?}");
    g.stop().await.unwrap();

    // Only a listed certificate, by fingerprint.
    let g = mtls_gateway(
        &pki,
        &format!(
            "\nauthorization:\n  accepted_mechanisms: [mtls]\n  mtls:\n    clients:\n      - {{ name: partner-a, sha256: \"{}\" }}\n",
            pki.client_a_sha256
        ),
    )
    .await;
    let url = g.mcp_url();
    let a = call_as(&pki, &url, Some(&pki.client_a)).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    let b = call_as(&pki, &url, Some(&pki.client_b)).await;
    assert_eq!(
        (b.status, b.error_code()),
        (401, Some(-32001)),
        "{}",
        b.text
    );
    assert!(b.text.contains("not one this business knows"), "{}", b.text);
    g.stop().await.unwrap();
}

// ---- Backend header allowlist ----

fn with_forwarded(text: String, names: &str) -> String {
    text.replacen(
        "  headers:\n    X-Static",
        &format!("  forward_headers: [{names}]\n  headers:\n    X-Static"),
        1,
    )
}

fn last_headers(seen: &Seen) -> serde_json::Map<String, Value> {
    seen.requests.lock().unwrap().last().unwrap()["headers"]
        .as_object()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn only_allowlisted_client_headers_reach_the_backend() {
    let (backend, raw) = raw_backend().await;
    let g = gateway_edited("plain", &backend, |t| {
        with_forwarded(t, "X-Request-Source, X-Tenant")
    })
    .await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();
    let extra = [
        ("x-request-source", "agent-7"),
        ("authorization", "Bearer client-secret-token"),
        ("x-api-key", "client-api-key-0123456789"),
        ("x-other", "not-listed"),
        ("x-static", "client-tries-to-override"),
    ];
    let mut rb = modern(
        &c,
        &url,
        1,
        "tools/call",
        json!({"name": "echo_get", "arguments": {"id": "1"}}),
    );
    for (k, v) in extra {
        rb = rb.header(k, v);
    }
    rb = rb.header("x-tenant", "t1").header("x-tenant", "t2");
    let a = send(rb).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    let seen = raw.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let h = &seen[0].3;
    assert_eq!(h["x-request-source"], "agent-7");
    assert_eq!(h["x-static"], "static-value", "the mapping's header wins");
    assert_eq!(h.get_all("x-static").iter().count(), 1);
    for absent in ["authorization", "x-api-key", "x-other"] {
        assert!(!h.contains_key(absent), "{absent} was forwarded: {h:?}");
    }
    assert!(
        !format!("{h:?}").contains("client-secret-token"),
        "the client's Authorization reached the backend"
    );
    // Both values of a repeated header are forwarded, in order.
    let tenants: Vec<_> = h.get_all("x-tenant").iter().collect();
    assert_eq!(tenants, ["t1", "t2"]);
    g.stop().await.unwrap();

    // `Authorization` only when listed explicitly.
    let (backend, seen) = test_backend().await;
    let g = gateway_edited("plain", &backend.to_string(), |t| {
        with_forwarded(t, "Authorization")
    })
    .await;
    let url = g.mcp_url();
    let rb = modern(
        &c,
        &url,
        1,
        "tools/call",
        json!({"name": "echo_get", "arguments": {"id": "1"}}),
    )
    .header("authorization", "Bearer for-the-backend");
    let a = send(rb).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    assert_eq!(
        last_headers(&seen)["authorization"],
        "Bearer for-the-backend"
    );
    g.stop().await.unwrap();
}

#[tokio::test]
async fn header_injection_through_the_allowlist_is_refused() {
    let (backend, seen) = test_backend().await;
    let g = gateway_edited("plain", &backend.to_string(), |t| {
        with_forwarded(t, "X-Request-Source")
    })
    .await;
    let url = g.mcp_url();
    let addr = url::Url::parse(&url).unwrap();
    let host = format!("{}:{}", addr.host_str().unwrap(), addr.port().unwrap());
    // Raw bytes, as no well-behaved client would send them.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo_get", "arguments": {"id": "1"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}}}})
    .to_string();
    let raw = |source: &[u8]| {
        let mut r = format!(
            "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: echo_get\r\nContent-Length: {}\r\nConnection: close\r\nX-Request-Source: ",
            addr.path(),
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(source);
        r.extend_from_slice(b"\r\n\r\n");
        r.extend_from_slice(body.as_bytes());
        r
    };
    async fn exchange(host: &str, bytes: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).to_string()
    }
    let before = hits(&seen);
    // A folded line smuggling a second header is not HTTP/1.1 a server accepts.
    let folded = exchange(&host, raw(b"a\r\n X-Injected: yes")).await;
    assert!(folded.starts_with("HTTP/1.1 400"), "folded: {folded}");
    // A byte outside visible ASCII is not passed on: the call is refused, as a tool error.
    let high = exchange(&host, raw(b"a\xffb")).await;
    assert!(high.starts_with("HTTP/1.1 200"), "non-ASCII: {high}");
    assert!(
        high.contains("\"isError\":true") && high.contains("does not forward"),
        "non-ASCII: {high}"
    );
    assert_eq!(hits(&seen), before, "no refused call reached the backend");
    // A bare LF ends the header line (RFC 9112 §2.2 lets servers accept it): what follows is a
    // second header the allowlist does not name, so the backend never sees it.
    let bare_lf = exchange(&host, raw(b"a\nX-Injected: yes")).await;
    assert!(bare_lf.starts_with("HTTP/1.1 "), "bare LF: {bare_lf}");
    let all = serde_json::to_string(&seen.requests.lock().unwrap().clone()).unwrap();
    assert!(!all.to_ascii_lowercase().contains("x-injected"), "{all}");
    for r in seen.requests.lock().unwrap().iter() {
        let v = r["headers"]["x-request-source"].as_str().unwrap_or("");
        assert!(!v.contains(['\r', '\n']), "{v:?}");
    }
    g.stop().await.unwrap();
}

#[test]
fn forward_headers_mistakes_are_diagnosed_with_line_and_hint() {
    let dir = fixture_with_backend("gateway", "127.0.0.1:9");
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        with_forwarded(
            text,
            "Host, \"bad name\", X-Static, X-A, x-a, Proxy-Anything",
        ),
    )
    .unwrap();
    let ds = portico::config::load(std::slice::from_ref(&file)).unwrap_err();
    let shown: Vec<String> = ds.iter().map(ToString::to_string).collect();
    let all = shown.join("\n");
    for want in [
        "`Host` cannot be forwarded",
        "`bad name` is not a valid header name",
        "`X-Static` is both a static header and a forwarded one",
        "`x-a` is listed twice",
        "`Proxy-Anything` cannot be forwarded",
    ] {
        assert!(all.contains(want), "missing {want}: {all}");
    }
    assert!(all.contains("plain.yaml:"), "file and line: {all}");
    assert!(all.contains("backend.forward_headers"), "{all}");
}

/// The MCP edge copies the client's request (every header) only for a configuration that
/// reads it: a signature policy or a header allowlist. Without the flag, the two tests above
/// would see no signature and no forwarded header.
#[test]
fn the_request_is_kept_only_for_mappings_that_read_it() {
    let dir = fixture_with_backend("gateway", "127.0.0.1:9");
    let file = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let load = |t: String| {
        std::fs::write(&file, t).unwrap();
        portico::config::load(std::slice::from_ref(&file)).unwrap()
    };
    assert!(!load(text.clone()).reads_http_request, "a plain mapping");
    assert!(
        load(with_forwarded(text.clone(), "X-Tenant")).reads_http_request,
        "forward_headers"
    );
    assert!(
        load(format!("{text}{SIG_POLICY}")).reads_http_request,
        "a signature policy"
    );
    let demo: Vec<std::path::PathBuf> = ["demo-spa", "demo-hotel", "demo-concierge"]
        .iter()
        .map(|m| format!("{}/mappings/{m}.yaml", env!("CARGO_MANIFEST_DIR")).into())
        .collect();
    assert!(
        !portico::config::load(&demo).unwrap().reads_http_request,
        "the demo mappings"
    );
}

// ---- Signed backend requests ----

/// One request as the backend received it: method, path, query, headers, body bytes.
type RawRequest = (String, String, Option<String>, HeaderMap, bytes::Bytes);

#[derive(Clone, Default)]
struct Raw(Arc<Mutex<Vec<RawRequest>>>);

async fn raw_backend() -> (String, Raw) {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let raw = Raw::default();
    let r = raw.clone();
    serve_with(
        listener,
        move |req: hyper::Request<hyper::body::Incoming>| {
            let r = r.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect().await.unwrap().to_bytes();
                let answer = json!({"path": parts.uri.path()}).to_string();
                r.0.lock().unwrap().push((
                    parts.method.to_string(),
                    parts.uri.path().to_string(),
                    parts.uri.query().map(str::to_string),
                    parts.headers,
                    bytes,
                ));
                let mut resp =
                    hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(answer)));
                resp.headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/json"));
                resp
            }
        },
    );
    (addr.to_string(), raw)
}

#[tokio::test]
async fn backend_requests_are_signed_with_portico_key() {
    let (backend, raw) = raw_backend().await;
    let g = gateway_edited("plain", &backend, |t| {
        t.replacen(
            "  timeout: 400ms\n",
            "  timeout: 400ms\n  sign_requests: true\n",
            1,
        )
    })
    .await;
    let url = g.mcp_url();
    let c = reqwest::Client::new();
    let jwks_url = url.replacen("/mcp", "/.well-known/jwks.json", 1);
    let jwks = c.get(&jwks_url).send().await.unwrap().text().await.unwrap();
    let keys = VerifyingKey::from_jwks(&jwks).unwrap();
    assert_eq!(keys.len(), 1, "{jwks}");
    let a = call(&c, &url, "echo_post", json!({"name": "signed"})).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    let a = call(&c, &url, "echo_get", json!({"id": "9", "tag": "x y"})).await;
    assert_eq!(outcome(&a), "ok", "{}", a.text);
    let seen = raw.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (method, path, query, headers, body) in &seen {
        let authority = headers["host"].to_str().unwrap().to_string();
        let parts = RequestParts {
            method,
            authority: &authority,
            path,
            query: query.as_deref(),
            headers,
        };
        let mut required = vec!["@method", "@authority", "@path"];
        if query.is_some() {
            required.push("@query");
        }
        if !body.is_empty() {
            required.extend(["content-digest", "content-type"]);
            sig::verify_content_digest(headers, body).expect("Content-Digest matches the body");
        }
        let policy = sig::Policy {
            required: &required,
            algorithms: &Alg::ALL,
            max_age: Duration::from_secs(300),
            require_created: true,
        };
        let v = sig::verify(&parts, &keys, &policy, now()).unwrap_or_else(|e| {
            panic!("{method} {path}: {e}: {headers:?}");
        });
        assert_eq!(v.keyid, keys[0].kid);
        // A changed path no longer verifies.
        let moved = RequestParts {
            path: "/t/other",
            ..parts
        };
        assert!(sig::verify(&moved, &keys, &policy, now()).is_err());
    }
    assert_eq!(seen[0].0, "POST");
    assert!(seen[1].2.is_some(), "the GET carried a query");
    g.stop().await.unwrap();
}

/// `portico serve --tls-cert … --tls-key …` with the client CA from `PORTICO_TLS_CLIENT_CA`, as a
/// process; a CA file that holds no certificate stops the start with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_command_takes_a_client_ca() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let pki = pki();
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let mapping = dir.join("plain.yaml");
    let text = std::fs::read_to_string(&mapping).unwrap();
    let text = text + "\nauthorization:\n  accepted_mechanisms: [mtls]\n";
    std::fs::write(&mapping, text).unwrap();
    for (name, pem) in [
        ("tls.crt", &pki.server_cert),
        ("tls.key", &pki.server_key),
        ("ca.pem", &pki.ca_pem),
        ("empty.pem", &String::new()),
    ] {
        std::fs::write(dir.join(name), pem).unwrap();
    }
    let serve = |ca: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_portico"));
        c.args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.join("tls.key"))
            .arg(&mapping)
            .env("PORTICO_TLS_CLIENT_CA", dir.join(ca));
        c
    };
    let mut child = serve("ca.pem")
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
    let with = call_as(&pki, &url, Some(&pki.client_a)).await;
    let without = call_as(&pki, &url, None).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(outcome(&with), "ok", "{line}: {}", with.text);
    assert_eq!(without.status, 401, "{}", without.text);

    let out = serve("empty.pem").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no usable CA certificate"), "{err}");
}
