//! The drain service.

use std::task::{Context, Poll};

use http::{Request, Response, Version};
use tower_service::Service;

use super::{DrainBody, DrainFuture, Draining};
use crate::drain::Drain;
use crate::middleware::{offered, release_readiness};
use crate::respond::Respond;

/// The service of a [`DrainLayer`](super::DrainLayer).
#[derive(Clone, Debug)]
pub struct DrainService<S, R> {
    inner: S,
    drain: Drain,
    responder: R,
}

impl<S, R> DrainService<S, R> {
    pub(crate) fn new(inner: S, drain: Drain, responder: R) -> Self {
        DrainService {
            inner,
            drain,
            responder,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// `S: Clone` because a refusal swaps in a fresh clone of the inner service, dropping what its
/// `poll_ready` reserved.
impl<S, R, ReqBody, ResBody> Service<Request<ReqBody>> for DrainService<S, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    R: Respond<Draining, Response<DrainBody<ResBody>>, S::Error> + Clone,
{
    type Response = Response<DrainBody<ResBody>>;
    type Error = R::Error;
    type Future = DrainFuture<S::Future, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(R::inner_error)
    }

    /// Counts the request as offered if no admit layer outside has seen it; calls the inner
    /// service unless the drain refuses.
    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let http1 = request.version() <= Version::HTTP_11;
        offered::count_if_first(|| self.drain.count_offered());
        match self.drain.admit() {
            Ok(guard) => {
                let inside = offered::Inside::enter();
                let future = self.inner.call(request);
                drop(inside);
                DrainFuture::admitted(future, guard, http1)
            }
            Err(_) => {
                release_readiness(&mut self.inner);
                DrainFuture::refused(
                    Draining::new(self.drain.retry_after()),
                    self.responder.clone(),
                    http1,
                )
            }
        }
    }
}
