//! Sends a built request to a REST backend with the backend's body cap, through the backend's
//! resilience stack ([`call`]) or with a bare timeout ([`send`]). Dropping the future aborts the
//! backend request (that is how cancellation reaches the backend).

use crate::config::Backend;
use crate::model::{Failure, FailureKind};
use crate::translate::rest::RestRequest;
use crate::translate::rest::RestResponse;
use crate::upstream::pool::{Pool, PoolError};
use crate::upstream::resilience::call::BackendCall;
use bytes::{Bytes, BytesMut};
use std::time::Duration;
use tower::ServiceExt as _;

/// The plain-`http` path: same failures, same messages, as the general client's.
async fn via_pool(
    pool: &Pool,
    backend: &Backend,
    req: RestRequest,
) -> Result<RestResponse, Failure> {
    let limit = backend.max_response_bytes;
    match pool
        .send(req.method, &req.url, req.headers, req.body, limit)
        .await
    {
        Ok(a) => {
            if a.replayed {
                tracing::info!(
                    reused_connection_lost = "replayed",
                    "the backend closed a reused connection before answering; the replayable request was sent again on a fresh one"
                );
                crate::ops::metrics::reused_connection_lost(&backend.base, "replayed");
            }
            Ok(RestResponse {
                status: a.status.as_u16(),
                headers: a.headers,
                body: a.body,
            })
        }
        Err(PoolError::ReusedClosed) => {
            tracing::warn!(
                reused_connection_lost = "outcome_unknown",
                "the backend closed a reused connection before answering a request that is not safe to send again"
            );
            crate::ops::metrics::reused_connection_lost(&backend.base, "outcome_unknown");
            Err(Failure::new(
                FailureKind::Unavailable,
                "the backend closed a reused connection before answering; the write may or may not have been applied (send it again with an idempotency key to be safe)",
            ))
        }
        Err(e) => {
            tracing::warn!(error = %e, "backend request failed");
            let status = e.status().map(|s| s.as_u16());
            let f = match &e {
                PoolError::TooLarge { .. } => Failure::new(
                    FailureKind::BadUpstreamResponse,
                    format!("the backend body exceeds the {limit}-byte limit"),
                ),
                PoolError::Body { .. } => Failure::new(
                    FailureKind::BadUpstreamResponse,
                    "the backend connection broke while sending the body",
                ),
                e if e.is_connect() => Failure::new(
                    FailureKind::Unavailable,
                    "the backend refused or failed the connection",
                ),
                _ => Failure::new(FailureKind::Unavailable, "the backend connection failed"),
            };
            Err(Failure { status, ..f })
        }
    }
}

/// One backend call through the backend's resilience stack (limit, trace context, retries,
/// the call's route breaker, per-attempt measure, [`prepare`], timeout) around [`transmit`],
/// the `tower::Service<RestRequest>` at its bottom.
pub async fn call<'a>(
    backend: &'a Backend,
    call: BackendCall<'a>,
) -> Result<RestResponse, Failure> {
    let prepared = tower::service_fn(move |req| prepare(backend, req));
    let send = tower::service_fn(move |req| transmit(backend, req));
    // The layers' futures, in one box: the levels above move a pointer, not all of them.
    crate::util::boxed::in_place(|| backend.resilience.service(prepared, send).oneshot(call)).await
}

/// [`prepare`] then [`transmit`] within `timeout`, outside the resilience stack (a task's
/// status polls).
pub async fn send(
    backend: &Backend,
    req: RestRequest,
    timeout: Duration,
) -> Result<RestResponse, Failure> {
    let req = prepare(backend, req).await?;
    match tokio::time::timeout(timeout, transmit(backend, req)).await {
        Ok(r) => r,
        Err(_) => Err(Failure::new(
            FailureKind::Timeout,
            format!(
                "the backend did not answer within {} ms",
                timeout.as_millis()
            ),
        )),
    }
}

/// Adds the backend's own credential (never the MCP client's token), then signs the request
/// (`backend.sign_requests`) so the signature covers it. Before the attempt's timeout starts.
pub async fn prepare(backend: &Backend, mut req: RestRequest) -> Result<RestRequest, Failure> {
    if let Some(o) = &backend.oauth {
        req.headers
            .insert(http::header::AUTHORIZATION, o.authorization().await?);
    }
    if backend.sign_requests {
        crate::upstream::sign::sign(&mut req)?;
    }
    Ok(req)
}

/// Performs the (prepared) request, with no deadline of its own; transport failures become
/// `Failure`s of kind Unavailable / BadUpstreamResponse.
pub async fn transmit(backend: &Backend, req: RestRequest) -> Result<RestResponse, Failure> {
    if let Some(pool) = &backend.pool {
        return via_pool(pool, backend, req).await;
    }
    let mut builder = backend
        .client
        .request(req.method, &req.url)
        .headers(req.headers);
    if let Some(body) = req.body {
        builder = builder.body(body);
    }
    let mut resp = builder.send().await.map_err(|e| {
        let what = if e.is_connect() {
            "the backend refused or failed the connection"
        } else {
            "the backend connection failed"
        };
        tracing::warn!(error = %e, "backend request failed");
        Failure::new(FailureKind::Unavailable, what)
    })?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    if let Some(len) = resp.content_length()
        && len > backend.max_response_bytes as u64
    {
        return Err(Failure {
            status: Some(status),
            ..Failure::new(
                FailureKind::BadUpstreamResponse,
                format!(
                    "the backend announced a {len}-byte body, over the {}-byte limit",
                    backend.max_response_bytes
                ),
            )
        });
    }
    let mut body = BytesMut::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > backend.max_response_bytes {
                    return Err(Failure {
                        status: Some(status),
                        ..Failure::new(
                            FailureKind::BadUpstreamResponse,
                            format!(
                                "the backend body exceeds the {}-byte limit",
                                backend.max_response_bytes
                            ),
                        )
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "backend body failed");
                return Err(Failure {
                    status: Some(status),
                    ..Failure::new(
                        FailureKind::BadUpstreamResponse,
                        "the backend connection broke while sending the body",
                    )
                });
            }
        }
    }
    Ok(RestResponse {
        status,
        headers,
        body: Bytes::from(body),
    })
}
