//! Per-request notifications (`notifications/progress`, `notifications/message`) and the
//! in-flight call table that `notifications/cancelled` reads. It never decides a reply.

use crate::binding::Reply;
use crate::config::Gateway;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// RFC 5424 severities as MCP names them, least severe first.
pub const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A log severity (index into [`LEVELS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(u8);

impl Level {
    pub const DEBUG: Level = Level(0);
    pub const INFO: Level = Level(1);
    pub const WARNING: Level = Level(3);
    pub const ERROR: Level = Level(4);

    /// Parses an MCP level name.
    pub fn parse(name: &str) -> Option<Level> {
        LEVELS
            .iter()
            .position(|l| *l == name)
            .map(|i| Level(i as u8))
    }

    pub fn name(self) -> &'static str {
        LEVELS.get(self.0 as usize).copied().unwrap_or("emergency")
    }
}

/// The `progressToken` of a request (`params._meta.progressToken`): a string or an integer.
pub fn progress_token(params: Option<&Value>) -> Option<Value> {
    params
        .and_then(|p| p.get("_meta")?.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// The 2026-07-28 per-request level (`_meta["io.modelcontextprotocol/logLevel"]`).
pub fn request_level(params: Option<&Value>) -> Option<Level> {
    params
        .and_then(|p| p.get("_meta")?.get("io.modelcontextprotocol/logLevel"))
        .and_then(Value::as_str)
        .and_then(Level::parse)
}

/// Where one request's notifications go. Without a channel, every method is a no-op.
#[derive(Debug, Default)]
pub struct Notifier {
    tx: Option<mpsc::UnboundedSender<Value>>,
    progress_token: Option<Value>,
    level: Option<Level>,
    /// 2025 sessions: where server->client requests wait for answers (`mcp::input`).
    asks: Option<Arc<super::client::Pending>>,
}

impl Notifier {
    /// A notifier that sends nothing.
    pub fn none() -> Self {
        Notifier::default()
    }

    /// A notifier for a request that sent `progress_token` and whose session (or `_meta`) set
    /// `level`; notifications go to `tx`.
    pub fn new(
        tx: mpsc::UnboundedSender<Value>,
        progress_token: Option<Value>,
        level: Option<Level>,
    ) -> Self {
        Notifier {
            tx: Some(tx),
            progress_token,
            level,
            asks: None,
        }
    }

    /// Lets the call send requests to its client on this channel (2025 sessions).
    pub fn with_asks(mut self, asks: Option<Arc<super::client::Pending>>) -> Self {
        self.asks = asks;
        self
    }

    /// The call's way to ask its client, when it has one.
    pub fn client_link(&self) -> Option<super::client::ClientLink> {
        match (&self.tx, &self.asks) {
            (Some(tx), Some(pending)) => Some(super::client::ClientLink {
                tx: tx.clone(),
                pending: pending.clone(),
            }),
            _ => None,
        }
    }

    /// True when the caller asked for progress and a channel exists.
    pub fn wants_progress(&self) -> bool {
        self.tx.is_some() && self.progress_token.is_some()
    }

    /// True when a log message at `level` would be sent.
    pub fn logs(&self, level: Level) -> bool {
        self.tx.is_some() && self.level.is_some_and(|min| level >= min)
    }

    /// Sends `notifications/progress` (when the caller sent a token).
    pub fn progress(&self, progress: u64, total: Option<u64>, message: &str) {
        let (Some(tx), Some(token)) = (&self.tx, &self.progress_token) else {
            return;
        };
        let mut params =
            json!({ "progressToken": token, "progress": progress, "message": message });
        if let Some(t) = total {
            params["total"] = json!(t);
        }
        let _ = tx.send(
            json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": params }),
        );
    }

    /// Sends `notifications/message` when `level` reaches the requested minimum.
    pub fn log(&self, level: Level, data: Value) {
        let Some(tx) = &self.tx else { return };
        if !self.logs(level) {
            return;
        }
        let _ = tx.send(json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": { "level": level.name(), "logger": "portico", "data": data }
        }));
    }
}

/// Per-session call state (2025 era): the log level from `logging/setLevel`, the requests in
/// flight (for `notifications/cancelled`) and the progress tokens they use.
#[derive(Debug, Default)]
pub struct Calls {
    level: Mutex<Option<Level>>,
    inflight: Mutex<HashMap<String, oneshot::Sender<()>>>,
    tokens: Mutex<HashSet<String>>,
}

/// Why a call could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("progressToken is already in use by an active request of this session")]
    TokenInUse,
    #[error("a request with this id is already in flight in this session")]
    IdInUse,
}

/// Removes a registered call from its table when dropped (finished, failed or abandoned).
#[derive(Debug)]
pub struct Registration {
    calls: Arc<Calls>,
    id: String,
    token: Option<String>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut m) = self.calls.inflight.lock() {
            m.remove(&self.id);
        }
        if let (Some(t), Ok(mut set)) = (&self.token, self.calls.tokens.lock()) {
            set.remove(t);
        }
    }
}

impl Calls {
    pub fn set_level(&self, level: Level) {
        if let Ok(mut l) = self.level.lock() {
            *l = Some(level);
        }
    }

    /// The level set by `logging/setLevel`, if any (none: no log notifications).
    pub fn level(&self) -> Option<Level> {
        self.level.lock().ok().and_then(|l| *l)
    }

    /// Registers request `id` (and its progress token); the receiver fires on cancellation.
    pub fn register(
        self: &Arc<Self>,
        id: &Value,
        token: Option<&Value>,
    ) -> Result<(Registration, oneshot::Receiver<()>), RegisterError> {
        let key = id.to_string();
        let token = token.map(Value::to_string);
        let (tx, rx) = oneshot::channel();
        {
            let mut set = self.tokens.lock().map_err(|_| RegisterError::TokenInUse)?;
            if let Some(t) = &token
                && !set.insert(t.clone())
            {
                return Err(RegisterError::TokenInUse);
            }
        }
        let mut m = self.inflight.lock().map_err(|_| RegisterError::IdInUse)?;
        if m.contains_key(&key) {
            drop(m);
            if let (Some(t), Ok(mut set)) = (&token, self.tokens.lock()) {
                set.remove(t);
            }
            return Err(RegisterError::IdInUse);
        }
        m.insert(key.clone(), tx);
        Ok((
            Registration {
                calls: self.clone(),
                id: key,
                token,
            },
            rx,
        ))
    }

    /// Cancels request `id` if it is still in flight; true when one was. A finished or unknown
    /// request is ignored (the cancellation raced the answer).
    pub fn cancel(&self, id: &Value) -> bool {
        let tx = self
            .inflight
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&id.to_string()));
        tx.is_some_and(|tx| tx.send(()).is_ok())
    }

    /// Number of requests in flight.
    pub fn in_flight(&self) -> usize {
        self.inflight.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// Runs one `tools/call` through the forward path, reporting on `n`: progress `0` at the start,
/// one tick per `progress_every` while the backend call runs, and a final `n/n` before the
/// answer; log messages for the start (info), the backend request (debug), the end (info) and
/// failures (warning for tool errors, error for protocol errors).
pub async fn observed_call(
    gateway: &Gateway,
    name: &str,
    arguments: Option<Value>,
    n: &Notifier,
) -> Reply {
    // Nothing to report (the usual case): the forward path as is.
    let tool = gateway.tools.get(name).filter(|_| n.tx.is_some());
    let Some(tool) = tool else {
        return crate::forward::call_tool(gateway, name, arguments).await;
    };
    // autonym does not adopt Logging (B3.1).
    let quiet;
    let n = if tool.business.binding.kind == crate::binding::Kind::Autonym {
        quiet = Notifier {
            tx: n.tx.clone(),
            progress_token: n.progress_token.clone(),
            level: None,
            asks: n.asks.clone(),
        };
        &quiet
    } else {
        n
    };
    let started = Instant::now();
    n.log(
        Level::INFO,
        json!({ "event": "tools/call started", "tool": name }),
    );
    n.log(
        Level::DEBUG,
        json!({
            "event": "backend request",
            "tool": name,
            "method": tool.method.as_str(),
            "timeout_ms": tool.timeout.as_millis() as u64,
        }),
    );
    n.progress(0, None, "calling the backend");
    // Boxed: this path is rare, and an inline second `call_tool` state would double the size
    // of every call's future, reported or not.
    let mut call = Box::pin(crate::forward::call_tool(gateway, name, arguments));
    let mut ticks = 0u64;
    let reply = if n.wants_progress() {
        let every = tool.progress_every;
        let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                r = &mut call => break r,
                _ = iv.tick() => {
                    ticks += 1;
                    n.progress(ticks, None, "waiting for the backend");
                }
            }
        }
    } else {
        call.await
    };
    n.progress(ticks + 1, Some(ticks + 1), "done");
    let latency_ms = started.elapsed().as_millis() as u64;
    match &reply {
        Reply::Result(r) if r.get("isError") == Some(&Value::Bool(true)) => {
            let text = r
                .pointer("/content/0/text")
                .and_then(Value::as_str)
                .unwrap_or("");
            n.log(
                Level::WARNING,
                json!({ "event": "tool error", "tool": name, "detail": text }),
            );
        }
        Reply::Result(_) | Reply::Written(_) => {}
        Reply::Error(e) => n.log(
            Level::ERROR,
            json!({ "event": "tools/call failed", "tool": name, "code": e.code, "message": e.message }),
        ),
    }
    let outcome = match &reply {
        r if r.is_tool_error() => "tool_error",
        Reply::Result(_) | Reply::Written(_) => "ok",
        Reply::Error(_) => "error",
    };
    n.log(
        Level::INFO,
        json!({ "event": "tools/call completed", "tool": name, "outcome": outcome, "latency_ms": latency_ms }),
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_parse() {
        assert!(Level::parse("error") > Level::parse("warning"));
        assert_eq!(Level::parse("debug"), Some(Level::DEBUG));
        assert_eq!(Level::parse("loud"), None);
        assert_eq!(Level::WARNING.name(), "warning");
    }

    #[test]
    fn registration_cancels_and_cleans_up() {
        let calls = Arc::new(Calls::default());
        let (reg, mut rx) = calls.register(&json!(7), Some(&json!("t"))).unwrap();
        assert_eq!(
            calls.register(&json!(8), Some(&json!("t"))).unwrap_err(),
            RegisterError::TokenInUse
        );
        assert_eq!(
            calls.register(&json!(7), None).unwrap_err(),
            RegisterError::IdInUse
        );
        assert!(calls.cancel(&json!(7)));
        assert!(rx.try_recv().is_ok());
        drop(reg);
        assert_eq!(calls.in_flight(), 0);
        // After the call finished, the token is free again and cancelling is a no-op.
        let (_reg, _rx) = calls.register(&json!(9), Some(&json!("t"))).unwrap();
        assert!(!calls.cancel(&json!(7)));
    }

    #[test]
    fn notifier_filters_by_level_and_token() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let n = Notifier::new(tx, None, Some(Level::WARNING));
        n.progress(1, None, "x");
        n.log(Level::INFO, json!("quiet"));
        n.log(Level::ERROR, json!("loud"));
        let m = rx.try_recv().unwrap();
        assert_eq!(m["params"]["level"], "error");
        assert!(rx.try_recv().is_err());
    }
}
