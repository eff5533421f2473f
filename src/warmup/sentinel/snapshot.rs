//! What a Sentinel bucket reports about itself.

use crate::warmup::Phase;
use crate::warmup::snapshot::progress;

/// A point-in-time view of a [`SentinelWarmUp`](super::SentinelWarmUp) limiter.
///
/// Tokens are reported as they are *after* the current second's update, even if no call has
/// made that update yet, so a snapshot taken just before a call agrees with the decision the
/// call is about to make.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct SentinelSnapshot {
    /// Tokens stored now, between 0 and `max_tokens`.
    pub stored_tokens: f64,
    /// The warning level `W`: below it the full rate applies.
    pub warning_tokens: f64,
    /// The maximum `M`: a full bucket is cold.
    pub max_tokens: f64,
    /// The limit in force now, in requests per rolling second (see
    /// [`SentinelCurve::qps_limit`](super::SentinelCurve::qps_limit)).
    pub qps_limit: f64,
    /// Passes counted in the current rolling window (Sentinel's `passQps`).
    pub window_passes: u64,
    /// How warm the limiter is.
    pub phase: Phase,
}

impl SentinelSnapshot {
    /// Warm-up progress from 0.0 (cold) to 1.0 (warm): how far the stored tokens have drained
    /// from the maximum towards the warning level.
    pub fn progress(&self) -> f64 {
        progress(self.stored_tokens, self.warning_tokens, self.max_tokens)
    }
}
