//! Signed outgoing webhooks to `deliver_to` URLs (RFC 9421 with portico's key), backoff retries, dead letters.
//! It never blocks the ingress (one task per delivery), never sends an unsigned request, and never
//! lets two events about one subject overtake each other on their way to one URL.

use super::journal::{Journal, Record};
use super::keys::{SigningKey, VerifyingKey};
pub use super::retry::RetryPolicy;
use super::sig;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

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
    turns: Arc<Turns>,
}

/// The subject of `event` at the JSON `pointer` (a non-empty string there): what orders its
/// deliveries ([`Egress::deliver`]'s `subject`).
pub fn subject_at(event: &Value, pointer: &str) -> Option<String> {
    event
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The order of deliveries per (URL, subject): USP §9.2.3 delivers the events of one booking
/// in causal order, so a delivery waits until the one before it on its key has ended
/// (delivered or dead-lettered). Deliveries on other keys, or without a subject, never wait.
#[derive(Debug, Default)]
struct Turns {
    /// The last delivery taken on each key: its ticket and the signal that it has ended.
    tails: Mutex<HashMap<TurnKey, (u64, oneshot::Receiver<()>)>>,
    tickets: std::sync::atomic::AtomicU64,
}

/// (URL, subject).
type TurnKey = (String, String);

/// One delivery's place in its key's line; dropping it lets the next one go.
struct Turn {
    turns: Arc<Turns>,
    key: TurnKey,
    ticket: u64,
    before: Option<oneshot::Receiver<()>>,
    _ended: oneshot::Sender<()>,
}

impl Turns {
    /// Takes the next place on `key`, in call order (the caller's order is the event order).
    fn take(self: &Arc<Self>, key: TurnKey) -> Turn {
        let ticket = self
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (ended, signal) = oneshot::channel();
        let before = match self.tails.lock() {
            Ok(mut tails) => tails.insert(key.clone(), (ticket, signal)).map(|(_, r)| r),
            // A poisoned map orders nothing more but loses no delivery.
            Err(_) => None,
        };
        Turn {
            turns: self.clone(),
            key,
            ticket,
            before,
            _ended: ended,
        }
    }

    #[cfg(test)]
    fn waiting_keys(&self) -> usize {
        self.tails.lock().map(|t| t.len()).unwrap_or(0)
    }
}

impl Turn {
    /// Waits until the delivery before this one on its key has ended; true if there was one.
    async fn wait(&mut self) -> bool {
        match self.before.take() {
            // Either outcome means it ended (its sender is only ever dropped).
            Some(before) => {
                let _ = before.await;
                true
            }
            None => false,
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // The last on its key forgets the key, so the map holds only keys with work in flight.
        if let Ok(mut tails) = self.turns.tails.lock()
            && tails.get(&self.key).is_some_and(|(t, _)| *t == self.ticket)
        {
            tails.remove(&self.key);
        }
    }
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
            turns: Arc::default(),
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
    /// `subject` (the booking id) orders deliveries: one to `url` about the same subject starts
    /// only when the one before it, in call order, has ended.
    pub fn deliver(
        self: &Arc<Self>,
        url: url::Url,
        event: Arc<Value>,
        event_id: String,
        policy: RetryPolicy,
        seq: Option<u64>,
        subject: Option<String>,
    ) {
        let me = self.clone();
        let mut turn = subject.map(|s| self.turns.take((url.to_string(), s)));
        tokio::spawn(async move {
            // Several replicas: the pending delivery is leased in Redis, so another replica
            // takes it over if this one dies before it ends (`crate::state::deliveries`).
            let shared = crate::state::shared().zip(seq);
            let lease_now = async || match shared {
                Some((state, seq)) => crate::state::deliveries::record(
                    state,
                    seq,
                    url.as_str(),
                    &event_id,
                    &event,
                    &policy,
                )
                .await
                .map(Some),
                None => Ok(None),
            };
            let lease = lease_now().await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot lease the delivery in the shared state; delivering from this replica only");
                None
            });
            let waited = match turn.as_mut() {
                Some(t) => t.wait().await,
                None => false,
            };
            // The wait may have eaten into the lease: take it anew from now.
            if waited
                && lease.is_some()
                && let Err(e) = lease_now().await
            {
                tracing::warn!(error = %e, "cannot renew the delivery's lease after waiting its turn");
            }
            let result = me.run(url.clone(), event, event_id, policy).await;
            drop(turn);
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

    #[tokio::test]
    async fn turns_on_one_key_go_in_the_order_taken_and_other_keys_never_wait() {
        let turns = Arc::<Turns>::default();
        let key = |s: &str| ("http://127.0.0.1:9/h".to_string(), s.to_string());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut taken: Vec<(u32, Turn)> = (1..=3).map(|i| (i, turns.take(key("b-1")))).collect();
        let mut other = turns.take(key("b-2"));
        assert_eq!(turns.waiting_keys(), 2);
        // Started last-first, they still run first-last; each holds its turn a little while.
        let mut tasks = Vec::new();
        while let Some((i, mut turn)) = taken.pop() {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let waited = turn.wait().await;
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(20)).await;
                (i, waited)
            }));
        }
        // Another key's turn is free at once, whatever b-1 is doing.
        assert!(!other.wait().await);
        drop(other);
        let mut waited = Vec::new();
        for t in tasks {
            waited.push(t.await.unwrap());
        }
        waited.sort_unstable();
        assert_eq!(waited, [(1, false), (2, true), (3, true)]);
        assert_eq!(*order.lock().unwrap(), [1, 2, 3]);
        // Nothing in flight: the map forgets both keys.
        assert_eq!(turns.waiting_keys(), 0);
    }

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
