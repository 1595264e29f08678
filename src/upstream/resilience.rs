//! Per-backend resilience around each backend call: the concurrency limit (load shedding), the
//! circuit breaker, and retries with backoff and jitter. It must never retry a call that is
//! neither safe nor keyed, and never lock or allocate on a call's path while nothing fails.
//!
//! The state (calls in flight, breaker) lives in a process-wide registry keyed by business and
//! backend URL, so a hot reload keeps it: a reload must not close an open breaker or forget the
//! calls in flight. The registry is only touched when a configuration compiles.

use crate::config::diag::{Diagnostic, locate_yaml};
use crate::config::mapping::BackendSpec;
use crate::model::{Failure, FailureKind};
use crate::translate::rest::RestRequest;
use crate::translate::rest::RestResponse;
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};

/// Default limit of calls in flight per backend.
pub const DEFAULT_MAX_CONCURRENCY: usize = 1024;
/// Default consecutive failures that open the breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// Default time the breaker stays open.
pub const DEFAULT_OPEN_FOR: Duration = Duration::from_secs(30);
const MAX_ATTEMPTS: u32 = 10;

/// The compiled settings of one backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Attempts in all (1 = no retry).
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Consecutive failures that open the breaker (0 = no breaker).
    pub breaker_failures: u32,
    pub open_for: Duration,
    /// Calls in flight allowed (0 = no limit).
    pub max_concurrency: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            attempts: 1,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            open_for: DEFAULT_OPEN_FOR,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }
}

/// The breaker's state as reported by `/readyz`, the status page and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }

    /// The value of the `portico_breaker_state` gauge.
    pub fn gauge(self) -> f64 {
        match self {
            BreakerState::Closed => 0.0,
            BreakerState::Open => 1.0,
            BreakerState::HalfOpen => 2.0,
        }
    }
}

impl crate::ops::metrics::BreakerGauge for BreakerState {
    fn label(self) -> &'static str {
        self.as_str()
    }
    fn value(self) -> f64 {
        self.gauge()
    }
}

const CLOSED: u8 = 0;
const OPEN: u8 = 1;
const HALF_OPEN: u8 = 2;

/// Milliseconds since the first use of the clock, so instants fit in an atomic.
fn now_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    EPOCH.elapsed().as_millis() as u64
}

/// Shared, reload-surviving state of one backend.
#[derive(Debug)]
struct State {
    business: String,
    inflight: AtomicUsize,
    state: AtomicU8,
    /// Consecutive failures while closed.
    failures: AtomicU32,
    /// When the breaker last opened (`now_ms`).
    opened_at: AtomicU64,
    /// A half-open trial call is running.
    trial: AtomicBool,
}

impl State {
    fn new(business: &str) -> State {
        State {
            business: business.to_string(),
            inflight: AtomicUsize::new(0),
            state: AtomicU8::new(CLOSED),
            failures: AtomicU32::new(0),
            opened_at: AtomicU64::new(0),
            trial: AtomicBool::new(false),
        }
    }
}

static REGISTRY: LazyLock<Mutex<HashMap<String, Weak<State>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The state for `business` at `base`: the existing one (after a reload), else a new one.
fn shared_state(business: &str, base: &str) -> Arc<State> {
    let key = format!("{business}\u{0}{base}");
    let Ok(mut map) = REGISTRY.lock() else {
        return Arc::new(State::new(business));
    };
    if let Some(s) = map.get(&key).and_then(Weak::upgrade) {
        return s;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let s = Arc::new(State::new(business));
    map.insert(key, Arc::downgrade(&s));
    s
}

/// One backend's policy and its shared state.
#[derive(Debug, Clone)]
pub struct Resilience {
    pub policy: Policy,
    state: Arc<State>,
}

/// What a backend reports to `/readyz` and the status page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Snapshot {
    pub breaker: &'static str,
    /// Consecutive failures counted while closed.
    pub failures: u32,
    /// Seconds until a trial call is allowed, while open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_s: Option<u64>,
    pub in_flight: usize,
    /// 0 = no limit.
    pub max_concurrency: usize,
}

/// The right to be one of the calls in flight; dropping it frees the slot.
struct Slot<'a>(Option<&'a AtomicUsize>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Permission from the breaker for one attempt. A trial permit dropped without a verdict (the
/// call was cancelled) lets the next call be the trial.
struct Permit<'a> {
    state: &'a State,
    trial: bool,
    judged: bool,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.trial && !self.judged {
            self.state.trial.store(false, Ordering::Release);
        }
    }
}

impl Resilience {
    /// A policy bound to the shared state of `business` at `base`.
    pub fn new(business: &str, base: &str, policy: Policy) -> Resilience {
        Resilience {
            policy,
            state: shared_state(business, base),
        }
    }

    /// The breaker state now (an open breaker whose time is up reads `half_open`).
    pub fn breaker(&self) -> BreakerState {
        let s = &self.state;
        match s.state.load(Ordering::Acquire) {
            OPEN if self.open_remaining().is_none() => BreakerState::HalfOpen,
            OPEN => BreakerState::Open,
            HALF_OPEN => BreakerState::HalfOpen,
            _ => BreakerState::Closed,
        }
    }

    /// State for `/readyz` and the status page.
    pub fn snapshot(&self) -> Snapshot {
        let breaker = self.breaker();
        Snapshot {
            breaker: breaker.as_str(),
            failures: self.state.failures.load(Ordering::Relaxed),
            retry_in_s: (breaker == BreakerState::Open)
                .then(|| self.open_remaining().map(secs_up))
                .flatten(),
            in_flight: self.state.inflight.load(Ordering::Relaxed),
            max_concurrency: self.policy.max_concurrency,
        }
    }

    /// Time left before an open breaker allows a trial; `None` when it is up.
    fn open_remaining(&self) -> Option<Duration> {
        let opened = self.state.opened_at.load(Ordering::Acquire);
        let until = opened.saturating_add(self.policy.open_for.as_millis() as u64);
        let now = now_ms();
        (now < until).then(|| Duration::from_millis(until - now))
    }

    fn take_slot(&self) -> Result<Slot<'_>, Failure> {
        let limit = self.policy.max_concurrency;
        if limit == 0 {
            return Ok(Slot(None));
        }
        let n = &self.state.inflight;
        if n.fetch_add(1, Ordering::AcqRel) >= limit {
            n.fetch_sub(1, Ordering::AcqRel);
            crate::ops::metrics::shed(&self.state.business);
            return Err(Failure {
                retry_after: Some(1),
                ..Failure::new(
                    FailureKind::Unavailable,
                    format!(
                        "portico is already running {limit} calls to this backend (its limit); the call was shed, try again shortly"
                    ),
                )
            });
        }
        Ok(Slot(Some(n)))
    }

    fn admit(&self) -> Result<Permit<'_>, Failure> {
        let s = &*self.state;
        let permit = |trial| Permit {
            state: s,
            trial,
            judged: false,
        };
        if self.policy.breaker_failures == 0 {
            return Ok(permit(false));
        }
        match s.state.load(Ordering::Acquire) {
            CLOSED => return Ok(permit(false)),
            OPEN => {
                if let Some(left) = self.open_remaining() {
                    return Err(self.open_failure(left));
                }
                if s.state
                    .compare_exchange(OPEN, HALF_OPEN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.changed(BreakerState::HalfOpen);
                }
            }
            _ => {}
        }
        // Half-open: one trial call at a time; the others are refused until it is judged.
        if s.state.load(Ordering::Acquire) == CLOSED {
            return Ok(permit(false));
        }
        if s.trial
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            Ok(permit(true))
        } else {
            Err(self.open_failure(Duration::from_secs(1)))
        }
    }

    fn open_failure(&self, left: Duration) -> Failure {
        Failure {
            retry_after: Some(secs_up(left)),
            ..Failure::new(
                FailureKind::Unavailable,
                format!(
                    "the backend failed {} times in a row; portico is not calling it for now (circuit breaker open)",
                    self.policy.breaker_failures
                ),
            )
        }
    }

    fn changed(&self, to: BreakerState) {
        tracing::warn!(business = %self.state.business, breaker = to.as_str(), "circuit breaker changed state");
        crate::ops::metrics::breaker_changed(&self.state.business, to);
    }

    /// Records an attempt's verdict.
    fn judge(&self, mut permit: Permit<'_>, ok: bool) {
        permit.judged = true;
        if self.policy.breaker_failures == 0 {
            return;
        }
        let s = &*self.state;
        if ok {
            if s.failures.load(Ordering::Relaxed) != 0 {
                s.failures.store(0, Ordering::Relaxed);
            }
            if permit.trial {
                s.state.store(CLOSED, Ordering::Release);
                s.trial.store(false, Ordering::Release);
                self.changed(BreakerState::Closed);
            }
            return;
        }
        if permit.trial {
            s.opened_at.store(now_ms(), Ordering::Release);
            s.state.store(OPEN, Ordering::Release);
            s.trial.store(false, Ordering::Release);
            self.changed(BreakerState::Open);
            return;
        }
        let n = s.failures.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        if n >= self.policy.breaker_failures && s.state.load(Ordering::Acquire) == CLOSED {
            s.opened_at.store(now_ms(), Ordering::Release);
            if s.state
                .compare_exchange(CLOSED, OPEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                s.failures.store(0, Ordering::Relaxed);
                self.changed(BreakerState::Open);
            }
        }
    }

    /// The delay before retry number `retry` (1-based): exponential, capped, with equal jitter
    /// (half fixed, half random) so that many callers do not retry in step.
    fn delay(&self, retry: u32) -> Duration {
        let exp = self
            .policy
            .backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(16))
            .min(self.policy.max_backoff);
        let half = exp / 2;
        let random = uuid::Uuid::new_v4().as_u64_pair().0;
        let spread = half.as_nanos().max(1) as u64;
        half + Duration::from_nanos(random % spread)
    }

    /// Runs one backend call through the limit, the breaker and the retry policy. `attempt`
    /// sends one request within the time it is given. `keyed` says the call carries an
    /// idempotency key, which makes a non-safe method retryable.
    pub async fn call<F, Fut>(
        &self,
        req: RestRequest,
        timeout: Duration,
        keyed: bool,
        mut attempt: F,
    ) -> Result<RestResponse, Failure>
    where
        F: FnMut(RestRequest, Duration) -> Fut,
        Fut: Future<Output = Result<RestResponse, Failure>>,
    {
        let _slot = self.take_slot()?;
        let deadline = Instant::now() + timeout;
        let retryable = self.policy.attempts > 1 && (req.method.is_safe() || keyed);
        let mut req = req;
        crate::ops::otel::inject(&mut req.headers);
        let mut n = 1;
        loop {
            let permit = self.admit()?;
            let spare = (retryable && n < self.policy.attempts).then(|| req.clone());
            let left = if n == 1 {
                timeout
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            let mut out = attempt(req, left).await;
            if n > 1
                && let Err(f) = &mut out
                && f.kind == FailureKind::Timeout
            {
                f.message = format!(
                    "the backend did not answer within {} ms ({n} attempts)",
                    timeout.as_millis()
                );
            }
            let verdict = judge(&out);
            self.judge(permit, verdict != Verdict::Failed);
            let (Some(next), Verdict::Failed) = (spare, verdict) else {
                return out;
            };
            if !retry_worthy(&out) {
                return out;
            }
            let mut wait = self.delay(n);
            if let Ok(resp) = &out
                && let Some(asked) = retry_after(resp)
            {
                wait = wait.max(asked);
            }
            // Only when the wait leaves time for another attempt.
            if Instant::now() + wait + Duration::from_millis(1) >= deadline {
                return out;
            }
            crate::ops::metrics::retried(&self.state.business);
            tokio::time::sleep(wait).await;
            req = next;
            n += 1;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Failed,
}

/// What the breaker counts as a failure: no connection, no answer in time, or a gateway-class
/// status (502, 503, 504). Any other answer proves the backend is there.
fn judge(out: &Result<RestResponse, Failure>) -> Verdict {
    match out {
        Ok(r) if matches!(r.status, 502..=504) => Verdict::Failed,
        Ok(_) => Verdict::Ok,
        Err(f) if matches!(f.kind, FailureKind::Unavailable | FailureKind::Timeout) => {
            Verdict::Failed
        }
        Err(_) => Verdict::Ok,
    }
}

/// Failures worth another attempt: no connection, or 502/503/504 (a timeout used the budget).
fn retry_worthy(out: &Result<RestResponse, Failure>) -> bool {
    match out {
        Ok(r) => matches!(r.status, 502..=504),
        Err(f) => f.kind == FailureKind::Unavailable,
    }
}

/// A `Retry-After` in seconds (the HTTP-date form is not used for retries).
fn retry_after(resp: &RestResponse) -> Option<Duration> {
    resp.headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

fn secs_up(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

/// Compiles `backend.retries`, `backend.breaker` and `backend.max_concurrency`.
pub fn compile(
    file: &Path,
    text: &str,
    business: &str,
    base: &str,
    spec: &BackendSpec,
    diags: &mut Vec<Diagnostic>,
) -> Option<Resilience> {
    let mut policy = Policy::default();
    let mut ok = true;
    let mut duration = |path: &[&str], v: &Option<String>, into: &mut Duration| {
        if let Some(s) = v {
            match crate::util::duration::parse_duration(s) {
                Some(d) => *into = d,
                None => {
                    ok = false;
                    diags.push(
                        Diagnostic::error(file, format!("`{s}` is not a duration"))
                            .line(locate_yaml(text, path))
                            .at(path.join("."))
                            .hint("write e.g. `5s`, `250ms` or `1m`"),
                    );
                }
            }
        }
    };
    if let Some(r) = &spec.retries {
        duration(
            &["backend", "retries", "backoff"],
            &r.backoff,
            &mut policy.backoff,
        );
        duration(
            &["backend", "retries", "max_backoff"],
            &r.max_backoff,
            &mut policy.max_backoff,
        );
    }
    if let Some(b) = &spec.breaker {
        duration(
            &["backend", "breaker", "open_for"],
            &b.open_for,
            &mut policy.open_for,
        );
    }
    if let Some(r) = &spec.retries {
        if r.attempts == 0 || r.attempts > MAX_ATTEMPTS {
            ok = false;
            diags.push(
                Diagnostic::error(
                    file,
                    format!(
                        "retries.attempts is {}; it counts the first attempt too and must be 1 to {MAX_ATTEMPTS}",
                        r.attempts
                    ),
                )
                .line(locate_yaml(text, &["backend", "retries", "attempts"]))
                .at("backend.retries.attempts")
                .hint("`attempts: 3` sends a call at most three times"),
            );
        }
        policy.attempts = r.attempts;
        if policy.max_backoff < policy.backoff {
            policy.max_backoff = policy.backoff;
        }
    }
    if let Some(f) = spec.breaker.as_ref().and_then(|b| b.failures) {
        policy.breaker_failures = f;
    }
    if let Some(m) = spec.max_concurrency {
        policy.max_concurrency = m as usize;
    }
    ok.then(|| Resilience::new(business, base, policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(name: &str) -> String {
        format!("{name}-{}", uuid::Uuid::new_v4().simple())
    }

    fn answer(status: u16) -> Result<RestResponse, Failure> {
        Ok(RestResponse {
            status,
            headers: http::HeaderMap::new(),
            body: bytes::Bytes::new(),
        })
    }

    #[test]
    fn opens_after_consecutive_failures_and_closes_after_a_good_trial() {
        let r = Resilience::new(
            &unique("b"),
            "http://x",
            Policy {
                breaker_failures: 3,
                open_for: Duration::from_millis(1),
                ..Policy::default()
            },
        );
        for _ in 0..2 {
            let p = r.admit().expect("closed");
            r.judge(p, false);
        }
        assert_eq!(r.breaker(), BreakerState::Closed);
        let p = r.admit().expect("closed");
        r.judge(p, true);
        assert_eq!(r.snapshot().failures, 0, "a success resets the count");
        for _ in 0..3 {
            let p = r.admit().expect("closed");
            r.judge(p, false);
        }
        assert_eq!(r.state.state.load(Ordering::Acquire), OPEN);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(r.breaker(), BreakerState::HalfOpen);
        let trial = r.admit().expect("the trial call");
        assert!(trial.trial);
        assert!(r.admit().is_err(), "one trial at a time");
        drop(trial);
        let trial = r.admit().expect("a cancelled trial frees the trial slot");
        r.judge(trial, true);
        assert_eq!(r.breaker(), BreakerState::Closed);
    }

    #[test]
    fn a_failed_trial_opens_it_again() {
        let name = unique("b");
        let r = Resilience::new(
            &name,
            "http://x",
            Policy {
                breaker_failures: 1,
                open_for: Duration::from_secs(60),
                ..Policy::default()
            },
        );
        let p = r.admit().expect("closed");
        r.judge(p, false);
        let f = r.admit().err().expect("open");
        assert_eq!(f.kind, FailureKind::Unavailable);
        assert!(
            f.retry_after.is_some_and(|s| (59..=60).contains(&s)),
            "{f:?}"
        );
        // The same backend reloaded with a shorter open time: its time is up.
        let r = Resilience::new(
            &name,
            "http://x",
            Policy {
                breaker_failures: 1,
                open_for: Duration::from_millis(1),
                ..Policy::default()
            },
        );
        std::thread::sleep(Duration::from_millis(5));
        let trial = r.admit().expect("trial after the open time");
        r.judge(trial, false);
        assert_eq!(r.state.state.load(Ordering::Acquire), OPEN, "open again");
    }

    #[test]
    fn state_survives_a_recompile_of_the_same_backend() {
        let name = unique("b");
        let policy = Policy {
            breaker_failures: 1,
            ..Policy::default()
        };
        let a = Resilience::new(&name, "http://x", policy.clone());
        let p = a.admit().expect("closed");
        a.judge(p, false);
        let b = Resilience::new(&name, "http://x", policy.clone());
        assert_eq!(b.breaker(), BreakerState::Open);
        let other = Resilience::new(&name, "http://y", policy);
        assert_eq!(other.breaker(), BreakerState::Closed, "another backend");
    }

    #[test]
    fn the_limit_sheds_and_a_dropped_slot_is_freed() {
        let r = Resilience::new(
            &unique("b"),
            "http://x",
            Policy {
                max_concurrency: 2,
                ..Policy::default()
            },
        );
        let a = r.take_slot().expect("1");
        let _b = r.take_slot().expect("2");
        let f = r.take_slot().err().expect("shed");
        assert_eq!(f.kind, FailureKind::Unavailable);
        assert_eq!(f.retry_after, Some(1));
        drop(a);
        assert!(r.take_slot().is_ok());
    }

    #[test]
    fn verdicts_and_delays() {
        assert_eq!(judge(&answer(503)), Verdict::Failed);
        assert_eq!(judge(&answer(500)), Verdict::Ok);
        assert_eq!(judge(&answer(404)), Verdict::Ok);
        assert!(retry_worthy(&answer(502)));
        assert!(!retry_worthy(&answer(500)));
        let timeout = Err(Failure::new(FailureKind::Timeout, "t"));
        assert_eq!(judge(&timeout), Verdict::Failed);
        assert!(!retry_worthy(&timeout));
        let r = Resilience::new(&unique("b"), "http://x", Policy::default());
        for retry in 1..8 {
            let d = r.delay(retry);
            let cap = Duration::from_millis(100 * (1 << (retry - 1))).min(Duration::from_secs(2));
            assert!(d >= cap / 2 && d <= cap, "retry {retry}: {d:?} vs {cap:?}");
        }
    }
}
