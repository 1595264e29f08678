//! A bare relay for `scripts/bench`: the floor of any proxy built from portico's HTTP parts.
//! It never listens beyond 127.0.0.1, and never parses or changes what it relays.
//!
//! A hyper HTTP/1.1 server that relays every request, as a GET of one fixed URL, to the backend
//! through portico's backend pool (`upstream::pool`) and answers with the backend's body as it
//! came: no JSON-RPC, no JSON parsing, no translation.
//!
//! `cargo run --release --example relay -- <listen port> <backend URL> [header: value]...`

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use portico::upstream::pool::Pool;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().ok_or("listen port")?.parse()?;
    let url: Arc<str> = args.next().ok_or("backend URL")?.into();
    let mut headers = HeaderMap::new();
    for h in args {
        let (k, v) = h.split_once(':').ok_or("header: value")?;
        headers.insert(
            HeaderName::try_from(k.trim())?,
            HeaderValue::try_from(v.trim())?,
        );
    }
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .ok_or("an http:// URL")?;
    let pool = Arc::new(Pool::new(authority, Duration::from_secs(1)).ok_or("authority")?);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("relay: http://127.0.0.1:{port}/");
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (pool, url, headers) = (pool.clone(), url.clone(), headers.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req: hyper::Request<Incoming>| {
                let (pool, url, headers) = (pool.clone(), url.clone(), headers.clone());
                async move {
                    let answer = pool
                        .send(http::Method::GET, &url, headers, None, 1 << 20)
                        .await;
                    let resp = match answer {
                        Ok(a) => {
                            let mut r = Response::new(Full::new(a.body));
                            *r.status_mut() = a.status;
                            if let Some(ct) = a.headers.get(http::header::CONTENT_TYPE) {
                                r.headers_mut()
                                    .insert(http::header::CONTENT_TYPE, ct.clone());
                            }
                            r
                        }
                        Err(e) => {
                            let mut r = Response::new(Full::new(Bytes::from(e.to_string())));
                            *r.status_mut() = StatusCode::BAD_GATEWAY;
                            r
                        }
                    };
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
