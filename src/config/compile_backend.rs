//! Compiles a mapping file's `backend` section (URL, auth, retries, forwarded headers).
//! It must never panic on user input: every problem becomes a `Diagnostic` with a fix.

use super::business::Backend;
use super::diag::{Diagnostic, locate_yaml};
use super::mapping::MappingFile;
use crate::util::duration::parse_duration;
use crate::util::env::substitute_env;
use http::{HeaderName, HeaderValue};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub(super) fn compile_backend(
    file: &Path,
    text: &str,
    spec: &MappingFile,
    diags: &mut Vec<Diagnostic>,
) -> Option<Backend> {
    let at = |path: &[&str]| locate_yaml(text, path);
    let b = &spec.backend;
    let mut ok = true;
    let url = match substitute_env(&b.url) {
        Ok(u) => u,
        Err(e) => {
            diags.push(
                Diagnostic::error(file, format!("backend url: {e}"))
                    .line(at(&["backend", "url"]))
                    .at("backend.url")
                    .hint("export the variable before starting portico, or write the URL"),
            );
            return None;
        }
    };
    let base = url.trim_end_matches('/').to_string();
    let mut authority = None;
    match url::Url::parse(&base) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {
            if u.scheme() == "http"
                && let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default())
            {
                authority = Some(match u.host() {
                    Some(url::Host::Ipv6(_)) => {
                        format!("[{}]:{port}", host.trim_matches(['[', ']']))
                    }
                    _ => format!("{host}:{port}"),
                });
            }
        }
        _ => {
            ok = false;
            diags.push(
                Diagnostic::error(
                    file,
                    format!("backend url `{}` is not an http(s) URL", b.url),
                )
                .line(at(&["backend", "url"]))
                .at("backend.url")
                .hint("e.g. `url: http://127.0.0.1:8081/api`"),
            );
        }
    }
    let duration =
        |field: &str, v: &Option<String>, default: Duration, diags: &mut Vec<Diagnostic>| match v {
            None => Some(default),
            Some(s) => parse_duration(s).or_else(|| {
                diags.push(
                    Diagnostic::error(file, format!("`{s}` is not a duration"))
                        .line(at(&["backend", field]))
                        .at(format!("backend.{field}"))
                        .hint("write e.g. `5s`, `1500ms` or `1m`"),
                );
                None
            }),
        };
    let timeout = duration("timeout", &b.timeout, Duration::from_secs(10), diags);
    let connect = duration(
        "connect_timeout",
        &b.connect_timeout,
        Duration::from_secs(2),
        diags,
    );
    let mut headers = Vec::new();
    for (k, v) in &b.headers {
        let line = at(&["backend", "headers", k]);
        let name = match HeaderName::from_bytes(k.as_bytes()) {
            Ok(n) => n,
            Err(_) => {
                ok = false;
                diags.push(
                    Diagnostic::error(file, format!("`{k}` is not a valid header name"))
                        .line(line)
                        .at(format!("backend.headers.{k}")),
                );
                continue;
            }
        };
        match substitute_env(v) {
            Ok(value) => match HeaderValue::from_str(&value) {
                Ok(mut hv) => {
                    hv.set_sensitive(true);
                    headers.push((name, hv));
                }
                Err(_) => {
                    ok = false;
                    diags.push(
                        Diagnostic::error(
                            file,
                            format!("header `{k}` has characters not allowed in HTTP headers"),
                        )
                        .line(line)
                        .at(format!("backend.headers.{k}")),
                    );
                }
            },
            Err(e) => {
                ok = false;
                diags.push(
                    Diagnostic::error(file, format!("header `{k}`: {e}"))
                        .line(line)
                        .at(format!("backend.headers.{k}"))
                        .hint("export the variable before starting portico (its value is never logged)"),
                );
            }
        }
    }
    let forward_headers = compile_forward_headers(file, b, &at, diags);
    let resilience =
        crate::upstream::resilience::compile::compile(file, text, &spec.business, &base, b, diags);
    let (timeout, connect, resilience, forward_headers) =
        (timeout?, connect?, resilience?, forward_headers?);
    if !ok {
        return None;
    }
    let client = match reqwest::Client::builder()
        .connect_timeout(connect)
        .pool_idle_timeout(Duration::from_secs(90))
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                format!("cannot build the HTTP client: {e}"),
            ));
            return None;
        }
    };
    let pool = authority
        .and_then(|a| crate::upstream::pool::Pool::new(&a, connect))
        .map(Arc::new);
    let oauth = b
        .oauth
        .as_ref()
        .and_then(|o| backend_oauth(o, file, text, diags));
    Some(Backend {
        oauth,
        base,
        client,
        pool,
        timeout,
        headers,
        max_response_bytes: b
            .max_response_bytes
            .unwrap_or(8 << 20)
            .min(usize::MAX as u64) as usize,
        resilience,
        forward_headers,
        sign_requests: b.sign_requests,
    })
}

/// The stand-in for a backend whose settings had mistakes: never called, since a file with
/// errors is never served; it only lets the file's tools be compiled and checked.
pub(super) fn unchecked_backend(business: &str) -> Option<Backend> {
    let base = "http://backend.invalid";
    Some(Backend {
        base: base.to_string(),
        client: reqwest::Client::builder().build().ok()?,
        pool: None,
        timeout: Duration::from_secs(10),
        headers: Vec::new(),
        max_response_bytes: 8 << 20,
        resilience: crate::upstream::resilience::Resilience::new(
            business,
            base,
            crate::upstream::resilience::Policy::default(),
        ),
        forward_headers: Vec::new(),
        sign_requests: false,
        oauth: None,
    })
}

/// Headers a client may not choose for the backend: connection management, framing, and what
/// portico itself sets or signs.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "content-digest",
    "content-encoding",
    "accept",
    "signature",
    "signature-input",
    "expect",
];

/// `backend.forward_headers`: valid names, none portico owns, none also set statically.
fn compile_forward_headers(
    file: &Path,
    b: &super::mapping::BackendSpec,
    at: &dyn Fn(&[&str]) -> Option<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<HeaderName>> {
    let mut names: Vec<HeaderName> = Vec::new();
    let mut ok = true;
    let mut bad = |msg: String, hint: &str| {
        ok = false;
        diags.push(
            Diagnostic::error(file, msg)
                .line(at(&["backend", "forward_headers"]))
                .at("backend.forward_headers")
                .hint(hint.to_string()),
        );
    };
    for raw in &b.forward_headers {
        let Ok(name) = HeaderName::from_bytes(raw.as_bytes()) else {
            bad(
                format!("`{raw}` is not a valid header name"),
                "list header names only, e.g. `X-Request-Source`",
            );
            continue;
        };
        if NOT_FORWARDED.contains(&name.as_str()) || name.as_str().starts_with("proxy-") {
            bad(
                format!(
                    "`{raw}` cannot be forwarded: portico sets it or it manages the connection"
                ),
                "remove it; the backend request gets its own framing, content type and signature",
            );
        } else if b.headers.keys().any(|k| k.eq_ignore_ascii_case(raw)) {
            bad(
                format!("`{raw}` is both a static header and a forwarded one"),
                "keep it in one of `backend.headers` and `backend.forward_headers`",
            );
        } else if names.contains(&name) {
            bad(format!("`{raw}` is listed twice"), "list each header once");
        } else {
            names.push(name);
        }
    }
    ok.then_some(names)
}

/// Compiles `backend.oauth`: the grant, the token URL (https, or http to a loopback host) and
/// the secret's `${ENV}`.
fn backend_oauth(
    o: &super::mapping::BackendOAuthSpec,
    file: &Path,
    text: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Arc<crate::upstream::credential::BackendCredential>> {
    let err = |field: &str, msg: String, hint: &str| {
        Diagnostic::error(file, msg)
            .line(locate_yaml(text, &["backend", "oauth", field]))
            .at(format!("backend.oauth.{field}"))
            .hint(hint.to_string())
    };
    let url_ok = url::Url::parse(&o.token_url).is_ok_and(|u| {
        u.scheme() == "https"
            || (u.scheme() == "http"
                && matches!(u.host_str(), Some("127.0.0.1" | "localhost" | "[::1]")))
    });
    if !url_ok {
        diags.push(err(
            "token_url",
            format!("`{}` is not an https URL", o.token_url),
            "write the token endpoint of the backend's authorization server (plain http only on 127.0.0.1)",
        ));
        return None;
    }
    let secret = match substitute_env(&o.client_secret) {
        Ok(s) => s,
        Err(e) => {
            diags.push(err(
                "client_secret",
                format!("client secret: {e}"),
                "set the variable, or write the value with ${NAME}",
            ));
            return None;
        }
    };
    use super::mapping::BackendGrant;
    use crate::upstream::credential::BackendCredential;
    if o.grant == BackendGrant::ClientCredentials && o.audience.is_some() {
        diags.push(err(
            "audience",
            "`audience` applies to `grant: token_exchange` only".into(),
            "remove it, or set `grant: token_exchange`",
        ));
        return None;
    }
    let timeout = Duration::from_secs(10);
    let built = crate::upstream::oauth::TokenEndpoint::new(
        o.token_url.clone(),
        o.client_id.clone(),
        secret,
        o.scope.clone(),
        o.resource.clone(),
        timeout,
    )
    .map(|endpoint| match o.grant {
        BackendGrant::ClientCredentials => BackendCredential::ClientCredentials(
            crate::upstream::oauth::ClientCredentials::new(endpoint),
        ),
        BackendGrant::TokenExchange => BackendCredential::TokenExchange(
            crate::upstream::exchange::TokenExchange::new(endpoint, o.audience.clone()),
        ),
    });
    match built {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            diags.push(err("token_url", e, "check the URL"));
            None
        }
    }
}
