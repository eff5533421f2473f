//! A [`Clock`] on tokio's time, which a test pauses and advances.
//!
//! Include it with `#[path = "support/tokio_clock.rs"] mod tokio_clock;`.

use admit::clock::Clock;
use tokio::time::Instant;

/// tokio's time since the clock was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokioClock(Instant);

impl TokioClock {
    /// A clock reading 0 now.
    pub(crate) fn now() -> Self {
        TokioClock(Instant::now())
    }
}

impl Clock for TokioClock {
    fn now_nanos(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
