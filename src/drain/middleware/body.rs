//! A response body that keeps its request in flight until it ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::drain::RequestGuard;
use crate::middleware::poll_to_end;

pin_project! {
    /// The body of a response the [`DrainLayer`](super::DrainLayer) passed: the inner body,
    /// holding the request's in-flight count until its last frame, an error, or its drop.
    /// Refusals and `101 Switching Protocols` carry no count.
    #[derive(Debug)]
    pub struct DrainBody<B> {
        #[pin]
        inner: B,
        guard: Option<RequestGuard>,
    }
}

impl<B> DrainBody<B> {
    pub(crate) fn new(inner: B, guard: Option<RequestGuard>) -> Self {
        DrainBody { inner, guard }
    }

    /// Whether the body still counts its request in flight.
    pub fn in_flight(&self) -> bool {
        self.guard.is_some()
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B: Default> Default for DrainBody<B> {
    /// An empty inner body, counting nothing: what responders build refusals with.
    fn default() -> Self {
        DrainBody {
            inner: B::default(),
            guard: None,
        }
    }
}

impl<B: Body> Body for DrainBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let (polled, end) = poll_to_end(this.inner, cx);
        if end.is_some() {
            this.guard.take();
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
