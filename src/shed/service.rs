//! The service [`ShedLayer`](super::ShedLayer) produces.

use std::fmt;
use std::task::{Context, Poll};

use tower_service::Service;

use super::Overloaded;
use super::classify::Classify;
use super::cpu::CpuSignal;
use super::future::ResponseFuture;
use super::permit::Completion;
use super::shared::SharedShedder;
use crate::clock::Clock;
use crate::respond::Respond;

/// A service behind a [`Shedder`](super::Shedder): made by [`ShedLayer`](super::ShedLayer), whose docs describe
/// its behaviour.
///
/// Cloning it is cheap and the clone shares the shedder.
pub struct ShedService<Svc, C: Clock + 'static, S: CpuSignal + 'static, K, R> {
    inner: Svc,
    shedder: SharedShedder<C, S>,
    classifier: K,
    responder: R,
}

impl<Svc, C: Clock + 'static, S: CpuSignal + 'static, K, R> ShedService<Svc, C, S, K, R> {
    /// Wraps `inner` with `shedder`, deciding outcomes with `classifier` and answering
    /// refusals with `responder`. [`ShedLayer`](super::ShedLayer) is the usual way to make one.
    pub fn new(
        inner: Svc,
        shedder: impl Into<SharedShedder<C, S>>,
        classifier: K,
        responder: R,
    ) -> Self {
        ShedService {
            inner,
            shedder: shedder.into(),
            classifier,
            responder,
        }
    }

    /// The shedder.
    pub fn shedder(&self) -> &SharedShedder<C, S> {
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
    C: Clock + 'static,
    S: CpuSignal + 'static,
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
        match self.shedder.admit_now() {
            Ok(admitted_at) => ResponseFuture::admitted(
                self.inner.call(request),
                Completion::new(self.shedder.clone(), admitted_at),
                self.classifier.clone(),
            ),
            Err(overloaded) => ResponseFuture::refused(overloaded, self.responder.clone()),
        }
    }
}

impl<Svc: Clone, C: Clock + 'static, S: CpuSignal + 'static, K: Clone, R: Clone> Clone
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

impl<Svc: fmt::Debug, C: Clock + 'static, S: CpuSignal + 'static, K: fmt::Debug, R: fmt::Debug>
    fmt::Debug for ShedService<Svc, C, S, K, R>
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
