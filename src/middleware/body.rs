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
        let this = self.project();
        let (polled, end) = poll_to_end(this.inner, cx);
        if let Some(end) = end
            && let Some(mut held) = this.held.take()
        {
            let outcome = match end {
                End::Last => held.outcome,
                End::Error => Outcome::Fail,
            };
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

/// How a body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Its last frame (or the end of its frames).
    Last,
    /// An error.
    Error,
}

/// What polling a body for a frame gives.
type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

/// Polls `body` for a frame, and says whether that ended it: no more frames, an error, or a
/// frame after which the body reports its end.
#[inline]
fn poll_to_end<B: Body>(mut body: Pin<&mut B>, cx: &mut Context<'_>) -> (Polled<B>, Option<End>) {
    let polled = body.as_mut().poll_frame(cx);
    let end = match &polled {
        Poll::Ready(None) => Some(End::Last),
        Poll::Ready(Some(Err(_))) => Some(End::Error),
        Poll::Ready(Some(Ok(_))) => body.is_end_stream().then_some(End::Last),
        Poll::Pending => None,
    };
    (polled, end)
}

impl<B: fmt::Debug, P> fmt::Debug for AdmitBody<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitBody")
            .field("inner", &self.inner)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::task::Waker;

    use super::*;

    /// How a permit ended: `None` while held, `Some(None)` dropped unfinished (cancelled).
    type Ending = Rc<Cell<Option<Option<Outcome>>>>;

    struct Recorder(Ending);

    impl Finish for Recorder {
        fn finish(&mut self, outcome: Outcome) {
            self.0.set(Some(Some(outcome)));
        }
    }

    impl Drop for Recorder {
        fn drop(&mut self) {
            if self.0.get().is_none() {
                self.0.set(Some(None));
            }
        }
    }

    /// Frames given up front, then the end; ends early after an error.
    struct Frames(VecDeque<Result<&'static [u8], &'static str>>);

    impl Body for Frames {
        type Data = &'static [u8];
        type Error = &'static str;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|frame| frame.map(Frame::data)))
        }
    }

    fn body(
        frames: &[Result<&'static [u8], &'static str>],
    ) -> (AdmitBody<Frames, Recorder>, Ending) {
        let ending = Ending::default();
        let body = AdmitBody::new(
            Frames(frames.iter().copied().collect()),
            Recorder(Rc::clone(&ending)),
            Outcome::Pass,
            CpuWait::NONE,
        );
        (body, ending)
    }

    fn poll(body: &mut AdmitBody<Frames, Recorder>) -> Polled<Frames> {
        Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_permit_ends_with_the_last_frame_as_classified() {
        let (mut body, ending) = body(&[Ok(b"a"), Ok(b"b")]);
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        assert!(body.in_flight());
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        assert!(matches!(poll(&mut body), Poll::Ready(None)));
        assert!(!body.in_flight());
        assert_eq!(ending.get(), Some(Some(Outcome::Pass)));
    }

    #[test]
    fn a_body_error_ends_the_request_as_failed() {
        let (mut body, ending) = body(&[Ok(b"a"), Err("reset")]);
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        assert_eq!(ending.get(), None, "still streaming");
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Err("reset")))));
        assert_eq!(ending.get(), Some(Some(Outcome::Fail)));
    }

    #[test]
    fn a_body_dropped_before_its_end_is_cancelled() {
        let (mut body, ending) = body(&[Ok(b"a"), Ok(b"b")]);
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Ok(_)))));
        drop(body);
        assert_eq!(ending.get(), Some(None));
    }
}
