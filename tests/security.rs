//! Inbound authentication over real HTTP: `portico demo --secure` (USP spa, UCP hotel) and test
//! mappings with OAuth JWTs (a JWKS served over HTTP) for the plain and autonym bindings. Access
//! tiers, identity binding, USP proofs of possession and booking-scoped credentials end to end,
//! each binding's refusal form, and a table of hostile cases with their expected codes.

mod common;
use common::*;
use portico::auth::{jws, pop};
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

const KEY: &str = portico::demo::SECURE_API_KEY;
const AUD: &str = portico::demo::SECURE_AUDIENCE;
const PROFILE: &str = "https://agent.example/profiles/a.json";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

async fn secure_demo() -> (portico::demo::Demo, reqwest::Client, String) {
    let d = portico::demo::start_opts(0, false, true).await.unwrap();
    let url = d.mcp_url();
    (d, reqwest::Client::new(), url)
}

/// `tools/call` at 2026-07-28 with extra HTTP headers.
async fn call_h(
    c: &reqwest::Client,
    url: &str,
    name: &str,
    args: Value,
    headers: &[(&str, &str)],
) -> Answer {
    let mut rb = modern(
        c,
        url,
        1,
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    send(rb).await
}

fn usp_meta(profile: &str) -> Value {
    json!({"usp": {"profile": profile, "idempotency_key": uuid::Uuid::new_v4().to_string()}})
}

/// HTTP 401, the JSON-RPC `code`, and the RFC 6750 challenge (no credential was presented).
fn assert_challenged(a: &Answer, code: i64) {
    assert_eq!((a.status, a.error_code()), (401, Some(code)), "{}", a.text);
    assert_eq!(a.headers["www-authenticate"], "Bearer");
}

fn data_code(a: &Answer) -> String {
    a.body["error"]["data"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn with_auth(mut args: Value, auth: Value) -> Value {
    args["_meta"]["usp"]["authorization"] = auth;
    args
}

async fn first_slot(c: &reqwest::Client, url: &str) -> String {
    let a = call(
        c,
        url,
        "usp_availability_query",
        json!({"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-03"}),
    )
    .await;
    a.sc()["slots"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["state"] == "available"))
        .and_then(|s| s["id"].as_str())
        .unwrap_or_else(|| panic!("no slot: {}", a.text))
        .to_string()
}

fn create_args(slot: &str, profile: &str) -> Value {
    json!({"service_id": "MASSAGE-60", "slot_id": slot,
           "buyer": {"first_name": "Alice", "last_name": "Smith", "email": "alice@example.com"},
           "_meta": usp_meta(profile)})
}

/// Books a slot with a proof of possession; the booking id and the issued credential.
async fn book_with_pop(c: &reqwest::Client, url: &str, k: &PopKey) -> (String, Value) {
    let slot = first_slot(c, url).await;
    let args = create_args(&slot, PROFILE);
    let proof = k.proof("usp_bookings_create", &args, json!({}));
    let a = call(
        c,
        url,
        "usp_bookings_create",
        with_auth(
            args,
            json!({"mechanism": "platform_key_pop", "proof": proof}),
        ),
    )
    .await;
    let id = a.sc()["booking"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("booked: {}", a.text))
        .to_string();
    (id, a.sc()["booking_scoped_credential"].clone())
}

#[tokio::test]
async fn usp_public_tools_are_open_and_privileged_ones_need_a_credential() {
    let (d, c, url) = secure_demo().await;
    assert!(
        d.banner().contains(KEY),
        "the banner says how to authenticate"
    );
    let open = call(&c, &url, "usp_services_list", json!({})).await;
    assert!(open.sc()["services"].is_array(), "{}", open.text);

    let slot = first_slot(&c, &url).await;
    let anon = call(&c, &url, "usp_bookings_create", create_args(&slot, PROFILE)).await;
    assert_eq!(
        (anon.status, anon.error_code()),
        (200, Some(-32006)),
        "{}",
        anon.text
    );
    assert_eq!(data_code(&anon), "authentication_required");

    let keyed = call_h(
        &c,
        &url,
        "usp_bookings_create",
        create_args(&slot, PROFILE),
        &[("x-api-key", KEY)],
    )
    .await;
    assert!(keyed.sc()["booking"]["id"].is_string(), "{}", keyed.text);
    // An API key principal gets a bearer credential (no cnf: no key was proven).
    assert!(
        keyed.sc()["booking_scoped_credential"]["value"]
            .as_str()
            .unwrap()
            .starts_with("bsc_")
    );
    assert!(keyed.sc()["booking_scoped_credential"].get("cnf").is_none());

    let id = keyed.sc()["booking"]["id"].as_str().unwrap();
    let bearer = format!("Bearer {KEY}");
    let got = call_h(
        &c,
        &url,
        "usp_bookings_get",
        json!({"booking_id": id, "_meta": {"usp": {"profile": PROFILE}}}),
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!(got.sc()["booking"]["id"], id, "{}", got.text);
    d.stop().await;
}

#[tokio::test]
async fn a_principal_presenting_a_second_profile_uri_is_refused() {
    let (d, c, url) = secure_demo().await;
    // The principal is the proven key (its thumbprint), not the profile URI.
    let (k, other_key) = (PopKey::new(), PopKey::new());
    let (one, two) = ("https://one.example/p.json", "https://two.example/p.json");
    for (key, profile, want) in [
        (&k, one, "ok"),
        (&k, one, "ok"),
        (&k, two, "profile_not_trusted"),
        // Many principals may share a profile URI.
        (&other_key, one, "ok"),
    ] {
        let args = json!({"booking_id": "A-9999", "_meta": {"usp": {"profile": profile}}});
        let p = key.proof("usp_bookings_get", &args, json!({}));
        let args = with_auth(args, json!({"mechanism": "platform_key_pop", "proof": p}));
        let a = call(&c, &url, "usp_bookings_get", args).await;
        assert_eq!(outcome(&a), want, "{profile}: {}", a.text);
        if want != "ok" {
            assert_eq!(a.error_code(), Some(-32005));
        }
    }
    d.stop().await;
}

#[tokio::test]
async fn proof_issued_credentials_are_sender_constrained() {
    let (d, c, url) = secure_demo().await;
    let k = PopKey::new();
    let (id, cred) = book_with_pop(&c, &url, &k).await;
    assert_eq!(
        cred["cnf"]["jkt"],
        k.jkt(),
        "bound to the proven key: {cred}"
    );
    let value = cred["value"].as_str().unwrap().to_string();
    assert!(value.len() >= 26 && value.starts_with("bsc_"));

    let get_args = json!({"booking_id": id, "_meta": {"usp": {"profile": PROFILE}}});
    let present = |proof: Option<String>, mechanism: &str| {
        let mut auth = json!({"mechanism": mechanism, "credential": value});
        if let Some(p) = proof {
            auth["proof"] = json!(p);
        }
        with_auth(get_args.clone(), auth)
    };
    let ath = jws::sha256_b64(value.as_bytes());
    let get = async |args: Value| call(&c, &url, "usp_bookings_get", args).await;
    let good = k.proof("usp_bookings_get", &get_args, json!({"ath": ath}));
    let ok = get(present(Some(good.clone()), "booking_scoped_credential")).await;
    assert_eq!(ok.sc()["booking"]["id"], id.as_str(), "{}", ok.text);

    // The same proof again: its jti was recorded.
    let replay = get(present(Some(good), "booking_scoped_credential")).await;
    assert_eq!(replay.error_code(), Some(-32600), "{}", replay.text);
    assert_eq!(data_code(&replay), "pop_proof_replayed");

    // Downgrade: the credential alone, whatever mechanism is declared, is absent; no fallback to
    // the valid API key also presented.
    for mech in ["booking_scoped_credential", "api_key", "oauth2_bearer"] {
        let args = present(None, mech);
        let down = call_h(&c, &url, "usp_bookings_get", args, &[("x-api-key", KEY)]).await;
        assert_eq!(
            data_code(&down),
            "pop_proof_missing",
            "{mech}: {}",
            down.text
        );
    }
    // A valid proof by another key: the thumbprint is not cnf.jkt.
    let stolen = PopKey::new().proof("usp_bookings_get", &get_args, json!({"ath": ath}));
    let a = get(present(Some(stolen), "booking_scoped_credential")).await;
    assert_eq!(data_code(&a), "pop_key_mismatch", "{}", a.text);

    // The credential authorizes its own booking only.
    let other_args = json!({"booking_id": "A-1", "_meta": {"usp": {"profile": PROFILE}}});
    let p = k.proof("usp_bookings_get", &other_args, json!({"ath": ath}));
    let auth = json!({"mechanism": "booking_scoped_credential", "credential": value, "proof": p});
    let a = get(with_auth(other_args, auth)).await;
    assert_eq!(a.error_code(), Some(-32005), "{}", a.text);
    assert_eq!(data_code(&a), "profile_not_trusted");
    d.stop().await;
}

#[tokio::test]
async fn vector_007_downgrade_is_refused_over_http() {
    let dir = common::upstream("usp/tests/vectors/pop/007-downgrade-cnf-without-proof.json");
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(&dir).unwrap_or_else(|e| panic!("{} missing: {e}", dir.display())),
    )
    .unwrap();
    let (d, c, url) = secure_demo().await;
    let cred = &v["credential"];
    let value = cred["value"].as_str().unwrap();
    // The business issued this credential, bound to cnf.jkt, for booking bkg_001.
    portico::auth::store::stores()
        .credentials
        .put(
            value,
            portico::auth::store::Issued {
                business: "seaside-spa".into(),
                resource: "bkg_001".into(),
                scope: vec!["usp_bookings_cancel".into()],
                jkt: cred["cnf"]["jkt"].as_str().map(str::to_string),
                expires_at: now() + 3600,
                principal: "jkt:vector".into(),
            },
        )
        .await;
    let args = json!({"booking_id": "bkg_001", "_meta": {"usp": {"profile": "https://agent.example/p.json",
        "idempotency_key": uuid::Uuid::new_v4().to_string(),
        "authorization": {"mechanism": v["declared_mechanism"], "credential": value}}}});
    let a = call(&c, &url, "usp_bookings_cancel", args).await;
    assert_eq!(
        data_code(&a),
        v["reject_code"].as_str().unwrap(),
        "{}",
        a.text
    );
    assert_eq!(a.error_code(), Some(-32600));
    d.stop().await;
}

#[tokio::test]
async fn ucp_refusals_are_http_401_with_a_challenge() {
    let (d, c, url) = secure_demo().await;
    let args = json!({"meta": {"ucp-agent": {"profile": PROFILE}}, "id": "nope"});
    let anon = call(&c, &url, "get_booking_session", args.clone()).await;
    assert_challenged(&anon, -32000);
    let ok = call_h(&c, &url, "get_booking_session", args, &[("x-api-key", KEY)]).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert!(ok.body.get("result").is_some(), "{}", ok.text);
    d.stop().await;
}

// ---- OAuth JWTs against a JWKS served over HTTP (plain and autonym bindings) ----

struct Issuer {
    ec: SigningKey,
    ed: SigningKey,
    jwks_url: String,
    _task: tokio::task::JoinHandle<()>,
}

/// Serves the issuer's JWKS on 127.0.0.1.
async fn issuer() -> Issuer {
    let ec = SigningKey::generate(Alg::EcdsaP256Sha256, "ec-1").unwrap();
    let ed = SigningKey::generate(Alg::Ed25519, "ed-1").unwrap();
    let jwks = json!({"keys": [ec.verifying_key().jwk(), ed.verifying_key().jwk()]}).to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let body = jwks.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    let body = body.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from(body)),
                        ))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            });
        }
    });
    Issuer {
        ec,
        ed,
        jwks_url: format!("http://{addr}/jwks.json"),
        _task: task,
    }
}

const ISS: &str = "https://issuer.example";
const API_AUD: &str = "portico-test";

impl Issuer {
    fn token(&self, alg: &str, kid: &str, claims: Value) -> String {
        let key = if alg == "EdDSA" { &self.ed } else { &self.ec };
        jws::sign(&json!({"alg": alg, "typ": "JWT", "kid": kid}), &claims, key).unwrap()
    }

    fn claims(&self) -> Value {
        json!({"iss": ISS, "aud": API_AUD, "sub": "client-7", "exp": now() + 300, "iat": now()})
    }
}

async fn oauth_gateway(
    binding: &str,
    iss: &Issuer,
) -> (portico::app::Running, reqwest::Client, String) {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let file = dir.join(format!("{binding}.yaml"));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!("\nauthorization:\n  accepted_mechanisms: [oauth2_bearer]\n  oauth2_bearer:\n    jwks_url: {}\n    issuer: {ISS}\n    audience: {API_AUD}\n    allow_hosts: [127.0.0.1]\n", iss.jwks_url));
    std::fs::write(&file, text).unwrap();
    let g = gateway(&[file]).await;
    let url = g.mcp_url();
    (g, reqwest::Client::new(), url)
}

#[tokio::test]
async fn plain_refusals_are_http_401_with_a_challenge() {
    let iss = issuer().await;
    let (g, c, url) = oauth_gateway("plain", &iss).await;
    let tool = "echo_get";
    let args = json!({"id": "1"});
    // Valid and hostile tokens: `hostile_bearer_tokens_are_refused`. The refusal's form:
    let anon = call(&c, &url, tool, args.clone()).await;
    assert_challenged(&anon, -32001);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn autonym_refuses_before_json_rpc_with_the_rfc_6750_challenge() {
    let iss = issuer().await;
    let (g, c, url) = oauth_gateway("autonym", &iss).await;
    let tool = "get_context";
    let anon = call(&c, &url, tool, json!({"domain": "travel"})).await;
    assert_eq!(anon.status, 401, "{}", anon.text);
    assert_eq!(anon.headers["content-type"], "application/problem+json");
    assert_eq!(anon.headers["www-authenticate"], "Bearer");
    assert!(
        anon.body.get("jsonrpc").is_none(),
        "not a JSON-RPC message: {}",
        anon.text
    );
    let mut expired = iss.claims();
    expired["exp"] = json!(now() - 3600);
    let bad = call_h(
        &c,
        &url,
        tool,
        json!({"domain": "travel"}),
        &[(
            "authorization",
            &format!("Bearer {}", iss.token("ES256", "ec-1", expired)),
        )],
    )
    .await;
    assert_eq!(bad.status, 401, "{}", bad.text);
    assert_eq!(
        bad.headers["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );
    let ok = call_h(
        &c,
        &url,
        tool,
        json!({"domain": "travel"}),
        &[(
            "authorization",
            &format!("Bearer {}", iss.token("ES256", "ec-1", iss.claims())),
        )],
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    g.stop().await.unwrap();
}

// ---- The hostile-case table ----

fn b64(v: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// What a call came to: `ok` (a result), else the binding's `data.code`, else the HTTP status.
fn outcome(a: &Answer) -> String {
    if a.body.get("result").is_some() && a.status == 200 {
        return "ok".into();
    }
    match a.body["error"]["data"]["code"].as_str() {
        Some(c) => c.to_string(),
        None => a.status.to_string(),
    }
}

struct Hostile {
    name: &'static str,
    args: Value,
    headers: Vec<(&'static str, String)>,
    want: &'static str,
}

fn pop_case(
    name: &'static str,
    want: &'static str,
    build: impl Fn(&PopKey, &Value) -> Value,
) -> Hostile {
    let k = PopKey::new();
    let base = json!({"booking_id": "A-9999", "_meta": {"usp": {"profile": PROFILE}}});
    Hostile {
        name,
        args: build(&k, &base),
        headers: vec![],
        want,
    }
}

/// A case whose `_meta.usp.authorization` is `auth` (no proof built).
fn meta_case(name: &'static str, want: &'static str, auth: Value) -> Hostile {
    pop_case(name, want, move |_, a| with_auth(a.clone(), auth.clone()))
}

/// A proof with the given header and claims over `args` (signed by `k`).
fn proof_with(k: &PopKey, args: &Value, header: Value, claims: Value) -> Value {
    let mut h = json!({"typ": "usp-pop+jwt", "alg": "EdDSA", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": k.x}});
    for (key, v) in header.as_object().unwrap() {
        if v.is_null() {
            h.as_object_mut().unwrap().remove(key);
        } else {
            h[key] = v.clone();
        }
    }
    let mut c = json!({"usp_m": "usp_bookings_get", "aud": AUD, "usp_p": pop::usp_p(args).unwrap(), "iat": now(), "jti": uuid::Uuid::new_v4().to_string()});
    for (key, v) in claims.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(key);
        } else {
            c[key] = v.clone();
        }
    }
    let p = jws::sign(&h, &c, &k.key).unwrap();
    with_auth(
        args.clone(),
        json!({"mechanism": "platform_key_pop", "proof": p}),
    )
}

fn with_proof_text(args: &Value, proof: String) -> Value {
    with_auth(
        args.clone(),
        json!({"mechanism": "platform_key_pop", "proof": proof}),
    )
}

#[tokio::test]
async fn hostile_cases_get_their_expected_codes() {
    let (d, c, url) = secure_demo().await;
    let none = json!({});
    let mut cases: Vec<Hostile> = vec![
        pop_case("valid proof", "ok", |k, a| {
            proof_with(k, a, json!({}), json!({}))
        }),
        pop_case("kid in the header is ignored", "ok", |k, a| {
            proof_with(k, a, json!({"kid": "someone-else"}), json!({}))
        }),
        pop_case("aud as an array naming us", "ok", |k, a| {
            proof_with(
                k,
                a,
                json!({}),
                json!({"aud": ["https://x.example/p", AUD]}),
            )
        }),
        pop_case("alg none, unsigned", "pop_proof_invalid", |k, a| {
            let h = json!({"typ": "usp-pop+jwt", "alg": "none", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": k.x}});
            let c = json!({"usp_m": "usp_bookings_get", "aud": AUD, "usp_p": pop::usp_p(a).unwrap(), "iat": now(), "jti": "n1"});
            with_proof_text(a, format!("{}.{}.AAAA", b64(&h), b64(&c)))
        }),
        pop_case("alg ES256", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"alg": "ES256"}), json!({}))
        }),
        pop_case("alg HS256", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"alg": "HS256"}), json!({}))
        }),
        pop_case("typ dpop+jwt", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"typ": "dpop+jwt"}), json!({}))
        }),
        pop_case("typ missing", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"typ": null}), json!({}))
        }),
        pop_case("crv swapped to X25519", "pop_proof_invalid", |k, a| {
            proof_with(
                k,
                a,
                json!({"jwk": {"kty": "OKP", "crv": "X25519", "x": k.x}}),
                json!({}),
            )
        }),
        pop_case("kty swapped to EC", "pop_proof_invalid", |k, a| {
            proof_with(
                k,
                a,
                json!({"jwk": {"kty": "EC", "crv": "Ed25519", "x": k.x}}),
                json!({}),
            )
        }),
        pop_case(
            "header JWK with a private member",
            "pop_proof_invalid",
            |k, a| {
                proof_with(
                    k,
                    a,
                    json!({"jwk": {"kty": "OKP", "crv": "Ed25519", "x": k.x, "d": "AAAA"}}),
                    json!({}),
                )
            },
        ),
        pop_case("no header JWK", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"jwk": null}), json!({}))
        }),
        pop_case("unknown header member", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({"x5u": "https://evil.example/k"}), json!({}))
        }),
        pop_case("forged signature", "pop_proof_invalid", |k, a| {
            let good = proof_with(k, a, json!({}), json!({}));
            let p = good["_meta"]["usp"]["authorization"]["proof"]
                .as_str()
                .unwrap();
            let (head, sig) = p.rsplit_once('.').unwrap();
            let flipped: String = sig.chars().rev().collect();
            with_proof_text(a, format!("{head}.{flipped}"))
        }),
        pop_case(
            "signed by another key than the header's",
            "pop_proof_invalid",
            |k, a| {
                let other = PopKey::new();
                let h = json!({"typ": "usp-pop+jwt", "alg": "EdDSA", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": k.x}});
                let c = json!({"usp_m": "usp_bookings_get", "aud": AUD, "usp_p": pop::usp_p(a).unwrap(), "iat": now(), "jti": "w1"});
                with_proof_text(a, jws::sign(&h, &c, &other.key).unwrap())
            },
        ),
        pop_case("aud of another business", "pop_proof_invalid", |k, a| {
            proof_with(
                k,
                a,
                json!({}),
                json!({"aud": "https://other.example/.well-known/usp"}),
            )
        }),
        pop_case("usp_m of another method", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"usp_m": "usp_bookings_cancel"}))
        }),
        pop_case(
            "arguments changed after signing",
            "pop_proof_invalid",
            |k, a| {
                let signed = proof_with(k, a, json!({}), json!({}));
                let mut tampered = signed.clone();
                tampered["booking_id"] = json!("A-1001");
                tampered
            },
        ),
        pop_case(
            "profile rewritten after signing",
            "pop_proof_invalid",
            |k, a| {
                let mut t = proof_with(k, a, json!({}), json!({}));
                t["_meta"]["usp"]["profile"] = json!("https://evil.example/p.json");
                t
            },
        ),
        pop_case("iat five minutes old", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"iat": now() - 300}))
        }),
        pop_case("iat five minutes ahead", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"iat": now() + 300}))
        }),
        pop_case("iat missing", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"iat": null}))
        }),
        pop_case("jti missing", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"jti": null}))
        }),
        pop_case("jti of 1000 characters", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"jti": "j".repeat(1000)}))
        }),
        pop_case("unknown claim", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"htu": "https://x"}))
        }),
        pop_case("ath without a credential", "pop_proof_invalid", |k, a| {
            proof_with(k, a, json!({}), json!({"ath": "abc"}))
        }),
        pop_case("oversized proof", "pop_proof_invalid", |k, a| {
            proof_with(
                k,
                a,
                json!({"pad": null}),
                json!({"nonce": "n".repeat(9000)}),
            )
        }),
        pop_case(
            "JWS parts that are not JSON",
            "pop_proof_invalid",
            |_, a| with_proof_text(a, "YWJj.YWJj.YWJj".into()),
        ),
        pop_case("not a JWS at all (schema)", "invalid_request", |_, a| {
            with_proof_text(a, "abc".into())
        }),
        meta_case(
            "platform_key_pop without a proof",
            "pop_proof_missing",
            json!({"mechanism": "platform_key_pop"}),
        ),
        pop_case(
            "a proof with a non-scoped credential",
            "authentication_required",
            |k, a| {
                let mut v = proof_with(k, a, json!({}), json!({}));
                v["_meta"]["usp"]["authorization"]["credential"] = json!(KEY);
                v
            },
        ),
        meta_case(
            "unknown mechanism",
            "authentication_required",
            json!({"mechanism": "magic", "credential": KEY}),
        ),
        meta_case(
            "authorization is not an object",
            "invalid_request",
            json!("Bearer x"),
        ),
        meta_case(
            "unknown booking-scoped credential",
            "authentication_required",
            json!({"mechanism": "booking_scoped_credential", "credential": "bsc_00000000000000000000000000000000"}),
        ),
        meta_case(
            "API key inside _meta (stdio form)",
            "ok",
            json!({"mechanism": "api_key", "credential": KEY}),
        ),
        meta_case(
            "an API key declared as a booking-scoped credential",
            "authentication_required",
            json!({"mechanism": "booking_scoped_credential", "credential": KEY}),
        ),
        meta_case(
            "wrong API key inside _meta",
            "authentication_required",
            json!({"mechanism": "api_key", "credential": "not-the-key-0000000"}),
        ),
        pop_case("nothing presented", "authentication_required", |_, a| {
            a.clone()
        }),
    ];
    let base = json!({"booking_id": "A-9999", "_meta": {"usp": {"profile": PROFILE}}});
    // Every bad HTTP-layer credential is `authentication_required`.
    for (name, header, value) in [
        (
            "wrong X-API-Key",
            "x-api-key",
            "wrong-key-0123456789".to_string(),
        ),
        ("Basic scheme", "authorization", format!("Basic {KEY}")),
        (
            "Bearer with a wrong key",
            "authorization",
            "Bearer nope-nope-nope".into(),
        ),
        (
            "Bearer with a JWT nobody accepts",
            "authorization",
            "Bearer a.b.c".into(),
        ),
        (
            "X-API-Key with a header-injection payload",
            "x-api-key",
            format!("{KEY} X-Admin: 1"),
        ),
    ] {
        let headers = vec![(header, value)];
        let want = "authentication_required";
        cases.push(Hostile {
            name,
            args: base.clone(),
            headers,
            want,
        });
    }
    cases.push(Hostile {
        name: "privileged call without _meta.usp.profile",
        args: json!({"booking_id": "A-9999"}),
        headers: vec![("x-api-key", KEY.to_string())],
        want: "invalid_request",
    });
    let mut report = Vec::new();
    for case in &cases {
        let h: Vec<(&str, &str)> = case.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let a = call_h(&c, &url, "usp_bookings_get", case.args.clone(), &h).await;
        let got = outcome(&a);
        if got != case.want {
            report.push(format!(
                "{}: want {}, got {} ({})",
                case.name, case.want, got, a.text
            ));
        }
    }
    // A replayed proof: the first use passes, the byte-identical resend does not.
    let k = PopKey::new();
    let replay = proof_with(&k, &base, none.clone(), none.clone());
    for (i, want) in ["ok", "pop_proof_replayed"].iter().enumerate() {
        let got = outcome(&call(&c, &url, "usp_bookings_get", replay.clone()).await);
        if got != *want {
            report.push(format!("replay #{i}: want {want}, got {got}"));
        }
    }
    // Duplicated credential headers are refused, not merged.
    let dup = send(
        modern(
            &c,
            &url,
            1,
            "tools/call",
            json!({"name": "usp_bookings_get", "arguments": base}),
        )
        .header("x-api-key", KEY)
        .header("x-api-key", KEY),
    )
    .await;
    if outcome(&dup) != "authentication_required" {
        report.push(format!("duplicated X-API-Key: {}", dup.text));
    }
    let total = cases.len() + 3;
    assert!(
        report.is_empty(),
        "{} of {total} cases failed:\n{}",
        report.len(),
        report.join("\n")
    );
    assert!(total >= 40, "{total} cases");
    d.stop().await;
}

#[tokio::test]
async fn hostile_bearer_tokens_are_refused() {
    let iss = issuer().await;
    let (g, c, url) = oauth_gateway("plain", &iss).await;
    let good = iss.claims();
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v;
        }
        c
    };
    let none_token = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&good)
    );
    let hs_token = {
        let h = b64(&json!({"alg": "HS256", "typ": "JWT", "kid": "ec-1"}));
        format!("{h}.{}.c2lnbmF0dXJl", b64(&good))
    };
    let tampered = {
        let t = iss.token("ES256", "ec-1", good.clone());
        let parts: Vec<&str> = t.split('.').collect();
        format!(
            "{}.{}.{}",
            parts[0],
            b64(&with("sub", json!("admin"))),
            parts[2]
        )
    };
    let es = |claims: Value| iss.token("ES256", "ec-1", claims);
    let cases: Vec<(&str, String, &str)> = vec![
        ("valid ES256", es(good.clone()), "ok"),
        (
            "valid EdDSA",
            iss.token("EdDSA", "ed-1", good.clone()),
            "ok",
        ),
        ("expired", es(with("exp", json!(now() - 600))), "401"),
        ("no exp", es(with("exp", Value::Null)), "401"),
        (
            "not valid yet (nbf)",
            es(with("nbf", json!(now() + 600))),
            "401",
        ),
        (
            "wrong audience",
            es(with("aud", json!("someone-else"))),
            "401",
        ),
        (
            "wrong issuer",
            es(with("iss", json!("https://evil.example"))),
            "401",
        ),
        ("no subject", es(with("sub", Value::Null)), "401"),
        ("alg none", none_token, "401"),
        ("alg HS256 (key confusion)", hs_token, "401"),
        (
            "unknown kid",
            iss.token("ES256", "nobody", good.clone()),
            "401",
        ),
        (
            "ES256 naming the Ed25519 key",
            iss.token("ES256", "ed-1", good.clone()),
            "401",
        ),
        (
            "EdDSA naming the EC key",
            iss.token("EdDSA", "ec-1", good.clone()),
            "401",
        ),
        ("payload tampered after signing", tampered, "401"),
        (
            "oversized token",
            es(with("pad", json!("p".repeat(10_000)))),
            "401",
        ),
    ];
    let mut report = Vec::new();
    for (name, token, want) in &cases {
        let a = call_h(
            &c,
            &url,
            "echo_get",
            json!({"id": "1"}),
            &[("authorization", &format!("Bearer {token}"))],
        )
        .await;
        let got = if a.status == 200 && a.body.get("result").is_some() {
            "ok".to_string()
        } else {
            a.status.to_string()
        };
        if got != *want {
            report.push(format!("{name}: want {want}, got {got} ({})", a.text));
        }
        if *want == "401" && a.headers.get("www-authenticate").is_none() {
            report.push(format!("{name}: no WWW-Authenticate"));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    g.stop().await.unwrap();
}

// ---- Rate limits ----

/// A fixture gateway (`binding`.yaml) renamed to a unique business, with `extra` appended.
async fn gateway_with_yaml(
    binding: &str,
    extra: &str,
) -> (portico::app::Running, reqwest::Client, String) {
    let (backend, _seen) = test_backend().await;
    let dir = fixture_with_backend("gateway", &backend.to_string());
    let file = dir.join(format!("{binding}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap();
    let unique = format!("business: limited-{}", uuid::Uuid::new_v4().simple());
    let text = text.replacen(text.lines().next().unwrap(), &unique, 1) + extra;
    std::fs::write(&file, text).unwrap();
    let g = gateway(&[file]).await;
    let url = g.mcp_url();
    (g, reqwest::Client::new(), url)
}

#[tokio::test]
async fn usp_rate_limits_are_per_principal() {
    let extra = "\nauthorization:\n  accepted_mechanisms: [api_key]\n  api_keys:\n    - { name: one, value: key-one-0123456789 }\n    - { name: two, value: key-two-0123456789 }\nrate_limits:\n  per_principal: { rate: 2, per: 1m }\n";
    let (g, c, url) = gateway_with_yaml("usp", extra).await;
    let args = json!({"name": "x", "_meta": {"usp": {"profile": PROFILE}}});
    let mut got = Vec::new();
    for key in [
        "key-one-0123456789",
        "key-one-0123456789",
        "key-one-0123456789",
        "key-two-0123456789",
    ] {
        got.push(call_h(&c, &url, "echo_post", args.clone(), &[("x-api-key", key)]).await);
    }
    let outcomes: Vec<String> = got.iter().map(outcome).collect();
    assert_eq!(
        outcomes,
        ["ok", "ok", "rate_limited", "ok"],
        "{}",
        got[2].text
    );
    assert_eq!(got[2].error_code(), Some(-32007));
    let wait = got[2].body["error"]["data"]["retry_after"]
        .as_u64()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    g.stop().await.unwrap();
}

#[tokio::test]
async fn plain_and_autonym_rate_limits_answer_429_with_retry_after() {
    for (binding, tool, args) in [
        ("plain", "echo_get", json!({"id": "1"})),
        ("autonym", "get_context", json!({"domain": "travel"})),
    ] {
        let extra = "\nrate_limits:\n  per_business: { rate: 1, per: 1m }\n";
        let (g, c, url) = gateway_with_yaml(binding, extra).await;
        let first = call(&c, &url, tool, args.clone()).await;
        assert_eq!(first.status, 200, "{binding}: {}", first.text);
        let second = call(&c, &url, tool, args.clone()).await;
        assert_eq!(second.status, 429, "{binding}: {}", second.text);
        let after: u64 = second.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&after), "{binding}: {after}");
        if binding == "autonym" {
            assert_eq!(second.headers["content-type"], "application/problem+json");
            assert_eq!(second.body["code"], "rate_limited");
        } else {
            assert_eq!(second.body["error"]["data"]["code"], "rate_limited");
        }
        g.stop().await.unwrap();
    }
}

// ---- Nonce challenges, business-only tools, sandbox posture ----

#[tokio::test]
async fn a_required_nonce_is_challenged_then_accepted() {
    let extra = format!(
        "\nauthorization:\n  accepted_mechanisms: [platform_key_pop]\n  platform_key_pop:\n    audiences: [\"{AUD}\"]\n    require_nonce: true\n"
    );
    let (g, c, url) = gateway_with_yaml("usp", &extra).await;
    let k = PopKey::new();
    let args = json!({"name": "x", "_meta": {"usp": {"profile": PROFILE}}});
    let signed = |extra: Value| {
        let p = k.proof("echo_post", &args, extra);
        with_auth(
            args.clone(),
            json!({"mechanism": "platform_key_pop", "proof": p}),
        )
    };
    let first = call(&c, &url, "echo_post", signed(json!({}))).await;
    assert_eq!(data_code(&first), "proof_nonce_required", "{}", first.text);
    let nonce = first.body["error"]["data"]["nonce"]
        .as_str()
        .expect("a nonce to retry with")
        .to_string();
    let wrong = call(&c, &url, "echo_post", signed(json!({"nonce": "made-up"}))).await;
    assert_eq!(data_code(&wrong), "proof_nonce_required", "{}", wrong.text);
    let ok = call(&c, &url, "echo_post", signed(json!({"nonce": nonce}))).await;
    assert_eq!(outcome(&ok), "ok", "{}", ok.text);
    g.stop().await.unwrap();
}

#[tokio::test]
async fn business_only_tools_need_a_business_principal_and_sandboxes_pass_anonymous_calls() {
    let extra = "\nauthorization:\n  accepted_mechanisms: [api_key]\n  api_keys:\n    - { name: agent, value: agent-key-0123456789 }\n    - { name: desk, value: desk-key-0123456789, business: true }\n  business_only: [echo_post]\n  tools: { echo_get: public }\n";
    let (g, c, url) = gateway_with_yaml("usp", extra).await;
    let args = json!({"name": "x", "_meta": {"usp": {"profile": PROFILE}}});
    let mut got = Vec::new();
    for key in ["agent-key-0123456789", "desk-key-0123456789"] {
        let a = call_h(&c, &url, "echo_post", args.clone(), &[("x-api-key", key)]).await;
        got.push(outcome(&a));
    }
    assert_eq!(got, ["profile_not_trusted", "ok"]);
    // A tier override: echo_get is public here.
    let open = call(&c, &url, "echo_get", json!({"id": "1"})).await;
    assert_eq!(outcome(&open), "ok", "{}", open.text);
    g.stop().await.unwrap();

    let sandbox = "\nauthorization:\n  privileged_operations_require_authentication: false\n  accepted_mechanisms: [api_key]\n  api_keys: [{ name: agent, value: agent-key-0123456789 }]\n";
    let (g, c, url) = gateway_with_yaml("usp", sandbox).await;
    let anon = call(&c, &url, "echo_post", args.clone()).await;
    assert_eq!(
        outcome(&anon),
        "ok",
        "a sandbox lets anonymous privileged calls through: {}",
        anon.text
    );
    let bad = call_h(
        &c,
        &url,
        "echo_post",
        args,
        &[("x-api-key", "wrong-key-0123456789")],
    )
    .await;
    assert_eq!(
        outcome(&bad),
        "authentication_required",
        "presented credentials are still checked"
    );
    g.stop().await.unwrap();
}
