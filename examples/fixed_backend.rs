//! A backend answering fixed JSON, for `scripts/bench-workloads`: the cheapest REST server the
//! workloads' mappings can call. It never listens beyond 127.0.0.1 and never parses a body.
//!
//! `cargo run --release --example fixed_backend -- <listen port> <routes file>`
//!
//! Each line of the routes file is `METHOD /path/pattern STATUS file.json` (file relative to the
//! routes file; `*` in the pattern matches one path segment; `#` starts a comment). A request is
//! answered by the first line whose method and pattern match its path (the query is ignored),
//! with the file's bytes and `Content-Type: application/json`; anything else gets a 404. The
//! request body is read and dropped, so large arguments cost the backend only their transfer.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

struct Route {
    method: http::Method,
    pattern: Vec<String>,
    status: StatusCode,
    body: Bytes,
}

fn routes(file: &std::path::Path) -> Result<Vec<Route>, Box<dyn std::error::Error>> {
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    let mut out = Vec::new();
    for (n, line) in std::fs::read_to_string(file)?.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [method, pattern, status, body] = parts[..] else {
            return Err(format!("{}:{}: METHOD /path STATUS file", file.display(), n + 1).into());
        };
        out.push(Route {
            method: method.parse()?,
            pattern: pattern.split('/').map(str::to_owned).collect(),
            status: StatusCode::from_u16(status.parse()?)?,
            body: std::fs::read(dir.join(body))
                .map_err(|e| format!("{}:{}: {body}: {e}", file.display(), n + 1))?
                .into(),
        });
    }
    Ok(out)
}

fn matches(route: &Route, method: &http::Method, path: &str) -> bool {
    route.method == method
        && path.split('/').count() == route.pattern.len()
        && path
            .split('/')
            .zip(&route.pattern)
            .all(|(seg, pat)| pat == "*" || seg == pat)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().ok_or("listen port")?.parse()?;
    let file = args.next().ok_or("routes file")?;
    let routes = Arc::new(routes(std::path::Path::new(&file))?);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "backend: http://127.0.0.1:{port}/ ({} routes)",
        routes.len()
    );
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let routes = routes.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let routes = routes.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let _ = body.collect().await;
                    let hit = routes
                        .iter()
                        .find(|r| matches(r, &parts.method, parts.uri.path()));
                    let mut resp = match hit {
                        Some(r) => {
                            let mut resp = Response::new(Full::new(r.body.clone()));
                            *resp.status_mut() = r.status;
                            resp
                        }
                        None => {
                            let mut resp = Response::new(Full::new(Bytes::from_static(
                                br#"{"error":"no route"}"#,
                            )));
                            *resp.status_mut() = StatusCode::NOT_FOUND;
                            resp
                        }
                    };
                    resp.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
