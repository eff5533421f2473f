//! The service [`AdmitLayer`](super::AdmitLayer) produces.

use std::fmt;
use std::marker::PhantomData;
use std::task::{Context, Poll};

use tower_service::Service;

use super::classify::Classify;
use super::future::ResponseFuture;
use super::hold::{AtResponse, Hold};
use super::offered;
use super::read::Inspect;
use super::read::ReadNothing;
use super::{Admission, IntoShared, Limiter};
use crate::Shared;
use crate::respond::Respond;

/// A service behind a [`Limiter`]: made by [`AdmitLayer`](super::AdmitLayer), whose docs
/// describe its behaviour.
///
/// Cloning it is cheap and the clone shares the limiter.
pub struct AdmitService<Svc, L: 'static, K, R, Q = ReadNothing, H = AtResponse> {
    inner: Svc,
    limiter: Shared<L>,
    classifier: K,
    responder: R,
    reader: Q,
    hold: PhantomData<fn() -> H>,
}

impl<Svc, L: Limiter, K, R> AdmitService<Svc, L, K, R> {
    /// Wraps `inner` with `limiter`, deciding outcomes with `classifier` and answering
    /// refusals with `responder`. [`AdmitLayer`](super::AdmitLayer) is the usual way to make one.
    pub(crate) fn new(
        inner: Svc,
        limiter: impl IntoShared<L>,
        classifier: K,
        responder: R,
    ) -> Self {
        AdmitService {
            inner,
            limiter: limiter.into_shared(),
            classifier,
            responder,
            reader: ReadNothing,
            hold: PhantomData,
        }
    }
}

impl<Svc, L: Limiter, K, R, Q, H> AdmitService<Svc, L, K, R, Q, H> {
    /// The service reading each request with `reader` (see
    /// [`AdmitLayer::inspect`](super::AdmitLayer::inspect)).
    pub(crate) fn with_inspect<Q2>(self, reader: Q2) -> AdmitService<Svc, L, K, R, Q2, H> {
        AdmitService {
            inner: self.inner,
            limiter: self.limiter,
            classifier: self.classifier,
            responder: self.responder,
            reader,
            hold: PhantomData,
        }
    }

    /// The service ending each admitted request as `H2` says (see [`Hold`]).
    pub(crate) fn with_hold<H2>(self) -> AdmitService<Svc, L, K, R, Q, H2> {
        AdmitService {
            inner: self.inner,
            limiter: self.limiter,
            classifier: self.classifier,
            responder: self.responder,
            reader: self.reader,
            hold: PhantomData,
        }
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

/// `Svc: Clone` because a refusal swaps in a fresh clone of the inner service, dropping what
/// its `poll_ready` reserved.
impl<Svc, Req, L, K, R, Q, H> Service<Req> for AdmitService<Svc, L, K, R, Q, H>
where
    Svc: Service<Req> + Clone,
    L: Limiter,
    Q: Inspect<Req>,
    K: Classify<Svc::Response, Svc::Error> + Clone,
    R: Respond<L::Refusal, Svc::Response, Svc::Error> + Clone,
    H: Hold<Svc::Response, L::Permit>,
{
    type Response = H::Response;
    type Error = R::Error;
    type Future = ResponseFuture<Svc, Req, L, K, R, H>;

    /// The inner service's readiness. Reserves nothing itself: the limiter decides in `call`.
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(R::inner_error)
    }

    /// Counts the request as offered if no admit layer outside has seen it, and asks the
    /// limiter with what the reader read from the request. An admitted request calls the inner
    /// service now; a refused one replaces it with a fresh clone, releasing what its
    /// `poll_ready` reserved; a waiting one takes the ready service along, to call it when its
    /// wait ends, and leaves a fresh clone.
    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        offered::count_if_first(|| L::count_offered(&self.limiter));
        match L::admit(&self.limiter, self.reader.inspect(&request)) {
            Admission::Enter(permit) => {
                let inside = offered::Inside::enter();
                let future = self.inner.call(request);
                drop(inside);
                ResponseFuture::admitted(future, permit, self.classifier.clone())
            }
            Admission::Refuse(refusal) => {
                release_readiness(&mut self.inner);
                ResponseFuture::refused(refusal, self.responder.clone())
            }
            Admission::Wait(wait) => {
                // The ready service goes with the request, to be called when the wait ends;
                // this one is a fresh clone, made ready again before the next call.
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                ResponseFuture::waiting(
                    wait,
                    ready,
                    request,
                    self.classifier.clone(),
                    self.responder.clone(),
                )
            }
        }
    }
}

/// Replaces `inner`, made ready but not called, with a fresh clone, and drops it with whatever
/// its `poll_ready` reserved (a `ConcurrencyLimit`'s permit, a `Buffer`'s slot). The clone must
/// be made ready again before it is called, as tower's contract requires after every `call`.
#[inline]
pub(crate) fn release_readiness<S: Clone>(inner: &mut S) {
    let fresh = inner.clone();
    drop(std::mem::replace(inner, fresh));
}

impl<Svc: Clone, L: 'static, K: Clone, R: Clone, Q: Clone, H> Clone
    for AdmitService<Svc, L, K, R, Q, H>
{
    fn clone(&self) -> Self {
        AdmitService {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            classifier: self.classifier.clone(),
            responder: self.responder.clone(),
            reader: self.reader.clone(),
            hold: PhantomData,
        }
    }
}

impl<Svc: fmt::Debug, L: fmt::Debug + 'static, K: fmt::Debug, R: fmt::Debug, Q: fmt::Debug, H>
    fmt::Debug for AdmitService<Svc, L, K, R, Q, H>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitService")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("classifier", &self.classifier)
            .field("responder", &self.responder)
            .field("reader", &self.reader)
            .finish()
    }
}
