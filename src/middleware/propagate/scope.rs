//! The server side: a request's class in scope while it is handled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::InScope;
use crate::criticality::Criticality;
use crate::middleware::Inspect;

/// A tower layer that reads each request's class with a reader and keeps it in scope (see
/// [`current`](super::current)) while the inner service handles the request. A request the
/// reader gives no class is [`Critical`](Criticality::Critical), the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScopeLayer<Q> {
    reader: Q,
}

impl<Q> ScopeLayer<Q> {
    /// Reads each request's class with `reader`, such as
    /// [`CriticalityHeader`](crate::middleware::CriticalityHeader).
    pub fn new(reader: Q) -> Self {
        ScopeLayer { reader }
    }
}

impl<S, Q: Clone> Layer<S> for ScopeLayer<Q> {
    type Service = ScopeService<S, Q>;

    fn layer(&self, inner: S) -> Self::Service {
        ScopeService {
            inner,
            reader: self.reader.clone(),
        }
    }
}

/// The service of a [`ScopeLayer`].
#[derive(Clone, Copy, Debug)]
pub struct ScopeService<S, Q> {
    inner: S,
    reader: Q,
}

impl<S, Q> ScopeService<S, Q> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Q, Req> Service<Req> for ScopeService<S, Q>
where
    S: Service<Req>,
    Q: Inspect<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ScopeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    /// Reads the request's class and calls the inner service with it in scope.
    fn call(&mut self, request: Req) -> Self::Future {
        let class = self.reader.inspect(&request).class().unwrap_or_default();
        let scope = InScope::enter(class);
        let future = self.inner.call(request);
        drop(scope);
        ScopeFuture { future, class }
    }
}

pin_project! {
    /// The response future of a [`ScopeService`]: the inner future, polled with the request's
    /// class in scope.
    #[derive(Debug)]
    pub struct ScopeFuture<F> {
        #[pin]
        future: F,
        class: Criticality,
    }
}

impl<F: Future> Future for ScopeFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _scope = InScope::enter(*this.class);
        this.future.poll(cx)
    }
}
