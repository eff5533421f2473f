//! What a bound has seen.

use crate::criticality::Criticality;

/// A [`Bound`](super::Bound) at one moment: the bound, the requests in service and waiting, and
/// what became of the requests that could not enter at once, by class
/// ([`Bound::snapshot`](super::Bound::snapshot)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BoundSnapshot {
    /// How many requests may be in service now.
    pub limit: u64,
    /// The lowest the bound goes.
    pub floor: u64,
    /// The highest the bound goes.
    pub ceiling: u64,
    /// Requests in service.
    pub in_service: u64,
    /// Requests waiting.
    pub waiting: u64,
    /// Requests counted by this bound's layer first (see
    /// [`Limiter::count_offered`](crate::middleware::Limiter::count_offered)).
    pub offered: u64,
    /// By class, from the least important
    /// ([`Criticality::index`](crate::criticality::Criticality::index)).
    pub classes: [WaitCounts; Criticality::COUNT],
}

/// What became of one class's requests that could not enter at once. Since the bound was
/// built: `waited` is `entered + cancelled + pushed_out + timed_out` plus the waiters whose
/// deadline ended their wait, plus those still waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitCounts {
    /// Requests that joined the queue.
    pub waited: u64,
    /// Waiters that entered.
    pub entered: u64,
    /// Waiters dropped before they entered (a client that went away).
    pub cancelled: u64,
    /// Requests refused at once: the queue was full, with no lower class to push out.
    pub full: u64,
    /// Waiters a request of a higher class pushed out.
    pub pushed_out: u64,
    /// Waiters refused for having waited as long as the queue allows.
    pub timed_out: u64,
    /// Requests refused because their deadline could not be met, at once or after waiting.
    pub deadline: u64,
}
