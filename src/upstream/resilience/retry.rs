//! The retry policy of `tower::retry::Retry` for backend calls: which attempts are sent again,
//! after what delay, within the backend's retry budget. It must never retry a call that is
//! neither safe nor keyed, a call its route's breaker refused, or past the call's deadline.
//!
//! Cost: a call that may be retried (`attempts > 1`, a safe method or an idempotency key) keeps
//! a copy of its request for the next attempt (an allocation, as before tower) and deposits
//! into tower's `TpsBudget`, which takes that budget's short mutex; a retry withdraws (the same
//! mutex). A call that may not be retried does neither.

use super::call::{AttemptError, BackendCall};
use super::{Resilience, Verdict, judge_ref, retry_after, worth_retrying};
use crate::translate::rest::RestResponse;
use std::time::{Duration, Instant};
use tower::retry::budget::Budget as _;

/// The policy of one backend, borrowed for one call.
#[derive(Clone, Copy)]
pub struct RetryPolicy<'a>(pub(super) &'a Resilience);

impl<'c> tower::retry::Policy<BackendCall<'c>, RestResponse, AttemptError> for RetryPolicy<'_> {
    type Future = tokio::time::Sleep;

    /// After attempt `call.attempt` (the copy kept for the next one): another attempt when it
    /// failed in a way worth retrying, the wait (backoff with jitter, at least the answer's
    /// `Retry-After`) leaves time before the deadline, and the budget has a retry to spare.
    fn retry(
        &mut self,
        call: &mut BackendCall<'c>,
        result: &mut Result<RestResponse, AttemptError>,
    ) -> Option<Self::Future> {
        let out = match result {
            Ok(resp) => Ok(&*resp),
            Err(AttemptError::Sent(f)) => Err(&*f),
            Err(AttemptError::Refused(_)) => return None,
        };
        if judge_ref(out) != Verdict::Failed || !worth_retrying(out) {
            return None;
        }
        let r = self.0;
        let mut wait = r.delay(call.attempt);
        if let Ok(resp) = out
            && let Some(asked) = retry_after(resp)
        {
            wait = wait.max(asked);
        }
        // Only when the wait leaves time for another attempt.
        if Instant::now() + wait + Duration::from_millis(1) >= call.deadline() {
            return None;
        }
        if !r.budget.withdraw() {
            tracing::debug!(business = %r.state.business, "retry budget spent; the failed attempt's outcome is the call's");
            crate::ops::metrics::retry_denied(&r.state.business);
            return None;
        }
        crate::ops::metrics::retried(&r.state.business);
        call.attempt += 1;
        Some(tokio::time::sleep(wait))
    }

    /// A copy for the next attempt, when there may be one: attempts left, and a safe method or
    /// an idempotency key. The first such copy counts the call in the budget.
    fn clone_request(&mut self, call: &BackendCall<'c>) -> Option<BackendCall<'c>> {
        let p = &self.0.policy;
        if call.attempt >= p.attempts || !(call.keyed || call.req.method.is_safe()) {
            return None;
        }
        if call.attempt == 1 {
            self.0.budget.deposit();
        }
        Some(call.clone())
    }
}
