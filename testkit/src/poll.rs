//! Driving a tower service without a runtime, for the tests that count allocations per
//! request: readiness, the call, and its response future, each polled once.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

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
