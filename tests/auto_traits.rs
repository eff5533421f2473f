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
