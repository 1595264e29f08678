//! The request a backend call carries through its `tower` stack ([`BackendCall`]: the REST
//! request and what the layers must know of its call) and how an attempt fails below the retry
//! layer. Data only: it must never send, wait or decide anything.

use super::Breaker;
use crate::model::Failure;
use crate::translate::rest::{RestRequest, RestResponse};
use std::time::{Duration, Instant};

/// What sees each attempt's outcome and how long it took (a tool's metrics and page row).
pub type Observe<'a> = dyn Fn(&Result<RestResponse, Failure>, Duration) + Sync + 'a;

/// One backend call going through the stack: the request and what the layers need to know of
/// the call it belongs to. Cloned (by the retry policy) only when it may be sent again.
#[derive(Clone)]
pub struct BackendCall<'a> {
    pub req: RestRequest,
    /// The breaker of the call's route (its tool or resource).
    pub(super) route: &'a Breaker,
    /// The whole call's time, all attempts included.
    pub(super) timeout: Duration,
    pub(super) started: Instant,
    /// The call carries an idempotency key (a non-safe method may then be sent again).
    pub(super) keyed: bool,
    /// 1 for the first attempt.
    pub(super) attempt: u32,
    pub(super) observe: Option<&'a Observe<'a>>,
}

impl<'a> BackendCall<'a> {
    /// A call of `req` on `route`'s breaker, to be answered within `timeout`.
    pub fn new(req: RestRequest, route: &'a Breaker, timeout: Duration, keyed: bool) -> Self {
        BackendCall {
            req,
            route,
            timeout,
            started: Instant::now(),
            keyed,
            attempt: 1,
            observe: None,
        }
    }

    /// The same call, with `observe` told of each attempt.
    pub fn observed(self, observe: &'a Observe<'a>) -> Self {
        BackendCall {
            observe: Some(observe),
            ..self
        }
    }

    /// The end of the time the call was given.
    pub(super) fn deadline(&self) -> Instant {
        self.started + self.timeout
    }
}

/// How an attempt ended without an answer, below the retry layer: refused by the breaker
/// (never retried), or sent and failed.
#[derive(Debug)]
pub enum AttemptError {
    Refused(Failure),
    Sent(Failure),
}

impl AttemptError {
    pub(super) fn into_failure(self) -> Failure {
        match self {
            AttemptError::Refused(f) | AttemptError::Sent(f) => f,
        }
    }
}
