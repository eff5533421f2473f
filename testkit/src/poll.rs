//! Driving a tower service without a runtime, for the tests that count allocations per
//! request: readiness, the call, and its response future, each polled once; a response body
//! polled to its end.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http_body::Body;
use tower_service::Service;

/// Sends `request` through `service` as a server would: `poll_ready`, `call`, then the
/// response future to completion, with a no-op waker.
///
/// # Panics
///
/// If the service is not ready at once or its future is pending: the services these tests
/// build answer at once.
pub fn call_now<S: Service<R>, R>(service: &mut S, request: R) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        service.poll_ready(&mut cx).is_ready(),
        "the service must be ready at once"
    );
    let mut future = pin!(service.call(request));
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the service must answer at once"),
    }
}

/// Polls `body` to its end with a no-op waker, as a server writing it would.
///
/// # Panics
///
/// If the body is pending or yields an error: the bodies these tests build are ready at once.
pub fn read_body_now<B: Body + Unpin>(mut body: B) {
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => return,
            Poll::Ready(Some(frame)) => assert!(frame.is_ok(), "a body error"),
            Poll::Pending => panic!("the body must be ready at once"),
        }
    }
}
