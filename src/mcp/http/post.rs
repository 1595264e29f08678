//! POST handling shared by both eras: body reading and limits, batches, replies, and
//! `tools/call` with progress, logs and cancellation.
//! It never decides era-specific header rules: those are in `eras`.

use super::Server;
use super::respond::{
    Body, accepts, empty, framed, problem_response, rejected, rpc_error, sign_response, sse_frame,
    sse_headers, written_response,
};
use crate::mcp::LEGACY_VERSIONS;
use crate::mcp::handler::{self, Answer, Core, Era};
use crate::mcp::jsonrpc::{self, INVALID_REQUEST, Message};
use crate::mcp::notify;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

impl Server {
    pub(super) async fn post(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let (json_ok, sse_ok) = accepts(req.headers());
        if !json_ok && !sse_ok {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &Value::Null,
                INVALID_REQUEST,
                "Not Acceptable: accept application/json or text/event-stream",
                None,
            );
        }
        let ct_ok = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("application/json")
            });
        if !ct_ok {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &Value::Null,
                INVALID_REQUEST,
                "Unsupported Media Type: Content-Type must be application/json",
                None,
            );
        }
        let max = self.opts.max_body_bytes;
        // `drained`: the rest of the body was read and dropped, so the connection can carry
        // the next request; otherwise the answer says the connection closes (RFC 9112 §9.6).
        let too_big = |drained: bool| {
            let mut r = match autonym_only_problem(&self.core, "payload_too_large") {
                Some(problem) => problem_response(Some(413), &problem),
                None => rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!("request body exceeds {max} bytes"),
                    None,
                ),
            };
            if !drained {
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            r
        };
        let (parts, mut body) = req.into_parts();
        if let Some(len) = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok())
            && len > max as u64
        {
            // A body at most DRAIN_BYTES over the limit is read and dropped, so the client
            // (still sending) gets the answer instead of a reset; a larger one is not read.
            let drained = len <= max as u64 + DRAIN_BYTES && drain(&mut body).await;
            return too_big(drained);
        }
        let read = Limited::new(&mut body, max).collect();
        let read = crate::ops::limits::within_body_deadline(&parts.extensions, read).await;
        let bytes = match read {
            Err(timed_out) => {
                let mut r = rpc_error(
                    StatusCode::REQUEST_TIMEOUT,
                    &Value::Null,
                    INVALID_REQUEST,
                    &timed_out.to_string(),
                    None,
                );
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return r;
            }
            Ok(Ok(c)) => c.to_bytes(),
            Ok(Err(e)) => {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    return too_big(drain(&mut body).await);
                }
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &Value::Null,
                    INVALID_REQUEST,
                    "could not read the request body",
                    None,
                );
            }
        };
        crate::auth::transport::record_body(&bytes);
        let value = match jsonrpc::parse_value(&bytes, self.opts.max_depth) {
            Ok(Value::Array(items)) => {
                return self.post_batch(&parts.headers, items, json_ok).await;
            }
            Ok(v) => v,
            Err(rej) => return rejected(&rej),
        };
        let msg = match jsonrpc::classify(value) {
            Ok(m) => m,
            Err(rej) => return rejected(&rej),
        };
        let headers = &parts.headers;
        let session_hdr = Self::session_id(headers);
        let version_hdr = headers
            .get(crate::util::names::MCP_PROTOCOL_VERSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let params = match &msg {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref()
            }
            Message::Response { .. } => None,
        };
        let meta = params.and_then(|p| p.get("_meta"));
        let meta_version = meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
        let header_is_legacy = version_hdr
            .as_deref()
            .is_some_and(|v| LEGACY_VERSIONS.contains(&v) || v == "2024-11-05");
        // The reference dual-era rule: no session, and a modern marker (`_meta` version, or a
        // version header that is not a handshake-era one). `initialize` sent that way is a
        // removed method (404), which is what modern clients probing a server expect.
        let modern = session_hdr.is_none()
            && (meta_version.is_some() || version_hdr.is_some())
            && !(meta_version.is_none() && header_is_legacy);
        // A request other than `tools/call` is a read: its params carry the credentials reads
        // judge besides the headers (`auth::access`). Tool calls take their own path.
        let read = match &msg {
            Message::Request { method, params, .. } if method != "tools/call" => {
                Some((method.clone(), params.clone()))
            }
            _ => None,
        };
        let parts = &parts;
        let dispatch = |msg| async move {
            if modern {
                self.post_modern(headers, msg, json_ok, sse_ok).await
            } else {
                self.post_legacy(parts, msg, session_hdr, version_hdr, json_ok, sse_ok)
                    .await
            }
        };
        // A tool call may lend its request body from this text (`translate::lent`).
        let call = matches!(&msg, Message::Request { method, .. } if method == "tools/call");
        match read {
            Some((method, params)) => {
                crate::auth::access::reading(&method, params, dispatch(msg)).await
            }
            None if call => crate::translate::lent::scope(bytes, dispatch(msg)).await,
            None => dispatch(msg).await,
        }
    }

    /// JSON-RPC batches: only sessions negotiated at 2025-03-26 may send them (the revision
    /// that had batching); everyone else gets -32600.
    pub(super) async fn post_batch(
        &self,
        headers: &HeaderMap,
        items: Vec<Value>,
        json_ok: bool,
    ) -> Response<Body> {
        let refuse = |m: &str| {
            rpc_error(
                StatusCode::BAD_REQUEST,
                &Value::Null,
                INVALID_REQUEST,
                m,
                None,
            )
        };
        let session = match Self::session_id(headers) {
            Some(sid) => self.find_session(&sid).await.ok(),
            None => None,
        };
        let Some(session) = session.filter(|s| s.version == "2025-03-26") else {
            return refuse(
                "JSON-RPC batches are not supported: send one message per request (batching exists only in MCP 2025-03-26 sessions)",
            );
        };
        if items.is_empty() {
            return refuse("an empty JSON-RPC batch is invalid");
        }
        let era = Era::Legacy(session.version.clone());
        // A call the token lacks a scope for refuses the whole batch with HTTP 403 before any
        // item runs: the client steps up and sends it again, nothing half done.
        let refused = items
            .iter()
            .filter(|item| item.get("method").and_then(Value::as_str) == Some("tools/call"))
            .find_map(|item| self.scope_refused(item.get("params")));
        if let Some(answer) = refused {
            return self.reply(&Value::Null, answer, json_ok, false, None);
        }
        let mut replies = Vec::new();
        for item in items {
            match jsonrpc::classify(item) {
                Err(rej) => replies.push(jsonrpc::error(&rej.id, rej.code, &rej.message, None)),
                Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                    replies.push(jsonrpc::error(
                        &id,
                        INVALID_REQUEST,
                        "initialize must not be part of a batch",
                        None,
                    ))
                }
                Ok(Message::Request { id, method, params }) => {
                    let answer = handler::handle(&self.core, &era, &method, params).await;
                    replies.push(answer.into_message(&id));
                }
                Ok(_) => {}
            }
        }
        if replies.is_empty() {
            return empty(StatusCode::ACCEPTED);
        }
        let body = Value::Array(replies);
        // JSON unless the client takes only SSE (a batch answers SSE whenever JSON is not
        // accepted).
        framed(StatusCode::OK, json_ok, true, |out| {
            crate::json_text::write(&body, out)
        })
    }

    /// Frames a final answer as JSON or a one-event SSE stream, per `Accept`.
    pub(super) fn reply(
        &self,
        id: &Value,
        answer: Answer,
        json_ok: bool,
        sse_ok: bool,
        extra: Option<(&'static str, String)>,
    ) -> Response<Body> {
        if let Answer::Error {
            code: crate::binding::HTTP_PROBLEM,
            data: Some(problem),
            http_status,
            ..
        } = &answer
        {
            return problem_response(*http_status, problem);
        }
        let add_extra = |r: &mut Response<Body>| {
            if let Some((name, value)) = extra
                && let Ok(v) = HeaderValue::from_str(&value)
            {
                r.headers_mut().insert(name, v);
            }
        };
        // A written result goes out as written; a signed answer is signed over its value.
        let answer = match answer {
            Answer::Written(w) if crate::auth::transport::response_signer().is_none() => {
                let mut r = written_response(id, w, json_ok, sse_ok);
                add_extra(&mut r);
                return r;
            }
            a => a,
        };
        let (status, body) = match answer {
            Answer::Result(r) => (StatusCode::OK, jsonrpc::result(id, r)),
            Answer::Written(w) => (StatusCode::OK, jsonrpc::result(id, w.to_value())),
            Answer::Error {
                code,
                message,
                data,
                http_status,
            } => (
                http_status
                    .and_then(|s| StatusCode::from_u16(s).ok())
                    .unwrap_or(StatusCode::OK),
                jsonrpc::error(id, code, &message, data),
            ),
        };
        let mut r = framed(status, json_ok, sse_ok, |out| {
            crate::json_text::write(&body, out)
        });
        add_extra(&mut r);
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(key) = crate::auth::transport::response_signer() {
            sign_response(&mut r, status, &body, &key);
        }
        if status == StatusCode::TOO_MANY_REQUESTS
            && let Some(secs) = body
                .pointer("/error/data/retry_after")
                .and_then(Value::as_u64)
        {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        r
    }
}

/// For a gateway whose businesses are all autonym, the Problem Details of a registered code
/// answered before any JSON-RPC processing (B3.4's HTTP form); `None` otherwise.
fn autonym_only_problem(core: &Core, slug: &str) -> Option<Value> {
    use crate::binding::{Kind, autonym};
    let g = core.gateway.load();
    let all =
        !g.businesses.is_empty() && g.businesses.iter().all(|b| b.binding.kind == Kind::Autonym);
    all.then(|| autonym::code(slug))
        .flatten()
        .map(|c| autonym::problem(c, None, None))
}

/// How much of an oversized request body past the limit is read and dropped (so that the
/// connection stays usable and the client gets its 413), and for how long at most.
const DRAIN_BYTES: u64 = 8 << 20;

const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Reads and drops what is left of a request body, at most [`DRAIN_BYTES`] and for at most
/// [`DRAIN_TIME`]: true when the body ended within both.
async fn drain(body: &mut Incoming) -> bool {
    let read = async {
        let mut seen = 0u64;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                seen += data.len() as u64;
                if seen > DRAIN_BYTES {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false)
}

/// What a `tools/call` reports while it runs, and how it can be cancelled (2025 sessions).
pub(super) struct CallReport {
    pub(super) token: Option<Value>,
    pub(super) level: Option<notify::Level>,
    pub(super) cancel: Option<(notify::Registration, tokio::sync::oneshot::Receiver<()>)>,
    /// The session's waiting table, when the tool asks its client for input (2025 era).
    pub(super) asks: Option<Arc<crate::mcp::input::Pending>>,
}

/// JSON-RPC code for a request answered after `notifications/cancelled` (JSON replies only:
/// an SSE reply just ends without a response).
const REQUEST_CANCELLED: i64 = -32800;

impl Server {
    /// Runs a `tools/call` with progress and log notifications. With an SSE-accepting client
    /// and something to report, the reply is an SSE stream (notifications, then the response);
    /// otherwise plain JSON. The call runs inside the response body: dropping the body drops
    /// the call and its backend request.
    pub(super) async fn observed_call(
        &self,
        id: Value,
        era: Era,
        params: Option<Value>,
        report: CallReport,
        json_ok: bool,
        sse_ok: bool,
    ) -> Response<Body> {
        // A missing scope is answered before a stream starts: HTTP 403 with its challenge.
        if let Some(answer) = self.scope_refused(params.as_ref()) {
            return self.reply(&id, answer, json_ok, sse_ok, None);
        }
        let stream =
            sse_ok && (report.token.is_some() || report.level.is_some() || report.asks.is_some());
        let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
        let notifier = if stream {
            notify::Notifier::new(tx, report.token, report.level).with_asks(report.asks)
        } else {
            notify::Notifier::none()
        };
        let core = self.core.clone();
        let work = crate::auth::transport::carry(crate::ops::otel::carry(async move {
            let call = handler::handle_with(&core, &era, "tools/call", params, &notifier);
            let answer = match report.cancel {
                Some((_registration, cancel)) => tokio::select! {
                    a = call => Some(a),
                    _ = cancel => None,
                },
                None => Some(call.await),
            };
            drop(notifier);
            answer
        }));
        if !stream {
            // Same framing (and binding HTTP status) as every other answer.
            let answer = work.await.unwrap_or_else(|| Answer::Error {
                code: REQUEST_CANCELLED,
                message: "Request cancelled".into(),
                data: None,
                http_status: None,
            });
            return self.reply(&id, answer, json_ok, sse_ok, None);
        }
        // Headers are sent before the answer exists: a binding's HTTP status cannot apply.
        let work = async move { work.await.map(|a| a.into_message(&id)) };
        let mut work = Some(Box::pin(work));
        let mut last: Option<Value> = None;
        let frames = futures_util::stream::poll_fn(move |cx| {
            use std::task::Poll;
            if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                return Poll::Ready(Some(Ok::<_, Infallible>(Frame::data(sse_frame(&n)))));
            }
            if let Some(w) = work.as_mut() {
                match w.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(answer) => {
                        work = None;
                        last = answer;
                        // Notifications queued before the answer go first.
                        if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                            return Poll::Ready(Some(Ok(Frame::data(sse_frame(&n)))));
                        }
                    }
                }
            } else if let Poll::Ready(Some(n)) = rx.poll_recv(cx) {
                return Poll::Ready(Some(Ok(Frame::data(sse_frame(&n)))));
            }
            Poll::Ready(last.take().map(|v| Ok(Frame::data(sse_frame(&v)))))
        });
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        sse_headers(&mut r);
        r
    }
}
