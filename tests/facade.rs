//! The reverse path over real HTTP: REST client -> portico facade -> an upstream MCP server
//! (an rmcp server written here, served by rmcp's own Streamable HTTP transport, in both eras),
//! and the upstream MCP client's era fallback, session renewal, timeouts and connection reuse.

mod common;

use bytes::Bytes;
use http_body_util::Full;
use portico::facade::{self, http::Running};
use portico::upstream::mcp::Era;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// What the rmcp server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    cancelled: AtomicUsize,
    cancelled_now: Notify,
    /// Requests refused because they were 2026-07-28 (legacy-only mode).
    refused_modern: AtomicUsize,
    /// `Authorization` values seen, per `Mcp-Method` (absent: "-").
    authorization: std::sync::Mutex<Vec<(String, String)>>,
}

#[derive(Clone)]
struct Tools(Arc<Seen>);

fn object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(serde_json::Map::new()),
    }
}

impl rmcp::ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = object(json!({"type": "object"}));
        Ok(ListToolsResult::with_all_items(
            ["echo", "taken", "limited", "broken", "slow"]
                .into_iter()
                .map(|n| Tool::new(n, "test tool", schema.clone()))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(req.arguments.unwrap_or_default());
        let usp = json!({"version": "2026-08-20"});
        let result = match req.name.as_ref() {
            "echo" => CallToolResult::structured(json!({"usp": usp, "echo": args, "messages": []})),
            "taken" => CallToolResult::structured(json!({"usp": usp, "messages": [
                {"type": "error", "code": "slot_unavailable", "content": "the slot is taken", "severity": "recoverable"}
            ]})),
            "limited" => {
                return Err(ErrorData::new(
                    ErrorCode(-32007),
                    "rate_limited",
                    Some(
                        json!({"code": "rate_limited", "content": "slow down", "retry_after": 30}),
                    ),
                ));
            }
            "broken" => CallToolResult::error(vec![ContentBlock::text("the tool fell over")]),
            "slow" => {
                tokio::select! {
                    _ = ctx.ct.cancelled() => {
                        self.0.cancelled.fetch_add(1, Ordering::SeqCst);
                        self.0.cancelled_now.notify_one();
                    }
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                CallToolResult::success(vec![ContentBlock::text("late")])
            }
            other => {
                return Err(ErrorData::new(
                    ErrorCode(-32602),
                    format!("Unknown tool: {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Serves the rmcp tools on `addr` (port 0: any). `legacy_only` refuses 2026-07-28 requests
/// with a plain 400, as a server from before that revision does.
async fn rmcp_server(
    addr: SocketAddr,
    legacy_only: bool,
    seen: Arc<Seen>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tools = Tools(seen.clone());
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    // Connections live in the accept task's JoinSet: aborting the task ends them all, as a
    // server restart does.
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            seen.connections.fetch_add(1, Ordering::SeqCst);
            let inner = hyper_util::service::TowerToHyperService::new(service.clone());
            let seen = seen.clone();
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let inner = inner.clone();
                    let seen = seen.clone();
                    async move {
                        let header = |n: &str| {
                            req.headers()
                                .get(n)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("-")
                                .to_string()
                        };
                        if let Ok(mut log) = seen.authorization.lock() {
                            log.push((header("mcp-method"), header("authorization")));
                        }
                        let modern = req
                            .headers()
                            .get("mcp-protocol-version")
                            .is_some_and(|v| v == "2026-07-28");
                        if legacy_only && modern {
                            seen.refused_modern.fetch_add(1, Ordering::SeqCst);
                            let mut r = hyper::Response::new(
                                http_body_util::combinators::UnsyncBoxBody::new(
                                    http_body_util::BodyExt::map_err(
                                        Full::new(Bytes::from_static(
                                            b"Bad Request: unsupported protocol version",
                                        )),
                                        |never| match never {},
                                    ),
                                ),
                            );
                            *r.status_mut() = hyper::StatusCode::BAD_REQUEST;
                            return Ok::<_, std::convert::Infallible>(r);
                        }
                        let resp = hyper::service::Service::call(&inner, req).await?;
                        Ok(resp.map(http_body_util::combinators::UnsyncBoxBody::new))
                    }
                });
            connections.spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, task)
}

fn workdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "portico-facade-{name}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const ROUTES: &str = r#"
routes:
  POST /echo/{booking_id}: echo
  GET /echo/{booking_id}: echo
  PUT /whole: { tool: echo, body: payload }
  POST /bookings: { tool: echo, status: 201 }
  POST /taken: taken
  POST /limited: limited
  POST /broken: broken
  POST /slow: slow
  GET /missing: no_such_tool
"#;

/// A facade (USP binding) in front of `mcp_url`.
async fn facade_on(
    mcp_url: &str,
    extra: &str,
) -> (Running, Arc<portico::upstream::mcp::McpUpstream>) {
    let dir = workdir("f");
    let file = dir.join("f.yaml");
    std::fs::write(
        &file,
        format!(
            "facade: test\nbinding: usp\nupstream:\n  url: {mcp_url}\n  timeout: 2s\ntool_error_status: 422\nmax_body_bytes: 4096\n{extra}{ROUTES}"
        ),
    )
    .unwrap();
    let f = facade::config::load(&file).unwrap_or_else(|d| panic!("{d:?}"));
    let upstream = f.upstream.clone();
    let running = facade::http::start(f, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (running, upstream)
}

async fn rest(req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = req.send().await.expect("facade answers");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, headers, body)
}

#[tokio::test]
async fn rest_calls_reach_rmcp_tools_in_the_2026_era() {
    let seen = Arc::new(Seen::default());
    let (addr, _task) = rmcp_server("127.0.0.1:0".parse().unwrap(), false, seen.clone()).await;
    let (f, upstream) = facade_on(&format!("http://{addr}/mcp"), "").await;
    let c = reqwest::Client::new();
    let (status, h, body) = rest(
        c.post(format!("{}/echo/b%2F1?limit=5", f.url()))
            .header("USP-Agent", "profile=\"https://agent.example/p.json\"")
            .header("Idempotency-Key", "k-1")
            .header("USP-Correlation-Id", "c-9")
            .json(&json!({"reason": "ill", "booking_id": "from-body"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let opened = seen.connections.load(Ordering::SeqCst);
    assert_eq!(h["content-type"], "application/json");
    // Body members flattened, query and path ids added (the path wins), headers in _meta.usp.
    assert_eq!(
        body["echo"],
        json!({"reason": "ill", "booking_id": "b/1", "limit": "5",
               "_meta": {"usp": {"profile": "https://agent.example/p.json", "idempotency_key": "k-1", "correlation_id": "c-9"}}})
    );
    assert_eq!(body["usp"]["version"], "2026-08-20");
    assert_eq!(upstream.era(), Some(Era::Modern));
    // A whole-body argument, and a configured success status.
    let (status, _, body) = rest(c.put(format!("{}/whole", f.url())).json(&json!([1, 2]))).await;
    assert_eq!((status, &body["echo"]), (200, &json!({"payload": [1, 2]})));
    let (status, _, _) = rest(c.post(format!("{}/bookings", f.url())).json(&json!({}))).await;
    assert_eq!(status, 201);
    // Connections are reused: the later calls opened none.
    assert!(
        opened <= 2,
        "{opened} connections for discovery and one call"
    );
    assert_eq!(seen.connections.load(Ordering::SeqCst), opened);
}

#[tokio::test]
async fn outcomes_become_http_answers() {
    let seen = Arc::new(Seen::default());
    let (addr, _task) = rmcp_server("127.0.0.1:0".parse().unwrap(), false, seen.clone()).await;
    let (f, _) = facade_on(&format!("http://{addr}/mcp"), "").await;
    let c = reqwest::Client::new();
    let post = |p: &str| c.post(format!("{}{p}", f.url())).json(&json!({}));
    // A business outcome is a processed request: 200 with messages[].
    let (status, _, body) = rest(post("/taken")).await;
    assert_eq!(status, 200);
    assert_eq!(body["messages"][0]["code"], "slot_unavailable");
    // A JSON-RPC error: the USP table's status, problem+json, Retry-After.
    let (status, h, body) = rest(post("/limited")).await;
    assert_eq!(status, 429);
    assert_eq!(h["content-type"], "application/problem+json");
    assert_eq!(h["retry-after"], "30");
    assert_eq!(body["status"], 429);
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(body["detail"], "slow down");
    assert_eq!(body["type"], "https://usp-protocol.dev/errors/rate-limited");
    // isError: the configured status.
    let (status, _, body) = rest(post("/broken")).await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (422, Some("the tool fell over"))
    );
    // An unknown tool upstream: -32602 is USP's invalid_profile_url row... the table says 400.
    let (status, _, _) = rest(c.get(format!("{}/missing", f.url()))).await;
    assert_eq!(status, 400);
    // Too slow: 504, and the upstream call is cancelled (the SSE stream is closed).
    let (status, h, body) = rest(post("/slow")).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(h["content-type"], "application/problem+json");
    tokio::time::timeout(Duration::from_secs(20), seen.cancelled_now.notified())
        .await
        .expect("the upstream tool saw the cancellation");
    assert_eq!(seen.cancelled.load(Ordering::SeqCst), 1);
    // The facade keeps serving.
    let (status, _, _) = rest(post("/echo/x")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_legacy_only_server_gets_a_session_renewed_on_404() {
    let seen = Arc::new(Seen::default());
    let (addr, task) = rmcp_server("127.0.0.1:0".parse().unwrap(), true, seen.clone()).await;
    let (f, upstream) = facade_on(&format!("http://{addr}/mcp"), "").await;
    let c = reqwest::Client::new();
    let (status, _, body) = rest(c.get(format!("{}/echo/1", f.url()))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["echo"]["booking_id"], "1");
    assert_eq!(seen.refused_modern.load(Ordering::SeqCst), 1);
    let Some(Era::Legacy {
        version,
        session: Some(first),
    }) = upstream.era()
    else {
        panic!("expected a session era, got {:?}", upstream.era())
    };
    assert_eq!(version, "2025-11-25");
    // The server restarts on the same port: the session is unknown there (404), and the
    // facade re-initializes transparently.
    task.abort();
    let _ = task.await;
    let (_, _task) = rmcp_server(addr, true, seen.clone()).await;
    let (status, _, body) = rest(c.get(format!("{}/echo/2", f.url()))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["echo"]["booking_id"], "2");
    let Some(Era::Legacy {
        session: Some(second),
        ..
    }) = upstream.era()
    else {
        panic!()
    };
    assert_ne!(first, second);
    // Timeouts in the session era send notifications/cancelled.
    let (status, _, _) = rest(c.post(format!("{}/slow", f.url())).json(&json!({}))).await;
    assert_eq!(status, 504);
    tokio::time::timeout(Duration::from_secs(20), seen.cancelled_now.notified())
        .await
        .expect("the upstream tool saw notifications/cancelled");
}

#[tokio::test]
async fn upstream_down_or_garbage_is_a_gateway_error() {
    let (dead, _held) = common::refused_addr();
    let (f, _) = facade_on(&format!("http://{dead}/mcp"), "").await;
    let c = reqwest::Client::new();
    let (status, h, body) = rest(c.get(format!("{}/echo/1", f.url()))).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(h["content-type"], "application/problem+json");
    // A server that answers HTML to everything.
    let (backend, _seen) = common::test_backend().await;
    let (f, _) = facade_on(&format!("http://{backend}/t/text"), "").await;
    let (status, _, body) = rest(c.get(format!("{}/echo/1", f.url()))).await;
    assert!(status == 502, "{status} {body}");
}

#[tokio::test]
async fn bad_rest_input_is_refused_before_any_call() {
    let seen = Arc::new(Seen::default());
    let (addr, _task) = rmcp_server("127.0.0.1:0".parse().unwrap(), false, seen.clone()).await;
    let (f, _) = facade_on(&format!("http://{addr}/mcp"), "").await;
    let c = reqwest::Client::new();
    let (status, h, body) = rest(c.get(format!("{}/nowhere", f.url()))).await;
    assert_eq!(
        (status, &h["content-type"]),
        (
            404,
            &"application/problem+json"
                .parse::<reqwest::header::HeaderValue>()
                .unwrap()
        )
    );
    assert_eq!(body["status"], 404);
    let (status, h, _) = rest(c.delete(format!("{}/echo/1", f.url()))).await;
    assert_eq!(status, 405);
    assert_eq!(h["allow"], "POST, GET");
    let (status, _, _) = rest(
        c.post(format!("{}/echo/1", f.url()))
            .header("content-type", "text/plain")
            .body("hi"),
    )
    .await;
    assert_eq!(status, 415);
    let (status, _, body) = rest(
        c.post(format!("{}/echo/1", f.url()))
            .header("content-type", "application/json")
            .body("{nope"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _, _) = rest(c.post(format!("{}/echo/1", f.url())).json(&json!([1]))).await;
    assert_eq!(status, 400);
    let big = "x".repeat(5000);
    let (status, _, _) = rest(
        c.post(format!("{}/echo/1", f.url()))
            .json(&json!({ "a": big })),
    )
    .await;
    assert_eq!(status, 413);
    let (status, _, body) = rest(
        c.post(format!("{}/echo/1", f.url()))
            .header("USP-Agent", "profile=\"ftp://x/p\"")
            .json(&json!({})),
    )
    .await;
    assert_eq!(
        (status, &body["code"]),
        (400, &json!("invalid_profile_url"))
    );
    // None of these reached the upstream server.
    assert_eq!(seen.connections.load(Ordering::SeqCst), 0);
}

#[test]
fn usp_facade_reproduces_every_row_of_the_usp_mapping_table() {
    let spec = std::fs::read_to_string(common::upstream("usp/specification.md")).unwrap();
    // §9.2.1: | `POST /services/list` | `usp_services_list` | ... |
    let section = &spec[spec.find("#### 9.2.1 Method Mapping").expect("§9.2.1")..];
    let section = &section[..section.find("#### 9.2.2").expect("§9.2.2")];
    let rows: Vec<(String, String, String)> = section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let op = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let tool = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
            let (method, path) = op.split_once(' ')?;
            Some((method.to_string(), path.to_string(), tool.to_string()))
        })
        .collect();
    assert_eq!(rows.len(), 27, "the table has 27 rows");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mappings/usp-facade.yaml");
    let f = facade::config::load(&file).unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(f.routes.len(), 27, "one route per row, nothing else");
    for (method, path, tool) in &rows {
        let found = f
            .routes
            .iter()
            .find(|r| r.method.as_str() == method && r.template.to_string() == *path);
        let r = found.unwrap_or_else(|| panic!("no route for {method} {path}"));
        assert_eq!(&r.tool, tool, "{method} {path}");
    }
    // Success statuses come from the OpenAPI document.
    let status = |m: &str, p: &str| {
        f.routes
            .iter()
            .find(|r| r.method.as_str() == m && r.template.to_string() == p)
            .map(|r| r.status)
    };
    assert_eq!(status("POST", "/bookings"), Some(201));
    assert_eq!(status("DELETE", "/registry/businesses/{id}"), Some(204));
    assert_eq!(status("GET", "/bookings/{booking_id}"), Some(200));
}

/// The derived USP facade (mappings/usp-facade.yaml, its documents from the fetched folder) in front of
/// `mcp_url`.
async fn usp_facade_on(mcp_url: &str) -> Running {
    let dir = workdir("usp");
    let file = dir.join("usp-facade.yaml");
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mappings/usp-facade.yaml");
    // The copy sits elsewhere: point its `../.upstream/` paths at the fetched folder itself.
    let upstream_dir = common::upstream("usp").parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(shipped)
        .unwrap()
        .replace("http://127.0.0.1:9100/mcp", mcp_url)
        .replace("../.upstream", &upstream_dir.display().to_string());
    std::fs::write(&file, text).unwrap();
    let f = facade::config::load(&file).unwrap_or_else(|d| panic!("{d:?}"));
    facade::http::start(f, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn rest_through_the_facade_equals_the_forward_path_alone() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    let mcp = demo.mcp_url();
    let f = usp_facade_on(&mcp).await;
    let c = reqwest::Client::new();
    let profile = "https://agent.example/profiles/scheduling-agent.json";
    let meta = json!({"usp": {"profile": profile}});
    let agent = format!("profile=\"{profile}\"");
    let forward = |name: &'static str, args: Value| {
        let c = c.clone();
        let mcp = mcp.clone();
        async move {
            let a = common::call(&c, &mcp, name, args).await;
            assert_eq!(a.status, 200, "{}", a.text);
            a.sc().clone()
        }
    };
    // Catalog and availability: same structuredContent, as the REST body.
    let (status, _, body) = rest(
        c.post(format!("{}/services/list", f.url()))
            .header("USP-Agent", &agent)
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        forward("usp_services_list", json!({"_meta": meta})).await
    );
    // The facade's own OpenAPI document, which every answer below must conform to.
    let (status, _, doc) = rest(c.get(format!("{}/openapi.json", f.url()))).await;
    assert_eq!(status, 200);
    conforms(&doc, "post", "/services/list", 200, &body);
    let (status, _, body) = rest(
        c.get(format!("{}/services/MASSAGE-60", f.url()))
            .header("USP-Agent", &agent),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        forward(
            "usp_services_get",
            json!({"service_id": "MASSAGE-60", "_meta": meta})
        )
        .await
    );
    conforms(&doc, "get", "/services/{service_id}", 200, &body);
    let query =
        json!({"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-02"});
    let (status, _, body) = rest(
        c.post(format!("{}/availability/query", f.url()))
            .header("USP-Agent", &agent)
            .json(&query),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut args = query.clone();
    args["_meta"] = meta.clone();
    assert_eq!(body, forward("usp_availability_query", args).await);
    conforms(&doc, "post", "/availability/query", 200, &body);
    // A booking: 201 (the OpenAPI's status), then read back both ways.
    let booking = json!({"service_id": "MASSAGE-60", "slot_id": "MASSAGE-60@2026-12-01T09:00",
        "buyer": {"first_name": "Alice", "last_name": "Example", "email": "alice@example.com"}});
    let (status, _, body) = rest(
        c.post(format!("{}/bookings", f.url()))
            .header("USP-Agent", &agent)
            .header("Idempotency-Key", "2f1c7a0e-0b1a-4c39-9d51-6f0a6d0c1b11")
            .json(&booking),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    conforms(&doc, "post", "/bookings", 201, &body);
    let id = body["booking"]["id"]
        .as_str()
        .expect("booking id")
        .to_string();
    let (status, _, body) = rest(
        c.get(format!("{}/bookings/{id}", f.url()))
            .header("USP-Agent", &agent),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        forward("usp_bookings_get", json!({"booking_id": id, "_meta": meta})).await
    );
    conforms(&doc, "get", "/bookings/{booking_id}", 200, &body);
    // The same slot again: a business outcome, 200 with messages[].
    let (status, _, body) = rest(
        c.post(format!("{}/bookings", f.url()))
            .header("USP-Agent", &agent)
            .header("Idempotency-Key", "9b2d4c1e-3f5a-4e6b-8c7d-0e1f2a3b4c5d")
            .json(&booking),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"][0]["code"], "slot_unavailable");
    conforms(&doc, "post", "/bookings", 200, &body);
    // A route whose tool the demo does not serve: a problem, and the facade keeps serving.
    let (status, h, body) = rest(
        c.post(format!("{}/waitlist/list", f.url()))
            .header("USP-Agent", &agent)
            .json(&json!({})),
    )
    .await;
    assert_eq!(h["content-type"], "application/problem+json", "{body}");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["detail"], "Unknown tool: usp_waitlist_list");
    conforms(&doc, "post", "/waitlist/list", 400, &body);
    assert!(
        body.get("code").is_none(),
        "-32602 alone names no USP code: {body}"
    );
    // Query parameters take the OpenAPI's types: a wrong one is refused before any call.
    let (status, _, body) = rest(c.get(format!("{}/services/feed?limit=ten", f.url()))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["detail"],
        "the query parameter `limit` must be an integer"
    );
    conforms(&doc, "get", "/services/feed", 400, &body);
    let (status, _, _) = rest(
        c.get(format!("{}/services/MASSAGE-60", f.url()))
            .header("USP-Agent", &agent),
    )
    .await;
    assert_eq!(status, 200);
    demo.stop().await;
}

#[tokio::test]
async fn the_demo_serves_a_facade_in_front_of_its_own_mcp_endpoint() {
    let demo = portico::demo::start(0).await.expect("demo starts");
    let banner = demo.banner();
    let url = banner
        .lines()
        .find_map(|l| l.strip_prefix("facade: "))
        .expect("the banner names the facade")
        .to_string();
    let c = reqwest::Client::new();
    let (status, _, body) = rest(c.get(format!("{url}/services/MASSAGE-60"))).await;
    assert_eq!(status, 200, "{body}");
    let forward = common::call(
        &c,
        &demo.mcp_url(),
        "usp_services_get",
        json!({"service_id": "MASSAGE-60"}),
    )
    .await;
    assert_eq!(&body, forward.sc());
    // A route the demo facade does not have.
    let (status, _, _) = rest(c.post(format!("{url}/waitlist")).json(&json!({}))).await;
    assert_eq!(status, 404);
    demo.stop().await;
}

/// Checks `body` against the generated document's schema for `method path` answered `status`
/// (the exact status, else `4XX` / `5XX`), with the document's components in scope.
fn conforms(doc: &Value, method: &str, path: &str, status: u16, body: &Value) {
    let responses = &doc["paths"][path][method]["responses"];
    let range = format!("{}XX", status / 100);
    let response = responses
        .get(status.to_string())
        .or_else(|| responses.get(&range))
        .unwrap_or_else(|| panic!("{method} {path} documents no {status}"));
    let content = response["content"].as_object().expect("a documented body");
    let (_, media) = content.iter().next().expect("one media type");
    let mut root = media["schema"].clone();
    root["components"] = doc["components"].clone();
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("{method} {path} {status}: schema does not compile: {e}"));
    let errors: Vec<String> = v
        .iter_errors(body)
        .take(3)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} {status}: {errors:?}\n{body}"
    );
}

/// Every `$ref` in `v` points inside `doc`.
fn refs_resolve(doc: &Value, v: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let ptr = r
                    .strip_prefix('#')
                    .unwrap_or_else(|| panic!("external $ref {r}"));
                assert!(doc.pointer(ptr).is_some(), "dangling $ref {r}");
            }
            m.values().for_each(|x| refs_resolve(doc, x));
        }
        Value::Array(a) => a.iter().for_each(|x| refs_resolve(doc, x)),
        _ => {}
    }
}

#[test]
fn the_generated_openapi_describes_every_derived_route_self_contained() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mappings/usp-facade.yaml");
    let f = facade::config::load(&file).unwrap_or_else(|d| panic!("{d:?}"));
    let doc = &*f.openapi;
    assert_eq!(doc["openapi"], "3.1.0");
    for r in &f.routes {
        let op = &doc["paths"][r.template.to_string()][r.method.as_str().to_ascii_lowercase()];
        assert_eq!(
            op["operationId"],
            r.tool.as_str(),
            "{} {}",
            r.method,
            r.template
        );
        assert!(op["responses"].get(r.status.to_string()).is_some());
        assert!(op["responses"].get("4XX").is_some() && op["responses"].get("5XX").is_some());
    }
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    assert_eq!(operations, 27);
    // Self-contained: every reference resolves inside the document, every schema compiles.
    refs_resolve(doc, doc);
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        let root = json!({"$ref": format!("#/components/schemas/{name}"), "components": doc["components"]});
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&root)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // The request body comes from the OpenRPC's by-name params: path ids and `_meta` left out.
    let body = &doc["paths"]["/bookings/{booking_id}/cancel"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    assert!(body["properties"].get("reason").is_some(), "{body}");
    assert!(body["properties"].get("booking_id").is_none());
    assert!(body["properties"].get("_meta").is_none());
    let create = &doc["paths"]["/bookings"]["post"]["requestBody"];
    assert_eq!(create["required"], true);
    assert_eq!(
        create["content"]["application/json"]["schema"]["required"],
        json!(["service_id", "slot_id", "buyer"])
    );
}

#[tokio::test]
async fn configured_headers_are_forwarded_on_tool_calls_only() {
    let seen = Arc::new(Seen::default());
    let (addr, _task) = rmcp_server("127.0.0.1:0".parse().unwrap(), false, seen.clone()).await;
    let (f, _) = facade_on(&format!("http://{addr}/mcp"), "").await;
    let c = reqwest::Client::new();
    // Without `forward_headers`, nothing is passed on.
    let (status, _, _) = rest(
        c.get(format!("{}/echo/1", f.url()))
            .header("Authorization", "Bearer t-1"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        seen.authorization
            .lock()
            .unwrap()
            .iter()
            .all(|(_, a)| a == "-")
    );
    // With it, the tools/call carries the caller's header.
    let dir = workdir("fwd");
    let file = dir.join("f.yaml");
    let mapping = |headers: &str| {
        format!(
            "facade: fwd\nbinding: plain\nupstream:\n  url: http://{addr}/mcp\n  forward_headers: [{headers}]\nroutes:\n  GET /echo/{{id}}: echo\n"
        )
    };
    std::fs::write(&file, mapping("Authorization")).unwrap();
    let g = facade::http::start(
        facade::config::load(&file).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    seen.authorization.lock().unwrap().clear();
    let (status, _, body) = rest(
        c.get(format!("{}/echo/2", g.url()))
            .header("Authorization", "Bearer t-2"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let log = seen.authorization.lock().unwrap().clone();
    assert!(
        log.contains(&("tools/call".to_string(), "Bearer t-2".to_string())),
        "{log:?}"
    );
    // The first call's era negotiation carries it too (a server that checks every request,
    // such as one with MCP authorization, needs it there).
    assert_eq!(
        log,
        [
            ("server/discover".to_string(), "Bearer t-2".to_string()),
            ("tools/call".to_string(), "Bearer t-2".to_string())
        ],
        "{log:?}"
    );
    // Transport headers cannot be configured for forwarding.
    std::fs::write(&file, mapping("Content-Type, Mcp-Session-Id")).unwrap();
    let errs = facade::config::load(&file).unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:?}");
}
