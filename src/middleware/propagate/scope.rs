//! The server side: a request's class and deadline in scope while it is handled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::{InScope, Scope};
use crate::clock::{Clock, MonotonicClock};
use crate::middleware::Inspect;

/// A tower layer that reads each request with a reader and keeps what it read in scope while
/// the inner service handles the request:
///
/// - its class ([`current`](super::current)): a request the reader gives no class is
///   [`Critical`](crate::criticality::Criticality::Critical), the default;
/// - its deadline, where the reader reads the time it has left
///   ([`GrpcTimeout`](crate::middleware::GrpcTimeout),
///   [`TimeoutHeader`](crate::middleware::TimeoutHeader)) less the wait it reads: the client's
///   [`DeadlineLayer`](crate::client::DeadlineLayer) sends the rest on.
#[derive(Clone, Copy, Debug)]
pub struct ScopeLayer<Q, C = MonotonicClock> {
    reader: Q,
    clock: C,
}

impl<Q> ScopeLayer<Q> {
    /// Reads each request with `reader`, such as
    /// [`CriticalityHeader`](crate::middleware::CriticalityHeader), or a pair of readers.
    pub fn new(reader: Q) -> Self {
        ScopeLayer {
            reader,
            clock: MonotonicClock::process(),
        }
    }
}

impl<Q, C> ScopeLayer<Q, C> {
    /// Dates deadlines on `clock` rather than the process's monotonic clock: give the clients'
    /// [`DeadlineLayer`](crate::client::DeadlineLayer) the same one.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> ScopeLayer<Q, C2> {
        ScopeLayer {
            reader: self.reader,
            clock,
        }
    }
}

impl<Q: Default> Default for ScopeLayer<Q> {
    fn default() -> Self {
        ScopeLayer::new(Q::default())
    }
}

impl<S, Q: Clone, C: Clone> Layer<S> for ScopeLayer<Q, C> {
    type Service = ScopeService<S, Q, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ScopeService {
            inner,
            reader: self.reader.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// The service of a [`ScopeLayer`].
#[derive(Clone, Copy, Debug)]
pub struct ScopeService<S, Q, C = MonotonicClock> {
    inner: S,
    reader: Q,
    clock: C,
}

impl<S, Q, C> ScopeService<S, Q, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Q, C, Req> Service<Req> for ScopeService<S, Q, C>
where
    S: Service<Req>,
    Q: Inspect<Req>,
    C: Clock,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ScopeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    /// Reads the request and calls the inner service with its class and deadline in scope.
    fn call(&mut self, request: Req) -> Self::Future {
        let arrival = self.reader.inspect(&request);
        let deadline_nanos = arrival.time_left_nanos().map(|left| {
            let left = left.saturating_sub(arrival.wait_nanos().unwrap_or(0));
            self.clock.now_nanos().saturating_add(left)
        });
        let scope = Scope {
            class: Some(arrival.class().unwrap_or_default()),
            deadline_nanos,
        };
        let entered = InScope::enter(scope);
        let future = self.inner.call(request);
        drop(entered);
        ScopeFuture { future, scope }
    }
}

pin_project! {
    /// The response future of a [`ScopeService`]: the inner future, polled with the request's
    /// class and deadline in scope.
    #[derive(Debug)]
    pub struct ScopeFuture<F> {
        #[pin]
        future: F,
        scope: Scope,
    }
}

impl<F: Future> Future for ScopeFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _scope = InScope::enter(*this.scope);
        this.future.poll(cx)
    }
}
