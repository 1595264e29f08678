//! The demo backend's webhook sender: wraps legacy appointment events, signs them with the demo key, POSTs them to portico.
//! Its private key is public knowledge (demo only): never use it for anything else.

use crate::webhook::keys::SigningKey;
use crate::webhook::sig;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// The demo sender's private JWK (its public half is `mappings/demo-webhook-keys.json`).
pub const DEMO_KEY: &str = include_str!("webhook-sender.jwk.json");

/// Attempts per event (the first try plus retries).
const ATTEMPTS: u32 = 4;

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub use crate::clock::rfc3339;

/// Sends every event from `events` to `url` (`http://host:port/webhooks/{business}`) until the
/// channel closes. Each attempt is signed afresh (new `created`), so retries are never replays.
pub async fn run(mut events: mpsc::Receiver<Value>, url: url::Url) {
    let key = match serde_json::from_str::<Value>(DEMO_KEY)
        .map_err(|e| e.to_string())
        .and_then(|j| SigningKey::from_jwk(&j).map_err(|e| e.to_string()))
    {
        Ok(k) => k,
        Err(e) => {
            tracing::error!(error = %e, "demo webhook key unusable; demo webhooks are off");
            return;
        }
    };
    let client = reqwest::Client::new();
    while let Some(ev) = events.recv().await {
        let mut body = json!({
            "webhook_id": uuid::Uuid::new_v4().to_string(),
            "occurred_at": rfc3339(unix_now()),
        });
        if let (Some(b), Some(e)) = (body.as_object_mut(), ev.as_object()) {
            b.extend(e.clone());
        }
        let bytes = body.to_string().into_bytes();
        for attempt in 0..ATTEMPTS {
            let sent = match sig::sign_webhook(&key, &url, &bytes, unix_now()) {
                Ok(headers) => client
                    .post(url.clone())
                    .headers(headers)
                    .body(bytes.clone())
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .map(|r| r.status()),
                Err(e) => {
                    tracing::error!(error = %e, "cannot sign a demo webhook");
                    break;
                }
            };
            match sent {
                Ok(s) if s.is_success() => break,
                other => {
                    tracing::warn!(attempt, result = ?other.map(|s| s.as_u16()), "demo webhook not acknowledged");
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_618_884_473), "2021-04-20T02:07:53Z");
        assert_eq!(rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn the_demo_key_matches_the_demo_jwks() {
        let key = SigningKey::from_jwk(&serde_json::from_str(DEMO_KEY).unwrap()).unwrap();
        let jwks = include_str!("../../mappings/demo-webhook-keys.json");
        let public = crate::webhook::keys::VerifyingKey::from_jwks(jwks).unwrap();
        assert_eq!(public, vec![key.verifying_key()]);
    }
}
