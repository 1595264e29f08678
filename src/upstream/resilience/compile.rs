//! Compiles a mapping's `backend.retries`, `backend.breaker` and `backend.max_concurrency` into a
//! backend's resilience [`Policy`]. It must never touch the shared state beyond binding to it.

use super::window::BUCKETS;
use super::{MAX_ATTEMPTS, Policy, Resilience};
use crate::config::diag::{Diagnostic, locate_yaml};
use crate::config::mapping::BackendSpec;
use std::path::Path;
use std::time::Duration;

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
        if let Some(b) = &r.budget {
            duration(
                &["backend", "retries", "budget", "window"],
                &b.window,
                &mut policy.budget.window,
            );
        }
    }
    if let Some(b) = &spec.breaker {
        duration(
            &["backend", "breaker", "open_for"],
            &b.open_for,
            &mut policy.open_for,
        );
        duration(
            &["backend", "breaker", "window"],
            &b.window,
            &mut policy.window,
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
    if let Some(b) = spec.retries.as_ref().and_then(|r| r.budget.as_ref()) {
        let budget = &mut policy.budget;
        budget.ratio = b.ratio.unwrap_or(budget.ratio);
        budget.min_per_s = b.min_per_s.unwrap_or(budget.min_per_s);
        let problem = if !(0.0..=1000.0).contains(&budget.ratio) {
            Some((
                "ratio",
                format!(
                    "retries.budget.ratio is {}; it is the retries allowed per retryable call, 0 to 1000",
                    budget.ratio
                ),
                "`ratio: 0.2` allows one retry per five calls",
            ))
        } else if budget.min_per_s >= i32::MAX as u32 {
            Some((
                "min_per_s",
                format!(
                    "retries.budget.min_per_s is {}; it must be below 2147483647",
                    budget.min_per_s
                ),
                "`min_per_s: 10` allows ten retries a second whatever the traffic",
            ))
        } else if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&budget.window) {
            Some((
                "window",
                format!(
                    "retries.budget.window is {:?}; it must be 1s to 60s",
                    budget.window
                ),
                "write e.g. `10s`",
            ))
        } else {
            None
        };
        if let Some((field, message, hint)) = problem {
            ok = false;
            diags.push(
                Diagnostic::error(file, message)
                    .line(locate_yaml(text, &["backend", "retries", "budget", field]))
                    .at(format!("backend.retries.budget.{field}"))
                    .hint(hint),
            );
        }
    }
    if let Some(b) = &spec.breaker {
        // `failures: N` alone: N failed calls and no success within the window.
        if let Some(f) = b.failures {
            policy.breaker = f > 0;
            policy.min_calls = f;
            policy.failure_ratio = 1.0;
        }
        if let Some(n) = b.min_calls {
            policy.min_calls = n;
        }
        if let Some(r) = b.failure_ratio {
            policy.failure_ratio = r;
        }
        let problem = if !(policy.failure_ratio > 0.0 && policy.failure_ratio <= 1.0) {
            Some((
                "failure_ratio",
                format!(
                    "breaker.failure_ratio is {}; it is the share of failed calls that opens the breaker, above 0 and at most 1",
                    policy.failure_ratio
                ),
                "`failure_ratio: 0.5` opens it when half of the window's calls failed",
            ))
        } else if policy.breaker && policy.min_calls == 0 {
            Some((
                "min_calls",
                "breaker.min_calls is 0; the ratio of no calls means nothing".to_string(),
                "`min_calls: 20` judges the ratio once the window holds 20 calls",
            ))
        } else if policy.window < Duration::from_millis(BUCKETS as u64) {
            Some((
                "window",
                format!(
                    "breaker.window is {:?}; it must be at least 10ms",
                    policy.window
                ),
                "write e.g. `30s`",
            ))
        } else {
            None
        };
        if let Some((field, message, hint)) = problem {
            ok = false;
            diags.push(
                Diagnostic::error(file, message)
                    .line(locate_yaml(text, &["backend", "breaker", field]))
                    .at(format!("backend.breaker.{field}"))
                    .hint(hint),
            );
        }
    }
    if let Some(m) = spec.max_concurrency {
        policy.max_concurrency = m as usize;
    }
    ok.then(|| Resilience::new(business, base, policy))
}
