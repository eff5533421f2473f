//! The drain service's response future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::header::CONNECTION;
use http::{HeaderValue, Response, StatusCode};
use pin_project_lite::pin_project;

use super::{DrainBody, Draining};
use crate::drain::{Phase, RequestGuard};
use crate::middleware::offered;
use crate::respond::Respond;

pin_project! {
    /// The response future of a [`DrainService`](super::DrainService): the inner future,
    /// holding the request's in-flight count, or the answer to a refused request.
    #[derive(Debug)]
    pub struct DrainFuture<F, R> {
        #[pin]
        state: State<F, R>,
        http1: bool,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F, R> {
        Admitted {
            #[pin]
            future: F,
            guard: Option<RequestGuard>,
        },
        Refused {
            refusal: Draining,
            responder: R,
        },
    }
}

impl<F, R> DrainFuture<F, R> {
    pub(crate) fn admitted(future: F, guard: RequestGuard, http1: bool) -> Self {
        DrainFuture {
            state: State::Admitted {
                future,
                guard: Some(guard),
            },
            http1,
        }
    }

    pub(crate) fn refused(refusal: Draining, responder: R, http1: bool) -> Self {
        DrainFuture {
            state: State::Refused { refusal, responder },
            http1,
        }
    }
}

impl<F, R, B, E> Future for DrainFuture<F, R>
where
    F: Future<Output = Result<Response<B>, E>>,
    R: Respond<Draining, Response<DrainBody<B>>, E>,
{
    type Output = Result<Response<DrainBody<B>>, R::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let http1 = *this.http1;
        match this.state.project() {
            StateProj::Admitted { future, guard } => {
                let inside = offered::Inside::enter();
                let response = ready!(future.poll(cx)).map_err(R::inner_error)?;
                drop(inside);
                let guard = guard.take();
                let announced = guard
                    .as_ref()
                    .is_some_and(|guard| guard.drain().phase() >= Phase::Announced);
                // An upgrade's request ends with its 101; the socket and any session outlive it.
                let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
                let guard = guard.filter(|_| !switching);
                let mut response = response.map(|body| DrainBody::new(body, guard));
                if http1 && announced && !switching {
                    close(&mut response);
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Refused { refusal, responder } => {
                let mut response = responder.respond(*refusal)?;
                if http1 {
                    close(&mut response);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}

/// Adds `Connection: close` unless the response already closes its connection: on HTTP/1,
/// how a server retires a keep-alive connection after this response.
pub(crate) fn close<B>(response: &mut Response<B>) {
    let headers = response.headers_mut();
    let closes = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"));
    if !closes {
        headers.append(CONNECTION, HeaderValue::from_static("close"));
    }
}
