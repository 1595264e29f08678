//! MCP authorization over real HTTP: portico as an OAuth 2.1 resource server in front of the
//! scriptable backend, with authorization servers (RFC 8414 / OpenID metadata and a JWK Set)
//! served on 127.0.0.1. Protected resource metadata at both well-known locations, a table of
//! hostile tokens and headers with their exact status and `WWW-Authenticate`, scopes per tool,
//! key rotation with a rate-limited refetch, and a backend that never sees the client's token.

mod common;
use bytes::Bytes;
use common::*;
use http_body_util::Full;
use hyper::{Request, Response};
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// An authorization server's discovery side: metadata and a JWK Set that can be rotated.
struct As {
    issuer: String,
    keys: Mutex<Vec<Value>>,
    jwks_fetches: AtomicUsize,
    /// Opaque tokens -> their RFC 7662 answer (`active: false` for any other).
    opaque: Mutex<std::collections::HashMap<String, Value>>,
    introspections: AtomicUsize,
    /// Serve OpenID discovery appended to the issuer's path instead of RFC 8414.
    oidc: bool,
}

impl As {
    async fn start(path: &str, oidc: bool, keys: &[&SigningKey]) -> Arc<As> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let a = Arc::new(As {
            issuer: format!("http://{addr}{path}"),
            keys: Mutex::new(keys.iter().map(|k| k.verifying_key().jwk()).collect()),
            jwks_fetches: AtomicUsize::new(0),
            opaque: Mutex::new(Default::default()),
            introspections: AtomicUsize::new(0),
            oidc,
        });
        let s = a.clone();
        serve_with(listener, move |req: Request<hyper::body::Incoming>| {
            let s = s.clone();
            async move {
                use http_body_util::BodyExt;
                let path = req.uri().path().to_string();
                let auth = req
                    .headers()
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string());
                let body = req.into_body().collect().await.unwrap().to_bytes();
                s.answer(&path, auth.as_deref(), &body)
            }
        });
        a
    }

    fn answer(&self, path: &str, auth: Option<&str>, body: &[u8]) -> Response<Full<Bytes>> {
        let u = url::Url::parse(&self.issuer).unwrap();
        let ipath = u.path().trim_end_matches('/');
        let meta = if self.oidc {
            format!("{ipath}/.well-known/openid-configuration")
        } else {
            format!("/.well-known/oauth-authorization-server{ipath}")
        };
        let (status, body) = if path == meta {
            let doc = json!({"issuer": self.issuer, "jwks_uri": format!("{}/jwks", self.issuer),
                "introspection_endpoint": format!("{}/introspect", self.issuer),
                "token_endpoint": format!("{}/token", self.issuer),
                "response_types_supported": ["code"]});
            (200, doc)
        } else if path == format!("{ipath}/jwks") {
            self.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            (200, json!({"keys": *self.keys.lock().unwrap()}))
        } else if path == format!("{ipath}/introspect") {
            self.introspections.fetch_add(1, Ordering::SeqCst);
            use base64::Engine;
            let want = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("portico-rs:introspect-secret")
            );
            if auth != Some(want.as_str()) {
                (401, json!({"error": "invalid_client"}))
            } else {
                let form: std::collections::HashMap<String, String> =
                    url::form_urlencoded::parse(body).into_owned().collect();
                let token = form.get("token").cloned().unwrap_or_default();
                let doc = self.opaque.lock().unwrap().get(&token).cloned();
                (200, doc.unwrap_or_else(|| json!({"active": false})))
            }
        } else {
            (404, json!({"error": "not_found"}))
        };
        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        r.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        r
    }
}

/// The backend's own authorization server: client credentials, tokens `bt-1`, `bt-2`, ... that
/// live `lifetime` seconds; what each token request carried.
struct TokenServer {
    url: String,
    requests: Mutex<Vec<(Option<String>, String)>>,
}

impl TokenServer {
    async fn start(lifetime: u64) -> Arc<TokenServer> {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let t = Arc::new(TokenServer {
            url: format!("http://{}/token", listener.local_addr().unwrap()),
            requests: Mutex::new(Vec::new()),
        });
        let s = t.clone();
        serve_with(listener, move |req: Request<hyper::body::Incoming>| {
            let s = s.clone();
            async move {
                let auth = req
                    .headers()
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string());
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let body = String::from_utf8_lossy(&body).to_string();
                let n = {
                    let mut r = s.requests.lock().unwrap();
                    r.push((auth, body));
                    r.len()
                };
                let doc = json!({"access_token": format!("bt-{n}"), "token_type": "Bearer",
                                 "expires_in": lifetime});
                let mut r = Response::new(Full::new(Bytes::from(doc.to_string())));
                r.headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                r
            }
        });
        t
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn b64(v: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
}

fn es256(key: &SigningKey, header: Value, claims: &Value) -> String {
    portico::auth::jws::sign(&header, claims, key).unwrap()
}

/// A token with any header, signed with `key` over exactly that header.
fn signed(key: &SigningKey, header: Value, claims: &Value) -> String {
    es256(key, header, claims)
}

struct World {
    _gateway: portico::app::Running,
    seen: Arc<Seen>,
    client: reqwest::Client,
    url: String,
    prm: String,
    resource: String,
    key: SigningKey,
    other_key: SigningKey,
    as1: Arc<As>,
    as2: Arc<As>,
    rogue: Arc<As>,
    rogue_key: SigningKey,
    second_key: SigningKey,
    tokens: Arc<TokenServer>,
}

impl World {
    async fn start() -> World {
        World::start_with(|_| String::new()).await
    }

    /// [`World::start`] with more YAML (made from the first issuer's URL) in the mapping.
    async fn start_with(extra: impl Fn(&str) -> String) -> World {
        let key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
        let other_key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
        let second_key = SigningKey::generate(Alg::Ed25519, "t2").unwrap();
        let rogue_key = SigningKey::generate(Alg::EcdsaP256Sha256, "r1").unwrap();
        let as1 = As::start("", false, &[&key]).await;
        let as2 = As::start("/tenant", true, &[&second_key]).await;
        let rogue = As::start("", false, &[&rogue_key]).await;
        let tokens = TokenServer::start(3).await;
        let (backend, seen) = test_backend().await;
        let dir = fixture_with_backend("gateway", &backend.to_string());
        let plain = std::fs::read_to_string(dir.join("plain.yaml")).unwrap();
        let text = plain.replace(
            "    X-Static: \"static-value\"\n",
            &format!("    X-Static: \"static-value\"\n  forward_headers: [authorization, x-trace]\n  oauth:\n    token_url: {}\n    client_id: portico\n    client_secret: backend-secret-0123456789\n    scope: items\n    resource: https://backend.example\n", tokens.url),
        ) + &format!(
            "mcp_authorization:\n  issuers: [\"{}\", \"{}\"]\n  allow_hosts: [127.0.0.1]\n  scopes: [items:read]\n  tools:\n    echo_post: [items:read, items:write]\n",
            as1.issuer, as2.issuer
        );
        // The token's principal (never the token) is a transform input: `$meta.principal`.
        let text = text.replace(
            "    query: { tag: .tag }\n",
            "    query: { tag: .tag }\n    headers: { X-Principal: '$meta.principal.subject + \"/\" + $meta.principal.client_id' }\n",
        ) + &extra(&as1.issuer);
        assert!(text.contains("X-Principal"), "the fixture changed");
        assert!(text.contains("forward_headers"), "the fixture changed");
        let file = dir.join("oauth.yaml");
        std::fs::write(&file, text).unwrap();
        let g = gateway(&[file]).await;
        let url = g.mcp_url();
        let resource = url.clone();
        let prm = format!("http://{}/.well-known/oauth-protected-resource/mcp", g.addr);
        World {
            _gateway: g,
            seen,
            client: reqwest::Client::new(),
            url,
            prm,
            resource,
            key,
            other_key,
            as1,
            as2,
            rogue,
            rogue_key,
            second_key,
            tokens,
        }
    }

    fn claims(&self) -> Value {
        json!({"iss": self.as1.issuer, "sub": "alice", "aud": self.resource,
               "client_id": "cli-1", "scope": "items:read", "iat": now(), "exp": now() + 300,
               "jti": uuid::Uuid::new_v4().to_string()})
    }

    fn token(&self) -> String {
        es256(
            &self.key,
            json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}),
            &self.claims(),
        )
    }

    fn with(&self, changes: Value) -> String {
        let mut c = self.claims();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        es256(
            &self.key,
            json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}),
            &c,
        )
    }

    fn missing(&self) -> String {
        format!(
            "Bearer resource_metadata=\"{}\", scope=\"items:read items:write\"",
            self.prm
        )
    }

    fn invalid(&self, why: &str) -> String {
        format!(
            "Bearer error=\"invalid_token\", error_description=\"{why}\", resource_metadata=\"{}\"",
            self.prm
        )
    }

    fn bad_request(&self, why: &str) -> String {
        format!(
            "Bearer error=\"invalid_request\", error_description=\"{why}\", resource_metadata=\"{}\"",
            self.prm
        )
    }

    /// `tools/call` of `tool` (valid arguments) at 2026-07-28 with `auth` applied.
    async fn call(&self, tool: &str, auth: &Auth) -> Answer {
        let args = match tool {
            "echo_post" => json!({"name": "n"}),
            _ => json!({"id": "7"}),
        };
        self.call_with(tool, args, auth).await
    }

    /// `tools/call` of `tool` with `args` at 2026-07-28 with `auth` applied to the request.
    async fn call_with(&self, tool: &str, args: Value, auth: &Auth) -> Answer {
        let url = match auth {
            Auth::Query(t) => format!("{}?access_token={t}", self.url),
            _ => self.url.clone(),
        };
        let mut rb = modern(
            &self.client,
            &url,
            1,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        );
        match auth {
            Auth::None | Auth::Query(_) => {}
            Auth::Header(v) => rb = rb.header("authorization", v.as_str()),
            Auth::Raw(v) => {
                rb = rb.header(
                    "authorization",
                    reqwest::header::HeaderValue::from_bytes(v).unwrap(),
                )
            }
            Auth::Twice(a, b) => {
                rb = rb
                    .header("authorization", a.as_str())
                    .header("authorization", b.as_str())
            }
        }
        send(rb).await
    }
}

enum Auth {
    None,
    Header(String),
    Raw(Vec<u8>),
    Twice(String, String),
    Query(String),
}

fn bearer(t: &str) -> Auth {
    Auth::Header(format!("Bearer {t}"))
}

#[tokio::test]
async fn protected_resource_metadata_is_served_at_both_well_known_locations() {
    let w = World::start().await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let base = w.url.trim_end_matches("/mcp");
        let r = w.client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["resource"], json!(w.resource), "{path}");
        assert_eq!(
            doc["authorization_servers"],
            json!([w.as1.issuer, w.as2.issuer])
        );
        assert_eq!(
            doc["scopes_supported"],
            json!(["items:read", "items:write"])
        );
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    // The challenge names the metadata; both eras' first requests get it.
    let (_, a) = initialize(&w.client, &w.url, "2025-06-18").await;
    assert_eq!(a.status, 401);
    assert_eq!(a.headers["www-authenticate"], w.missing().as_str());
    let a = w.call("echo_get", &Auth::None).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.headers["www-authenticate"], w.missing().as_str());
    assert_eq!(a.body["error"]["code"], -32001);
}

#[tokio::test]
async fn hostile_tokens_and_headers_get_their_exact_status_and_challenge() {
    let w = World::start().await;
    let good = w.token();
    let t = now();
    let hs256 = {
        // HS256 "signed" with the issuer's public key as the secret: key confusion.
        let header = b64(json!({"alg": "HS256", "kid": "k1", "typ": "at+jwt"})
            .to_string()
            .as_bytes());
        let claims = b64(w.claims().to_string().as_bytes());
        let secret = w.key.verifying_key().jwk().to_string();
        let k = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
        let sig = aws_lc_rs::hmac::sign(&k, format!("{header}.{claims}").as_bytes());
        format!("{header}.{claims}.{}", b64(sig.as_ref()))
    };
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"at+jwt"}"#),
        b64(w.claims().to_string().as_bytes())
    );
    let tampered = {
        let parts: Vec<&str> = good.split('.').collect();
        let mut c = w.claims();
        c["sub"] = json!("mallory");
        format!(
            "{}.{}.{}",
            parts[0],
            b64(c.to_string().as_bytes()),
            parts[2]
        )
    };
    let rogue = es256(
        &w.rogue_key,
        json!({"alg": "ES256", "kid": "r1"}),
        &json!({"iss": w.rogue.issuer, "sub": "eve", "aud": w.resource, "scope": "items:read",
                "exp": t + 300}),
    );
    let second = signed(
        &w.second_key,
        json!({"alg": "EdDSA", "kid": "t2", "typ": "at+jwt"}),
        &json!({"iss": w.as2.issuer, "sub": "bob", "aud": w.resource, "scope": "items:read",
                "exp": t + 300}),
    );
    let big = w.with(json!({"pad": "x".repeat(9000)}));
    let missing = w.missing();
    let h = |alg: &str, extra: Value| {
        let mut hd = json!({"alg": alg, "kid": "k1", "typ": "at+jwt"});
        for (k, v) in extra.as_object().unwrap() {
            hd[k] = v.clone();
        }
        hd
    };
    let sig = "the signature does not verify";
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, Auth, u16, Option<String>)> = vec![
        ("no Authorization header", "echo_get", Auth::None, 401, Some(missing.clone())),
        ("Basic scheme", "echo_get", Auth::Header("Basic YWxpY2U6c2VjcmV0".into()), 401, Some(missing.clone())),
        ("Bearer without a token", "echo_get", Auth::Header("Bearer".into()), 401, Some(missing.clone())),
        ("alg none", "echo_get", bearer(&none), 401, Some(w.invalid("`alg: none` is refused"))),
        ("HS256 signed with the public key", "echo_get", bearer(&hs256), 401, Some(w.invalid("algorithm `HS256` is not accepted"))),
        ("RS256 header over an EC key", "echo_get", bearer(&signed(&w.key, h("RS256", json!({})), &w.claims())), 401, Some(w.invalid("the key's type or curve does not fit the token's algorithm"))),
        ("wrong audience", "echo_get", bearer(&w.with(json!({"aud": "https://other.example/mcp"}))), 401, Some(w.invalid("the token is not for this resource (audience)"))),
        ("audience list without this resource", "echo_get", bearer(&w.with(json!({"aud": ["cli-1", "https://other.example/mcp"]}))), 401, Some(w.invalid("the token is not for this resource (audience)"))),
        ("no audience", "echo_get", bearer(&w.with(json!({"aud": null}))), 401, Some(w.invalid("the token is not for this resource (audience)"))),
        ("untrusted issuer with a valid signature", "echo_get", bearer(&rogue), 401, Some(w.invalid("the token's issuer is not trusted here"))),
        ("trusted issuer named, another issuer's key", "echo_get", bearer(&es256(&w.rogue_key, json!({"alg": "ES256", "kid": "k1"}), &w.claims())), 401, Some(w.invalid(sig))),
        ("no issuer", "echo_get", bearer(&w.with(json!({"iss": null}))), 401, Some(w.invalid("the token has no `iss`"))),
        ("expired past the leeway", "echo_get", bearer(&w.with(json!({"exp": t - 120}))), 401, Some(w.invalid("the token has expired"))),
        ("no exp", "echo_get", bearer(&w.with(json!({"exp": null}))), 401, Some(w.invalid("the token has no `exp`"))),
        ("nbf in the future", "echo_get", bearer(&w.with(json!({"nbf": t + 600}))), 401, Some(w.invalid("the token is not valid yet"))),
        ("iat in the future", "echo_get", bearer(&w.with(json!({"iat": t + 600}))), 401, Some(w.invalid("the token is not valid yet"))),
        ("unknown kid", "echo_get", bearer(&signed(&w.key, h("ES256", json!({"kid": "nope"})), &w.claims())), 401, Some(w.invalid("no key matches the token (kid and algorithm)"))),
        ("same kid, another key", "echo_get", bearer(&es256(&w.other_key, h("ES256", json!({})), &w.claims())), 401, Some(w.invalid(sig))),
        ("tampered payload", "echo_get", bearer(&tampered), 401, Some(w.invalid(sig))),
        ("oversized token", "echo_get", bearer(&big), 401, Some(w.invalid("the token is larger than 8192 bytes"))),
        ("not a JWS", "echo_get", bearer("abc"), 401, Some(w.invalid("the token is not a compact JWS (three base64url parts, JSON header and payload)"))),
        ("typ of a DPoP proof", "echo_get", bearer(&signed(&w.key, h("ES256", json!({"typ": "dpop+jwt"})), &w.claims())), 401, Some(w.invalid("the token's `typ` is not an access token's"))),
        ("crit header", "echo_get", bearer(&signed(&w.key, h("ES256", json!({"crit": ["exp"]})), &w.claims())), 401, Some(w.invalid("the token has critical header parameters"))),
        ("neither sub nor client_id", "echo_get", bearer(&w.with(json!({"sub": null, "client_id": null}))), 401, Some(w.invalid("the token has neither `sub` nor `client_id`"))),
        ("two Authorization headers", "echo_get", Auth::Twice(format!("Bearer {good}"), format!("Bearer {good}")), 400, Some(w.bad_request("more than one Authorization header"))),
        ("token in the query string", "echo_get", Auth::Query(good.clone()), 400, Some(w.bad_request("access tokens are accepted in the Authorization header only"))),
        ("not a token68", "echo_get", Auth::Header("Bearer a,b".into()), 400, Some(w.bad_request("the bearer token is not a token68 value"))),
        ("non-ASCII header bytes", "echo_get", Auth::Raw(b"Bearer \xe9t\xe9".to_vec()), 400, Some(w.bad_request("the Authorization header is not ASCII"))),
        ("lowercase bearer (the scheme is case-insensitive)", "echo_get", Auth::Header(format!("bearer {good}")), 200, None),
        ("upper-case BEARER", "echo_get", Auth::Header(format!("BEARER {good}")), 200, None),
        ("expired within the 60 s leeway", "echo_get", bearer(&w.with(json!({"exp": t - 30}))), 200, None),
        ("a valid token of the second issuer (OpenID discovery, EdDSA)", "echo_get", bearer(&second), 200, None),
        ("a valid token", "echo_get", bearer(&good), 200, None),
        ("missing a scope the tool needs", "echo_post", bearer(&good), 403, Some(format!(
            "Bearer error=\"insufficient_scope\", scope=\"items:read items:write\", resource_metadata=\"{}\", error_description=\"the token lacks a scope this tool needs\"", w.prm))),
        ("holding the tool's scopes", "echo_post", bearer(&w.with(json!({"scope": "items:read items:write"}))), 200, None),
    ];
    assert!(cases.len() >= 25);
    let mut failures = Vec::new();
    for (name, tool, auth, status, challenge) in &cases {
        let a = w.call(tool, auth).await;
        let got = a
            .headers
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string());
        if a.status != *status || &got != challenge {
            failures.push(format!(
                "{name}: got {} {:?}, want {status} {challenge:?} ({})",
                a.status, got, a.text
            ));
        }
        if *status == 200 && a.body["result"]["isError"] == json!(true) {
            failures.push(format!("{name}: the call failed: {}", a.text));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn the_backend_never_receives_the_clients_token() {
    let w = World::start().await;
    let token = w.token();
    let a = w
        .call("echo_get", &Auth::Header(format!("Bearer {token}")))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let seen = w.seen.requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one backend request: {seen:?}");
    let text = serde_json::to_string(&seen).unwrap();
    assert!(
        !text.contains(&token) && !text.contains(token.split('.').nth(1).unwrap()),
        "the token reached the backend: {text}"
    );
    // `forward_headers` lists `authorization`: the MCP token is still not forwarded; the
    // backend gets its own credential instead.
    assert_eq!(seen[0]["headers"]["authorization"], "Bearer bt-1", "{text}");
    assert_eq!(seen[0]["headers"]["x-principal"], "alice/cli-1", "{text}");
    // A refused call never reaches the backend; the scope is checked before the arguments.
    let before = w.seen.requests.lock().unwrap().len();
    let a = w
        .call_with(
            "echo_post",
            json!({}),
            &Auth::Header(format!("Bearer {token}")),
        )
        .await;
    assert_eq!(a.status, 403, "{}", a.text);
    let a = w
        .call("echo_post", &Auth::Header(format!("Bearer {token}")))
        .await;
    assert_eq!(a.status, 403);
    assert_eq!(w.seen.requests.lock().unwrap().len(), before);
}

#[tokio::test]
async fn an_unknown_kid_refetches_the_keys_at_most_every_ten_seconds() {
    let w = World::start().await;
    let a = w.call("echo_get", &bearer(&w.token())).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(w.as1.jwks_fetches.load(Ordering::SeqCst), 1);
    // The issuer rotates to a new key; tokens with its kid arrive at once.
    let rotated = SigningKey::generate(Alg::EcdsaP256Sha256, "k2").unwrap();
    w.as1
        .keys
        .lock()
        .unwrap()
        .push(rotated.verifying_key().jwk());
    let fresh = es256(&rotated, json!({"alg": "ES256", "kid": "k2"}), &w.claims());
    for _ in 0..20 {
        let a = w.call("echo_get", &bearer(&fresh)).await;
        assert_eq!(a.status, 401);
    }
    assert_eq!(
        w.as1.jwks_fetches.load(Ordering::SeqCst),
        1,
        "refetches within JWKS_MIN_REFRESH"
    );
    tokio::time::sleep(
        portico::auth::policy::JWKS_MIN_REFRESH + std::time::Duration::from_millis(300),
    )
    .await;
    let a = w.call("echo_get", &bearer(&fresh)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(w.as1.jwks_fetches.load(Ordering::SeqCst), 2);
    // The old key still works; the cache answers.
    let a = w.call("echo_get", &bearer(&w.token())).await;
    assert_eq!(a.status, 200);
    assert_eq!(w.as1.jwks_fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_2025_session_needs_the_token_on_every_request() {
    let w = World::start().await;
    let client = reqwest::Client::builder()
        .default_headers(
            [(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {}", w.token()).parse().unwrap(),
            )]
            .into_iter()
            .collect(),
        )
        .build()
        .unwrap();
    let (sid, a) = initialize(&client, &w.url, "2025-11-25").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "echo_get", "arguments": {"id": "1"}}});
    let a = send(legacy(&client, &w.url, &sid, call.clone())).await;
    assert_eq!(a.status, 200, "{}", a.text);
    // The same session without the token is refused before JSON-RPC.
    let a = send(legacy(&w.client, &w.url, &sid, call)).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.headers["www-authenticate"], w.missing().as_str());
}

#[tokio::test]
async fn the_backend_gets_its_own_client_credentials_token_refreshed_before_expiry() {
    let w = World::start().await;
    let token = w.token();
    let backend_auth =
        |i: usize| w.seen.requests.lock().unwrap()[i]["headers"]["authorization"].clone();
    for _ in 0..2 {
        let a = w.call("echo_get", &bearer(&token)).await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(backend_auth(0), "Bearer bt-1");
    assert_eq!(backend_auth(1), "Bearer bt-1", "the token is cached");
    assert_eq!(w.tokens.requests.lock().unwrap().len(), 1);
    // 3 s tokens are fetched again a fifth of their life early: at 2.4 s, while still valid.
    tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
    let a = w.call("echo_get", &bearer(&token)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(backend_auth(2), "Bearer bt-2");
    let requests = w.tokens.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let basic = format!("Basic {}", {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode("portico:backend-secret-0123456789")
    });
    for (auth, body) in &requests {
        assert_eq!(auth.as_deref(), Some(basic.as_str()));
        let form: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
        assert_eq!(form["grant_type"], "client_credentials");
        assert_eq!(form["scope"], "items");
        assert_eq!(form["resource"], "https://backend.example");
        assert!(
            !body.contains(&token),
            "the client's token reached the token endpoint"
        );
    }
}

#[tokio::test]
async fn the_tokens_principal_is_the_identity_a_business_policy_sees() {
    // The business requires authentication for its (untiered, so privileged) tools and takes
    // OAuth principals: the MCP token's principal is the caller, on calls and on GET streams.
    let w = World::start_with(|iss| {
        format!(
            "authorization:\n  accepted_mechanisms: [oauth2_bearer]\n  oauth2_bearer:\n    issuer: \"{iss}\"\n    audience: unused\n    jwks_url: \"{iss}/jwks\"\n    allow_hosts: [127.0.0.1]\n"
        )
    })
    .await;
    let a = w.call("echo_get", &bearer(&w.token())).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_ne!(a.body["result"]["isError"], json!(true), "{}", a.text);
    // The token's audience is the MCP endpoint, not the business's `oauth2_bearer.audience`:
    // the business judges the principal, not the token again.
    let authed = reqwest::Client::builder()
        .default_headers(
            [(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {}", w.token()).parse().unwrap(),
            )]
            .into_iter()
            .collect(),
        )
        .build()
        .unwrap();
    let (sid, a) = initialize(&authed, &w.url, "2025-11-25").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let stream = authed
        .get(&w.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200, "{:?}", stream.headers());
    drop(stream);
    let anonymous = w
        .client
        .get(&w.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn opaque_tokens_are_introspected_and_the_answer_cached() {
    let w = World::start_with(|_| {
        "  introspection:\n    client_id: portico-rs\n    client_secret: introspect-secret\n".into()
    })
    .await;
    let t = now();
    let answer = |aud: &str, exp: i64, scope: &str| {
        json!({"active": true, "iss": w.as1.issuer, "sub": "carol", "client_id": "cli-9",
               "aud": aud, "exp": exp, "scope": scope})
    };
    {
        let mut o = w.as1.opaque.lock().unwrap();
        o.insert("op-good".into(), answer(&w.resource, t + 300, "items:read"));
        o.insert(
            "op-elsewhere".into(),
            answer("https://other.example/mcp", t + 300, "items:read"),
        );
        o.insert(
            "op-expired".into(),
            answer(&w.resource, t - 600, "items:read"),
        );
    }
    let a = w.call("echo_get", &bearer("op-good")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let a = w.call("echo_get", &bearer("op-good")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    // The first issuer said active; the answer is reused (one introspection in all).
    assert_eq!(w.as1.introspections.load(Ordering::SeqCst), 1);
    let a = w.call("echo_post", &bearer("op-good")).await;
    assert_eq!(a.status, 403, "{}", a.text);
    for (token, why) in [
        ("op-unknown", "the token is not active"),
        (
            "op-elsewhere",
            "the token is not for this resource (audience)",
        ),
        ("op-expired", "the token has expired"),
    ] {
        let a = w.call("echo_get", &bearer(token)).await;
        assert_eq!(a.status, 401, "{token}: {}", a.text);
        assert_eq!(
            a.headers["www-authenticate"],
            w.invalid(why).as_str(),
            "{token}"
        );
    }
    let backend = serde_json::to_string(&*w.seen.requests.lock().unwrap()).unwrap();
    assert!(!backend.contains("op-good"), "{backend}");
}
