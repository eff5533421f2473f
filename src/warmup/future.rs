//! The response future of [`WarmUpService`](super::WarmUpService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::Rejected;
use crate::respond::Respond;

pin_project! {
    /// The response future of [`WarmUpService`](super::WarmUpService): the inner service's
    /// future, or the answer to a refused request.
    pub struct ResponseFuture<F, R> {
        #[pin]
        state: State<F, R>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, R> {
        Admitted {
            #[pin]
            future: F,
        },
        Refused {
            rejected: Rejected,
            responder: R,
        },
    }
}

impl<F, R> ResponseFuture<F, R> {
    pub(crate) fn admitted(future: F) -> Self {
        ResponseFuture {
            state: State::Admitted { future },
        }
    }

    pub(crate) fn refused(rejected: Rejected, responder: R) -> Self {
        ResponseFuture {
            state: State::Refused {
                rejected,
                responder,
            },
        }
    }
}

impl<F, T, E, R> Future for ResponseFuture<F, R>
where
    F: Future<Output = Result<T, E>>,
    R: Respond<Rejected, T, E>,
{
    type Output = Result<T, R::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted { future } => {
                Poll::Ready(ready!(future.poll(cx)).map_err(R::inner_error))
            }
            StateProj::Refused {
                rejected,
                responder,
            } => Poll::Ready(responder.respond(*rejected)),
        }
    }
}

impl<F, R> fmt::Debug for ResponseFuture<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Admitted { .. } => f.write_str("ResponseFuture::Admitted"),
            State::Refused { rejected, .. } => f
                .debug_struct("ResponseFuture::Refused")
                .field("rejected", rejected)
                .finish_non_exhaustive(),
        }
    }
}
