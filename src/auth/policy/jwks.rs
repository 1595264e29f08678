//! A policy's JWT key source: static keys or a JWK Set URL, fetched through `auth::fetch`,
//! cached and refetched on an unknown `kid` at most every `JWKS_MIN_REFRESH`. It must never
//! fetch more than once for concurrent misses, or keep a key set past `JWKS_TTL`.

use crate::auth::fetch::{self, Limits};
use crate::auth::jws::{Jws, JwsAlg, JwsError, JwtKey};
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where JWT verification keys come from.
pub enum Jwks {
    Static(Vec<JwtKey>),
    Url {
        url: String,
        limits: Limits,
        cache: Mutex<Option<(Instant, std::sync::Arc<Vec<JwtKey>>)>>,
        /// Serialises refreshes so concurrent misses fetch once.
        refresh: tokio::sync::Mutex<()>,
    },
}

/// How long fetched keys are used before a refetch; an unknown `kid` refetches sooner.
pub const JWKS_TTL: Duration = Duration::from_secs(300);
/// Least time between two refetches caused by unknown `kid`s.
pub const JWKS_MIN_REFRESH: Duration = Duration::from_secs(10);

impl Jwks {
    /// The keys; `force` refetches (an unknown `kid`) unless a fetch happened very recently.
    pub async fn keys(&self, force: bool) -> Result<std::sync::Arc<Vec<JwtKey>>, String> {
        let Jwks::Url {
            url,
            limits,
            cache,
            refresh,
        } = self
        else {
            let Jwks::Static(k) = self else {
                return Err("no keys".into());
            };
            return Ok(std::sync::Arc::new(k.clone()));
        };
        let fresh = |min_age: Duration| {
            cache
                .lock()
                .ok()
                .and_then(|c| c.clone())
                .filter(|(at, _)| at.elapsed() < min_age)
                .map(|(_, k)| k)
        };
        let want = if force { JWKS_MIN_REFRESH } else { JWKS_TTL };
        if let Some(k) = fresh(want) {
            return Ok(k);
        }
        let _one = refresh.lock().await;
        if let Some(k) = fresh(want) {
            return Ok(k);
        }
        let body = fetch::get(url, limits)
            .await
            .map_err(|e| format!("JWKS fetch failed: {e}"))?;
        let doc: Value =
            serde_json::from_slice(&body).map_err(|_| "the JWKS is not JSON".to_string())?;
        let keys = std::sync::Arc::new(JwtKey::from_jwks(&doc)?);
        if let Ok(mut c) = cache.lock() {
            *c = Some((Instant::now(), keys.clone()));
        }
        Ok(keys)
    }
}

impl Jwks {
    /// Verifies `jws`'s signature for `alg` with the key its `kid` names (any key of the set
    /// when it names none); an unknown `kid` refetches the set once (rate-limited by
    /// [`JWKS_MIN_REFRESH`]). `Err` when the keys cannot be had at all.
    pub async fn verify(&self, jws: &Jws, alg: JwsAlg) -> Result<Result<(), JwsError>, String> {
        let kid = jws.kid();
        for force in [false, true] {
            let keys = self.keys(force).await?;
            let candidates: Vec<_> = keys
                .iter()
                .filter(|k| kid.is_none_or(|kid| k.kid() == kid))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let mut result = Err(JwsError::KeyMismatch);
            for k in candidates {
                match jws.verify(alg, k) {
                    Ok(()) => return Ok(Ok(())),
                    Err(JwsError::KeyMismatch) => {}
                    Err(e) => result = Err(e),
                }
            }
            return Ok(result);
        }
        Ok(Err(JwsError::NoKey))
    }
}
