//! A webhook-only HTTP listener (`portico stdio --webhook-listen`): `POST /webhooks/{business}` and `/.well-known/jwks.json`, nothing else.
//! It never serves MCP: a stdio server's MCP stays on stdin/stdout.

use super::ingress::Ingress;
use crate::mcp::handler::Core;
use crate::ops::limits::{Gate, Limits};
use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpListener;

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// Serves webhooks for `ingress` on `listener` until the task is dropped, within `limits`.
pub async fn serve(
    listener: TcpListener,
    ingress: Arc<Ingress>,
    core: Arc<Core>,
    max_body: usize,
    limits: Limits,
) {
    let gate = Gate::new("webhook", limits);
    loop {
        let (stream, _, slot) = gate.accept(&listener).await;
        let (ingress, core, gate) = (ingress.clone(), core.clone(), gate.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(
                move |req: http::Request<hyper::body::Incoming>| {
                    let (ingress, core) = (ingress.clone(), core.clone());
                    Box::pin(async move {
                        let path = req.uri().path().to_string();
                        let r = if let Some(business) = path.strip_prefix("/webhooks/") {
                            let gateway = core.gateway.load_full();
                            let reply =
                                super::edge::receive(&ingress, &gateway, business, req, max_body)
                                    .await;
                            json_response(reply.status, &reply.body)
                        } else if path == "/.well-known/jwks.json" && req.method() == Method::GET {
                            let keys = ingress.egress.as_ref().map(|e| e.jwks());
                            json_response(
                                StatusCode::OK,
                                &keys.unwrap_or_else(|| json!({"keys": []})),
                            )
                        } else {
                            json_response(
                                StatusCode::NOT_FOUND,
                                &json!({"title": "not found", "status": 404,
                                    "detail": "this listener only takes POST /webhooks/{business}"}),
                            )
                        };
                        Ok::<_, Infallible>(r)
                    })
                },
            );
            let (stream, slot) = gate.watch(stream, slot);
            let served = gate
                .limits
                .http1()
                .serve_connection(
                    hyper_util::rt::TokioIo::new(stream),
                    gate.service(slot, svc),
                )
                .await;
            if let Err(e) = served {
                gate.ended(&e);
            }
        });
    }
}
