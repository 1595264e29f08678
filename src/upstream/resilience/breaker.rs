//! The circuit breaker as a `tower` layer: each attempt asks its route's breaker for a permit
//! and reports its verdict to it (tower has no breaker). It must never send an attempt the
//! breaker refused, and never lock or allocate (a permit and a verdict are atomics).

use super::call::{AttemptError, BackendCall};
use super::{Permit, Resilience, Verdict, judge};
use crate::model::{Failure, FailureKind};
use crate::translate::rest::RestResponse;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tower::{Layer, Service};

/// The backend's breakers (one per route; the call names its route).
#[derive(Clone, Copy)]
pub(super) struct BreakerLayer<'a>(pub(super) &'a Resilience);

impl<'a, S> Layer<S> for BreakerLayer<'a> {
    type Service = BreakerService<'a, S>;
    fn layer(&self, inner: S) -> BreakerService<'a, S> {
        BreakerService { r: self.0, inner }
    }
}

#[derive(Clone)]
pub struct BreakerService<'a, S> {
    r: &'a Resilience,
    inner: S,
}

impl<'a, 'c, S> Service<BackendCall<'c>> for BreakerService<'a, S>
where
    S: Service<BackendCall<'c>, Response = RestResponse, Error = Failure>,
{
    type Response = RestResponse;
    type Error = AttemptError;
    type Future = Judged<'a, 'c, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), AttemptError>> {
        self.inner.poll_ready(cx).map_err(AttemptError::Sent)
    }

    fn call(&mut self, call: BackendCall<'c>) -> Self::Future {
        let route: &'c super::Breaker = call.route;
        match self.r.admit(&route.0) {
            Ok(permit) => Judged::Admitted {
                inner: self.inner.call(call),
                r: self.r,
                permit: Some(permit),
            },
            Err(f) => Judged::Refused { failure: Some(f) },
        }
    }
}

pin_project! {
    /// An admitted attempt whose verdict goes to its breaker when it ends (a trial attempt
    /// dropped before lets the next call be the trial), or a refusal.
    #[project = JudgedProj]
    pub enum Judged<'a, 'c, F> {
        Refused { failure: Option<Failure> },
        Admitted {
            #[pin]
            inner: F,
            r: &'a Resilience,
            permit: Option<Permit<'c>>,
        },
    }
}

impl<F> Future for Judged<'_, '_, F>
where
    F: Future<Output = Result<RestResponse, Failure>>,
{
    type Output = Result<RestResponse, AttemptError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            JudgedProj::Refused { failure } => {
                Poll::Ready(Err(AttemptError::Refused(failure.take().unwrap_or_else(
                    || Failure::new(FailureKind::Internal, "a refused attempt was polled again"),
                ))))
            }
            JudgedProj::Admitted { inner, r, permit } => {
                let out = ready!(inner.poll(cx));
                if let Some(p) = permit.take() {
                    r.judge(p, judge(&out) != Verdict::Failed);
                }
                Poll::Ready(out.map_err(AttemptError::Sent))
            }
        }
    }
}
