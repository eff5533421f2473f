//! The response future of [`AdmitService`](super::AdmitService).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::Limiter;
use super::classify::Classify;
use super::hold::{AtResponse, Hold};
use super::limiter::Finish;
use super::offered;
use crate::respond::Respond;

pin_project! {
    /// The response future of [`AdmitService`](super::AdmitService): the inner service's future
    /// holding the request's permit, or the answer to a refused request. `H` says when the
    /// permit ends ([`Hold`]).
    ///
    /// Dropping it before it completes ends the request as cancelled. The inner future is
    /// polled marked as inside an admit layer (see
    /// [`Limiter::count_offered`](super::Limiter::count_offered)).
    pub struct ResponseFuture<F, L: Limiter, K, R, H = AtResponse> {
        #[pin]
        state: State<F, L, K, R>,
        hold: PhantomData<fn() -> H>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, L: Limiter, K, R> {
        Admitted {
            #[pin]
            future: F,
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

impl<F, L: Limiter, K, R, H> ResponseFuture<F, L, K, R, H> {
    pub(crate) fn admitted(future: F, permit: L::Permit, classifier: K) -> Self {
        ResponseFuture {
            state: State::Admitted {
                future,
                permit: Some(permit),
                classifier,
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

impl<F, T, E, L, K, R, H> Future for ResponseFuture<F, L, K, R, H>
where
    F: Future<Output = Result<T, E>>,
    L: Limiter,
    K: Classify<T, E>,
    R: Respond<L::Refusal, T, E>,
    H: Hold<T, L::Permit>,
{
    type Output = Result<H::Response, R::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
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
                Poll::Ready(answer)
            }
            StateProj::Refused { refusal, responder } => {
                Poll::Ready(responder.respond(*refusal).map(H::bare))
            }
        }
    }
}

impl<F, L: Limiter, K, R, H> fmt::Debug for ResponseFuture<F, L, K, R, H>
where
    L::Permit: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
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
