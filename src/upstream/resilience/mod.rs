//! Resilience around each backend call, as `tower` layers composed per backend: the concurrency
//! limit (load shedding), retries (backoff, jitter, a budget), a breaker per route and the
//! per-attempt timeout. It must never retry a call that is neither safe nor keyed, and never lock
//! or allocate on a call's path while nothing fails (a retryable call's copy of its request and
//! its deposit in the retry budget aside, see `retry`).
//!
//! The layers, outermost first (`stack`, [`Resilience::service`]): `Limit` (a slot of
//! `max_concurrency`, else the call is shed at once; only when a limit is set), `Trace` (the
//! caller's W3C `traceparent` on the request, when OTLP export is on), error flattening
//! (`tower::util::MapErr`), `tower::retry::Retry` with the policy of `retry` and tower's
//! `TpsBudget` (only when `attempts > 1`), `Breaker` (`breaker`: the route's breaker admits and
//! judges each attempt), `Measure` (the caller's per-attempt metrics hook), `Prepare` (the
//! backend's credential and signature, before the attempt's timeout starts), `Timeout` (each
//! attempt within what is left of the call's deadline), then the sender: a
//! `tower::Service<RestRequest>` (`upstream::rest::call`). The compiled parts (policy, shared
//! state, budget) live here per backend, built when the configuration compiles (`compile`); a
//! call wraps them around its sender by reference, which moves a few words and counts no
//! reference. The request going through is a `call::BackendCall`.
//!
//! The breaker opens a route when, within a sliding window, at least `min_calls` calls were
//! made and at least `failure_ratio` of them failed (as Envoy's outlier detection and
//! resilience4j do), so one caller's slow argument opens only the route it slows, and only once
//! its failures outweigh the route's other calls. A call records its verdict in one atomic
//! bucket of the route's window (a compare-and-swap, no lock, no allocation).
//!
//! The state (calls in flight, each route's breaker, the retry budget) lives in a process-wide
//! registry keyed by business and backend URL, so a hot reload keeps it: a reload must not close
//! an open breaker or forget the calls in flight. The registry is only touched when a
//! configuration compiles.

use crate::model::{Failure, FailureKind};
use crate::translate::rest::RestResponse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;
use tower::retry::budget::TpsBudget;

pub mod breaker;
pub mod call;
pub mod compile;
pub mod retry;
pub mod stack;
mod window;
use window::{BUCKETS, Window, now_ms};

/// Default limit of calls in flight per backend.
pub const DEFAULT_MAX_CONCURRENCY: usize = 1024;
/// Default share of failed calls in the window that opens a route's breaker.
pub const DEFAULT_FAILURE_RATIO: f64 = 0.5;
/// Default fewest calls in the window before the ratio is judged.
pub const DEFAULT_MIN_CALLS: u32 = 20;
/// Default length of the sliding window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30);
/// Default time the breaker stays open.
pub const DEFAULT_OPEN_FOR: Duration = Duration::from_secs(30);
/// Default retries per retryable call within the budget's window, beyond the minimum rate.
pub const DEFAULT_BUDGET_RATIO: f64 = 0.2;
/// Default retries per second the budget always allows.
pub const DEFAULT_BUDGET_MIN_PER_S: u32 = 10;
/// Default time a retryable call counts in the budget.
pub const DEFAULT_BUDGET_WINDOW: Duration = Duration::from_secs(10);
const MAX_ATTEMPTS: u32 = 10;

/// The retry budget of one backend (`backend.retries.budget`), for tower's `TpsBudget`: retries
/// may be `ratio` of the retryable calls of the last `window`, plus `min_per_s` a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetPolicy {
    /// Retries allowed per retryable call (0 to 1000; 0.2 = one retry per five calls).
    pub ratio: f64,
    /// Retries a second allowed whatever the traffic (fewer than 2^31).
    pub min_per_s: u32,
    /// How long a call counts (1 s to 60 s).
    pub window: Duration,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy {
            ratio: DEFAULT_BUDGET_RATIO,
            min_per_s: DEFAULT_BUDGET_MIN_PER_S,
            window: DEFAULT_BUDGET_WINDOW,
        }
    }
}

impl BudgetPolicy {
    /// The budget, with each setting held within `TpsBudget`'s bounds (it panics outside them;
    /// `compile` refuses such settings with a diagnostic before they get here).
    fn build(&self) -> TpsBudget {
        let ratio = if self.ratio.is_finite() {
            self.ratio.clamp(0.0, 1000.0)
        } else {
            DEFAULT_BUDGET_RATIO
        };
        let window = self
            .window
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        TpsBudget::new(
            window,
            self.min_per_s.min(i32::MAX as u32 - 1),
            ratio as f32,
        )
    }
}

/// The compiled settings of one backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Attempts in all (1 = no retry).
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Whether routes have a breaker at all (`breaker: { failures: 0 }` turns it off).
    pub breaker: bool,
    /// Share of failed calls (0 < ratio <= 1) in the window that opens a route.
    pub failure_ratio: f64,
    /// Fewest calls in the window before the ratio is judged.
    pub min_calls: u32,
    /// Length of the sliding window.
    pub window: Duration,
    pub open_for: Duration,
    /// Calls in flight allowed (0 = no limit).
    pub max_concurrency: usize,
    /// How many retries the backend's calls may make in all.
    pub budget: BudgetPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            attempts: 1,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            breaker: true,
            failure_ratio: DEFAULT_FAILURE_RATIO,
            min_calls: DEFAULT_MIN_CALLS,
            window: DEFAULT_WINDOW,
            open_for: DEFAULT_OPEN_FOR,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            budget: BudgetPolicy::default(),
        }
    }
}

/// The breaker's state as reported by `/readyz`, the status page and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BreakerState {
    Closed,
    HalfOpen,
    Open,
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

/// One route's breaker: shared, reload-surviving.
#[derive(Debug)]
struct Route {
    business: String,
    name: String,
    state: AtomicU8,
    /// When the breaker last opened (`now_ms`).
    opened_at: AtomicU64,
    /// A half-open trial call is running.
    trial: AtomicBool,
    window: Window,
}

/// Shared, reload-surviving state of one backend.
#[derive(Debug)]
struct State {
    business: String,
    inflight: AtomicUsize,
    /// Its routes' breakers by route name (touched when a configuration compiles, and when
    /// the state is reported).
    routes: Mutex<HashMap<String, Weak<Route>>>,
    /// The retry budget and the settings it was made with (touched when a configuration
    /// compiles).
    budget: Mutex<Option<(BudgetPolicy, Arc<TpsBudget>)>>,
}

impl State {
    fn new(business: &str) -> State {
        State {
            business: business.to_string(),
            inflight: AtomicUsize::new(0),
            routes: Mutex::new(HashMap::new()),
            budget: Mutex::new(None),
        }
    }

    /// The retry budget for `wanted`: the existing one while its settings stay the same (a
    /// reload keeps what the retries spent), else a new one.
    fn budget(&self, wanted: &BudgetPolicy) -> Arc<TpsBudget> {
        let Ok(mut held) = self.budget.lock() else {
            return Arc::new(wanted.build());
        };
        if let Some((p, b)) = held.as_ref()
            && p == wanted
        {
            return b.clone();
        }
        let b = Arc::new(wanted.build());
        *held = Some((*wanted, b.clone()));
        b
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
    /// Deposited into by each retryable call, withdrawn from by each retry.
    budget: Arc<TpsBudget>,
}

/// A route's breaker (a tool's, or a resource's): made once per compile with
/// [`Resilience::route`], held by the tool or resource that calls through it.
#[derive(Debug, Clone)]
pub struct Breaker(Arc<Route>);

/// What a backend reports to `/readyz` and the status page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Snapshot {
    /// The backend as a whole, over its routes that are not closed or had calls in the window:
    /// `open` when all of them are open, `half_open` when none is closed and one is half-open,
    /// else `closed` (`routes` names any route not closed).
    pub breaker: &'static str,
    /// Failed calls in the window, over all routes.
    pub failures: u64,
    /// Seconds until a trial call is allowed on the first open route, while all are open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_s: Option<u64>,
    pub in_flight: usize,
    /// 0 = no limit.
    pub max_concurrency: usize,
    /// The routes whose breaker is not closed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteSnapshot>,
}

/// One route whose breaker is not closed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RouteSnapshot {
    pub route: String,
    pub breaker: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_s: Option<u64>,
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

/// Permission from a route's breaker for one attempt. A trial permit dropped without a verdict
/// (the call was cancelled) lets the next call be the trial.
struct Permit<'a> {
    route: &'a Route,
    trial: bool,
    judged: bool,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.trial && !self.judged {
            self.route.trial.store(false, Ordering::Release);
        }
    }
}

impl Resilience {
    /// A policy bound to the shared state of `business` at `base`.
    pub fn new(business: &str, base: &str, policy: Policy) -> Resilience {
        let state = shared_state(business, base);
        Resilience {
            budget: state.budget(&policy.budget),
            policy,
            state,
        }
    }

    /// The breaker of route `name` on this backend: the existing one (after a reload), else a
    /// new, closed one.
    pub fn route(&self, name: &str) -> Breaker {
        let fresh = || {
            Arc::new(Route {
                business: self.state.business.clone(),
                name: name.to_string(),
                state: AtomicU8::new(CLOSED),
                opened_at: AtomicU64::new(0),
                trial: AtomicBool::new(false),
                window: Window::default(),
            })
        };
        let Ok(mut map) = self.state.routes.lock() else {
            return Breaker(fresh());
        };
        if let Some(r) = map.get(name).and_then(Weak::upgrade) {
            return Breaker(r);
        }
        map.retain(|_, w| w.strong_count() > 0);
        let r = fresh();
        map.insert(name.to_string(), Arc::downgrade(&r));
        Breaker(r)
    }

    /// The live routes' breakers.
    fn routes(&self) -> Vec<Arc<Route>> {
        self.state
            .routes
            .lock()
            .map(|m| m.values().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }

    /// The state of route `b`'s breaker now (an open breaker whose time is up reads
    /// `half_open`).
    pub fn breaker_of(&self, b: &Breaker) -> BreakerState {
        self.route_state(&b.0)
    }

    fn route_state(&self, r: &Route) -> BreakerState {
        match r.state.load(Ordering::Acquire) {
            OPEN if self.open_remaining(r).is_none() => BreakerState::HalfOpen,
            OPEN => BreakerState::Open,
            HALF_OPEN => BreakerState::HalfOpen,
            _ => BreakerState::Closed,
        }
    }

    /// Every live route's name and breaker state (for the metrics).
    pub fn route_states(&self) -> Vec<(String, BreakerState)> {
        self.routes()
            .iter()
            .map(|r| (r.name.clone(), self.route_state(r)))
            .collect()
    }

    /// The backend as a whole (see [`Snapshot::breaker`]).
    pub fn breaker(&self) -> BreakerState {
        let (width, now) = (self.bucket_ms(), now_ms());
        self.routes()
            .iter()
            .filter_map(|r| self.active_state(r, width, now))
            .min()
            .unwrap_or(BreakerState::Closed)
    }

    /// A route's state when it counts for the backend as a whole: not closed, or closed with
    /// calls in the window (a route nobody called says nothing about the backend).
    fn active_state(&self, r: &Route, width: u64, now: u64) -> Option<BreakerState> {
        let state = self.route_state(r);
        (state != BreakerState::Closed || r.window.totals(width, now).0 > 0).then_some(state)
    }

    /// State for `/readyz` and the status page.
    pub fn snapshot(&self) -> Snapshot {
        let routes = self.routes();
        let width = self.bucket_ms();
        let now = now_ms();
        let mut failures = 0;
        let mut listed = Vec::new();
        let mut all: Option<BreakerState> = None;
        let mut first_trial: Option<u64> = None;
        for r in &routes {
            failures += r.window.totals(width, now).1;
            if let Some(active) = self.active_state(r, width, now) {
                all = Some(all.map_or(active, |a| a.min(active)));
            }
            let state = self.route_state(r);
            if state == BreakerState::Closed {
                continue;
            }
            let retry_in_s = (state == BreakerState::Open)
                .then(|| self.open_remaining(r).map(secs_up))
                .flatten();
            if let Some(s) = retry_in_s {
                first_trial = Some(first_trial.map_or(s, |f| f.min(s)));
            }
            listed.push(RouteSnapshot {
                route: r.name.clone(),
                breaker: state.as_str(),
                retry_in_s,
            });
        }
        let all = all.unwrap_or(BreakerState::Closed);
        listed.sort_by(|a, b| a.route.cmp(&b.route));
        Snapshot {
            breaker: all.as_str(),
            failures,
            retry_in_s: (all == BreakerState::Open).then_some(first_trial).flatten(),
            in_flight: self.state.inflight.load(Ordering::Relaxed),
            max_concurrency: self.policy.max_concurrency,
            routes: listed,
        }
    }

    /// Width of one window bucket in milliseconds.
    fn bucket_ms(&self) -> u64 {
        (self.policy.window.as_millis() as u64 / BUCKETS as u64).max(1)
    }

    /// Time left before an open breaker allows a trial; `None` when it is up.
    fn open_remaining(&self, r: &Route) -> Option<Duration> {
        let opened = r.opened_at.load(Ordering::Acquire);
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

    fn admit<'r>(&self, r: &'r Route) -> Result<Permit<'r>, Failure> {
        let permit = |trial| Permit {
            route: r,
            trial,
            judged: false,
        };
        if !self.policy.breaker {
            return Ok(permit(false));
        }
        match r.state.load(Ordering::Acquire) {
            CLOSED => return Ok(permit(false)),
            OPEN => {
                if let Some(left) = self.open_remaining(r) {
                    return Err(self.open_failure(r, left));
                }
                if r.state
                    .compare_exchange(OPEN, HALF_OPEN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.changed(r, BreakerState::HalfOpen);
                }
            }
            _ => {}
        }
        // Half-open: one trial call at a time; the others are refused until it is judged.
        if r.state.load(Ordering::Acquire) == CLOSED {
            return Ok(permit(false));
        }
        if r.trial
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            Ok(permit(true))
        } else {
            Err(self.open_failure(r, Duration::from_secs(1)))
        }
    }

    fn open_failure(&self, r: &Route, left: Duration) -> Failure {
        let p = &self.policy;
        Failure {
            retry_after: Some(secs_up(left)),
            ..Failure::new(
                FailureKind::Unavailable,
                format!(
                    "the failure ratio of `{}` reached {} % over at least {} calls within {} ms; portico is not calling it for now (circuit breaker open)",
                    r.name,
                    (p.failure_ratio * 100.0).round(),
                    p.min_calls,
                    p.window.as_millis()
                ),
            )
        }
    }

    fn changed(&self, r: &Route, to: BreakerState) {
        tracing::warn!(business = %r.business, route = %r.name, breaker = to.as_str(), "circuit breaker changed state");
        crate::ops::metrics::breaker_changed(&r.business, &r.name, to);
    }

    /// Records an attempt's verdict.
    fn judge(&self, mut permit: Permit<'_>, ok: bool) {
        permit.judged = true;
        if !self.policy.breaker {
            return;
        }
        let r = permit.route;
        let width = self.bucket_ms();
        let now = now_ms();
        if ok {
            r.window.record(width, now, false);
            if permit.trial {
                r.window.clear();
                r.state.store(CLOSED, Ordering::Release);
                r.trial.store(false, Ordering::Release);
                self.changed(r, BreakerState::Closed);
            }
            return;
        }
        if permit.trial {
            r.opened_at.store(now, Ordering::Release);
            r.state.store(OPEN, Ordering::Release);
            r.trial.store(false, Ordering::Release);
            self.changed(r, BreakerState::Open);
            return;
        }
        r.window.record(width, now, true);
        let (calls, failures) = r.window.totals(width, now);
        let tripped = calls >= u64::from(self.policy.min_calls)
            && failures as f64 >= self.policy.failure_ratio * calls as f64;
        if tripped && r.state.load(Ordering::Acquire) == CLOSED {
            r.opened_at.store(now, Ordering::Release);
            if r.state
                .compare_exchange(CLOSED, OPEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                r.window.clear();
                self.changed(r, BreakerState::Open);
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Failed,
}

/// What the breaker counts as a failure: no connection, no answer in time, or a gateway-class
/// status (502, 503, 504). Any other answer proves the backend is there.
fn judge(out: &Result<RestResponse, Failure>) -> Verdict {
    judge_ref(out.as_ref())
}

fn judge_ref(out: Result<&RestResponse, &Failure>) -> Verdict {
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
fn worth_retrying(out: Result<&RestResponse, &Failure>) -> bool {
    match out {
        Ok(r) => matches!(r.status, 502..=504),
        Err(f) => f.kind == FailureKind::Unavailable,
    }
}

#[cfg(test)]
fn retry_worthy(out: &Result<RestResponse, Failure>) -> bool {
    worth_retrying(out.as_ref())
}

/// A `Retry-After` in seconds (the HTTP-date form is not used for retries).
pub fn retry_after(resp: &RestResponse) -> Option<Duration> {
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

#[cfg(test)]
mod tests;
