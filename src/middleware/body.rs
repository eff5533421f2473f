//! A response body that holds its request's permit until it ends.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::classify::Outcome;
use super::limiter::Finish;
use crate::signal::cpu::CpuWait;

pin_project! {
    /// The body of a response an [`AdmitLayer`](super::AdmitLayer) admitted with
    /// [`AtBodyEnd`](super::AtBodyEnd): the inner body, holding the request's permit until its
    /// last frame (the permit then finishes with the response's outcome), an error (a failure)
    /// or its drop (cancelled). Refusals' answers hold nothing.
    pub struct AdmitBody<B, P> {
        #[pin]
        inner: B,
        held: Option<Held<P>>,
    }
}

/// A permit and what to finish it with.
struct Held<P> {
    permit: P,
    outcome: Outcome,
    cpu_wait: CpuWait,
}

impl<B, P: Finish> AdmitBody<B, P> {
    pub(crate) fn new(inner: B, permit: P, outcome: Outcome, cpu_wait: CpuWait) -> Self {
        AdmitBody {
            inner,
            held: Some(Held {
                permit,
                outcome,
                cpu_wait,
            }),
        }
    }
}

impl<B, P> AdmitBody<B, P> {
    pub(crate) fn bare(inner: B) -> Self {
        AdmitBody { inner, held: None }
    }

    /// Whether the body still holds its request's permit.
    pub fn in_flight(&self) -> bool {
        self.held.is_some()
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B: Default, P> Default for AdmitBody<B, P> {
    /// An empty inner body, holding nothing: what responders build refusals with (an outer
    /// layer's refusal of an inner layer's response type).
    fn default() -> Self {
        AdmitBody::bare(B::default())
    }
}

impl<B: Body, P: Finish> Body for AdmitBody<B, P> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let failed = matches!(polled, Poll::Ready(Some(Err(_))));
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended && let Some(mut held) = this.held.take() {
            let outcome = if failed { Outcome::Fail } else { held.outcome };
            held.permit.finish_after(outcome, held.cpu_wait);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: fmt::Debug, P> fmt::Debug for AdmitBody<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitBody")
            .field("inner", &self.inner)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}
