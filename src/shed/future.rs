//! The response future of [`ShedService`](super::ShedService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::Overloaded;
use super::classify::{Classify, Outcome};
use super::cpu::CpuSignal;
use super::permit::Completion;
use super::shared::SharedShedder;
use crate::clock::Clock;
use crate::respond::Respond;

pin_project! {
    /// The response future of [`ShedService`](super::ShedService): the inner service's future
    /// holding the request's permit, or the answer to a refused request.
    ///
    /// Dropping it before it completes ends the request as a failure.
    pub struct ResponseFuture<F, C, S, K, R>
    where
        C: Clock,
        C: 'static,
        S: CpuSignal,
        S: 'static,
    {
        #[pin]
        state: State<F, C, S, K, R>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C, S, K, R>
    where
        C: Clock,
        C: 'static,
        S: CpuSignal,
        S: 'static,
    {
        Admitted {
            #[pin]
            future: F,
            // `None` once the outcome is recorded.
            permit: Option<Completion<SharedShedder<C, S>, C, S>>,
            classifier: K,
        },
        Refused {
            overloaded: Overloaded,
            responder: R,
        },
    }
}

impl<F, C: Clock + 'static, S: CpuSignal + 'static, K, R> ResponseFuture<F, C, S, K, R> {
    pub(crate) fn admitted(
        future: F,
        permit: Completion<SharedShedder<C, S>, C, S>,
        classifier: K,
    ) -> Self {
        ResponseFuture {
            state: State::Admitted {
                future,
                permit: Some(permit),
                classifier,
            },
        }
    }

    pub(crate) fn refused(overloaded: Overloaded, responder: R) -> Self {
        ResponseFuture {
            state: State::Refused {
                overloaded,
                responder,
            },
        }
    }
}

impl<F, T, E, C, S, K, R> Future for ResponseFuture<F, C, S, K, R>
where
    F: Future<Output = Result<T, E>>,
    C: Clock + 'static,
    S: CpuSignal + 'static,
    K: Classify<T, E>,
    R: Respond<Overloaded, T, E>,
{
    type Output = Result<T, R::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted {
                future,
                permit,
                classifier,
            } => {
                let result = ready!(future.poll(cx));
                if let Some(permit) = permit.take() {
                    permit.finish(classifier.classify(result.as_ref()) == Outcome::Pass);
                }
                Poll::Ready(result.map_err(R::inner_error))
            }
            StateProj::Refused {
                overloaded,
                responder,
            } => Poll::Ready(responder.respond(*overloaded)),
        }
    }
}

impl<F, C: Clock + 'static, S: CpuSignal + 'static, K, R> fmt::Debug
    for ResponseFuture<F, C, S, K, R>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Admitted { permit, .. } => f
                .debug_struct("ResponseFuture::Admitted")
                .field("permit", permit)
                .finish_non_exhaustive(),
            State::Refused { overloaded, .. } => f
                .debug_struct("ResponseFuture::Refused")
                .field("overloaded", overloaded)
                .finish_non_exhaustive(),
        }
    }
}
