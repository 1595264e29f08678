//! Signed outgoing webhooks to `deliver_to` URLs (RFC 9421 with portico's key), backoff retries, dead letters.
//! It never blocks the ingress (one task per delivery) and never sends an unsigned request.

use super::journal::{Journal, Record};
use super::keys::{SigningKey, VerifyingKey};
use super::sig;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Retry schedule (USP §9.2.3 defaults: 30 s initial, 3 retries, 15 minutes at most in total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub retries: u32,
    pub max_total: Duration,
    /// Time allowed for one attempt.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_secs(30),
            retries: 3,
            max_total: Duration::from_secs(15 * 60),
            timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry `n` (1-based), or `None` when no retry is left within the budget.
    pub fn delay(&self, n: u32, waited: Duration) -> Option<Duration> {
        if n == 0 || n > self.retries {
            return None;
        }
        let d = self
            .initial
            .checked_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
            .unwrap_or(self.max_total);
        (waited + d <= self.max_total).then_some(d)
    }
}

/// A delivery that never got a 2xx.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub url: String,
    pub event_id: String,
    pub attempts: u32,
    pub last_error: String,
    /// Unix seconds when it was given up.
    pub at: i64,
    pub event: Value,
}

/// Most dead letters kept in memory (the oldest go first; each is also logged).
const DEAD_LETTERS: usize = 1000;

/// portico's signer and delivery queue.
pub struct Egress {
    key: Arc<SigningKey>,
    /// Where deliveries are recorded as done (the ingress records them as pending).
    journal: Option<Arc<dyn Journal>>,
    client: reqwest::Client,
    dead: Mutex<VecDeque<DeadLetter>>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("kid", &self.key.verifying_key().kid)
            .finish_non_exhaustive()
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Egress {
    pub fn new(key: Arc<SigningKey>, journal: Option<Arc<dyn Journal>>) -> Arc<Egress> {
        Arc::new(Egress {
            key,
            journal,
            client: reqwest::Client::new(),
            dead: Mutex::new(VecDeque::new()),
        })
    }

    /// portico's public keys as a JWK Set (`/.well-known/jwks.json`).
    pub fn jwks(&self) -> Value {
        json!({"keys": [self.key.verifying_key().jwk()]})
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The private key deliveries are signed with (also used for backend request signing).
    pub fn signing_key(&self) -> Arc<SigningKey> {
        self.key.clone()
    }

    /// Deliveries given up so far (most recent last).
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.dead
            .lock()
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Starts delivering `event` to `url` in its own task.
    /// `seq` is the event's journal sequence number: an ingress event's delivery is leased in
    /// the shared state and recorded in the journal; one without (`None`, the facade's relay of
    /// upstream notifications) is delivered from this process only.
    pub fn deliver(
        self: &Arc<Self>,
        url: url::Url,
        event: Arc<Value>,
        event_id: String,
        policy: RetryPolicy,
        seq: Option<u64>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            // Several replicas: the pending delivery is leased in Redis, so another replica
            // takes it over if this one dies before it ends (`crate::state::deliveries`).
            let shared = crate::state::shared().zip(seq);
            let mut lease = None;
            if let Some((state, seq)) = shared {
                let recorded = crate::state::deliveries::record(
                    state,
                    seq,
                    url.as_str(),
                    &event_id,
                    &event,
                    &policy,
                )
                .await;
                match recorded {
                    Ok(field) => lease = Some(field),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot lease the delivery in the shared state; delivering from this replica only")
                    }
                }
            }
            let result = me.run(url.clone(), event, event_id, policy).await;
            if let (Some((state, _)), Some(field)) = (shared, lease)
                && let Err(e) = crate::state::deliveries::finish(state, &field).await
            {
                tracing::warn!(error = %e, "cannot end the delivery's lease; another replica may send it again");
            }
            if let (Some(j), Some(seq)) = (&me.journal, seq) {
                let done = Record::Done {
                    seq,
                    url: url.to_string(),
                    result: result.into(),
                };
                if let Err(e) = j.append(&done) {
                    tracing::warn!(error = %e, "cannot record a finished delivery in the journal");
                }
            }
        });
    }

    /// Sweeps the shared state for deliveries whose replica died (lease ended) and runs them
    /// here, until the task is aborted. Checks every second (one small Redis command).
    pub async fn take_over_forever(self: Arc<Self>, state: &'static crate::state::Shared) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let taken = match crate::state::deliveries::take_over(state).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(error = %e, "delivery sweep failed");
                    continue;
                }
            };
            for p in taken {
                let Ok(url) = url::Url::parse(&p.url) else {
                    let _ = crate::state::deliveries::finish(state, &p.field).await;
                    continue;
                };
                tracing::info!(url = %url, event_id = %p.event_id, "taking over a delivery whose replica stopped");
                let me = self.clone();
                tokio::spawn(async move {
                    me.run(url, Arc::new(p.event), p.event_id, p.policy).await;
                    if let Err(e) = crate::state::deliveries::finish(state, &p.field).await {
                        tracing::warn!(error = %e, "cannot end the delivery's lease; another replica may send it again");
                    }
                });
            }
        }
    }

    async fn attempt(&self, url: &url::Url, body: &[u8], timeout: Duration) -> Result<(), String> {
        let headers = sig::sign_webhook(&self.key, url, body, now()).map_err(|e| e.to_string())?;
        let resp = self
            .client
            .post(url.clone())
            .headers(headers)
            .body(body.to_vec())
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    "timeout".to_string()
                } else {
                    e.to_string()
                }
            })?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("HTTP {}", resp.status().as_u16()))
        }
    }

    async fn run(
        &self,
        url: url::Url,
        event: Arc<Value>,
        event_id: String,
        policy: RetryPolicy,
    ) -> &'static str {
        let body = event.to_string().into_bytes();
        let mut waited = Duration::ZERO;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let err = match self.attempt(&url, &body, policy.timeout).await {
                Ok(()) => {
                    crate::ops::metrics::webhook_egress("delivered");
                    return "delivered";
                }
                Err(e) => e,
            };
            match policy.delay(attempts, waited) {
                Some(d) => {
                    crate::ops::metrics::webhook_egress("retried");
                    tracing::warn!(url = %url, event_id, attempts, error = %err, retry_in_ms = d.as_millis() as u64, "webhook delivery failed; retrying");
                    tokio::time::sleep(d).await;
                    waited += d;
                }
                None => {
                    crate::ops::metrics::webhook_egress("dead_letter");
                    tracing::error!(url = %url, event_id, attempts, error = %err, "webhook delivery given up (dead letter)");
                    if let Ok(mut dead) = self.dead.lock() {
                        if dead.len() >= DEAD_LETTERS {
                            dead.pop_front();
                        }
                        dead.push_back(DeadLetter {
                            url: url.to_string(),
                            event_id,
                            attempts,
                            last_error: err,
                            at: now(),
                            event: (*event).clone(),
                        });
                    }
                    return "dead_letter";
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usp_default_schedule_is_30_60_120_seconds() {
        let p = RetryPolicy::default();
        let s = Duration::from_secs;
        assert_eq!(p.delay(1, s(0)), Some(s(30)));
        assert_eq!(p.delay(2, s(30)), Some(s(60)));
        assert_eq!(p.delay(3, s(90)), Some(s(120)));
        assert_eq!(p.delay(4, s(210)), None);
        // The total budget caps the schedule.
        let tight = RetryPolicy {
            max_total: s(100),
            ..p
        };
        assert_eq!(tight.delay(3, s(90)), None);
    }
}
