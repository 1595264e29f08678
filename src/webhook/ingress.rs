//! `POST /webhooks/{business}`: digest first, then signature, replay, transform, dedupe, journal, queue, then 2xx.
//! It never queues anything that failed a check, and never answers 2xx before the event is queued.

use super::config::WebhookConfig;
use super::dedupe::{Dedupe, MemoryDedupe};
use super::egress::Egress;
use super::hub::Hub;
use super::journal::{Journal, Record};
use super::keys::{Alg, SigningKey};
use super::sig::{self, Policy, RequestParts, SigError, replay_window};
use crate::auth::store::KeepFor;
use crate::config::Gateway;
use crate::translate::transform::Vars3;
use http::{HeaderMap, StatusCode};
use moka::sync::Cache;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What the sender is told.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

/// Why a webhook is refused (besides signature and digest problems).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Signature(#[from] SigError),
    #[error("this signature was already used")]
    Replayed,
    #[error("the payload is not JSON: {0}")]
    NotJson(String),
    #[error("the payload cannot be turned into an event: {0}")]
    BadEvent(String),
    #[error("no webhooks are configured for business `{0}`")]
    UnknownBusiness(String),
    #[error("the event could not be recorded; retry later: {0}")]
    Journal(String),
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::Signature(
                SigError::DigestMissing | SigError::DigestMalformed(_) | SigError::DigestMismatch,
            ) => StatusCode::BAD_REQUEST,
            Refusal::Signature(SigError::Key(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            Refusal::Signature(_) | Refusal::Replayed => StatusCode::UNAUTHORIZED,
            Refusal::NotJson(_) => StatusCode::BAD_REQUEST,
            Refusal::BadEvent(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Refusal::UnknownBusiness(_) => StatusCode::NOT_FOUND,
            Refusal::Journal(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Short slug for metrics and the problem `type`.
    pub fn slug(&self) -> &'static str {
        match self {
            Refusal::Signature(e) => e.slug(),
            Refusal::Replayed => "replayed",
            Refusal::NotJson(_) => "payload_malformed",
            Refusal::BadEvent(_) => "event_invalid",
            Refusal::UnknownBusiness(_) => "unknown_business",
            Refusal::Journal(_) => "journal",
        }
    }

    fn reply(&self) -> Reply {
        let status = self.status();
        Reply {
            status,
            body: json!({
                "type": format!("urn:portico:webhook:{}", self.slug()),
                "title": "webhook refused",
                "status": status.as_u16(),
                "detail": self.to_string(),
            }),
        }
    }
}

/// How much webhook history a replica keeps in memory (and, for the dedupe window, in Redis
/// with `--state`). The defaults suit production; a soak or a small sidecar may shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Accepted events kept for `Last-Event-ID` replay on 2025-era streams.
    pub replay: usize,
    /// How long an event id is remembered: a repeat within it is answered as a duplicate.
    pub dedupe: Duration,
    /// Booking resources whose latest event is kept for `resources/read`.
    pub latest: u64,
}

impl Default for Retention {
    fn default() -> Self {
        let hub = super::hub::HubOptions::default();
        Retention {
            replay: hub.replay,
            dedupe: super::dedupe::DEFAULT_TTL,
            latest: hub.latest,
        }
    }
}

/// The webhook receiver: hub, dedupe store and the seen-signature cache.
pub struct Ingress {
    pub hub: Arc<Hub>,
    pub dedupe: Arc<dyn Dedupe>,
    /// portico's signer for `deliver_to` (and `/.well-known/jwks.json`); `None` only when no
    /// key could be made.
    pub egress: Option<Arc<Egress>>,
    /// What accepted signatures signed ([`sig::Verified::replay_key`], or the HMAC tag), each
    /// kept for its [`replay_window`].
    signatures: Cache<Vec<u8>, Duration>,
    /// The dedupe window (journal compaction and the shared store use it too).
    dedupe_window: Duration,
    /// Accepted events and deliveries, written before the sender is answered.
    journal: Option<Arc<dyn Journal>>,
}

impl Ingress {
    /// `dedupe_window` is how long `dedupe` keeps an event id (journal compaction and the
    /// shared store keep events as long).
    pub fn new(
        hub: Arc<Hub>,
        dedupe: Arc<dyn Dedupe>,
        dedupe_window: Duration,
        egress: Option<Arc<Egress>>,
        journal: Option<Arc<dyn Journal>>,
    ) -> Self {
        Ingress {
            hub,
            dedupe,
            egress,
            journal,
            signatures: Cache::builder()
                .max_capacity(1_000_000)
                .expire_after(KeepFor)
                .build(),
            dedupe_window,
        }
    }

    /// An ingress with the default hub and in-memory dedupe store, signing outgoing webhooks
    /// with `key` (or an ephemeral P-256 key).
    pub fn with_key(key: Option<Arc<SigningKey>>, journal: Option<Arc<dyn Journal>>) -> Self {
        Ingress::with_retention(key, journal, Retention::default())
    }

    /// As [`Ingress::with_key`], keeping `retention`'s replay buffer and dedupe window.
    pub fn with_retention(
        key: Option<Arc<SigningKey>>,
        journal: Option<Arc<dyn Journal>>,
        retention: Retention,
    ) -> Self {
        let key = key.or_else(|| {
            let kid = format!("portico-{}", uuid::Uuid::new_v4().simple());
            match SigningKey::generate(Alg::EcdsaP256Sha256, &kid) {
                Ok(k) => Some(Arc::new(k)),
                Err(e) => {
                    tracing::error!(error = %e, "cannot create a webhook signing key");
                    None
                }
            }
        });
        let egress = key.map(|k| Egress::new(k, journal.clone()));
        Ingress::new(
            Hub::new(super::hub::HubOptions {
                replay: retention.replay,
                latest: retention.latest,
                ..Default::default()
            }),
            Arc::new(MemoryDedupe::new(1_000_000, retention.dedupe)),
            retention.dedupe,
            egress,
            journal,
        )
    }

    /// Reads the journal back after a restart: recent events return to the replay buffer, the
    /// latest-event table and the dedupe store (sequence numbers continue after them), and
    /// deliveries that never finished start again. The journal is compacted first.
    pub fn restore(&self, gateway: &Gateway) -> std::io::Result<usize> {
        let Some(journal) = &self.journal else {
            return Ok(0);
        };
        let now = unix_now();
        let ttl = i64::try_from(self.dedupe_window.as_secs()).unwrap_or(i64::MAX);
        let kept = super::journal::compact(journal.load()?, now, ttl);
        journal.rewrite(&kept)?;
        let mut events = std::collections::HashMap::new();
        for r in &kept {
            if let Record::Event {
                seq,
                business,
                method,
                event_id,
                event,
                uri,
                at,
            } = r
            {
                if now - at <= ttl {
                    self.dedupe.first_seen(&format!("{business}\0{event_id}"));
                }
                self.hub
                    .restore(*seq, business, method, event.clone(), uri.clone());
                events.insert(
                    *seq,
                    (business.clone(), event_id.clone(), Arc::new(event.clone())),
                );
            }
        }
        let mut resumed = 0;
        for r in &kept {
            let (Record::Pending { seq, url }, Some(egress)) = (r, &self.egress) else {
                continue;
            };
            let (Some((business, event_id, event)), Ok(url)) =
                (events.get(seq), url::Url::parse(url))
            else {
                continue;
            };
            let cfg = gateway
                .businesses
                .iter()
                .find(|b| &b.name == business)
                .and_then(|b| b.webhooks.as_ref());
            let policy = cfg.map(|w| w.retry).unwrap_or_default();
            let subject = cfg.and_then(|w| w.subject(event));
            egress.deliver(
                url,
                event.clone(),
                event_id.clone(),
                policy,
                Some(*seq),
                subject,
            );
            resumed += 1;
        }
        Ok(resumed)
    }

    /// What can be checked before the body is read: `business` takes webhooks, and the request
    /// carries the signature headers of a scheme it accepts (RFC 9421, or its HMAC header). The
    /// body of a request refused here is never read.
    pub fn precheck(
        &self,
        gateway: &Gateway,
        business: &str,
        headers: &HeaderMap,
    ) -> Result<(), Reply> {
        let cfg = gateway
            .businesses
            .iter()
            .find(|b| b.name == business)
            .and_then(|b| b.webhooks.as_ref());
        let refusal = match cfg {
            None => Refusal::UnknownBusiness(business.to_string()),
            Some(cfg) => {
                let rfc9421 =
                    headers.contains_key("signature-input") || headers.contains_key("signature");
                let hmac = cfg
                    .hmac
                    .as_ref()
                    .is_some_and(|(name, _)| headers.contains_key(name));
                if rfc9421 || hmac {
                    return Ok(());
                }
                Refusal::Signature(SigError::Unsigned)
            }
        };
        let known = cfg.map_or("unknown", |c| c.business.as_str());
        Err(self.refused(business, known, &refusal))
    }

    /// Counts and logs a refusal; the sender's answer.
    fn refused(&self, business: &str, known: &str, e: &Refusal) -> Reply {
        crate::ops::metrics::webhook_received(known, e.slug());
        tracing::info!(business, refused = e.slug(), detail = %e, "webhook refused");
        e.reply()
    }

    /// Handles one request for `business` (already read: `parts` and the raw `body`).
    pub async fn receive(
        &self,
        gateway: &Gateway,
        business: &str,
        parts: &RequestParts<'_>,
        body: &[u8],
    ) -> Reply {
        let cfg = gateway
            .businesses
            .iter()
            .find(|b| b.name == business)
            .and_then(|b| b.webhooks.clone());
        let now = unix_now();
        let result = match &cfg {
            Some(cfg) => self.accept(cfg, parts, body, now).await,
            None => Err(Refusal::UnknownBusiness(business.to_string())),
        };
        let known = cfg.as_ref().map_or("unknown", |c| c.business.as_str());
        match result {
            Ok((event_id, true)) => {
                crate::ops::metrics::webhook_received(known, "queued");
                Reply {
                    status: StatusCode::ACCEPTED,
                    body: json!({"status": "queued", "event_id": event_id}),
                }
            }
            Ok((event_id, false)) => {
                crate::ops::metrics::webhook_received(known, "duplicate");
                Reply {
                    status: StatusCode::OK,
                    body: json!({"status": "duplicate", "event_id": event_id}),
                }
            }
            Err(e) => self.refused(business, known, &e),
        }
    }

    /// Verifies, transforms, dedupes and queues; returns the event id and whether it was new.
    pub async fn accept(
        &self,
        cfg: &WebhookConfig,
        parts: &RequestParts<'_>,
        body: &[u8],
        now: i64,
    ) -> Result<(String, bool), Refusal> {
        let headers = parts.headers;
        let rfc9421 = headers.contains_key("signature-input") || headers.contains_key("signature");
        // The digest is checked over the raw bytes before anything else looks at them.
        if rfc9421 || headers.contains_key("content-digest") {
            sig::verify_content_digest(headers, body)?;
        }
        let mark = if rfc9421 {
            let policy = Policy {
                required: &sig::USP_COMPONENTS,
                algorithms: &cfg.algorithms,
                max_age: cfg.max_age,
                require_created: true,
            };
            // Keyed on what was signed, not on the signature's bytes: the high-S twin of a
            // captured ECDSA signature verifies too and must count as the same signature.
            sig::verify(parts, &cfg.keys, &policy, now)?
                .replay_key
                .to_vec()
        } else if let Some((name, secret)) = &cfg.hmac {
            let value = headers.get(name).and_then(|v| v.to_str().ok());
            sig::verify_hmac(value, secret, body, cfg.max_age, now)?
        } else {
            return Err(SigError::Unsigned.into());
        };
        let window = replay_window(cfg.max_age);
        if !self
            .signatures
            .entry(mark.clone())
            .or_insert(window)
            .is_fresh()
        {
            return Err(Refusal::Replayed);
        }
        let out = self.accept_verified(cfg, body, now).await;
        if let Err(Refusal::Journal(_)) = &out {
            // Not recorded, through no fault of the sender: the same signed request may come
            // again.
            self.signatures.invalidate(&mark);
        }
        out
    }

    /// The steps after a signature was verified and recorded: transform, dedupe, journal, queue.
    async fn accept_verified(
        &self,
        cfg: &WebhookConfig,
        body: &[u8],
        now: i64,
    ) -> Result<(String, bool), Refusal> {
        let payload: Value =
            crate::json_text::from_slice(body).map_err(|e| Refusal::NotJson(e.to_string()))?;
        let event = match &cfg.transform {
            None => payload,
            Some(t) => t
                .run(
                    &payload,
                    Vars3 {
                        args: &Value::Null,
                        status: 0,
                        meta: &Value::Null,
                    },
                )
                .map_err(|e| {
                    // The sender is told what failed, never the mapping's program.
                    tracing::info!(business = %cfg.business, error = %e, "webhook transform failed");
                    Refusal::BadEvent(format!("the transform failed: {}", e.message))
                })?
                .ok_or_else(|| Refusal::BadEvent("the transform produced no value".into()))?,
        };
        if !event.is_object() {
            return Err(Refusal::BadEvent("the event is not a JSON object".into()));
        }
        let event_id = event
            .pointer(&cfg.event_id)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Refusal::BadEvent(format!("no event id (a string) at `{}`", cfg.event_id))
            })?
            .to_string();
        let subject = cfg.subject(&event);
        let uri = subject.as_deref().map(|id| cfg.uri_for(id));
        let egress = self.egress.as_ref().filter(|_| !cfg.deliver_to.is_empty());
        let shared = egress.map(|_| Arc::new(event.clone()));
        // Several replicas: Redis dedupes, numbers and keeps the event; every replica's reader
        // (`crate::state::events::read_into`) then sends it to its own clients.
        if let Some(state) = crate::state::shared() {
            let appended = crate::state::events::append(
                state,
                &cfg.business,
                &cfg.method,
                &event_id,
                &event,
                uri.as_deref(),
                self.dedupe_window,
            )
            .await;
            let seq = match appended {
                Ok(Some(seq)) => seq,
                Ok(None) => return Ok((event_id, false)),
                Err(e) => {
                    tracing::error!(error = %e, "cannot record the webhook in the shared state; refusing the event");
                    return Err(Refusal::Journal(e.to_string()));
                }
            };
            self.deliver(cfg, egress, shared, &event_id, seq, subject);
            return Ok((event_id, true));
        }
        let key = format!("{}\0{event_id}", cfg.business);
        if !self.dedupe.first_seen(&key) {
            return Ok((event_id, false));
        }
        // Journal first (under the hub's lock, so journal order is delivery order), then queue.
        let published =
            self.hub
                .publish_with(
                    &cfg.business,
                    &cfg.method,
                    event,
                    uri.clone(),
                    |seq, ev| match &self.journal {
                        None => Ok(()),
                        Some(j) => {
                            j.append(&Record::Event {
                                seq,
                                business: cfg.business.clone(),
                                method: cfg.method.clone(),
                                event_id: event_id.clone(),
                                event: ev.clone(),
                                uri: uri.clone(),
                                at: now,
                            })?;
                            for url in cfg.deliver_to.iter().filter(|_| egress.is_some()) {
                                j.append(&Record::Pending {
                                    seq,
                                    url: url.to_string(),
                                })?;
                            }
                            Ok::<(), std::io::Error>(())
                        }
                    },
                );
        let seq = match published {
            Ok(seq) => seq,
            Err(e) => {
                self.dedupe.forget(&key);
                tracing::error!(error = %e, "cannot write the webhook journal; refusing the event");
                return Err(Refusal::Journal(e.to_string()));
            }
        };
        self.deliver(cfg, egress, shared, &event_id, seq, subject);
        Ok((event_id, true))
    }

    /// Starts the outgoing deliveries (`deliver_to`) of an accepted event.
    fn deliver(
        &self,
        cfg: &WebhookConfig,
        egress: Option<&Arc<Egress>>,
        event: Option<Arc<Value>>,
        event_id: &str,
        seq: u64,
        subject: Option<String>,
    ) {
        if let (Some(egress), Some(event)) = (egress, event) {
            for url in &cfg.deliver_to {
                egress.deliver(
                    url.clone(),
                    event.clone(),
                    event_id.to_string(),
                    cfg.retry,
                    Some(seq),
                    subject.clone(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_signatures_leave_the_cache_after_their_window() {
        let cache: Cache<Vec<u8>, Duration> = Cache::builder().expire_after(KeepFor).build();
        let short = Duration::from_millis(50);
        assert!(cache.entry(b"sig-a".to_vec()).or_insert(short).is_fresh());
        assert!(
            !cache.entry(b"sig-a".to_vec()).or_insert(short).is_fresh(),
            "a replay within the window is seen"
        );
        cache
            .entry(b"sig-b".to_vec())
            .or_insert(Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(120));
        cache.run_pending_tasks();
        assert!(!cache.contains_key(b"sig-a".as_slice()), "expired and gone");
        assert!(
            cache.contains_key(b"sig-b".as_slice()),
            "kept for its own window"
        );
    }
}
