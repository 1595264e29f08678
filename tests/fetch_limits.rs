//! The fetcher for other parties' documents (JWK Sets, profiles) against real local servers: no
//! plain http or special-use address unless the host is allowed, no redirects, a size cap on
//! declared and streamed bodies, a time limit, and non-2xx answers refused.

use bytes::Bytes;
use http_body_util::{Full, StreamBody};
use portico::auth::fetch::{FetchError, Limits, get};
use std::time::Duration;

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

async fn route(path: &str) -> hyper::Response<Body> {
    use http_body_util::BodyExt;
    let full = |s: u16, b: Vec<u8>| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(b)).boxed());
        *r.status_mut() = hyper::StatusCode::from_u16(s).unwrap();
        r
    };
    match path {
        "/ok" => full(200, br#"{"keys":[]}"#.to_vec()),
        "/redirect" => {
            let mut r = full(302, vec![]);
            r.headers_mut().insert("location", "/ok".parse().unwrap());
            r
        }
        "/big" => full(200, vec![b'x'; 300 * 1024]),
        "/big-chunked" => {
            // No Content-Length: the cap must hold while streaming.
            let chunks = (0..400).map(|_| {
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(vec![
                    b'y';
                    1024
                ])))
            });
            hyper::Response::new(StreamBody::new(futures_util::stream::iter(chunks)).boxed())
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            full(200, b"{}".to_vec())
        }
        _ => full(500, b"boom".to_vec()),
    }
}

async fn server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        Ok::<_, std::convert::Infallible>(route(req.uri().path()).await)
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn fetch_limits_table() {
    let base = server().await;
    let allowed = Limits {
        timeout: Duration::from_millis(800),
        allow_hosts: vec!["127.0.0.1".into()],
        ..Limits::default()
    };
    let strict = Limits::default();
    let port = base.rsplit(':').next().unwrap().to_string();
    let cases: Vec<(&str, String, &Limits, Result<(), FetchError>)> = vec![
        (
            "allowed host, small JSON",
            format!("{base}/ok"),
            &allowed,
            Ok(()),
        ),
        (
            "plain http, host not allowed",
            format!("{base}/ok"),
            &strict,
            Err(FetchError::NotHttps),
        ),
        (
            "https to loopback, not allowed",
            format!("https://127.0.0.1:{port}/ok"),
            &strict,
            Err(FetchError::PrivateAddress("127.0.0.1".into())),
        ),
        (
            "cloud metadata address",
            "https://169.254.169.254/latest".into(),
            &strict,
            Err(FetchError::PrivateAddress("169.254.169.254".into())),
        ),
        (
            "private range",
            "https://10.0.0.7/p.json".into(),
            &strict,
            Err(FetchError::PrivateAddress("10.0.0.7".into())),
        ),
        (
            "IPv4-mapped loopback",
            "https://[::ffff:127.0.0.1]/p.json".into(),
            &strict,
            Err(FetchError::PrivateAddress("[::ffff:7f00:1]".into())),
        ),
        (
            "not a URL",
            "profile.json".into(),
            &strict,
            Err(FetchError::BadUrl),
        ),
        (
            "file scheme",
            "file:///etc/passwd".into(),
            &strict,
            Err(FetchError::BadUrl),
        ),
        (
            "redirect",
            format!("{base}/redirect"),
            &allowed,
            Err(FetchError::Redirect),
        ),
        (
            "oversized, declared",
            format!("{base}/big"),
            &allowed,
            Err(FetchError::TooLarge(256 * 1024)),
        ),
        (
            "oversized, streamed",
            format!("{base}/big-chunked"),
            &allowed,
            Err(FetchError::TooLarge(256 * 1024)),
        ),
        (
            "slow",
            format!("{base}/slow"),
            &allowed,
            Err(FetchError::Timeout(Duration::from_millis(800))),
        ),
        (
            "server error",
            format!("{base}/fail"),
            &allowed,
            Err(FetchError::Status(500)),
        ),
    ];
    let mut report = Vec::new();
    for (name, url, limits, want) in cases {
        let got = get(&url, limits).await.map(|_| ());
        if got != want {
            report.push(format!("{name}: want {want:?}, got {got:?}"));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
