//! MCP over stdio: one JSON-RPC message per line on stdin, answers on stdout, logs on stderr.
//! Same handlers and eras as HTTP; it never writes anything but JSON-RPC messages to stdout.

use super::MODERN_VERSIONS;
use super::handler::{self, Core, Era};
use super::jsonrpc::{self, INVALID_PARAMS, INVALID_REQUEST, Message, UNSUPPORTED_VERSION};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Largest accepted line (one message), in bytes.
pub const MAX_LINE: usize = 1 << 20;

/// Serves one client until stdin closes. A 2025 session starts with `initialize`; a request
/// carrying `_meta["io.modelcontextprotocol/protocolVersion"]` is served statelessly.
pub async fn serve<R, W>(
    core: Arc<Core>,
    input: R,
    mut output: W,
    max_depth: usize,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BufReader::new(input);
    let mut negotiated: Option<String> = None;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut lines)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await?;
        if n == 0 {
            return Ok(());
        }
        if buf.len() > MAX_LINE {
            // Skip the rest of the oversized line, then answer it.
            if buf.last() != Some(&b'\n') {
                let mut rest = Vec::new();
                lines.read_until(b'\n', &mut rest).await?;
            }
            write(
                &mut output,
                &jsonrpc::error(
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!("message exceeds {MAX_LINE} bytes"),
                    None,
                ),
            )
            .await?;
            continue;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let reply = match jsonrpc::parse(line, max_depth) {
            Err(rej) => Some(jsonrpc::error(&rej.id, rej.code, &rej.message, None)),
            Ok(Message::Notification { .. } | Message::Response { .. }) => None,
            Ok(Message::Request { id, method, params }) => {
                Some(answer(&core, &mut negotiated, id, &method, params).await)
            }
        };
        if let Some(r) = reply {
            write(&mut output, &r).await?;
        }
    }
}

async fn answer(
    core: &Core,
    negotiated: &mut Option<String>,
    id: Value,
    method: &str,
    params: Option<Value>,
) -> Value {
    let meta_version = params
        .as_ref()
        .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let era = match (meta_version, method) {
        (Some(v), _) => {
            if !MODERN_VERSIONS.contains(&v.as_str()) {
                return jsonrpc::error(
                    &id,
                    UNSUPPORTED_VERSION,
                    &format!("Unsupported protocol version: {v}"),
                    Some(json!({ "supported": MODERN_VERSIONS, "requested": v })),
                );
            }
            let caps = params
                .as_ref()
                .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1clientCapabilities"));
            if !caps.is_some_and(Value::is_object) {
                return jsonrpc::error(
                    &id,
                    INVALID_PARAMS,
                    "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] is required",
                    None,
                );
            }
            Era::Modern(v)
        }
        (None, "initialize") => {
            let requested = params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            let version = handler::negotiate(requested);
            *negotiated = Some(version.to_string());
            return jsonrpc::result(&id, handler::initialize_result(&core.info, version));
        }
        (None, _) => match negotiated {
            Some(v) => Era::Legacy(v.clone()),
            None => {
                return jsonrpc::error(
                    &id,
                    INVALID_REQUEST,
                    "send initialize first (or per-request _meta for 2026-07-28)",
                    None,
                );
            }
        },
    };
    handler::handle(core, &era, method, params)
        .await
        .into_message(&id)
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
        assert_eq!(out[2]["result"]["tools"].as_array().unwrap().len(), 13);
        assert_eq!(out[3]["error"]["code"], -32700);
        assert_eq!(out[4], json!({"jsonrpc":"2.0","id":4,"result":{}}));
    }

    #[tokio::test]
    async fn stateless_requests_over_stdio() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{{{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{{\"name\":\"nope\",{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{{{meta}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\"}}}}}}\n"
        );
        let out = run(&input).await;
        assert_eq!(out[0]["result"]["resultType"], "complete");
        assert_eq!(out[1]["error"]["code"], -32602);
        assert_eq!(
            out[2]["error"]["code"], -32601,
            "ping is removed in 2026-07-28"
        );
        assert_eq!(out[3]["error"]["code"], -32022);
    }
}
