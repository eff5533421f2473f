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
    use admit::respond::{BoxErrorResponder, GrpcResponder, HttpResponder};
    use admit::shed::classify::{ErrorsFail, ErrorsPass, GoZeroGrpc, GoZeroHttp};
    use admit::shed::cpu::{ManualCpu, SystemCpu};
    use admit::shed::error::ShedRejection;
    use admit::shed::{ShedLayer, ShedService};
    use admit::warmup::error::WarmUpRejection;
    use admit::warmup::{WarmUpInterceptor, WarmUpLayer, WarmUpService};

    use super::{boxable_error, shareable};

    fn clonable<T: Clone + Send + Sync + 'static>() {}
    fn sendable<T: Send + 'static>() {}

    type Inner = Ready<Result<http::Response<()>, Infallible>>;

    #[test]
    fn layers_services_and_futures_are_send() {
        clonable::<ShedLayer>();
        clonable::<ShedLayer<ManualClock, ManualCpu, GoZeroHttp, HttpResponder>>();
        clonable::<ShedLayer<ManualClock, SystemCpu, GoZeroGrpc, GrpcResponder>>();
        clonable::<ShedLayer<ManualClock, SystemCpu, ErrorsFail, BoxErrorResponder>>();
        clonable::<ShedService<(), ManualClock, ManualCpu, ErrorsPass, BoxErrorResponder>>();
        clonable::<WarmUpLayer>();
        clonable::<WarmUpLayer<ManualClock, HttpResponder>>();
        clonable::<WarmUpService<(), ManualClock, GrpcResponder>>();
        clonable::<WarmUpInterceptor>();
        sendable::<
            admit::shed::future::ResponseFuture<
                Inner,
                ManualClock,
                SystemCpu,
                GoZeroHttp,
                HttpResponder,
            >,
        >();
        sendable::<admit::warmup::future::ResponseFuture<Inner, BoxErrorResponder>>();
        shareable::<
            admit::shed::future::ResponseFuture<
                Inner,
                ManualClock,
                SystemCpu,
                GoZeroHttp,
                HttpResponder,
            >,
        >();
    }

    #[test]
    fn rejections_are_zero_sized_errors() {
        boxable_error::<ShedRejection>();
        boxable_error::<WarmUpRejection>();
        assert_eq!(size_of::<ShedRejection>(), 0);
        assert_eq!(size_of::<WarmUpRejection>(), 0);
    }
}
