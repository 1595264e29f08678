//! A bare relay for `scripts/bench`: the floor of any proxy built from portico's HTTP parts.
//! It never listens beyond 127.0.0.1, and never parses or changes what it relays.
//!
//! A hyper HTTP/1.1 server that relays every request, as a GET of one fixed URL, to the backend
//! through portico's backend pool (`upstream::pool`) and answers with the backend's body as it
//! came: no JSON-RPC, no JSON parsing, no translation.
//!
//! `cargo run --release --example relay -- <listen port> <backend URL> [header: value]...`

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;

mod common;

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = common::args()?;
    let port = args.port;
    let url: Arc<str> = args.url.into();
    let headers = args.headers;
    let pool = Arc::new(args.pool);
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
