//! Response framing for the MCP endpoint: the body type, JSON and SSE framing, JSON-RPC errors,
//! Accept and Host parsing, header-value decoding.
//! It never looks at sessions or runs requests: it only shapes what others answer.

use crate::binding::Written;
use crate::mcp::jsonrpc::{self, INTERNAL_ERROR};
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::{Value, json};
use std::convert::Infallible;

/// Response body type of the MCP endpoint.
pub type Body = BoxBody<Bytes, Infallible>;

/// 503 with `Retry-After` and a JSON-RPC error.
pub(super) fn unavailable(id: &Value, retry_after_s: u64, message: &str) -> Response<Body> {
    let mut r = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        INTERNAL_ERROR,
        message,
        Some(json!({"retry_after": retry_after_s})),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    r
}

pub(super) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

thread_local! {
    /// Room the next answer written on this thread starts with: about the size of the answers
    /// written before it, so a typical answer is written without growing its buffer.
    static ANSWER_ROOM: std::cell::Cell<usize> = const { std::cell::Cell::new(1024) };
}

/// `prefix`, the JSON text of `value`, then `suffix`, in a buffer sized from the answers
/// before it (growing a 256-byte buffer to a 2 KiB answer copied it three times).
fn answer_bytes(prefix: &[u8], value: &Value, suffix: &[u8]) -> Vec<u8> {
    answer_with(prefix, 0, |out| crate::json_text::write(value, out), suffix)
}

/// [`answer_bytes`] with the JSON written by `write`, which writes at least `size` bytes (0
/// when unknown): a known large answer gets its room at once, not a buffer sized from the
/// answers before it and then replaced.
fn answer_with(
    prefix: &[u8],
    size: usize,
    write: impl FnOnce(&mut Vec<u8>),
    suffix: &[u8],
) -> Vec<u8> {
    let room = ANSWER_ROOM.with(std::cell::Cell::get);
    let mut out = Vec::with_capacity(room.max(prefix.len() + size + suffix.len() + 64));
    out.extend_from_slice(prefix);
    write(&mut out);
    out.extend_from_slice(suffix);
    // Follows larger answers at once and smaller ones slowly; bounded either way.
    let next = out.len().max(room - room / 8).clamp(256, 64 * 1024);
    ANSWER_ROOM.with(|r| r.set(next));
    out
}

/// A JSON-RPC answer as JSON, or as one SSE event when the client takes only
/// `text/event-stream`; `write` writes the message.
pub(super) fn framed(
    status: StatusCode,
    json_ok: bool,
    sse_ok: bool,
    write: impl FnOnce(&mut Vec<u8>),
) -> Response<Body> {
    framed_sized(status, json_ok, sse_ok, 0, write)
}

/// [`framed`] where `write` is known to write at least `size` bytes.
fn framed_sized(
    status: StatusCode,
    json_ok: bool,
    sse_ok: bool,
    size: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Response<Body> {
    if json_ok || !sse_ok {
        return json_written(status, size, write);
    }
    const PREFIX: &[u8] = b"event: message\ndata: ";
    let mut frame = answer_with(PREFIX, size, write, b"\n\n");
    // A line break would end the `data:` line. In JSON text one can only be whitespace (the
    // backend's own text of an object passed through), which a space stands for.
    let end = frame.len().saturating_sub(2);
    if let Some(data) = frame.get_mut(PREFIX.len()..end) {
        for b in data.iter_mut().filter(|b| matches!(b, b'\n' | b'\r')) {
            *b = b' ';
        }
    }
    let mut r = Response::new(full(Bytes::from(frame)));
    *r.status_mut() = status;
    sse_headers(&mut r);
    r
}

/// Written results whose two texts reach this many bytes go out as chunks that lend the texts
/// ([`Written::into_chunks`]); smaller ones are copied into one buffer, as one frame through
/// hyper costs less than several.
const LEND_MIN: usize = 16 * 1024;

/// The JSON (or SSE) response for request `id` whose result was written on the hot path.
pub(super) fn written_response(
    id: &Value,
    w: Written,
    json_ok: bool,
    sse_ok: bool,
) -> Response<Body> {
    let size = w.texts_len();
    // An SSE event (the client takes only `text/event-stream`) stays whole: a passed-through
    // text may hold line breaks, which its framing replaces.
    let sse = !json_ok && sse_ok;
    if size < LEND_MIN || sse {
        return framed_sized(StatusCode::OK, json_ok, sse_ok, size, |out| {
            write_written(id, &w, out)
        });
    }
    let mut head = Vec::with_capacity(64);
    write_result_head(id, &mut head);
    let mut r = Response::new(Chunks::new(w.into_chunks(head, b"}")).boxed());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A body of several chunks sent in order, its length known: hyper sends a `Content-Length`
/// and queues the chunks, none copied, for vectored writes (one, unless its queue passes
/// `max_buf_size` before the last chunk). `http_body_util` has no such body (`StreamBody`
/// knows no length, `Full` holds one chunk).
struct Chunks {
    chunks: std::vec::IntoIter<Bytes>,
}

impl Chunks {
    fn new(chunks: Vec<Bytes>) -> Self {
        Chunks {
            chunks: chunks.into_iter(),
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let next = self.chunks.by_ref().find(|c| !c.is_empty());
        std::task::Poll::Ready(next.map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.as_slice().iter().all(Bytes::is_empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let left = self.chunks.as_slice().iter().map(|c| c.len() as u64).sum();
        http_body::SizeHint::with_exact(left)
    }
}

/// The JSON-RPC response's text up to its `result` value, as `jsonrpc::result` writes it.
fn write_result_head(id: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"id\":");
    crate::json_text::write(id, out);
    out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
}

/// The JSON-RPC response for request `id` whose result was written on the hot path: the bytes
/// `jsonrpc::result` of its value writes.
fn write_written(id: &Value, w: &Written, out: &mut Vec<u8>) {
    write_result_head(id, out);
    w.write(out);
    out.push(b'}');
}

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    json_written(status, 0, |out| crate::json_text::write(value, out))
}

/// A JSON response whose body `write` writes.
fn json_written(
    status: StatusCode,
    size: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Response<Body> {
    let mut r = Response::new(full(answer_with(b"", size, write, b"")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Adds RFC 9421 response-signature headers over the JSON body `json_response` sent.
pub(super) fn sign_response(
    r: &mut Response<Body>,
    status: StatusCode,
    body: &Value,
    key: &crate::webhook::keys::SigningKey,
) {
    let ct = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    if ct != "application/json" {
        return; // an SSE frame is not the signed body
    }
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let bytes = crate::json_text::to_vec(body);
    if let Some((digest, input, sig)) =
        crate::auth::respsig::sign(status.as_u16(), &ct, &bytes, key, created)
    {
        for (name, value) in [
            ("content-digest", digest),
            ("signature-input", input),
            ("signature", sig),
        ] {
            if let Ok(v) = HeaderValue::from_str(&value) {
                r.headers_mut().insert(name, v);
            }
        }
    }
}

pub(super) fn rpc_error(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<Body> {
    json_response(status, &jsonrpc::error(id, code, message, data))
}

/// 400 with the JSON-RPC error for a body that is not one acceptable message.
pub(super) fn rejected(rej: &jsonrpc::Rejection) -> Response<Body> {
    rpc_error(
        StatusCode::BAD_REQUEST,
        &rej.id,
        rej.code,
        &rej.message,
        None,
    )
}

pub(super) fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

pub(super) fn sse_frame(value: &Value) -> Bytes {
    Bytes::from(answer_bytes(b"event: message\ndata: ", value, b"\n\n"))
}

pub(super) fn sse_headers(r: &mut Response<Body>) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// Which media types the client accepts: (json, sse).
pub(super) fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let mut values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    if values.peek().is_none() {
        return (true, true);
    }
    let mut json = false;
    let mut sse = false;
    for v in values {
        for part in v.split(',') {
            let mt = part.split(';').next().unwrap_or("").trim();
            let is = |name: &str| mt.eq_ignore_ascii_case(name);
            if is("*/*") {
                json = true;
                sse = true;
            } else if is("application/*") || is("application/json") {
                json = true;
            } else if is("text/*") || is("text/event-stream") {
                sse = true;
            }
        }
    }
    (json, sse)
}

/// The `Host` header, else the URI's authority (HTTP/2's `:authority`), as sent.
pub(crate) fn request_host<B>(req: &Request<B>) -> Option<String> {
    request_host_str(req).map(str::to_string)
}

/// [`request_host`], borrowed from the request.
pub(crate) fn request_host_str<B>(req: &Request<B>) -> Option<&str> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// The host of a `Host` header or URI authority, lower-cased, without port or IPv6 brackets.
pub(crate) fn host_of(authority: &str) -> String {
    host_part(authority).to_ascii_lowercase()
}

/// [`host_of`] in the case it was sent: a slice of `authority`, for comparisons that ignore
/// ASCII case anyway (lower-casing moves no byte, so the slice is the same either way).
pub(crate) fn host_part(authority: &str) -> &str {
    let a = authority.trim();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match a.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => a,
    }
}

/// An HTTP answer whose body is a Problem Details object (autonym's pre-JSON-RPC forms, MCP
/// authorization's `insufficient_scope`): 401 carries a Bearer challenge naming the code, a
/// problem's own `challenge` member becomes `WWW-Authenticate`, 429 and 503 `Retry-After` when
/// known.
pub(super) fn problem_response(status: Option<u16>, problem: &Value) -> Response<Body> {
    let status = status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut problem = std::borrow::Cow::Borrowed(problem);
    let challenge = match problem
        .to_mut()
        .as_object_mut()
        .and_then(|o| o.remove("challenge"))
    {
        Some(Value::String(c)) => HeaderValue::from_str(&c).ok(),
        _ => None,
    };
    let mut r = json_response(status, &problem);
    let h = r.headers_mut();
    if let Some(c) = challenge {
        h.insert(header::WWW_AUTHENTICATE, c);
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if status == StatusCode::UNAUTHORIZED && !h.contains_key(header::WWW_AUTHENTICATE) {
        let code = problem
            .get("code")
            .and_then(Value::as_str)
            .filter(|c| c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        if let Ok(v) = HeaderValue::from_str(&crate::auth::challenge(code)) {
            h.insert(header::WWW_AUTHENTICATE, v);
        }
    }
    if let Some(secs) = problem.get("retry_after").and_then(Value::as_u64) {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// Decodes `=?base64?...?=` header values (SEP-2243); plain values pass through.
pub(super) fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_string()),
    }
}
