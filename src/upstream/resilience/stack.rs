//! The backend call as a `tower` stack: the composition of its layers ([`Resilience::service`])
//! and the plain ones (limit and shedding, trace context, per-attempt measure, preparation and
//! timeout). It must never send anything itself, nor box a future.
//!
//! Own layers rather than tower's or tower-http's where those do not fit:
//! - `Limit` instead of `ConcurrencyLimit` + `LoadShed`: tower's limit is a tokio semaphore,
//!   whose every permit release locks the semaphore's waiter list (a lock on each call), whose
//!   size is fixed while a reload may change `max_concurrency` with calls in flight, and
//!   `LoadShed` answers a boxed error. `Limit` counts calls in flight in the backend's shared
//!   atomic and sheds at once, as `LoadShed` over a full limit would.
//! - `Timeout` instead of `tower::timeout`: the deadline belongs to the call (its tool's
//!   timeout), not to the backend, and a later attempt gets only what is left of it.
//! - `Trace` instead of tower-http's `TraceLayer`, which serves `http::Request`s; a
//!   [`BackendCall`] carries a `RestRequest` (method, URL, headers, body as translated).

use super::breaker::{BreakerLayer, BreakerService};
use super::call::{AttemptError, BackendCall, Observe};
use super::retry::RetryPolicy;
use super::{Resilience, Slot};
use crate::model::{Failure, FailureKind};
use crate::translate::rest::{RestRequest, RestResponse};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tower::retry::RetryLayer;
use tower::util::{Either, MapErr};
use tower::{Layer, Service, ServiceBuilder};

/// An attempt: the route's breaker, the measure, the preparation and the timeout, over `S`.
pub type Attempt<'a, P, S> = BreakerService<'a, Measure<Prepare<P, Timeout<S>>>>;
/// Attempts, retried or not (`backend.retries`), with their errors flattened to [`Failure`]s.
type Attempts<'a, P, S> = Trace<
    MapErr<
        Either<tower::retry::Retry<RetryPolicy<'a>, Attempt<'a, P, S>>, Attempt<'a, P, S>>,
        fn(AttemptError) -> Failure,
    >,
>;
/// A backend's whole stack over the sender `S` (see the module header of `resilience`): a
/// `tower::Service<BackendCall>` answering a [`RestResponse`] or a [`Failure`].
pub type Stack<'a, P, S> = Either<Limit<'a, Attempts<'a, P, S>>, Attempts<'a, P, S>>;

impl Resilience {
    /// The backend's stack around `send`, with `prepare` making each attempt's request ready
    /// before its timeout starts (the backend's credential and signature). Which layers it
    /// holds follows the compiled policy; building it moves a few references, counts none.
    pub fn service<'a, P, S>(&'a self, prepare: P, send: S) -> Stack<'a, P, S>
    where
        P: Service<RestRequest, Response = RestRequest, Error = Failure> + Clone,
        S: Service<RestRequest, Response = RestResponse, Error = Failure> + Clone,
    {
        let p = &self.policy;
        let flatten: fn(AttemptError) -> Failure = AttemptError::into_failure;
        ServiceBuilder::new()
            .option_layer((p.max_concurrency > 0).then_some(LimitLayer(self)))
            .layer(TraceLayer)
            .map_err(flatten)
            .option_layer((p.attempts > 1).then(|| RetryLayer::new(RetryPolicy(self))))
            .layer(BreakerLayer(self))
            .layer(MeasureLayer)
            .layer(PrepareLayer(prepare))
            .layer(TimeoutLayer)
            .service(send)
    }
}

/// Takes one of the backend's `max_concurrency` slots for the whole call, or sheds it.
#[derive(Clone, Copy)]
struct LimitLayer<'a>(&'a Resilience);

impl<'a, S> Layer<S> for LimitLayer<'a> {
    type Service = Limit<'a, S>;
    fn layer(&self, inner: S) -> Limit<'a, S> {
        Limit { r: self.0, inner }
    }
}

pub struct Limit<'a, S> {
    r: &'a Resilience,
    inner: S,
}

impl<'a, 'c, S> Service<BackendCall<'c>> for Limit<'a, S>
where
    S: Service<BackendCall<'c>, Response = RestResponse, Error = Failure>,
{
    type Response = RestResponse;
    type Error = Failure;
    type Future = Limited<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: BackendCall<'c>) -> Self::Future {
        match self.r.take_slot() {
            Ok(slot) => Limited::Running {
                inner: self.inner.call(call),
                _slot: slot,
            },
            Err(f) => Limited::Shed { failure: Some(f) },
        }
    }
}

pin_project! {
    /// A call holding its slot until it ends (or is dropped), or the failure of a shed call.
    #[project = LimitedProj]
    pub enum Limited<'a, F> {
        Shed { failure: Option<Failure> },
        Running { #[pin] inner: F, _slot: Slot<'a> },
    }
}

impl<F> Future for Limited<'_, F>
where
    F: Future<Output = Result<RestResponse, Failure>>,
{
    type Output = Result<RestResponse, Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            LimitedProj::Running { inner, .. } => inner.poll(cx),
            LimitedProj::Shed { failure } => {
                Poll::Ready(Err(failure.take().unwrap_or_else(|| {
                    Failure::new(FailureKind::Internal, "a shed call was polled again")
                })))
            }
        }
    }
}

/// Adds the current span's W3C trace context to the request, once for all attempts.
#[derive(Clone, Copy)]
struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Trace(inner)
    }
}

pub struct Trace<S>(S);

impl<'c, S: Service<BackendCall<'c>>> Service<BackendCall<'c>> for Trace<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut call: BackendCall<'c>) -> S::Future {
        crate::ops::otel::inject(&mut call.req.headers);
        self.0.call(call)
    }
}

/// Tells the call's [`Observe`] of each attempt that was sent (timeouts included).
#[derive(Clone, Copy)]
struct MeasureLayer;

impl<S> Layer<S> for MeasureLayer {
    type Service = Measure<S>;
    fn layer(&self, inner: S) -> Measure<S> {
        Measure(inner)
    }
}

#[derive(Clone)]
pub struct Measure<S>(S);

impl<'c, S> Service<BackendCall<'c>> for Measure<S>
where
    S: Service<BackendCall<'c>, Response = RestResponse, Error = Failure>,
{
    type Response = RestResponse;
    type Error = Failure;
    type Future = Measured<'c, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, call: BackendCall<'c>) -> Self::Future {
        let observe = call.observe.map(|o| (o, Instant::now()));
        Measured {
            inner: self.0.call(call),
            observe,
        }
    }
}

pin_project! {
    pub struct Measured<'c, F> {
        #[pin]
        inner: F,
        observe: Option<(&'c Observe<'c>, Instant)>,
    }
}

impl<F> Future for Measured<'_, F>
where
    F: Future<Output = Result<RestResponse, Failure>>,
{
    type Output = Result<RestResponse, Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let Some((observe, started)) = this.observe.take() {
            observe(&out, started.elapsed());
        }
        Poll::Ready(out)
    }
}

/// Makes each attempt's request ready with a service of its own (the backend's credential and
/// signature) before handing it on: outside the attempt's timeout, so a slow token endpoint
/// delays calls rather than failing every one of them.
#[derive(Clone)]
struct PrepareLayer<P>(P);

impl<P: Clone, S> Layer<S> for PrepareLayer<P> {
    type Service = Prepare<P, S>;
    fn layer(&self, inner: S) -> Prepare<P, S> {
        Prepare {
            prepare: self.0.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct Prepare<P, S> {
    prepare: P,
    inner: S,
}

impl<'c, P, S> Service<BackendCall<'c>> for Prepare<P, S>
where
    P: Service<RestRequest, Response = RestRequest, Error = Failure>,
    S: Service<BackendCall<'c>, Response = RestResponse, Error = Failure> + Clone,
{
    type Response = RestResponse;
    type Error = Failure;
    type Future = Prepared<'c, P::Future, S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        ready!(self.prepare.poll_ready(cx))?;
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: BackendCall<'c>) -> Self::Future {
        let req = std::mem::take(&mut call.req);
        // The readied service goes with the call; a clone stays for the next one (tower's way).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Prepared::Preparing {
            fut: self.prepare.call(req),
            rest: Some((call, inner)),
        }
    }
}

pin_project! {
    /// The preparation of an attempt's request, then the attempt.
    #[project = PreparedProj]
    pub enum Prepared<'c, F, S: Service<BackendCall<'c>>> {
        Preparing { #[pin] fut: F, rest: Option<(BackendCall<'c>, S)> },
        Sending { #[pin] fut: S::Future },
    }
}

impl<'c, F, S> Future for Prepared<'c, F, S>
where
    F: Future<Output = Result<RestRequest, Failure>>,
    S: Service<BackendCall<'c>, Response = RestResponse, Error = Failure>,
{
    type Output = Result<RestResponse, Failure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let next = match self.as_mut().project() {
                PreparedProj::Sending { fut } => return fut.poll(cx),
                PreparedProj::Preparing { fut, rest } => {
                    let req = ready!(fut.poll(cx))?;
                    let Some((mut call, mut inner)) = rest.take() else {
                        return Poll::Ready(Err(Failure::new(
                            FailureKind::Internal,
                            "a prepared attempt was polled again",
                        )));
                    };
                    call.req = req;
                    Prepared::Sending {
                        fut: inner.call(call),
                    }
                }
            };
            self.set(next);
        }
    }
}

/// Gives each attempt the time left of its call (the whole of it to the first), and hands the
/// sender the bare request.
#[derive(Clone, Copy)]
struct TimeoutLayer;

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;
    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout(inner)
    }
}

#[derive(Clone)]
pub struct Timeout<S>(S);

impl<'c, S> Service<BackendCall<'c>> for Timeout<S>
where
    S: Service<RestRequest, Response = RestResponse, Error = Failure>,
{
    type Response = RestResponse;
    type Error = Failure;
    type Future = Timed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, call: BackendCall<'c>) -> Self::Future {
        let left = if call.attempt == 1 {
            call.timeout
        } else {
            call.deadline().saturating_duration_since(Instant::now())
        };
        let (total, attempt) = (call.timeout, call.attempt);
        Timed {
            inner: tokio::time::timeout(left, self.0.call(call.req)),
            left,
            total,
            attempt,
        }
    }
}

pin_project! {
    pub struct Timed<F> {
        #[pin]
        inner: tokio::time::Timeout<F>,
        left: Duration,
        total: Duration,
        attempt: u32,
    }
}

impl<F> Future for Timed<F>
where
    F: Future<Output = Result<RestResponse, Failure>>,
{
    type Output = Result<RestResponse, Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut out = ready!(this.inner.poll(cx)).unwrap_or_else(|_| {
            Err(Failure::new(
                FailureKind::Timeout,
                format!(
                    "the backend did not answer within {} ms",
                    this.left.as_millis()
                ),
            ))
        });
        // A later attempt's timeout is the whole call's.
        if *this.attempt > 1
            && let Err(f) = &mut out
            && f.kind == FailureKind::Timeout
        {
            f.message = format!(
                "the backend did not answer within {} ms ({} attempts)",
                this.total.as_millis(),
                this.attempt
            );
        }
        Poll::Ready(out)
    }
}
