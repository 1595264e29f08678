//! Shared state for several replicas (`--state redis://...`): the Redis connection, key names and health.
//! It never logs stored values or the URL's password, and never blocks a request longer than its command timeout.
//!
//! What lives here when configured (docs/scaling.md): idempotency records (`idempotency`),
//! accepted webhook events, their dedupe keys and the sequence counter (`events`), and 2025-era
//! session records (`sessions`). Without `--state`, every kind stays in process memory.

pub mod auth;
pub mod deliveries;
pub mod events;
pub mod idempotency;
pub mod sessions;
pub mod tasks;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long one Redis command may take before the request that needed it fails.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the shared state is unusable.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("`{0}` is not a redis:// or rediss:// URL")]
    BadUrl(String),
    #[error("shared state (redis at {at}) is unavailable: {source}")]
    Redis {
        at: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("shared state holds a record portico cannot read: {0}")]
    Corrupt(String),
}

/// The Redis-backed shared state of one process.
pub struct Shared {
    conn: ConnectionManager,
    client: redis::Client,
    prefix: String,
    /// Where it points, for messages: scheme, host and port only.
    pub display: String,
    healthy: AtomicBool,
}

static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();

/// The process's shared state, when `--state` configured one.
pub fn shared() -> Option<&'static Arc<Shared>> {
    SHARED.get()
}

/// Makes `state` the process's shared state (once; later calls are ignored and return false).
pub fn install(state: Arc<Shared>) -> bool {
    SHARED.set(state).is_ok()
}

fn display_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}:{}",
            u.scheme(),
            u.host_str().unwrap_or("?"),
            u.port().unwrap_or(6379)
        ),
        Err(_) => "redis".into(),
    }
}

impl Shared {
    /// Prepares a connection to `url` (`redis://host:port/db`; `rediss://` for TLS is refused
    /// by this build). Connects lazily and reconnects by itself, so portico starts while Redis
    /// is down; `/readyz` reports it. `prefix` starts every key (a hash tag keeps a replica
    /// set's keys in one cluster slot).
    pub fn new(url: &str, prefix: &str) -> Result<Arc<Shared>, StateError> {
        if !url.starts_with("redis://") {
            return Err(StateError::BadUrl(display_of(url)));
        }
        let display = display_of(url);
        let client = redis::Client::open(url).map_err(|e| StateError::Redis {
            at: display.clone(),
            source: e,
        })?;
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), Self::config())
            .map_err(|e| StateError::Redis {
                at: display.clone(),
                source: e,
            })?;
        Ok(Arc::new(Shared {
            conn,
            client,
            prefix: format!("{{{prefix}}}"),
            display,
            healthy: AtomicBool::new(true),
        }))
    }

    fn config() -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500))
    }

    /// A handle on the shared multiplexed connection (cheap to clone).
    pub(crate) fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// A dedicated connection for blocking reads (`XREAD BLOCK` would stall the shared one).
    pub(crate) async fn dedicated(&self, block: Duration) -> Result<ConnectionManager, StateError> {
        let cfg = Self::config().set_response_timeout(Some(block + COMMAND_TIMEOUT));
        ConnectionManager::new_with_config(self.client.clone(), cfg)
            .await
            .map_err(|e| self.err(e))
    }

    /// A key in portico's namespace.
    pub(crate) fn key(&self, rest: &str) -> String {
        format!("{}:{rest}", self.prefix)
    }

    /// Wraps a Redis error (and marks the state unhealthy until the next success).
    pub(crate) fn err(&self, e: redis::RedisError) -> StateError {
        if self.healthy.swap(false, Ordering::Relaxed) {
            tracing::warn!(redis = %self.display, error = %e, "shared state unavailable");
        }
        crate::ops::metrics::state_error();
        StateError::Redis {
            at: self.display.clone(),
            source: e,
        }
    }

    /// Records a successful command.
    pub(crate) fn ok(&self) {
        if !self.healthy.swap(true, Ordering::Relaxed) {
            tracing::info!(redis = %self.display, "shared state reachable again");
        }
    }

    /// Whether the last command succeeded.
    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Runs one command on the shared connection, recording success or failure.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, StateError> {
        let mut c = self.conn();
        match cmd.query_async(&mut c).await {
            Ok(v) => {
                self.ok();
                Ok(v)
            }
            Err(e) => Err(self.err(e)),
        }
    }

    /// Round trip to Redis (for `/readyz`).
    pub async fn ping(&self) -> Result<(), StateError> {
        let mut c = self.conn();
        let r: Result<String, _> = redis::cmd("PING").query_async(&mut c).await;
        match r {
            Ok(_) => {
                self.ok();
                Ok(())
            }
            Err(e) => Err(self.err(e)),
        }
    }
}
