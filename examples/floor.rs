//! A hand-written translator for `scripts/bench`: the floor of any MCP gateway built from
//! portico's HTTP parts. It never listens beyond 127.0.0.1, and serves one tool only.
//!
//! The bare relay (`examples/relay.rs`) plus the least work any translation of
//! `usp_availability_query` has to do, written by hand for that one tool: the JSON-RPC request
//! read into borrowed fields, the 2026-07-28 header checks, the REST URL built with its
//! arguments encoded, the backend body read into borrowed fields, and the answer written
//! directly as bytes, the same `structuredContent` the demo mapping produces. No JSON trees,
//! no jq, no schema checks, no metrics: whatever a general gateway spends above this, it spends
//! on being general. `scripts/bench` compares it with portico and with the relay.
//!
//! `cargo run --release --example floor -- <listen port> <backend base URL> [header: value]...`

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use portico::translate::path::encode_segment;
use portico::upstream::pool::Pool;
use serde::Deserialize;
use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

mod common;

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: serde_json::Value,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Arguments<'a>,
    #[serde(borrow, rename = "_meta")]
    meta: Meta<'a>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow)]
    service_id: Cow<'a, str>,
    #[serde(borrow)]
    start_date: Cow<'a, str>,
    #[serde(borrow)]
    end_date: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Openings<'a> {
    #[serde(borrow)]
    treatment: Cow<'a, str>,
    #[serde(borrow)]
    openings: Vec<Opening<'a>>,
}

#[derive(Deserialize)]
struct Opening<'a> {
    #[serde(borrow)]
    begins: Cow<'a, str>,
    #[serde(borrow)]
    ends: Cow<'a, str>,
    free: bool,
    #[serde(borrow, rename = "ref")]
    reference: Cow<'a, str>,
}

/// The answer's fixed `usp` object, as the demo mapping's binding writes it.
const USP: &str = concat!(
    r#"{"capabilities":{"dev.usp-protocol.services.availability":[{"version":"2026-08-20"}],"#,
    r#""dev.usp-protocol.services.bookings":[{"version":"2026-08-20"}],"#,
    r#""dev.usp-protocol.services.catalog":[{"version":"2026-08-20"}]},"version":"2026-08-20"}"#
);

fn text(out: &mut Vec<u8>, s: &str) {
    // A `&str` always serialises; the writer is a Vec.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// What `lisbon` of the demo mapping appends to a wall-clock time: seconds and the UTC offset.
fn lisbon_suffix(t: &str) -> &'static str {
    if t >= "2027-03-28T01:00" {
        ":00+01:00"
    } else {
        ":00+00:00"
    }
}

/// `lisbon` of the demo mapping, written as a JSON string (the times need no escapes).
fn lisbon(out: &mut Vec<u8>, t: &str) {
    out.push(b'"');
    out.extend_from_slice(t.as_bytes());
    out.extend_from_slice(lisbon_suffix(t).as_bytes());
    out.push(b'"');
}

/// Minutes since midnight of `YYYY-MM-DDTHH:MM`.
fn minutes(t: &str) -> Option<i64> {
    let h: i64 = t.get(11..13)?.parse().ok()?;
    let m: i64 = t.get(14..16)?.parse().ok()?;
    Some(h * 60 + m)
}

fn error(
    id: &serde_json::Value,
    status: StatusCode,
    code: i64,
    message: &str,
) -> Response<Full<Bytes>> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(br#","message":"#);
    text(&mut out, message);
    out.extend_from_slice(b"}}");
    json(status, out)
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

struct Floor {
    pool: Pool,
    base: String,
    headers: HeaderMap,
}

impl Floor {
    async fn call(&self, req: hyper::Request<Incoming>) -> Response<Full<Bytes>> {
        let null = serde_json::Value::Null;
        let (parts, body) = req.into_parts();
        let Ok(bytes) = Limited::new(body, 1 << 20)
            .collect()
            .await
            .map(|c| c.to_bytes())
        else {
            return error(&null, StatusCode::BAD_REQUEST, -32600, "unreadable body");
        };
        let Ok(rpc) = serde_json::from_slice::<Request<'_>>(&bytes) else {
            return error(
                &null,
                StatusCode::BAD_REQUEST,
                -32700,
                "not this tool's request",
            );
        };
        let id = &rpc.id;
        let hdr = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        if rpc.jsonrpc != "2.0" || rpc.method != "tools/call" {
            return error(
                id,
                StatusCode::BAD_REQUEST,
                -32600,
                "a tools/call request only",
            );
        }
        if rpc.params.name != "usp_availability_query" {
            return error(id, StatusCode::OK, -32602, "unknown tool");
        }
        if hdr("mcp-protocol-version") != Some(&*rpc.params.meta.version)
            || rpc.params.meta.version != "2026-07-28"
            || hdr("mcp-method") != Some("tools/call")
            || hdr("mcp-name") != Some(&*rpc.params.name)
        {
            return error(id, StatusCode::BAD_REQUEST, -32020, "header mismatch");
        }
        let args = &rpc.params.arguments;
        let url = format!(
            "{}/treatments/{}/openings?{}",
            self.base,
            encode_segment(&args.service_id),
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("from", &args.start_date)
                .append_pair("to", &args.end_date)
                .finish()
        );
        let answer = match self
            .pool
            .send(http::Method::GET, &url, self.headers.clone(), None, 1 << 20)
            .await
        {
            Ok(a) if a.status == StatusCode::OK => a,
            Ok(_) => return error(id, StatusCode::OK, -32603, "backend status"),
            Err(_) => return error(id, StatusCode::OK, -32603, "backend unreachable"),
        };
        let Ok(doc) = serde_json::from_slice::<Openings<'_>>(&answer.body) else {
            return error(id, StatusCode::OK, -32603, "backend body");
        };
        let mut out = Vec::with_capacity(2048);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        let _ = serde_json::to_writer(&mut out, id);
        out.extend_from_slice(concat!(
            r#","result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"portico","version":"0.1.0"}},"#,
            r#""content":[{"type":"text","text":"#
        ).as_bytes());
        let free: Vec<&Opening<'_>> = doc.openings.iter().filter(|o| o.free).collect();
        let mut summary = format!(
            "Found {} available slot(s) for {} from {} to {}",
            free.len(),
            doc.treatment,
            args.start_date,
            args.end_date
        );
        if let Some(first) = free.first() {
            summary.push_str("; first: ");
            summary.push_str(&first.begins);
            summary.push_str(lisbon_suffix(&first.begins));
        }
        summary.push('.');
        text(&mut out, &summary);
        out.extend_from_slice(
            br#"}],"resultType":"complete","structuredContent":{"messages":[],"service_id":"#,
        );
        text(&mut out, &doc.treatment);
        out.extend_from_slice(br#","slots":["#);
        for (i, o) in free.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let (Some(b), Some(e)) = (minutes(&o.begins), minutes(&o.ends)) else {
                return error(id, StatusCode::OK, -32603, "backend times");
            };
            out.extend_from_slice(br#"{"duration":"PT"#);
            out.extend_from_slice((e - b).to_string().as_bytes());
            out.extend_from_slice(br#"M","end":"#);
            lisbon(&mut out, &o.ends);
            out.extend_from_slice(br#","id":"#);
            text(&mut out, &o.reference);
            out.extend_from_slice(br#","service_id":"#);
            text(&mut out, &args.service_id);
            out.extend_from_slice(br#","start":"#);
            lisbon(&mut out, &o.begins);
            out.extend_from_slice(br#","state":"available"}"#);
        }
        out.extend_from_slice(br#"],"usp":"#);
        out.extend_from_slice(USP.as_bytes());
        out.extend_from_slice(b"}}}");
        json(StatusCode::OK, out)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = common::args()?;
    let port = args.port;
    let floor = Arc::new(Floor {
        pool: args.pool,
        base: args.url.trim_end_matches('/').to_string(),
        headers: args.headers,
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("floor: http://127.0.0.1:{port}/mcp");
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let floor = floor.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let floor = floor.clone();
                async move { Ok::<_, Infallible>(floor.call(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
