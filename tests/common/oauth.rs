//! Test authorization servers for MCP authorization tests: an issuer's discovery side
//! (metadata, a rotatable JWK Set, introspection) and a backend's token endpoint (client
//! credentials and RFC 8693 token exchange, each request recorded). Test-only, loopback only.

use super::serve_with;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use portico::webhook::keys::SigningKey;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// An authorization server's discovery side: metadata and a JWK Set that can be rotated.
pub struct As {
    pub issuer: String,
    pub keys: Mutex<Vec<Value>>,
    pub jwks_fetches: AtomicUsize,
    /// Opaque tokens -> their RFC 7662 answer (`active: false` for any other).
    pub opaque: Mutex<std::collections::HashMap<String, Value>>,
    pub introspections: AtomicUsize,
    /// Serve OpenID discovery appended to the issuer's path instead of RFC 8414.
    oidc: bool,
}

impl As {
    pub async fn start(path: &str, oidc: bool, keys: &[&SigningKey]) -> Arc<As> {
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

/// The backend's own authorization server at `/token`. Client credentials: tokens `bt-1`,
/// `bt-2`, ... Token exchange (RFC 8693): the request is checked exactly against `exchange`
/// (HTTP Basic `portico:backend-secret-0123456789`, a form with exactly the grant type, the
/// subject token and its type, the requested type and `exchange`'s `audience`, `resource` and
/// `scope`); a token for subject `S` is `xt-S-<n>`, and subject `mallory` is refused with
/// `invalid_grant` (its description quoting the subject token, which portico must not pass on).
/// Tokens live `lifetime` seconds; every request is recorded.
pub struct TokenServer {
    pub url: String,
    pub requests: Mutex<Vec<(Option<String>, String)>>,
    pub exchange: Value,
}

pub const EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

fn token_answer(status: u16, doc: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(doc.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

impl TokenServer {
    pub async fn start(lifetime: u64) -> Arc<TokenServer> {
        TokenServer::start_with(lifetime, json!({})).await
    }

    pub async fn start_with(lifetime: u64, exchange: Value) -> Arc<TokenServer> {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let t = Arc::new(TokenServer {
            url: format!("http://{}/token", listener.local_addr().unwrap()),
            requests: Mutex::new(Vec::new()),
            exchange,
        });
        let s = t.clone();
        serve_with(listener, move |req: Request<hyper::body::Incoming>| {
            let s = s.clone();
            async move {
                let auth = req
                    .headers()
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string());
                let form_type = req.headers().get("content-type").cloned();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let body = String::from_utf8_lossy(&body).to_string();
                let n = {
                    let mut r = s.requests.lock().unwrap();
                    r.push((auth.clone(), body.clone()));
                    r.len()
                };
                let form: std::collections::BTreeMap<String, String> =
                    url::form_urlencoded::parse(body.as_bytes())
                        .into_owned()
                        .collect();
                if form.get("grant_type").map(String::as_str) != Some(EXCHANGE) {
                    return token_answer(
                        200,
                        json!({"access_token": format!("bt-{n}"),
                        "token_type": "Bearer", "expires_in": lifetime}),
                    );
                }
                s.exchange_answer(n, auth.as_deref(), form_type, &form, lifetime)
            }
        });
        t
    }

    fn exchange_answer(
        &self,
        n: usize,
        auth: Option<&str>,
        form_type: Option<hyper::header::HeaderValue>,
        form: &std::collections::BTreeMap<String, String>,
        lifetime: u64,
    ) -> Response<Full<Bytes>> {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("portico:backend-secret-0123456789")
        );
        if auth != Some(basic.as_str()) {
            return token_answer(401, json!({"error": "invalid_client"}));
        }
        if form_type.as_ref().and_then(|v| v.to_str().ok())
            != Some("application/x-www-form-urlencoded")
        {
            return token_answer(400, json!({"error": "invalid_request"}));
        }
        let subject = form.get("subject_token").cloned().unwrap_or_default();
        let mut want: std::collections::BTreeMap<String, String> = [
            ("grant_type", EXCHANGE),
            ("subject_token", subject.as_str()),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for k in ["audience", "resource", "scope"] {
            if let Some(v) = self.exchange.get(k).and_then(Value::as_str) {
                want.insert(k.into(), v.into());
            }
        }
        if *form != want {
            return token_answer(
                400,
                json!({"error": "invalid_request",
                "error_description": format!("expected {want:?}")}),
            );
        }
        // The subject token's `sub` (its signature is the resource server's to check).
        let sub = subject
            .split('.')
            .nth(1)
            .and_then(|p| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(p)
                    .ok()
            })
            .and_then(|p| serde_json::from_slice::<Value>(&p).ok())
            .and_then(|c| c["sub"].as_str().map(str::to_string));
        match sub.as_deref() {
            None => token_answer(400, json!({"error": "invalid_request"})),
            Some("mallory") => token_answer(
                400,
                json!({"error": "invalid_grant",
                "error_description": format!("subject token {subject} is not accepted")}),
            ),
            Some(sub) => token_answer(
                200,
                json!({"access_token": format!("xt-{sub}-{n}"),
                "issued_token_type": ACCESS_TOKEN, "token_type": "Bearer",
                "expires_in": lifetime}),
            ),
        }
    }
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub fn b64(v: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
}

pub fn es256(key: &SigningKey, header: Value, claims: &Value) -> String {
    portico::auth::jws::sign(&header, claims, key).unwrap()
}

/// A token with any header, signed with `key` over exactly that header.
pub fn signed(key: &SigningKey, header: Value, claims: &Value) -> String {
    es256(key, header, claims)
}
