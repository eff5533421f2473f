//! The `tracing` events of a warm-up bucket: one when it reaches its full rate, one when idle
//! time brings it back below, never one per request.

use std::borrow::Cow;

use crate::sync::{AtomicBool, Ordering};

/// Whether a bucket was last seen at its full rate, and its name for the events.
#[derive(Debug)]
pub(crate) struct RateWatch {
    warm: AtomicBool,
    name: Option<Cow<'static, str>>,
}

impl RateWatch {
    pub(crate) fn new(warm: bool, name: Option<Cow<'static, str>>) -> Self {
        RateWatch {
            warm: AtomicBool::new(warm),
            name,
        }
    }

    /// Notes whether a decision left the bucket at its full rate; logs a change once, however
    /// many threads see it.
    #[inline]
    pub(crate) fn observe(&self, warm: bool, permits_per_second: impl FnOnce() -> f64) {
        if warm != self.warm.load(Ordering::Relaxed) {
            self.changed(warm, permits_per_second);
        }
    }

    #[cold]
    fn changed(&self, warm: bool, permits_per_second: impl FnOnce() -> f64) {
        if self.warm.swap(warm, Ordering::AcqRel) == warm {
            return;
        }
        let permits_per_second = permits_per_second();
        let limiter = self.name.as_deref().unwrap_or_default();
        if warm {
            tracing::info!(
                target: "admit::warmup",
                limiter,
                permits_per_second,
                "warm-up reached its full rate"
            );
        } else {
            tracing::info!(
                target: "admit::warmup",
                limiter,
                permits_per_second,
                "warm-up fell back below its full rate after idle time"
            );
        }
    }
}
