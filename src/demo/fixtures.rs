//! The conformance fixture backend: a small legacy-style REST API (JSON, text, PNG, WAV, failures,
//! a JSON echo, long-running jobs in `demo::jobs`)
//! that `mappings/conformance.yaml` turns into the MCP suite's fixtures. Its only state is the
//! jobs table; it must never listen beyond loopback, and never panics on request input.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use percent_encoding::percent_decode_str;
use serde_json::json;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A 1x1 PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A short 8 kHz, 8-bit mono PCM WAV: a square wave.
pub fn beep_wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..800)
        .map(|i| if i % 16 < 8 { 0xC0 } else { 0x40 })
        .collect();
    let mut w = Vec::with_capacity(44 + samples.len());
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    w.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    w.extend_from_slice(&samples);
    w
}

/// The PNG's bytes.
pub fn pixel_png() -> Vec<u8> {
    STANDARD.decode(PIXEL_PNG).unwrap_or_default()
}

fn reply(status: StatusCode, media: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(media),
    );
    r
}

fn json_reply(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    reply(status, "application/json", v.to_string())
}

/// Routes one request (all under `/v1`).
pub fn route(method: &Method, path: &str) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return json_reply(StatusCode::METHOD_NOT_ALLOWED, json!({"error": "METHOD"}));
    }
    let Some(rest) = path.strip_prefix("/v1") else {
        return json_reply(StatusCode::NOT_FOUND, json!({"error": "NO_ROUTE"}));
    };
    match rest {
        "/greeting" => json_reply(
            StatusCode::OK,
            json!({"message": "This is a simple text response for testing."}),
        ),
        "/images/pixel" => reply(StatusCode::OK, "image/png", pixel_png()),
        "/sounds/beep" => reply(StatusCode::OK, "audio/wav", beep_wav()),
        "/notes/embedded" => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "This is an embedded resource content.",
        ),
        "/notes/static" => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "This is the content of the static text resource.",
        ),
        "/notes/example" => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "Embedded resource content for testing.",
        ),
        "/notes/watched" => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "Watched resource content.",
        ),
        "/reports/mixed" => json_reply(
            StatusCode::OK,
            json!({
                "caption": "Multiple content types test:",
                "thumbnail": {"media_type": "image/png", "base64": PIXEL_PNG},
                "attachment": {"name": "mixed-content-resource", "payload": {"test": "data", "value": 123}}
            }),
        ),
        "/failures/always" => json_reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": "This tool intentionally returns an error for testing"}),
        ),
        _ => match rest
            .strip_prefix("/items/")
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .and_then(|id| percent_decode_str(id).decode_utf8().ok())
        {
            Some(id) => json_reply(
                StatusCode::OK,
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}),
            ),
            None => json_reply(StatusCode::NOT_FOUND, json!({"error": "NO_ROUTE"})),
        },
    }
}

/// How long `GET /v1/slow` takes: long enough for several progress ticks.
pub const SLOW: std::time::Duration = std::time::Duration::from_millis(200);

/// Largest body `POST /v1/echo` reads.
const ECHO_MAX: usize = 64 * 1024;

/// `POST /v1/echo`: answers `{"received": <the JSON body>}` (the tools that ask the MCP client
/// show the backend what their answers became); a body that is not JSON is a 400.
async fn echo(req: Request<Incoming>) -> Response<Full<Bytes>> {
    use http_body_util::{BodyExt, Limited};
    let Ok(body) = Limited::new(req.into_body(), ECHO_MAX).collect().await else {
        return json_reply(StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "TOO_LARGE"}));
    };
    match serde_json::from_slice::<serde_json::Value>(&body.to_bytes()) {
        Ok(v) => json_reply(StatusCode::OK, json!({ "received": v })),
        Err(_) => json_reply(StatusCode::BAD_REQUEST, json!({"error": "NOT_JSON"})),
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() == Method::POST && req.uri().path() == "/v1/echo" {
        return Ok(echo(req).await);
    }
    if req.method() == Method::POST && req.uri().path() == "/v1/jobs" {
        use http_body_util::{BodyExt, Limited};
        return Ok(
            match Limited::new(req.into_body(), ECHO_MAX).collect().await {
                Ok(b) => super::jobs::create(&b.to_bytes()),
                Err(_) => json_reply(StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "TOO_LARGE"})),
            },
        );
    }
    if let Some(id) = req.uri().path().strip_prefix("/v1/jobs/")
        && (req.method() == Method::GET || req.method() == Method::DELETE)
    {
        return Ok(super::jobs::at(req.method() == Method::DELETE, id));
    }
    if req.method() == Method::GET && req.uri().path() == "/v1/slow" {
        tokio::time::sleep(SLOW).await;
        return Ok(json_reply(
            StatusCode::OK,
            json!({"message": "Slow work finished."}),
        ));
    }
    Ok(route(req.method(), req.uri().path()))
}

async fn serve(listener: TcpListener) -> io::Result<()> {
    let mut conns = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        conns.spawn(async move {
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
        while conns.try_join_next().is_some() {}
    }
}

/// Binds `addr` (loopback) and serves the fixtures until the task is aborted.
pub async fn spawn(addr: SocketAddr) -> io::Result<(SocketAddr, JoinHandle<io::Result<()>>)> {
    if !addr.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the fixture backend listens on loopback only",
        ));
    }
    let listener = crate::util::listen::bind(addr)?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(serve(listener))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(r: &Response<Full<Bytes>>) -> &str {
        r.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    #[test]
    fn routes_answer_by_media_type() {
        assert_eq!(media(&route(&Method::GET, "/v1/images/pixel")), "image/png");
        assert_eq!(media(&route(&Method::GET, "/v1/sounds/beep")), "audio/wav");
        assert_eq!(route(&Method::GET, "/v1/failures/always").status(), 500);
        assert_eq!(route(&Method::POST, "/v1/greeting").status(), 405);
        assert_eq!(route(&Method::GET, "/v1/items/a%2Fb").status(), 200);
        assert_eq!(route(&Method::GET, "/v1/items/a/b").status(), 404);
        assert_eq!(route(&Method::GET, "/nope").status(), 404);
    }

    #[test]
    fn media_fixtures_are_well_formed() {
        assert!(pixel_png().starts_with(b"\x89PNG"));
        let wav = beep_wav();
        assert_eq!(&wav[0..4], b"RIFF");
        assert_eq!(wav.len(), 44 + 800);
    }
}
