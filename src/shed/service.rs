//! The service [`ShedLayer`](super::ShedLayer) produces.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::classify::Classify;
use super::cpu::CpuSignal;
use super::future::ResponseFuture;
use super::{Overloaded, Shedder};
use crate::clock::Clock;
use crate::respond::Respond;

/// A service behind a [`Shedder`]: made by [`ShedLayer`](super::ShedLayer), whose docs describe
/// its behaviour.
///
/// Cloning it is cheap and the clone shares the shedder.
pub struct ShedService<Svc, C: Clock, S: CpuSignal, K, R> {
    inner: Svc,
    shedder: Arc<Shedder<C, S>>,
    classifier: K,
    responder: R,
}

impl<Svc, C: Clock, S: CpuSignal, K, R> ShedService<Svc, C, S, K, R> {
    /// Wraps `inner` with `shedder`, deciding outcomes with `classifier` and answering
    /// refusals with `responder`. [`ShedLayer`](super::ShedLayer) is the usual way to make one.
    pub fn new(inner: Svc, shedder: Arc<Shedder<C, S>>, classifier: K, responder: R) -> Self {
        ShedService {
            inner,
            shedder,
            classifier,
            responder,
        }
    }

    /// The shedder.
    pub fn shedder(&self) -> &Arc<Shedder<C, S>> {
        &self.shedder
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

impl<Svc, Req, C, S, K, R> Service<Req> for ShedService<Svc, C, S, K, R>
where
    Svc: Service<Req>,
    C: Clock,
    S: CpuSignal,
    K: Classify<Svc::Response, Svc::Error> + Clone,
    R: Respond<Overloaded, Svc::Response, Svc::Error> + Clone,
{
    type Response = Svc::Response;
    type Error = R::Error;
    type Future = ResponseFuture<Svc::Future, C, S, K, R>;

    /// The inner service's readiness. Reserves nothing: the shedder decides in `call`.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(R::inner_error)
    }

    /// Asks the shedder; calls the inner service only if the request is admitted.
    fn call(&mut self, request: Req) -> Self::Future {
        match self.shedder.allow_owned() {
            Ok(permit) => {
                ResponseFuture::admitted(self.inner.call(request), permit, self.classifier.clone())
            }
            Err(overloaded) => ResponseFuture::refused(overloaded, self.responder.clone()),
        }
    }
}

impl<Svc: Clone, C: Clock, S: CpuSignal, K: Clone, R: Clone> Clone
    for ShedService<Svc, C, S, K, R>
{
    fn clone(&self) -> Self {
        ShedService {
            inner: self.inner.clone(),
            shedder: self.shedder.clone(),
            classifier: self.classifier.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<Svc: fmt::Debug, C: Clock, S: CpuSignal, K: fmt::Debug, R: fmt::Debug> fmt::Debug
    for ShedService<Svc, C, S, K, R>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedService")
            .field("inner", &self.inner)
            .field("shedder", &self.shedder)
            .field("classifier", &self.classifier)
            .field("responder", &self.responder)
            .finish()
    }
}
