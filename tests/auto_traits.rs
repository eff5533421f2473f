//! Compile-time checks: limiters can be shared across threads and tasks, and every error can be
//! boxed into tower's `BoxError` (`Box<dyn Error + Send + Sync>`).

use std::error::Error;

use admit::ConfigError;
use admit::clock::{CoarseClock, ManualClock, MonotonicClock};
use admit::warmup::{AcquireError, Curve, Rejected, WarmUp, WarmUpBuilder, WarmUpSnapshot};

fn shareable<T: Send + Sync + 'static>() {}
fn boxable_error<T: Error + Send + Sync + 'static>() {}
fn copyable<T: Copy + Send + Sync>() {}

#[test]
fn limiters_and_clocks_are_send_and_sync() {
    shareable::<WarmUp>();
    shareable::<WarmUp<ManualClock>>();
    shareable::<WarmUp<CoarseClock>>();
    shareable::<WarmUp<std::sync::Arc<dyn admit::clock::Clock>>>();
    shareable::<WarmUpBuilder<MonotonicClock>>();
    shareable::<admit::shed::Shedder>();
    shareable::<admit::shed::Shedder<ManualClock>>();
    shareable::<admit::bound::Bound>();
    shareable::<admit::client::Throttle>();
    shareable::<admit::client::Throttle<ManualClock>>();
    shareable::<admit::client::Throttles<String, MonotonicClock>>();
    shareable::<admit::client::RetryBudget>();
    shareable::<MonotonicClock>();
    shareable::<ManualClock>();
    shareable::<CoarseClock>();
}

#[test]
fn errors_box_into_tower_errors() {
    boxable_error::<Rejected>();
    boxable_error::<AcquireError>();
    boxable_error::<ConfigError>();
    boxable_error::<admit::bound::Busy>();
    boxable_error::<admit::client::Throttled>();
    #[cfg(feature = "http")]
    boxable_error::<admit::client::DeadlineExceeded>();
}

#[test]
fn small_values_are_copy() {
    copyable::<Rejected>();
    copyable::<AcquireError>();
    copyable::<WarmUpSnapshot>();
    copyable::<Curve>();
    copyable::<MonotonicClock>();
    copyable::<admit::client::ThrottleTotals>();
    copyable::<admit::client::RetryBudgetTotals>();
}

/// The tower layers, their services and futures move across threads and tasks, as axum
/// (`Clone + Send + Sync` services, `Send` futures) and tonic require.
#[cfg(feature = "tonic")]
mod layers {
    use std::convert::Infallible;
    use std::future::Ready;
    use std::task::{Context, Poll};

    use admit::bound::{Bound, BoundLayer};

    use admit::clock::ManualClock;
    use admit::middleware::classify::{ErrorsFail, ErrorsPass, GoZeroGrpc, GoZeroHttp};
    use admit::middleware::{AdmitService, ResponseFuture};
    use admit::respond::{BoxErrorResponder, GrpcResponder, HttpResponder, Refused};
    use admit::shed::{ShedLayer, Shedder};
    use admit::warmup::{WarmUp, WarmUpInterceptor, WarmUpLayer};

    use super::{boxable_error, shareable};

    fn clonable<T: Clone + Send + Sync + 'static>() {}
    fn sendable<T: Send + 'static>() {}

    /// A service answering at once.
    #[derive(Clone)]
    struct Inner;

    impl tower::Service<Request> for Inner {
        type Response = http::Response<()>;
        type Error = Infallible;
        type Future = Ready<Result<http::Response<()>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request) -> Self::Future {
            std::future::ready(Ok(http::Response::new(())))
        }
    }

    type Request = http::Request<()>;

    #[test]
    fn layers_services_and_futures_are_send() {
        clonable::<ShedLayer>();
        clonable::<ShedLayer<ManualClock, GoZeroHttp, HttpResponder>>();
        clonable::<ShedLayer<ManualClock, GoZeroGrpc, GrpcResponder>>();
        clonable::<ShedLayer<ManualClock, ErrorsFail, BoxErrorResponder>>();
        clonable::<AdmitService<(), Shedder<ManualClock>, ErrorsPass, BoxErrorResponder>>();
        clonable::<WarmUpLayer>();
        clonable::<WarmUpLayer<WarmUp<ManualClock>, ErrorsPass, HttpResponder>>();
        clonable::<AdmitService<(), WarmUp<ManualClock>, ErrorsPass, GrpcResponder>>();
        clonable::<WarmUpInterceptor>();
        clonable::<BoundLayer>();
        clonable::<BoundLayer<ManualClock, GoZeroHttp, HttpResponder>>();
        clonable::<admit::client::DeadlineLayer>();
        clonable::<admit::client::DeadlineService<Inner>>();
        sendable::<admit::client::DeadlineFuture<Ready<Result<(), Infallible>>>>();
        clonable::<admit::middleware::propagate::ScopeLayer<admit::middleware::TimeoutHeader>>();
        sendable::<ResponseFuture<Inner, Request, Shedder<ManualClock>, GoZeroHttp, HttpResponder>>(
        );
        sendable::<ResponseFuture<Inner, Request, WarmUp, ErrorsPass, BoxErrorResponder>>();
        sendable::<ResponseFuture<Inner, Request, Bound, GoZeroHttp, HttpResponder>>();
        shareable::<ResponseFuture<Inner, Request, Shedder<ManualClock>, GoZeroHttp, HttpResponder>>(
        );
    }

    #[test]
    fn the_boxed_refusal_is_a_zero_sized_error() {
        boxable_error::<Refused>();
        assert_eq!(size_of::<Refused>(), 0);
    }
}
