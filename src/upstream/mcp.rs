//! The client portico uses to call tools on an upstream MCP server over Streamable HTTP, both
//! eras (2026-07-28 stateless first, `initialize` sessions as fallback); it must never interpret tool results.
//!
//! One `McpUpstream` per server: a pooled `reqwest` client (connections are reused), the era
//! found on first use, and for the session era the `Mcp-Session-Id`, renewed transparently when
//! the server answers 404 for an expired session. Answers may be JSON or an SSE stream; the
//! whole exchange runs inside the call's timeout, and a call that times out (or is dropped) is
//! cancelled upstream: the stream is closed (2026-07-28) or `notifications/cancelled` is sent.

use crate::util::names;
use base64::Engine;
use bytes::BytesMut;
use serde_json::{Map, Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The stateless protocol revision tried first.
pub const MODERN: &str = "2026-07-28";
/// The version offered in `initialize` when the server does not speak [`MODERN`].
pub const LEGACY: &str = "2025-11-25";
/// Versions accepted back from `initialize`.
const LEGACY_OK: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// How long the end of an SSE stream is awaited after its response arrived.
const STREAM_END_WAIT: Duration = Duration::from_millis(250);

/// Why a call to the upstream MCP server did not produce a tool result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    /// The server answered with a JSON-RPC error object.
    #[error("upstream JSON-RPC error {code}: {message}")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
        /// HTTP status the error arrived with.
        status: u16,
        retry_after: Option<u64>,
    },
    /// No connection could be made.
    #[error("upstream MCP server unreachable: {0}")]
    Unreachable(String),
    /// No complete answer within the timeout.
    #[error("upstream MCP server did not answer within {0:?}")]
    Timeout(Duration),
    /// The server refused the request's credentials (HTTP 401 or 403, e.g. MCP
    /// authorization), with its `WWW-Authenticate` challenge.
    #[error("upstream MCP server refused the credentials (HTTP {status})")]
    Refused {
        status: u16,
        challenge: Option<String>,
    },
    /// An HTTP error without a JSON-RPC body (a proxy's 502, a 503 while shedding load...).
    #[error("upstream MCP server answered HTTP {status}")]
    Status {
        status: u16,
        retry_after: Option<u64>,
    },
    /// Something that is not a valid MCP answer.
    #[error("upstream MCP server answered something invalid: {0}")]
    BadResponse(String),
}

/// The era spoken with the server, once found.
#[derive(Debug, Clone, PartialEq)]
pub enum Era {
    /// 2026-07-28: no handshake, `_meta` and routing headers on every request.
    Modern,
    /// A session era: negotiated version and the session id (if the server minted one).
    Legacy {
        version: String,
        session: Option<String>,
    },
}

/// Settings of one upstream MCP server.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    pub url: String,
    /// Timeout of one tool call, negotiation included.
    pub timeout: Duration,
    /// Timeout of the TCP connect.
    pub connect_timeout: Duration,
    /// Largest answer read (JSON body or the SSE stream up to the response).
    pub max_response_bytes: usize,
}

/// A client of one upstream MCP server; cheap to share behind an `Arc`.
pub struct McpUpstream {
    pub(super) opts: McpOptions,
    pub(super) http: reqwest::Client,
    era: Mutex<Option<Era>>,
    /// Serialises negotiation so concurrent first calls negotiate once.
    negotiating: tokio::sync::Mutex<()>,
    pub(super) next_id: AtomicU64,
}

impl std::fmt::Debug for McpUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpUpstream")
            .field("url", &self.opts.url)
            .finish()
    }
}

/// One JSON-RPC exchange's answer.
struct Answer {
    status: u16,
    session: Option<String>,
    message: Option<Value>,
    retry_after: Option<u64>,
    /// `WWW-Authenticate` of a 401 or 403.
    challenge: Option<String>,
}

/// A header value as SEP-2243 wants it: as is when safe ASCII, else `=?base64?…?=`.
fn routing_value(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !s.starts_with(' ')
        && !s.ends_with(' ');
    if safe {
        s.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    }
}

fn retry_after(h: &reqwest::header::HeaderMap) -> Option<u64> {
    h.get("retry-after")?.to_str().ok()?.trim().parse().ok()
}

impl McpUpstream {
    /// Builds the client; nothing is sent until the first call.
    pub fn new(opts: McpOptions) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| format!("cannot build the MCP client: {e}"))?;
        Ok(McpUpstream {
            opts,
            http,
            era: Mutex::new(None),
            negotiating: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
        })
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.opts.url
    }

    /// The era found so far (`None` before the first call or after a session expired).
    pub fn era(&self) -> Option<Era> {
        self.era.lock().map(|e| e.clone()).unwrap_or(None)
    }

    fn set_era(&self, era: Option<Era>) {
        if let Ok(mut e) = self.era.lock() {
            *e = era;
        }
    }

    /// Calls `tools/call` and returns the `CallToolResult` object, within the timeout.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, McpError> {
        self.call_tool_with(name, arguments, &http::HeaderMap::new())
            .await
    }

    /// As [`Self::call_tool`], with extra HTTP headers on the `tools/call` request (never on
    /// discovery or `initialize`).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        headers: &http::HeaderMap,
    ) -> Result<Value, McpError> {
        let timeout = self.opts.timeout;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let params = json!({ "name": name, "arguments": arguments });
        let guard = CancelOnDrop {
            upstream: self,
            id,
            armed: true,
        };
        let result = tokio::time::timeout(
            timeout,
            self.call(id, "tools/call", params, Some(name), headers),
        )
        .await
        .unwrap_or(Err(McpError::Timeout(timeout)));
        let mut guard = guard;
        guard.armed = matches!(result, Err(McpError::Timeout(_)));
        drop(guard);
        result
    }

    /// One request: negotiates if needed, re-initializes once on an expired session.
    async fn call(
        &self,
        id: u64,
        method: &str,
        params: Value,
        name: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Result<Value, McpError> {
        let mut renewed = false;
        loop {
            let era = self.ensure_era(headers).await?;
            let answer = self
                .exchange(&era, id, method, &params, name, headers)
                .await?;
            if answer.status == 404
                && let Era::Legacy {
                    session: Some(_), ..
                } = &era
                && !renewed
            {
                // The session expired: forget it and start a new one, once.
                tracing::info!(url = %self.opts.url, "upstream MCP session expired; re-initializing");
                self.forget(&era);
                renewed = true;
                continue;
            }
            return result_of(answer);
        }
    }

    /// Clears the era if it is still `stale` (another call may have renewed it already).
    pub(super) fn forget(&self, stale: &Era) {
        if let Ok(mut e) = self.era.lock()
            && e.as_ref() == Some(stale)
        {
            *e = None;
        }
    }

    /// The era spoken with the server, negotiated first with `headers` (the first call's
    /// forwarded headers: a server that checks credentials on every request, such as one with
    /// MCP authorization, needs them on discovery and `initialize` too).
    pub(super) async fn ensure_era(&self, headers: &http::HeaderMap) -> Result<Era, McpError> {
        if let Some(era) = self.era() {
            return Ok(era);
        }
        let _one = self.negotiating.lock().await;
        if let Some(era) = self.era() {
            return Ok(era);
        }
        let era = self.negotiate(headers).await?;
        let version = match &era {
            Era::Modern => MODERN,
            Era::Legacy { version, .. } => version.as_str(),
        };
        tracing::info!(url = %self.opts.url, version, "upstream MCP server: protocol version chosen");
        self.set_era(Some(era.clone()));
        Ok(era)
    }

    /// `server/discover` first; anything but a result naming [`MODERN`] falls back to
    /// `initialize` + `notifications/initialized`.
    async fn negotiate(&self, headers: &http::HeaderMap) -> Result<Era, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .exchange(
                &Era::Modern,
                id,
                "server/discover",
                &json!({}),
                None,
                headers,
            )
            .await?;
        if answer.status == 401 || answer.status == 403 {
            return Err(McpError::Refused {
                status: answer.status,
                challenge: answer.challenge,
            });
        }
        if answer.status == 200
            && let Some(r) = answer.message.as_ref().and_then(|m| m.get("result"))
        {
            let speaks = r
                .get("supportedVersions")
                .and_then(Value::as_array)
                .is_none_or(|v| v.iter().any(|x| x.as_str() == Some(MODERN)));
            if speaks {
                return Ok(Era::Modern);
            }
        }
        if answer.status >= 500 {
            return Err(McpError::Status {
                status: answer.status,
                retry_after: answer.retry_after,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let params = json!({
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": { "name": "portico", "version": env!("CARGO_PKG_VERSION") }
        });
        let boot = Era::Legacy {
            version: LEGACY.into(),
            session: None,
        };
        let answer = self
            .exchange(&boot, id, "initialize", &params, None, headers)
            .await?;
        let session = answer.session.clone();
        let result = result_of(answer)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !LEGACY_OK.contains(&version.as_str()) {
            return Err(McpError::BadResponse(format!(
                "the server speaks neither {MODERN} nor a session era portico knows (it chose `{version}`)"
            )));
        }
        let era = Era::Legacy { version, session };
        self.notify(&era, "notifications/initialized", json!({}), headers)
            .await?;
        Ok(era)
    }

    /// Sends a notification (expects 202, tolerates 200/204).
    async fn notify(
        &self,
        era: &Era,
        method: &str,
        params: Value,
        headers: &http::HeaderMap,
    ) -> Result<(), McpError> {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        let resp = self
            .request(era, method, None)
            .headers(headers.clone())
            .json(&body)
            .send()
            .await
            .map_err(transport_error)?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(McpError::Status {
                status,
                retry_after: retry_after(resp.headers()),
            })
        }
    }

    pub(super) fn request(
        &self,
        era: &Era,
        method: &str,
        name: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.opts.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        match era {
            Era::Modern => {
                rb = rb
                    .header(names::MCP_PROTOCOL_VERSION, MODERN)
                    .header(names::MCP_METHOD, method);
                if let Some(n) = name {
                    rb = rb.header(names::MCP_NAME, routing_value(n));
                }
            }
            Era::Legacy { version, session } => {
                if method != "initialize" {
                    rb = rb.header(names::MCP_PROTOCOL_VERSION, version.as_str());
                }
                if let Some(s) = session {
                    rb = rb.header(names::MCP_SESSION_ID, s.as_str());
                }
            }
        }
        rb
    }

    /// Sends one request and reads its answer (JSON, or SSE up to the matching response).
    async fn exchange(
        &self,
        era: &Era,
        id: u64,
        method: &str,
        params: &Value,
        name: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Result<Answer, McpError> {
        let body = envelope(era, id, method, params);
        // The calling span's W3C `traceparent` (when tracing is exported), over any forwarded one.
        let mut headers = headers.clone();
        crate::ops::otel::inject(&mut headers);
        let resp = self
            .request(era, method, name)
            .headers(headers)
            .json(&body)
            .send()
            .await
            .map_err(transport_error)?;
        let status = resp.status().as_u16();
        let session = resp
            .headers()
            .get(names::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let retry = retry_after(resp.headers());
        let challenge = (status == 401 || status == 403)
            .then(|| resp.headers().get(http::header::WWW_AUTHENTICATE))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        let message = if sse {
            Some(self.read_sse(resp, id).await?)
        } else {
            let bytes = self.read_body(resp).await?;
            crate::json_text::from_slice(&bytes)
                .ok()
                .filter(Value::is_object)
        };
        Ok(Answer {
            status,
            session,
            message,
            retry_after: retry,
            challenge,
        })
    }

    async fn read_body(&self, mut resp: reqwest::Response) -> Result<BytesMut, McpError> {
        let mut buf = BytesMut::new();
        while let Some(chunk) = resp.chunk().await.map_err(transport_error)? {
            if buf.len() + chunk.len() > self.opts.max_response_bytes {
                return Err(McpError::BadResponse(format!(
                    "the answer is larger than {} bytes",
                    self.opts.max_response_bytes
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    }

    /// Reads SSE events until the JSON-RPC response with `id`; notifications before it are
    /// skipped. Returning drops the stream (closing it is the 2026-07-28 cancellation).
    async fn read_sse(&self, mut resp: reqwest::Response, id: u64) -> Result<Value, McpError> {
        let mut reader = SseReader::new(id, self.opts.max_response_bytes);
        loop {
            match resp.chunk().await.map_err(transport_error)? {
                Some(chunk) => {
                    if let Some(msg) = reader.push(&chunk)? {
                        // Servers close the stream after the response; reading its end lets
                        // the connection go back to the pool. One that keeps it open loses
                        // the connection.
                        let _ = tokio::time::timeout(STREAM_END_WAIT, async {
                            while let Ok(Some(_)) = resp.chunk().await {}
                        })
                        .await;
                        return Ok(msg);
                    }
                }
                None => return Err(reader.ended()),
            }
        }
    }
}

/// A JSON-RPC request for `era`: 2026-07-28 requests carry the protocol version, client
/// capabilities and client info in `params._meta`.
pub(super) fn envelope(era: &Era, id: u64, method: &str, params: &Value) -> Value {
    let mut params = params.clone();
    if *era == Era::Modern
        && let Value::Object(p) = &mut params
    {
        let meta = p
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            m.insert(
                "io.modelcontextprotocol/protocolVersion".into(),
                Value::from(MODERN),
            );
            m.insert(
                "io.modelcontextprotocol/clientCapabilities".into(),
                json!({}),
            );
            m.insert(
                "io.modelcontextprotocol/clientInfo".into(),
                json!({ "name": "portico", "version": env!("CARGO_PKG_VERSION") }),
            );
        }
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// The SSE side of one exchange, fed chunk by chunk: finds the JSON-RPC response with `id`
/// (notifications and other events before it are skipped) and holds at most `limit` bytes of
/// stream. Synchronous, so the fuzz target drives it with arbitrary chunk boundaries.
#[derive(Debug)]
pub struct SseReader {
    id: u64,
    limit: usize,
    /// Bytes not yet part of a complete event.
    buf: Vec<u8>,
    /// How far `buf` has been searched for an event end (so each byte is scanned about once).
    scanned: usize,
    /// Bytes of stream read so far.
    read: usize,
}

impl SseReader {
    pub fn new(id: u64, limit: usize) -> SseReader {
        SseReader {
            id,
            limit,
            buf: Vec::new(),
            scanned: 0,
            read: 0,
        }
    }

    /// Adds `chunk`; `Ok(Some(message))` once the response with the reader's id is complete,
    /// an error once the stream passes the limit without it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Option<Value>, McpError> {
        self.read = self.read.saturating_add(chunk.len());
        if self.read > self.limit {
            return Err(McpError::BadResponse(format!(
                "the event stream passed {} bytes without the response",
                self.limit
            )));
        }
        self.buf.extend_from_slice(chunk);
        // A terminator may straddle the previous chunk's end: rescan its last 3 bytes.
        let mut from = self.scanned.saturating_sub(3);
        while let Some((len, with_blank)) = event_end(&self.buf[from..]) {
            let (len, with_blank) = (from + len, from + with_blank);
            let msg = sse_data(&self.buf[..len]);
            self.buf.drain(..with_blank);
            from = 0;
            if let Some(msg) = msg
                && msg.get("id").and_then(Value::as_u64) == Some(self.id)
                && (msg.get("result").is_some() || msg.get("error").is_some())
            {
                self.scanned = 0;
                return Ok(Some(msg));
            }
        }
        self.scanned = self.buf.len();
        Ok(None)
    }

    /// Bytes held, waiting for the end of an event (never more than the limit).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The error for a stream that ended before the response.
    pub fn ended(&self) -> McpError {
        McpError::BadResponse("the event stream ended without the response".into())
    }
}

/// Sends `notifications/cancelled` (session era) for a call that timed out or was dropped.
struct CancelOnDrop<'a> {
    upstream: &'a McpUpstream,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(era @ Era::Legacy { .. }) = self.upstream.era() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let rb = self
            .upstream
            .request(&era, "notifications/cancelled", None)
            .json(&json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": self.id, "reason": "portico: the REST caller's timeout passed or it went away" }
            }))
            .timeout(Duration::from_secs(5));
        handle.spawn(async move {
            let _ = rb.send().await;
        });
    }
}

/// End of the first SSE event in `buf`: (event length, length including the blank line).
pub(super) fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i..].starts_with(b"\r\n\r\n") {
            return Some((i, i + 4));
        }
        if buf[i..].starts_with(b"\n\n") || buf[i..].starts_with(b"\r\r") {
            return Some((i, i + 2));
        }
        i += 1;
    }
    None
}

/// The JSON message in an event's `data:` lines (joined by `\n`), if any.
pub(super) fn sse_data(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data = String::new();
    let mut any = false;
    for line in text.split(['\n', '\r']) {
        if let Some(rest) = line.strip_prefix("data:") {
            if any {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            any = true;
        }
    }
    if !any || data.trim().is_empty() {
        return None;
    }
    serde_json::from_str(&data).ok()
}

pub(super) fn transport_error(e: reqwest::Error) -> McpError {
    if e.is_connect() {
        McpError::Unreachable(e.to_string())
    } else if e.is_timeout() {
        McpError::Timeout(Duration::ZERO)
    } else {
        McpError::BadResponse(format!("transport: {e}"))
    }
}

/// The `result` of an answer, or the error it carries.
fn result_of(a: Answer) -> Result<Value, McpError> {
    if a.status == 401 || a.status == 403 {
        return Err(McpError::Refused {
            status: a.status,
            challenge: a.challenge,
        });
    }
    match a.message {
        Some(mut m) => {
            if let Some(e) = m.get_mut("error").map(Value::take) {
                return Err(McpError::Rpc {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    data: e.get("data").cloned(),
                    status: a.status,
                    retry_after: a.retry_after,
                });
            }
            match m.get_mut("result").map(Value::take) {
                Some(r @ Value::Object(_)) if (200..300).contains(&a.status) => Ok(r),
                Some(_) => Err(McpError::BadResponse(
                    "the result is not a JSON object".into(),
                )),
                None if a.status >= 400 => Err(McpError::Status {
                    status: a.status,
                    retry_after: a.retry_after,
                }),
                None => Err(McpError::BadResponse(
                    "neither `result` nor `error` in the answer".into(),
                )),
            }
        }
        None if a.status >= 400 => Err(McpError::Status {
            status: a.status,
            retry_after: a.retry_after,
        }),
        None => Err(McpError::BadResponse(format!(
            "HTTP {} without a JSON-RPC message",
            a.status
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_split_and_decoded() {
        let buf = b": keep-alive\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\n data\r\n\r\nrest";
        let (a, b) = event_end(buf).unwrap();
        assert_eq!(&buf[..a], b": keep-alive");
        assert_eq!(sse_data(&buf[..a]), None);
        let (c, _) = event_end(&buf[b..]).unwrap();
        // A broken JSON payload is no message.
        assert_eq!(sse_data(&buf[b..b + c]), None);
        let ok = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":3,\"result\":{}}";
        assert_eq!(
            sse_data(ok),
            Some(json!({"jsonrpc":"2.0","id":3,"result":{}}))
        );
    }

    #[test]
    fn the_sse_reader_is_independent_of_chunk_boundaries() {
        let stream = b": ping\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"ok\":1}}\r\n\r\ntrailing";
        let whole = {
            let mut r = SseReader::new(7, 4096);
            r.push(stream).unwrap()
        };
        assert_eq!(
            whole,
            Some(json!({"jsonrpc":"2.0","id":7,"result":{"ok":1}}))
        );
        // Every single cut point, including inside a CRLF CRLF terminator.
        for cut in 0..stream.len() {
            let mut r = SseReader::new(7, 4096);
            let a = r.push(&stream[..cut]).unwrap();
            let got = match a {
                Some(m) => Some(m),
                None => r.push(&stream[cut..]).unwrap(),
            };
            assert_eq!(got, whole, "cut at {cut}");
        }
        // One byte at a time.
        let mut r = SseReader::new(7, 4096);
        let mut got = None;
        for b in stream {
            if let Some(m) = r.push(std::slice::from_ref(b)).unwrap() {
                got = Some(m);
                break;
            }
        }
        assert_eq!(got, whole);
    }

    #[test]
    fn the_sse_reader_stops_at_its_limit() {
        let mut r = SseReader::new(1, 100);
        assert_eq!(r.push(&[b'x'; 60]).unwrap(), None);
        assert_eq!(r.buffered(), 60);
        let e = r.push(&[b'x'; 41]).unwrap_err();
        assert!(matches!(e, McpError::BadResponse(m) if m.contains("100 bytes")));
        assert!(r.buffered() <= 100);
    }

    #[test]
    fn routing_headers_encode_unsafe_names() {
        assert_eq!(routing_value("usp_bookings_get"), "usp_bookings_get");
        assert_eq!(routing_value("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(routing_value(" x"), "=?base64?IHg=?=");
    }
}
