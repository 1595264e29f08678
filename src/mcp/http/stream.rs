//! The GET stream: server-to-client notifications on SSE, its gate and keep-alives.
//! It never handles POSTed requests.

use super::Server;
use super::lifetime::{no_session, session_gone};
use super::respond::{Body, accepts, rpc_error, sse_headers};
use crate::mcp::handler::Answer;
use crate::mcp::jsonrpc::INVALID_REQUEST;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

impl Server {
    pub(super) async fn get(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(sid) = Self::session_id(req.headers()) else {
            let mut r = rpc_error(
                StatusCode::METHOD_NOT_ALLOWED,
                &Value::Null,
                INVALID_REQUEST,
                "GET needs an Mcp-Session-Id (2026-07-28 has no GET stream: use subscriptions/listen)",
                None,
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        };
        if !accepts(req.headers()).1 {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &Value::Null,
                INVALID_REQUEST,
                "Not Acceptable: GET must accept text/event-stream",
                None,
            );
        }
        let session = match self.find_session(&sid).await {
            Ok(s) => s,
            Err(why) => return no_session(&Value::Null, why),
        };
        let (tx, rx) = mpsc::channel::<Bytes>(256);
        session.attach_stream(tx);
        let last_event_id = req
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let filter = crate::webhook::hub::Filter::from_query(req.uri().query());
        // Events reach this stream only as far as its own credentials allow (`auth::access`);
        // the request is kept when a policy may read its signature.
        let keep = self.core.gateway.load().reads_http_request;
        let creds = crate::auth::transport::HttpCredentials::from_request(&req, keep);
        let gate = self.stream_gate(&creds).await;
        // The status changes of this session's owner's tasks (`notifications/tasks/status`),
        // for a session of a revision with tasks (2025-11-25).
        let owner =
            crate::auth::transport::scope(creds, async { crate::mcp::tasks::caller(false) });
        let tasks = owner
            .await
            .filter(|_| session.version.as_str() >= "2025-11-25")
            .map(crate::mcp::tasks::notify::for_owner);
        self.events_loaded().await;
        let events = self.webhooks.hub.listen(&sid, filter, last_event_id, gate);
        // The stream ends with its session: DELETE or expiry here, or its shared record gone
        // because another replica ended it (checked once per keep-alive or renewal period,
        // whichever is shorter; the open stream renews the record).
        let idle = self.opts.session_idle;
        let ended = EndsWith(tokio::spawn(session_gone(
            session,
            self.opts.keep_alive,
            idle,
        )));
        let tasks = futures_util::stream::iter(tasks).flatten();
        let frames = futures_util::stream::select(tokio_stream_receiver(rx), events);
        self.stream_response(futures_util::stream::select(frames, tasks).take_until(ended))
    }

    /// The delivery gate of a stream opened with `creds` (`None`: no business has a policy).
    pub(super) async fn stream_gate(
        &self,
        creds: &crate::auth::transport::HttpCredentials,
    ) -> Option<Arc<dyn crate::webhook::hub::Gate>> {
        let core = self.core.clone();
        let gate = crate::auth::access::StreamGate::open(move || core.gateway.load_full(), creds);
        gate.await.map(|g| g as Arc<dyn crate::webhook::hub::Gate>)
    }

    /// A `resources/list` answer that also names the booking resources the caller owns
    /// (`webhook::edge::owned_resources`); such a list is the caller's own (`private`).
    pub(super) async fn with_owned(&self, answer: Answer) -> Answer {
        let Answer::Result(mut r) = answer else {
            return answer;
        };
        let gateway = self.core.gateway.load_full();
        if !gateway
            .businesses
            .iter()
            .any(|b| b.webhooks.is_some() && b.auth.is_some())
        {
            return Answer::Result(r);
        }
        let Some(audience) = crate::auth::access::Audience::current(&gateway).await else {
            return Answer::Result(r);
        };
        let owned = crate::webhook::edge::owned_resources(&self.webhooks, &gateway, &audience);
        let owned = owned.await;
        if let (false, Some(Value::Array(list))) = (owned.is_empty(), r.get_mut("resources")) {
            list.extend(owned);
            if r.get("cacheScope").is_some() {
                r["cacheScope"] = json!("private");
            }
        }
        Answer::Result(r)
    }

    /// A long-lived SSE response: `source` plus keep-alive comments, ended by shutdown.
    pub(super) fn stream_response(
        &self,
        source: impl futures_util::Stream<Item = Bytes> + Send + Sync + 'static,
    ) -> Response<Body> {
        let keep_alive = self.opts.keep_alive;
        let ticks = tokio_stream_interval(keep_alive);
        let open = crate::ops::metrics::SseClient::open();
        let mut closing = self.closing.subscribe();
        // The response ends when `source` does (a `None` after its last frame), not only at
        // shutdown: the keep-alive ticks alone would hold it open.
        let source = source
            .map(Some)
            .chain(futures_util::stream::once(std::future::ready(None)));
        let frames = futures_util::stream::select(
            source,
            ticks.map(|_| Some(Bytes::from_static(b": keep-alive\n\n"))),
        )
        .take_while(|frame| std::future::ready(frame.is_some()))
        .filter_map(std::future::ready)
        .take_until(async move {
            let _ = closing.wait_for(|c| *c).await;
        })
        .map(move |b| {
            let _ = &open;
            Ok::<_, Infallible>(Frame::data(b))
        });
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
        sse_headers(&mut r);
        r
    }
}

/// A task the stream ends with; aborted when the stream is dropped first.
struct EndsWith(tokio::task::JoinHandle<()>);

impl Future for EndsWith {
    type Output = ();
    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl Drop for EndsWith {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn tokio_stream_receiver(mut rx: mpsc::Receiver<Bytes>) -> impl futures_util::Stream<Item = Bytes> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn tokio_stream_interval(period: Duration) -> impl futures_util::Stream<Item = ()> {
    let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    futures_util::stream::poll_fn(move |cx| iv.poll_tick(cx).map(|_| Some(())))
}
