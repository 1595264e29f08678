//! MCP authorization over real HTTP: portico as an OAuth 2.1 resource server in front of the
//! scriptable backend, with authorization servers (RFC 8414 / OpenID metadata and a JWK Set)
//! served on 127.0.0.1. Protected resource metadata at both well-known locations, a table of
//! hostile tokens and headers with their exact status and `WWW-Authenticate`, scopes per tool,
//! key rotation with a rate-limited refetch, and a backend that never sees the client's token.

mod common;
use common::oauth::*;
use common::*;
use portico::webhook::keys::{Alg, SigningKey};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

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
        World::start_full(extra, "", TokenServer::start(3).await).await
    }

    /// [`World::start`] whose backend gets the caller's token exchanged (RFC 8693) at a token
    /// server that checks the exchange request exactly.
    async fn start_exchange(lifetime: u64) -> World {
        let expect = json!({"audience": "https://backend.example/api",
            "resource": "https://backend.example", "scope": "items"});
        World::start_full(
            |_| String::new(),
            "    grant: token_exchange\n    audience: https://backend.example/api\n",
            TokenServer::start_with(lifetime, expect).await,
        )
        .await
    }

    async fn start_full(
        extra: impl Fn(&str) -> String,
        grant: &str,
        tokens: Arc<TokenServer>,
    ) -> World {
        let key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
        let other_key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
        let second_key = SigningKey::generate(Alg::Ed25519, "t2").unwrap();
        let rogue_key = SigningKey::generate(Alg::EcdsaP256Sha256, "r1").unwrap();
        let as1 = As::start("", false, &[&key]).await;
        let as2 = As::start("/tenant", true, &[&second_key]).await;
        let rogue = As::start("", false, &[&rogue_key]).await;
        let (backend, seen) = test_backend().await;
        let dir = fixture_with_backend("gateway", &backend.to_string());
        let plain = std::fs::read_to_string(dir.join("plain.yaml")).unwrap();
        let text = plain.replace(
            "    X-Static: \"static-value\"\n",
            &format!("    X-Static: \"static-value\"\n  forward_headers: [authorization, x-trace]\n  oauth:\n    token_url: {}\n    client_id: portico\n    client_secret: backend-secret-0123456789\n    scope: items\n    resource: https://backend.example\n{grant}", tokens.url),
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

    /// A client that sends a valid token on every request.
    fn authed_client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .default_headers(
                [(
                    reqwest::header::AUTHORIZATION,
                    format!("Bearer {}", self.token()).parse().unwrap(),
                )]
                .into_iter()
                .collect(),
            )
            .build()
            .unwrap()
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
    let client = w.authed_client();
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

/// The recorded token request `i` as a form.
fn token_form(w: &World, i: usize) -> std::collections::BTreeMap<String, String> {
    let body = w.tokens.requests.lock().unwrap()[i].1.clone();
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

#[tokio::test]
async fn token_exchange_gives_the_backend_a_token_for_the_caller_cached_per_subject() {
    let w = World::start_exchange(3).await;
    let alice = w.token();
    let bob = w.with(json!({"sub": "bob"}));
    let backend_auth =
        |i: usize| w.seen.requests.lock().unwrap()[i]["headers"]["authorization"].clone();
    let a = w.call("echo_get", &bearer(&alice)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(backend_auth(0), "Bearer xt-alice-1");
    // The exchange request, exactly (the token server refuses any other form, too).
    let want: std::collections::BTreeMap<String, String> = [
        ("grant_type", EXCHANGE),
        ("subject_token", alice.as_str()),
        ("subject_token_type", ACCESS_TOKEN),
        ("requested_token_type", ACCESS_TOKEN),
        ("audience", "https://backend.example/api"),
        ("resource", "https://backend.example"),
        ("scope", "items"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(token_form(&w, 0), want);
    // Alice again, with another token of hers: the cached backend token.
    let a = w.call("echo_get", &bearer(&w.token())).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(backend_auth(1), "Bearer xt-alice-1");
    // Bob gets his own.
    let a = w.call("echo_get", &bearer(&bob)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(backend_auth(2), "Bearer xt-bob-2");
    assert_eq!(token_form(&w, 1)["subject_token"], bob);
    assert_eq!(w.tokens.requests.lock().unwrap().len(), 2);
    // 3 s tokens are exchanged again a fifth of their life early, while still valid.
    tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
    let a = w.call("echo_get", &bearer(&alice)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(backend_auth(3), "Bearer xt-alice-3");
    // The client's token reached the token endpoint only, never the backend.
    let seen = serde_json::to_string(&*w.seen.requests.lock().unwrap()).unwrap();
    for t in [&alice, &bob] {
        assert!(!seen.contains(t.split('.').nth(1).unwrap()), "{seen}");
    }
}

#[tokio::test]
async fn a_refused_token_exchange_is_a_clear_tool_error_without_any_token() {
    let w = World::start_exchange(300).await;
    let mallory = w.with(json!({"sub": "mallory"}));
    let a = w.call("echo_get", &bearer(&mallory)).await;
    // A tool error (`isError`) the agent can read, as the plain binding gives a refusal.
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.result()["isError"], true, "{}", a.text);
    let all = a.text.clone();
    assert_eq!(
        a.result()["content"][0]["text"],
        "the backend needs the caller's identity, and its authorization server would not exchange the caller's token: the token endpoint refused the request (HTTP 400, invalid_grant)"
    );
    // The token server quoted the subject token in its description: it goes nowhere.
    assert!(!all.contains(mallory.split('.').nth(1).unwrap()), "{all}");
    assert!(
        w.seen.requests.lock().unwrap().is_empty(),
        "no backend call"
    );
    // The token endpoint down: unavailable, retryable, still without a token.
    let w = World::start_full(
        |_| String::new(),
        "    grant: token_exchange\n",
        Arc::new(TokenServer {
            url: "http://127.0.0.1:9/token".into(),
            requests: Mutex::new(Vec::new()),
            exchange: json!({}),
        }),
    )
    .await;
    let a = w.call("echo_get", &bearer(&w.token())).await;
    assert!(
        a.text.contains("authorization server is unavailable"),
        "{} {}",
        a.status,
        a.text
    );
    assert!(
        w.seen.requests.lock().unwrap().is_empty(),
        "no backend call"
    );
}

#[tokio::test]
async fn the_demo_facade_passes_the_rest_clients_token_to_the_checked_mcp_endpoint() {
    let key = SigningKey::generate(Alg::EcdsaP256Sha256, "k1").unwrap();
    let issuer = As::start("", false, &[&key]).await;
    let demo = portico::demo::start_full(
        0,
        false,
        false,
        portico::auth::resource::Options {
            issuers: vec![issuer.issuer.clone()],
            allow_hosts: vec!["127.0.0.1".into()],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mcp = demo.mcp_url();
    let token = |scope: &str| {
        es256(
            &key,
            json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}),
            &json!({"iss": issuer.issuer, "sub": "alice", "aud": mcp, "client_id": "rest-1",
                    "scope": scope, "iat": now(), "exp": now() + 300}),
        )
    };
    let facade = demo.facade.url();
    let client = reqwest::Client::new();
    let list = |auth: Option<String>| {
        let mut rb = client
            .post(format!("{facade}/services/list"))
            .json(&json!({}));
        if let Some(a) = auth {
            rb = rb.header("authorization", a);
        }
        rb.send()
    };
    let prm = format!(
        "resource_metadata=\"http://{}/.well-known/oauth-protected-resource/mcp\"",
        demo.gateway.addr
    );
    // No token: the MCP endpoint's 401 and its challenge, passed on.
    let r = list(None).await.unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.contains(&prm), "{challenge}");
    // A token for the MCP endpoint: the call goes through.
    let r = list(Some(format!("Bearer {}", token("demo:call"))))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["services"].as_array().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    // A forged token is refused as any MCP client's would be.
    let forged = token("demo:call").replace('.', ".x");
    let r = list(Some(format!("Bearer {forged}"))).await.unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    // A privileged tool without `demo:book`: 403 with the step-up challenge.
    let r = client
        .post(format!("{facade}/bookings"))
        .header("authorization", format!("Bearer {}", token("demo:call")))
        .json(&json!({"service_id": "massage-60"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"demo:call demo:book\""),
        "{challenge}"
    );
}

#[tokio::test]
async fn a_missing_scope_in_a_batch_or_an_sse_reply_is_still_http_403_before_anything_runs() {
    let w = World::start().await;
    let step_up = format!(
        "Bearer error=\"insufficient_scope\", scope=\"items:read items:write\", resource_metadata=\"{}\", error_description=\"the token lacks a scope this tool needs\"",
        w.prm
    );
    let client = w.authed_client();
    // A 2025-03-26 batch: one call the token may make, one it may not. Neither runs.
    let (sid, a) = initialize(&client, &w.url, "2025-03-26").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let call = |id: i64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
    };
    let batch = json!([
        call(1, "echo_get", json!({"id": "1"})),
        call(2, "echo_post", json!({"name": "n"}))
    ]);
    let a = send(
        client
            .post(&w.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-03-26")
            .body(batch.to_string()),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.text);
    assert_eq!(a.headers["www-authenticate"], step_up.as_str());
    assert_eq!(a.body["code"], "insufficient_scope", "{}", a.text);
    assert!(w.seen.requests.lock().unwrap().is_empty(), "nothing ran");
    // A 2025-11-25 call asking for progress, which would answer as an SSE stream.
    let (sid, a) = initialize(&client, &w.url, "2025-11-25").await;
    assert_eq!(a.status, 200, "{}", a.text);
    let mut progress = call(3, "echo_post", json!({"name": "n"}));
    progress["params"]["_meta"] = json!({"progressToken": "p1"});
    let a = send(legacy(&client, &w.url, &sid, progress)).await;
    assert_eq!(a.status, 403, "{}", a.text);
    assert_eq!(a.headers["www-authenticate"], step_up.as_str());
    // The same at 2026-07-28 with a progress token.
    let params = json!({"name": "echo_post", "arguments": {"name": "n"}, "_meta": {
        "progressToken": "p2",
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"}}});
    let a = send(
        client
            .post(&w.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo_post")
            .body(
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params})
                    .to_string(),
            ),
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.text);
    assert_eq!(a.headers["www-authenticate"], step_up.as_str());
    assert!(w.seen.requests.lock().unwrap().is_empty(), "nothing ran");
    // The one that may run still does, streamed.
    let mut ok = call(5, "echo_get", json!({"id": "1"}));
    ok["params"]["_meta"] = json!({"progressToken": "p3"});
    let a = send(legacy(&client, &w.url, &sid, ok)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(w.seen.requests.lock().unwrap().len(), 1);
}
