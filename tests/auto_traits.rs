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
    shareable::<MonotonicClock>();
    shareable::<ManualClock>();
    shareable::<CoarseClock>();
}

#[test]
fn errors_box_into_tower_errors() {
    boxable_error::<Rejected>();
    boxable_error::<AcquireError>();
    boxable_error::<ConfigError>();
}

#[test]
fn small_values_are_copy() {
    copyable::<Rejected>();
    copyable::<AcquireError>();
    copyable::<WarmUpSnapshot>();
    copyable::<Curve>();
    copyable::<MonotonicClock>();
}

/// The tower layers, their services and futures move across threads and tasks, as axum
/// (`Clone + Send + Sync` services, `Send` futures) and tonic require.
#[cfg(feature = "tonic")]
mod layers {
    use std::convert::Infallible;
    use std::future::Ready;

    use admit::clock::ManualClock;
    use admit::middleware::classify::{ErrorsFail, ErrorsPass, GoZeroGrpc, GoZeroHttp};
    use admit::middleware::{AdmitService, ResponseFuture};
    use admit::respond::{BoxErrorResponder, GrpcResponder, HttpResponder, Refused};
    use admit::shed::{ShedLayer, Shedder};
    use admit::warmup::{WarmUp, WarmUpInterceptor, WarmUpLayer};

    use super::{boxable_error, shareable};

    fn clonable<T: Clone + Send + Sync + 'static>() {}
    fn sendable<T: Send + 'static>() {}

    type Inner = Ready<Result<http::Response<()>, Infallible>>;

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
        sendable::<ResponseFuture<Inner, Shedder<ManualClock>, GoZeroHttp, HttpResponder>>();
        sendable::<ResponseFuture<Inner, WarmUp, ErrorsPass, BoxErrorResponder>>();
        shareable::<ResponseFuture<Inner, Shedder<ManualClock>, GoZeroHttp, HttpResponder>>();
    }

    #[test]
    fn the_boxed_refusal_is_a_zero_sized_error() {
        boxable_error::<Refused>();
        assert_eq!(size_of::<Refused>(), 0);
    }
}
