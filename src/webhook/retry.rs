//! The retry schedule of outgoing webhooks: initial delay, retry count, total budget, attempt timeout.
//! A leaf shared by the sender and the shared delivery state: it never sends or stores anything.

use std::time::Duration;

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
