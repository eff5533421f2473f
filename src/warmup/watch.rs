//! The `tracing` events of a warm-up bucket: one when it reaches its full rate, one when idle
//! time brings it back below, never one per request.

use std::borrow::Cow;

use super::smooth::SmoothCurve;
use crate::sync::{AtomicBool, Ordering};

/// Where a [`WarmUp`](super::WarmUp) is at its full rate, with hysteresis: it reaches it when
/// an admission leaves its stored permits at or below the warning level, and falls back once
/// an admission finds idle time has refilled it halfway up the warm-up slope (the rate in
/// force then `2c / (1 + f)`, halfway in spacing between the full rate `c` and the cold one
/// `c / f`). A load that keeps the level near the warning level, each admission spending
/// what the gap before it refilled, logs once. Both bounds are shares of the maximum, which a
/// new rate leaves as they are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FullRate {
    /// At or below this fill the bucket reaches its full rate.
    warm_at: f64,
    /// At or above this fill a bucket at its full rate has fallen back.
    cold_at: f64,
}

impl FullRate {
    pub(crate) fn new(curve: &SmoothCurve) -> Self {
        let warm_at = curve.threshold() / curve.max();
        FullRate {
            warm_at,
            cold_at: (1.0 + warm_at) / 2.0,
        }
    }

    /// Whether a bucket that was (`was`) or was not at its full rate is at it with `fill`.
    #[inline]
    pub(crate) fn at(&self, was: bool, fill: f64) -> bool {
        if was {
            fill < self.cold_at
        } else {
            fill <= self.warm_at
        }
    }
}

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

    /// Notes whether a decision left the bucket at its full rate, `warm(was)` given whether it
    /// was; logs a change once, however many threads see it.
    #[inline]
    pub(crate) fn observe(
        &self,
        warm: impl FnOnce(bool) -> bool,
        permits_per_second: impl FnOnce() -> f64,
    ) {
        let was = self.warm.load(Ordering::Relaxed);
        let warm = warm(was);
        if warm != was {
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
