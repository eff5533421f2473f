//! The throttle: the SRE book's client-side rule over a sliding window.

use std::error::Error;
use std::fmt;

use super::draw::Draws;
use super::tally::Tally;
use super::window::Window;
use crate::clock::{Clock, MonotonicClock};
use crate::criticality::Criticality;

/// Client-side adaptive throttling: refuses a request locally, before it is sent, with the
/// probability `max(0, (requests − k·accepts) / (requests + 1))` over a sliding window (Google's
/// SRE book, chapter 21, "Handling Overload").
///
/// `requests` counts every request the application tried to send, once its outcome is known,
/// the ones refused here included; `accepts` counts the ones the backend accepted, that is,
/// answered with anything but an overload refusal. While the backend accepts at least one
/// request in `k`, nothing is refused; once it refuses more, the client sends about `k` times
/// what it accepts, so the backend keeps seeing a little more than it serves (and the client
/// learns when it has room again), while the rest is refused without a round trip.
///
/// Call [`try_send`](Self::try_send) before sending; once the request is sent, call
/// [`accepted`](Self::accepted) when the backend's answer is not an overload refusal (an error
/// other than overload counts as accepted: the backend took the request), and
/// [`refused`](Self::refused) when it is, or when the request ended without an answer (a
/// timeout). Requests still in flight count for nothing, so a burst at start-up is not refused
/// for want of answers.
///
/// # Example
///
/// ```
/// use admit::client::Throttle;
///
/// let throttle = Throttle::builder().build()?;
/// for _ in 0..10 {
///     if throttle.try_send().is_ok() {
///         // Sent; the backend answered, and not with an overload refusal:
///         throttle.accepted();
///     }
/// }
/// assert_eq!(throttle.snapshot().probability, 0.0);
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct Throttle<C = MonotonicClock> {
    pub(super) window: Window,
    pub(super) k: f64,
    pub(super) draws: Draws,
    pub(super) name: Option<std::borrow::Cow<'static, str>>,
    pub(super) clock: C,
    /// Every [`try_send`](Self::try_send), by class.
    pub(super) attempts: Tally,
    /// The attempts refused locally, by class.
    pub(super) throttled: Tally,
}

/// What a [`Throttle`] has decided since it was made, by the requests'
/// [`Criticality`]: cumulative, never reset (a destination that leaves a
/// [`Throttles`](super::Throttles) map returns with a new throttle, counting from 0).
///
/// [`Throttle::try_send`] counts as [`Critical`](Criticality::Critical); a
/// [`ThrottleLayer`](super::ThrottleLayer) counts each request as the class its
/// [`admit-criticality`](crate::criticality::CRITICALITY_HEADER) header claims (`critical`
/// without one).
///
/// ```
/// use admit::client::Throttle;
/// use admit::criticality::Criticality;
///
/// let throttle = Throttle::builder().build()?;
/// assert!(throttle.try_send().is_ok());
/// let totals = throttle.totals();
/// assert_eq!(totals.attempts(Criticality::Critical), 1);
/// assert_eq!(totals.throttled(Criticality::Critical), 0);
/// assert_eq!(totals.attempts(Criticality::Sheddable), 0);
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ThrottleTotals {
    attempts: [u64; Criticality::COUNT],
    throttled: [u64; Criticality::COUNT],
}

impl ThrottleTotals {
    /// Requests of `class` asked to be sent, the ones refused locally included.
    pub fn attempts(&self, class: Criticality) -> u64 {
        self.attempts[class.index()]
    }

    /// Requests of `class` refused locally, never sent.
    pub fn throttled(&self, class: Criticality) -> u64 {
        self.throttled[class.index()]
    }

    /// What `self` counted beyond `earlier`, a reading of the same throttle taken before it
    /// (0 where `earlier` is ahead).
    #[cfg(feature = "metrics")]
    pub(crate) fn since(&self, earlier: &ThrottleTotals) -> ThrottleTotals {
        ThrottleTotals {
            attempts: std::array::from_fn(|i| self.attempts[i].saturating_sub(earlier.attempts[i])),
            throttled: std::array::from_fn(|i| {
                self.throttled[i].saturating_sub(earlier.throttled[i])
            }),
        }
    }
}

/// What a [`Throttle`]'s window holds now.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThrottleSnapshot {
    /// Requests tried in the window, the ones refused locally included.
    pub requests: u64,
    /// Requests the backend accepted in the window.
    pub accepts: u64,
    /// The probability the next request is refused locally.
    pub probability: f64,
}

/// A request a [`Throttle`] refused locally: it was not sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttled {
    probability: f64,
}

impl Throttled {
    /// The refusal probability in force when the request was refused.
    pub fn probability(&self) -> f64 {
        self.probability
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "throttled locally: the backend refuses more than it accepts (refusing {:.0} % here)",
            self.probability * 100.0
        )
    }
}

impl Error for Throttled {}

/// The SRE book's refusal probability for `requests` and `accepts` in the window.
fn probability(requests: u64, accepts: u64, k: f64) -> f64 {
    let requests = requests as f64;
    ((requests - k * accepts as f64) / (requests + 1.0)).max(0.0)
}

impl<C: Clock> Throttle<C> {
    /// Whether to send a request now. A request refused here counts as tried and not
    /// accepted; one let through counts once [`accepted`](Self::accepted) or
    /// [`refused`](Self::refused) says how it ended.
    ///
    /// # Errors
    ///
    /// [`Throttled`], with the probability in force, when the draw refuses it.
    pub fn try_send(&self) -> Result<(), Throttled> {
        self.try_send_as(Criticality::Critical)
    }

    /// [`try_send`](Self::try_send) for a request of `class`, which its
    /// [totals](Self::totals) count it as.
    pub(crate) fn try_send_as(&self, class: Criticality) -> Result<(), Throttled> {
        self.attempts.add(class);
        let mut ring = self.window.at(self.clock.now_nanos());
        let (requests, accepts) = ring.sums();
        let probability = probability(requests, accepts, self.k);
        if probability > 0.0 && self.draws.next() < probability {
            ring.add(1, 0);
            drop(ring);
            self.throttled.add(class);
            return Err(Throttled { probability });
        }
        Ok(())
    }

    /// Counts a request sent and accepted: the backend answered with anything but an overload
    /// refusal.
    pub fn accepted(&self) {
        self.count(1, 1);
    }

    /// Counts a request sent and not accepted: the backend refused it as overloaded, or it
    /// ended without an answer.
    pub fn refused(&self) {
        self.count(1, 0);
    }

    fn count(&self, requests: u64, accepts: u64) {
        self.window
            .at(self.clock.now_nanos())
            .add(requests, accepts);
    }

    /// The window's counts and the refusal probability now.
    pub fn snapshot(&self) -> ThrottleSnapshot {
        let (requests, accepts) = self.window.at(self.clock.now_nanos()).sums();
        ThrottleSnapshot {
            requests,
            accepts,
            probability: probability(requests, accepts, self.k),
        }
    }

    /// The name given to the builder, if any: the metrics' `client` label.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl<C> Throttle<C> {
    /// The requests asked to be sent and refused locally since the throttle was made, by
    /// class: cumulative, unlike the [window](Self::snapshot). Reads a few atomics; takes no
    /// lock.
    pub fn totals(&self) -> ThrottleTotals {
        // Refusals first: each is counted after its attempt.
        let throttled = self.throttled.get();
        ThrottleTotals {
            attempts: self.attempts.get(),
            throttled,
        }
    }
}

impl<C> fmt::Debug for Throttle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttle")
            .field("bucket_nanos", &self.window.bucket_nanos())
            .field("k", &self.k)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
