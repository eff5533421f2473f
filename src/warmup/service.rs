//! The service [`WarmUpLayer`](super::WarmUpLayer) produces.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::future::ResponseFuture;
use super::{Rejected, WarmUp};
use crate::clock::Clock;
use crate::respond::Respond;

/// A service behind a [`WarmUp`] limiter: made by [`WarmUpLayer`](super::WarmUpLayer), whose
/// docs describe its behaviour.
///
/// Cloning it is cheap and the clone shares the limiter.
pub struct WarmUpService<Svc, C, R> {
    inner: Svc,
    limiter: Arc<WarmUp<C>>,
    responder: R,
}

impl<Svc, C, R> WarmUpService<Svc, C, R> {
    /// Wraps `inner` with `limiter`, answering refusals with `responder`.
    /// [`WarmUpLayer`](super::WarmUpLayer) is the usual way to make one.
    pub fn new(inner: Svc, limiter: Arc<WarmUp<C>>, responder: R) -> Self {
        WarmUpService {
            inner,
            limiter,
            responder,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<WarmUp<C>> {
        &self.limiter
    }

    /// The inner service.
    pub fn get_ref(&self) -> &Svc {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut Svc {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> Svc {
        self.inner
    }
}

impl<Svc, Req, C, R> Service<Req> for WarmUpService<Svc, C, R>
where
    Svc: Service<Req>,
    C: Clock,
    R: Respond<Rejected, Svc::Response, Svc::Error> + Clone,
{
    type Response = Svc::Response;
    type Error = R::Error;
    type Future = ResponseFuture<Svc::Future, R>;

    /// The inner service's readiness. Reserves nothing: the limiter decides in `call`.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(R::inner_error)
    }

    /// Takes a permit; calls the inner service only if there was one.
    fn call(&mut self, request: Req) -> Self::Future {
        match self.limiter.try_acquire() {
            Ok(()) => ResponseFuture::admitted(self.inner.call(request)),
            Err(rejected) => ResponseFuture::refused(rejected, self.responder.clone()),
        }
    }
}

impl<Svc: Clone, C, R: Clone> Clone for WarmUpService<Svc, C, R> {
    fn clone(&self) -> Self {
        WarmUpService {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<Svc: fmt::Debug, C, R: fmt::Debug> fmt::Debug for WarmUpService<Svc, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpService")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("responder", &self.responder)
            .finish()
    }
}
