//! MCP over stdio: one JSON-RPC message per line on stdin, answers on stdout, logs on stderr.
//! Same handlers and eras as HTTP; it never writes anything but JSON-RPC messages to stdout.

use super::MODERN_VERSIONS;
use super::handler::{self, Core, Era};
use super::jsonrpc::{self, INVALID_PARAMS, INVALID_REQUEST, Message, UNSUPPORTED_VERSION};
use super::notify::{self, Calls, Notifier};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Largest accepted line (one message), in bytes.
pub const MAX_LINE: usize = 1 << 20;

/// Serves one client until stdin closes. A 2025 session starts with `initialize`; a request
/// carrying `_meta["io.modelcontextprotocol/protocolVersion"]` is served statelessly.
/// `tools/call` runs concurrently with reading: its progress and log notifications go out as
/// they happen, `notifications/cancelled` drops it (no response then), and answers may arrive
/// out of request order. At end of input the calls in flight finish first.
pub async fn serve<R, W>(
    core: Arc<Core>,
    input: R,
    output: W,
    max_depth: usize,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_with_events(core, input, output, max_depth, None).await
}

/// As `serve`, and once a 2025 session is initialized, every webhook notification `hub`
/// fans out (`usp_webhook` and the like) is written to stdout too, as it arrives. Events
/// accepted before `initialize` are not sent (there was no session to send them to).
pub async fn serve_with_events<R, W>(
    core: Arc<Core>,
    input: R,
    mut output: W,
    max_depth: usize,
    hub: Option<Arc<crate::webhook::hub::Hub>>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (out, mut queue) = mpsc::unbounded_channel::<Value>();
    let session = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A stdio client presents no credentials: with a business's policy it is anonymous there.
    let gate = match &hub {
        Some(_) => {
            let core = core.clone();
            let load = move || core.gateway.load_full();
            let creds = crate::auth::transport::HttpCredentials::default();
            crate::auth::access::StreamGate::open(load, &creds)
                .await
                .map(|g| g as Arc<dyn crate::webhook::hub::Gate>)
        }
        None => None,
    };
    let forwarder = hub.map(|hub| {
        let (out, session) = (out.clone(), session.clone());
        let mut events = Box::pin(hub.listen("stdio", Default::default(), None, gate));
        tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(frame) = events.next().await {
                if !session.load(std::sync::atomic::Ordering::Acquire) {
                    continue;
                }
                for msg in sse_messages(&frame) {
                    if out.send(msg).is_err() {
                        return;
                    }
                }
            }
        })
        .abort_handle()
    });
    let forwarder = forwarder.map(AbortOnDrop);
    let reader = async move {
        let read = read_loop(core, input, out, max_depth, session).await;
        // End of input: the forwarder's copy of the output queue goes too, so the writer ends.
        drop(forwarder);
        read
    };
    let writer = async {
        while let Some(msg) = queue.recv().await {
            write(&mut output, &msg).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Stops the notification forwarder with the server.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The JSON-RPC messages in one SSE frame (its `data:` lines).
fn sse_messages(frame: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(frame)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

async fn read_loop<R: AsyncRead + Unpin>(
    core: Arc<Core>,
    input: R,
    out: mpsc::UnboundedSender<Value>,
    max_depth: usize,
    session: Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(input);
    let mut negotiated: Option<String> = None;
    let calls = Arc::new(Calls::default());
    let mut running = JoinSet::new();
    let mut buf = Vec::new();
    loop {
        while running.try_join_next().is_some() {}
        buf.clear();
        let n = (&mut lines)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await?;
        if n == 0 {
            while running.join_next().await.is_some() {}
            return Ok(());
        }
        if buf.len() > MAX_LINE {
            // Skip the rest of the oversized line, then answer it.
            if buf.last() != Some(&b'\n') {
                let mut rest = Vec::new();
                lines.read_until(b'\n', &mut rest).await?;
            }
            let _ = out.send(jsonrpc::error(
                &Value::Null,
                INVALID_REQUEST,
                &format!("message exceeds {MAX_LINE} bytes"),
                None,
            ));
            continue;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match jsonrpc::parse(line, max_depth) {
            Err(rej) => {
                let _ = out.send(jsonrpc::error(&rej.id, rej.code, &rej.message, None));
            }
            Ok(Message::Notification { method, params }) => {
                // A finished or unknown request is ignored: the cancellation raced the answer.
                if method == "notifications/cancelled"
                    && let Some(rid) = params.as_ref().and_then(|p| p.get("requestId"))
                {
                    calls.cancel(rid);
                }
            }
            Ok(Message::Response { .. }) => {}
            Ok(Message::Request { id, method, params }) => {
                let era = match era_for(&core, &mut negotiated, &id, &method, params.as_ref()) {
                    Ok(era) => era,
                    Err(reply) => {
                        let _ = out.send(reply);
                        // After the `initialize` answer: notifications may follow it.
                        if negotiated.is_some() {
                            session.store(true, std::sync::atomic::Ordering::Release);
                        }
                        continue;
                    }
                };
                if method == "tools/call" {
                    let level = match &era {
                        Era::Legacy(_) => calls.level(),
                        Era::Modern(_) => notify::request_level(params.as_ref()),
                    };
                    let token = notify::progress_token(params.as_ref());
                    let (registration, cancel) = match calls.register(&id, token.as_ref()) {
                        Ok(r) => r,
                        Err(e) => {
                            let _ =
                                out.send(jsonrpc::error(&id, INVALID_PARAMS, &e.to_string(), None));
                            continue;
                        }
                    };
                    let notifier = Notifier::new(out.clone(), token, level);
                    let (core, out) = (core.clone(), out.clone());
                    running.spawn(async move {
                        let _registration = registration;
                        let call =
                            handler::handle_with(&core, &era, "tools/call", params, &notifier);
                        tokio::select! {
                            a = call => {
                                let _ = out.send(a.into_message(&id));
                            }
                            _ = cancel => {}
                        }
                    });
                    continue;
                }
                // A read judges the credentials in its params (`auth::access`).
                let handled = handler::handle(&core, &era, &method, params.clone());
                let answer = crate::auth::access::reading(&method, params.clone(), handled).await;
                if method == "logging/setLevel"
                    && matches!(answer, handler::Answer::Result(_))
                    && let Some(l) = params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str)
                        .and_then(notify::Level::parse)
                {
                    calls.set_level(l);
                }
                let _ = out.send(answer.into_message(&id));
            }
        }
    }
}

/// The era a request is served under, or the immediate reply (the `initialize` result, or an
/// error) when there is nothing more to do.
fn era_for(
    core: &Core,
    negotiated: &mut Option<String>,
    id: &Value,
    method: &str,
    params: Option<&Value>,
) -> Result<Era, Value> {
    let meta_version = params
        .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
        .and_then(Value::as_str)
        .map(str::to_string);
    match (meta_version, method) {
        (Some(v), _) => {
            if !MODERN_VERSIONS.contains(&v.as_str()) {
                return Err(jsonrpc::error(
                    id,
                    UNSUPPORTED_VERSION,
                    &format!("Unsupported protocol version: {v}"),
                    Some(json!({ "supported": MODERN_VERSIONS, "requested": v })),
                ));
            }
            let caps = params
                .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1clientCapabilities"));
            if !caps.is_some_and(Value::is_object) {
                return Err(jsonrpc::error(
                    id,
                    INVALID_PARAMS,
                    "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required",
                    None,
                ));
            }
            Ok(Era::Modern(v))
        }
        (None, "initialize") => {
            let requested = params
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            let version = handler::negotiate(requested);
            *negotiated = Some(version.to_string());
            Err(jsonrpc::result(
                id,
                handler::initialize_result(&core.info, version),
            ))
        }
        (None, _) => match negotiated {
            Some(v) => Ok(Era::Legacy(v.clone())),
            None => Err(jsonrpc::error(
                id,
                INVALID_REQUEST,
                "send initialize first (or per-request _meta for 2026-07-28)",
                None,
            )),
        },
    }
}

async fn write<W: AsyncWrite + Unpin>(out: &mut W, msg: &Value) -> std::io::Result<()> {
    let mut line = msg.to_string();
    line.push('\n');
    out.write_all(line.as_bytes()).await?;
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::handler::ServerInfo;
    use arc_swap::ArcSwap;

    async fn run(input: &str) -> Vec<Value> {
        let dir = crate::demo::write_files("127.0.0.1:9".parse().unwrap(), None).unwrap();
        let g = crate::config::load(&[dir.join("mappings")]).unwrap();
        let core = Arc::new(Core {
            gateway: ArcSwap::from_pointee(g),
            info: ServerInfo::default(),
        });
        let mut out = Vec::new();
        serve(core, input.as_bytes(), &mut out, 64).await.unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn legacy_session_over_stdio() {
        let out = run(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#, "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "\n",
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#, "\n",
            "{broken\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#, "\n",
        ))
        .await;
        assert_eq!(out.len(), 5, "{out:?}");
        assert_eq!(out[0]["error"]["code"], -32600);
        assert_eq!(out[1]["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(out[2]["result"]["tools"].as_array().unwrap().len(), 14);
        assert_eq!(out[3]["error"]["code"], -32700);
        assert_eq!(out[4], json!({"jsonrpc":"2.0","id":4,"result":{}}));
    }

    #[tokio::test]
    async fn stateless_requests_over_stdio() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{{{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{{\"name\":\"nope\",{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{{{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\"}}}}}}\n"
        );
        let mut out = run(&input).await;
        // tools/call runs concurrently: answers may come out of request order.
        out.sort_by_key(|m| m["id"].as_i64());
        assert_eq!(out[0]["result"]["resultType"], "complete");
        assert_eq!(out[1]["error"]["code"], -32602);
        assert_eq!(
            out[2]["error"]["code"], -32601,
            "ping is removed in 2026-07-28"
        );
        assert_eq!(out[3]["error"]["code"], -32022);
    }
}
