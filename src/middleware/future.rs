//! The response future of [`AdmitService`](super::AdmitService).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tower_service::Service;

use super::Limiter;
use super::classify::Classify;
use super::hold::{AtResponse, Hold};
use super::limiter::Finish;
use super::offered;
use crate::respond::Respond;

pin_project! {
    /// The response future of [`AdmitService`](super::AdmitService): the inner service's future
    /// holding the request's permit, a request waiting for its permit (with the inner service
    /// it will be called on), or the answer to a refused request. `H` says when the permit
    /// ends ([`Hold`]).
    ///
    /// Dropping it before it completes ends the request as cancelled, or gives up its wait.
    /// The inner service is called, and its future polled, marked as inside an admit layer
    /// (see [`Limiter::count_offered`](super::Limiter::count_offered)).
    pub struct ResponseFuture<S, Req, L, K, R, H = AtResponse>
    where
        S: Service<Req>,
        L: Limiter,
    {
        #[pin]
        state: State<S, Req, L, K, R>,
        hold: PhantomData<fn() -> H>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req, L, K, R>
    where
        S: Service<Req>,
        L: Limiter,
    {
        Waiting {
            #[pin]
            wait: L::Wait,
            // The ready inner service and the request, taken when the wait ends.
            call: Option<(S, Req)>,
            classifier: K,
            responder: R,
        },
        Admitted {
            #[pin]
            future: S::Future,
            // `None` once the outcome is recorded.
            permit: Option<L::Permit>,
            classifier: K,
        },
        Refused {
            refusal: L::Refusal,
            responder: R,
        },
    }
}

impl<S: Service<Req>, Req, L: Limiter, K, R, H> ResponseFuture<S, Req, L, K, R, H> {
    pub(crate) fn admitted(future: S::Future, permit: L::Permit, classifier: K) -> Self {
        ResponseFuture {
            state: State::Admitted {
                future,
                permit: Some(permit),
                classifier,
            },
            hold: PhantomData,
        }
    }

    pub(crate) fn waiting(
        wait: L::Wait,
        ready: S,
        request: Req,
        classifier: K,
        responder: R,
    ) -> Self {
        ResponseFuture {
            state: State::Waiting {
                wait,
                call: Some((ready, request)),
                classifier,
                responder,
            },
            hold: PhantomData,
        }
    }

    pub(crate) fn refused(refusal: L::Refusal, responder: R) -> Self {
        ResponseFuture {
            state: State::Refused { refusal, responder },
            hold: PhantomData,
        }
    }
}

impl<S, Req, T, L, K, R, H> Future for ResponseFuture<S, Req, L, K, R, H>
where
    S: Service<Req, Response = T>,
    L: Limiter,
    K: Classify<T, S::Error> + Clone,
    R: Respond<L::Refusal, T, S::Error> + Clone,
    H: Hold<T, L::Permit>,
{
    type Output = Result<H::Response, R::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Admitted {
                    future,
                    permit,
                    classifier,
                } => {
                    let inside = offered::Inside::enter();
                    let result = ready!(future.poll(cx));
                    drop(inside);
                    if permit.is_none() {
                        return Poll::Ready(result.map(H::bare).map_err(R::inner_error));
                    }
                    let outcome = classifier.classify(result.as_ref());
                    let cpu_wait = classifier.cpu_wait(result.as_ref());
                    let answer = match result {
                        Ok(response) => Ok(H::hold(response, permit, outcome, cpu_wait)),
                        Err(error) => {
                            if let Some(held) = permit {
                                held.finish_after(outcome, cpu_wait);
                            }
                            Err(R::inner_error(error))
                        }
                    };
                    *permit = None;
                    return Poll::Ready(answer);
                }
                StateProj::Refused { refusal, responder } => {
                    return Poll::Ready(responder.respond(*refusal).map(H::bare));
                }
                StateProj::Waiting {
                    wait,
                    call,
                    classifier,
                    responder,
                } => {
                    let decided = ready!(wait.poll(cx));
                    let next = match (decided, call.take()) {
                        (Ok(permit), Some((mut ready, request))) => {
                            let inside = offered::Inside::enter();
                            let future = ready.call(request);
                            drop(inside);
                            State::Admitted {
                                future,
                                permit: Some(permit),
                                classifier: classifier.clone(),
                            }
                        }
                        // A wait resolves once: a second answer has no request to send.
                        (Ok(_), None) => return Poll::Pending,
                        (Err(refusal), _) => State::Refused {
                            refusal,
                            responder: responder.clone(),
                        },
                    };
                    state.set(next);
                }
            }
        }
    }
}

impl<S: Service<Req>, Req, L: Limiter, K, R, H> fmt::Debug for ResponseFuture<S, Req, L, K, R, H>
where
    L::Permit: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Waiting { .. } => f
                .debug_struct("ResponseFuture::Waiting")
                .finish_non_exhaustive(),
            State::Admitted { permit, .. } => f
                .debug_struct("ResponseFuture::Admitted")
                .field("permit", permit)
                .finish_non_exhaustive(),
            State::Refused { refusal, .. } => f
                .debug_struct("ResponseFuture::Refused")
                .field("refusal", refusal)
                .finish_non_exhaustive(),
        }
    }
}
