//! Unit tests of backend-call resilience: the per-route circuit breaker and its window, the
//! concurrency limit, and retry verdicts and delays. Test-only code.

use super::window::{pack, unpack};
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

/// One call on route `b` with verdict `ok`.
fn one(r: &Resilience, b: &Breaker, ok: bool) {
    let p = r.admit(&b.0).expect("admitted");
    r.judge(p, ok);
}

fn ratio(min_calls: u32, failure_ratio: f64, open_for: Duration) -> Policy {
    Policy {
        min_calls,
        failure_ratio,
        open_for,
        ..Policy::default()
    }
}

#[test]
fn opens_on_the_ratio_over_the_minimum_volume_and_closes_after_a_good_trial() {
    let r = Resilience::new(
        &unique("b"),
        "http://x",
        ratio(10, 0.5, Duration::from_millis(1)),
    );
    let a = r.route("a");
    // Four failures of five calls: over the ratio, under the volume.
    one(&r, &a, true);
    for _ in 0..4 {
        one(&r, &a, false);
    }
    assert_eq!(r.breaker_of(&a), BreakerState::Closed, "5 calls < 10");
    // Five successes: 10 calls, 4 failed (40 %).
    for _ in 0..5 {
        one(&r, &a, true);
    }
    assert_eq!(r.breaker_of(&a), BreakerState::Closed, "under the ratio");
    one(&r, &a, false);
    assert_eq!(
        r.breaker_of(&a),
        BreakerState::Closed,
        "11 calls, 5 failed (45 %)"
    );
    one(&r, &a, false);
    assert_eq!(r.breaker_of(&a), BreakerState::Open, "12 calls, 6 failed");
    assert_eq!(a.0.state.load(Ordering::Acquire), OPEN);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(r.breaker_of(&a), BreakerState::HalfOpen);
    let trial = r.admit(&a.0).expect("the trial call");
    assert!(trial.trial);
    assert!(r.admit(&a.0).is_err(), "one trial at a time");
    drop(trial);
    let trial = r
        .admit(&a.0)
        .expect("a cancelled trial frees the trial slot");
    r.judge(trial, true);
    assert_eq!(r.breaker_of(&a), BreakerState::Closed);
    assert_eq!(
        a.0.window.totals(r.bucket_ms(), now_ms()),
        (0, 0),
        "a fresh window"
    );
}

#[test]
fn one_route_opening_leaves_the_others_closed() {
    let r = Resilience::new(&unique("b"), "http://x", ratio(3, 0.5, DEFAULT_OPEN_FOR));
    let (slow, other) = (r.route("slow"), r.route("other"));
    for _ in 0..3 {
        one(&r, &slow, false);
    }
    assert_eq!(r.breaker_of(&slow), BreakerState::Open);
    let f = r.admit(&slow.0).err().expect("open");
    assert_eq!(f.kind, FailureKind::Unavailable);
    assert!(f.message.contains("`slow`"), "{}", f.message);
    assert!(r.admit(&other.0).is_ok(), "another route is not refused");
    assert_eq!(
        r.breaker(),
        BreakerState::Open,
        "the only route with calls is open"
    );
    one(&r, &other, true);
    assert_eq!(
        r.breaker(),
        BreakerState::Closed,
        "the backend: not all open"
    );
    let snap = r.snapshot();
    assert_eq!(snap.breaker, "closed");
    assert_eq!(snap.routes.len(), 1);
    assert_eq!(
        (snap.routes[0].route.as_str(), snap.routes[0].breaker),
        ("slow", "open")
    );
    // 3 calls, 2 failed: 67 % of the minimum volume.
    for _ in 0..2 {
        one(&r, &other, false);
    }
    assert_eq!(r.breaker(), BreakerState::Open, "every route open");
    assert!(r.snapshot().retry_in_s.is_some());
}

#[test]
fn the_window_forgets_old_calls() {
    let r = Resilience::new(
        &unique("b"),
        "http://x",
        Policy {
            window: Duration::from_millis(100),
            ..ratio(4, 1.0, DEFAULT_OPEN_FOR)
        },
    );
    let a = r.route("a");
    for _ in 0..3 {
        one(&r, &a, false);
    }
    std::thread::sleep(Duration::from_millis(130));
    one(&r, &a, false);
    assert_eq!(
        r.breaker_of(&a),
        BreakerState::Closed,
        "3 failures slid out"
    );
    for _ in 0..3 {
        one(&r, &a, false);
    }
    assert_eq!(r.breaker_of(&a), BreakerState::Open);
}

#[test]
fn a_failed_trial_opens_it_again() {
    let name = unique("b");
    let r = Resilience::new(&name, "http://x", ratio(1, 1.0, Duration::from_secs(60)));
    let a = r.route("a");
    one(&r, &a, false);
    let f = r.admit(&a.0).err().expect("open");
    assert_eq!(f.kind, FailureKind::Unavailable);
    assert!(
        f.retry_after.is_some_and(|s| (59..=60).contains(&s)),
        "{f:?}"
    );
    // The same backend reloaded with a shorter open time: its time is up.
    let r = Resilience::new(&name, "http://x", ratio(1, 1.0, Duration::from_millis(1)));
    let a = r.route("a");
    std::thread::sleep(Duration::from_millis(5));
    let trial = r.admit(&a.0).expect("trial after the open time");
    r.judge(trial, false);
    assert_eq!(a.0.state.load(Ordering::Acquire), OPEN, "open again");
}

#[test]
fn state_survives_a_recompile_of_the_same_backend() {
    let name = unique("b");
    let policy = ratio(1, 1.0, DEFAULT_OPEN_FOR);
    let a = Resilience::new(&name, "http://x", policy.clone());
    let route = a.route("t");
    one(&a, &route, false);
    let b = Resilience::new(&name, "http://x", policy.clone());
    assert_eq!(b.breaker_of(&b.route("t")), BreakerState::Open);
    let other = Resilience::new(&name, "http://y", policy);
    assert_eq!(
        other.breaker_of(&other.route("t")),
        BreakerState::Closed,
        "another backend"
    );
}

#[test]
fn window_words_pack_and_saturate() {
    assert_eq!(unpack(pack(7, 3, 2)), (7, 3, 2));
    assert_eq!(
        unpack(pack(u32::MAX, 1 << 20, 1 << 20)),
        (u32::MAX, 0xFFFF, 0xFFFF)
    );
    let w = Window::default();
    for i in 0..70_000 {
        w.record(1000, 0, i % 2 == 0);
    }
    assert_eq!(w.totals(1000, 0), (0xFFFF, 35_000));
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
