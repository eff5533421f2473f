//! One signal's reading.

use std::time::Duration;

use super::Cause;
use crate::clock::saturating_nanos;

/// One signal's reading: whether the system is overloaded, which share of the concurrency the
/// service has proven to carry may still be admitted (the headroom), whether the request it was
/// read for is refused outright, and optionally a floor for the limit and a retry hint.
///
/// The headroom scales the shedder's limit whether or not this signal is hot: go-zero's CPU
/// signal lowers it from 1 at the threshold to 0.1 at a saturated CPU. A
/// [floor](Self::with_limit_floor) keeps the limit at or above the proven concurrency and the
/// throughput times the floor, whatever the headroom. Readings combine with [`and`](Self::and).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pressure {
    cause: Option<Cause>,
    headroom: f64,
    /// How the reading ranks when combined: 0 without a cause, else the cause's rank plus one,
    /// with [`REFUSES`] set if it refuses.
    rank: u8,
    /// The retry hint in ns; 0: none.
    retry_nanos: u64,
    /// The floor for the limit in ns, plus one; 0: none.
    floor: u64,
}

/// The rank bit of a reading that refuses: above every cause's.
const REFUSES: u8 = 0x80;

impl Pressure {
    /// No pressure, full headroom.
    pub const CALM: Pressure = Pressure {
        cause: None,
        headroom: 1.0,
        rank: 0,
        retry_nanos: 0,
        floor: 0,
    };

    /// Overloaded by `cause`, with full headroom: the shedder applies its concurrency rule.
    #[inline]
    pub const fn overloaded(cause: Cause) -> Pressure {
        Pressure {
            cause: Some(cause),
            headroom: 1.0,
            rank: cause.rank() + 1,
            retry_nanos: 0,
            floor: 0,
        }
    }

    /// Overloaded by `cause`, and the request read for is refused whatever the concurrency.
    #[inline]
    pub const fn refuse(cause: Cause) -> Pressure {
        Pressure {
            cause: Some(cause),
            headroom: 1.0,
            rank: (cause.rank() + 1) | REFUSES,
            retry_nanos: 0,
            floor: 0,
        }
    }

    /// The same reading with `headroom`, the share of the proven concurrency to admit:
    /// clamped to `0.0..=1.0`. NaN counts as 0 (a signal that cannot compute its headroom
    /// fails closed). Even at 0 the shedder refuses only while more requests are in flight
    /// than none, so a request arriving to an idle service passes.
    #[inline]
    #[must_use]
    pub fn with_headroom(self, headroom: f64) -> Pressure {
        Pressure {
            headroom: if headroom.is_nan() {
                0.0
            } else {
                headroom.clamp(0.0, 1.0)
            },
            ..self
        }
    }

    /// The same reading with a retry hint: how long a refused client should wait before it
    /// retries (a queue gate's interval, a probe's tick), if this reading names the refusal.
    /// Without one the shedder answers its bucket's length, or the rest of its cool-off.
    /// Saturates at 584 years; zero is no hint.
    #[inline]
    #[must_use]
    pub const fn with_retry_after(self, retry_after: Duration) -> Pressure {
        self.with_retry_after_nanos(saturating_nanos(retry_after))
    }

    /// [`with_retry_after`](Self::with_retry_after) in ns.
    #[inline]
    #[must_use]
    pub(crate) const fn with_retry_after_nanos(self, retry_nanos: u64) -> Pressure {
        Pressure {
            retry_nanos,
            ..self
        }
    }

    /// The same reading with a floor for the shedder's limit on requests in flight: whatever
    /// the headroom, the limit is at least go-zero's (the proven concurrency) and the best
    /// throughput times `floor`, the concurrency at which requests take that long (Little's
    /// law). A signal that measures the waits themselves says so: a queue gate's floor is its
    /// target. Readings without a cause may carry one; it applies while the shedder is hot.
    #[inline]
    #[must_use]
    pub const fn with_limit_floor(self, floor: Duration) -> Pressure {
        self.with_limit_floor_nanos(saturating_nanos(floor))
    }

    /// [`with_limit_floor`](Self::with_limit_floor) in ns.
    #[inline]
    #[must_use]
    pub(crate) const fn with_limit_floor_nanos(self, floor_nanos: u64) -> Pressure {
        Pressure {
            floor: floor_nanos.saturating_add(1),
            ..self
        }
    }

    /// What overloads the system, or `None` if this reading sees no overload.
    #[inline]
    pub fn cause(&self) -> Option<Cause> {
        self.cause
    }

    /// The share of the proven concurrency to admit, `0.0..=1.0`.
    #[inline]
    pub fn headroom(&self) -> f64 {
        self.headroom
    }

    /// The retry hint, if the reading has one.
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        (self.retry_nanos > 0).then(|| Duration::from_nanos(self.retry_nanos))
    }

    /// The retry hint in ns, 0 without one.
    #[inline]
    pub(crate) fn retry_nanos(&self) -> u64 {
        self.retry_nanos
    }

    /// The floor for the limit, if the reading has one.
    #[inline]
    pub fn limit_floor(&self) -> Option<Duration> {
        self.floor_nanos().map(Duration::from_nanos)
    }

    /// The floor for the limit in ns, if the reading has one.
    #[inline]
    pub(crate) fn floor_nanos(&self) -> Option<u64> {
        self.floor.checked_sub(1)
    }

    /// The factor the shedder scales go-zero's `maxFlight` by: the headroom, or 1 while the
    /// reading has a floor (which keeps the limit at or above the proven concurrency).
    #[inline]
    pub(crate) fn limit_scale(&self) -> f64 {
        if self.floor > 0 { 1.0 } else { self.headroom }
    }

    /// Whether the request read for is refused whatever the concurrency.
    #[inline]
    pub fn refuses(&self) -> bool {
        self.rank & REFUSES != 0
    }

    /// Two readings combined: overloaded if either is, refusing if either does, with the
    /// smaller headroom and the larger floor. The cause and its retry hint are the refusing
    /// reading's, else the higher-ranked one's (the CPU, then signals of your own, the queue,
    /// the runtime probe), else `self`'s.
    ///
    /// ```
    /// use admit::signal::{Cause, Pressure};
    ///
    /// let queue = Pressure::overloaded(Cause::Queue);
    /// let cpu = Pressure::overloaded(Cause::Cpu).with_headroom(0.5);
    /// assert_eq!(queue.and(cpu).cause(), Some(Cause::Cpu));
    /// assert_eq!(queue.and(cpu).headroom(), 0.5);
    /// let late = Pressure::refuse(Cause::QueueDelay);
    /// assert_eq!(cpu.and(late).cause(), Some(Cause::QueueDelay));
    /// ```
    #[inline]
    #[must_use]
    pub fn and(self, other: Pressure) -> Pressure {
        let (cause, rank, retry_nanos) = if other.rank > self.rank {
            (other.cause, other.rank, other.retry_nanos)
        } else {
            (self.cause, self.rank, self.retry_nanos)
        };
        Pressure {
            cause,
            headroom: if other.headroom < self.headroom {
                other.headroom
            } else {
                self.headroom
            },
            rank: rank | (self.rank | other.rank) & REFUSES,
            retry_nanos,
            floor: self.floor.max(other.floor),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_combined_reading_whatever_its_rank() {
        let cpu = Pressure::overloaded(Cause::Cpu);
        let lag = Pressure::refuse(Cause::RuntimeLag);
        for (a, b) in [(cpu, lag), (lag, cpu)] {
            let both = a.and(b);
            assert_eq!(both.cause(), Some(Cause::RuntimeLag));
            assert!(both.refuses());
        }
    }

    #[test]
    fn equal_ranks_keep_the_first_and_calm_changes_nothing() {
        let disk = Pressure::overloaded(Cause::Custom("disk"));
        let pool = Pressure::overloaded(Cause::Custom("pool")).with_headroom(0.3);
        assert_eq!(disk.and(pool).cause(), Some(Cause::Custom("disk")));
        assert_eq!(disk.and(pool).headroom(), 0.3);
        assert_eq!(Pressure::CALM.and(pool), pool);
        assert_eq!(pool.and(Pressure::CALM), pool);
    }

    #[test]
    fn the_hint_follows_the_cause_and_the_larger_floor_wins() {
        let ms = Duration::from_millis;
        let queue = Pressure::overloaded(Cause::Queue)
            .with_retry_after(ms(100))
            .with_limit_floor(ms(5));
        let cpu = Pressure::overloaded(Cause::Cpu).with_headroom(0.5);
        let both = queue.and(cpu);
        assert_eq!((both.cause(), both.retry_after()), (Some(Cause::Cpu), None));
        assert_eq!(both.limit_floor(), Some(ms(5)));
        let calm_floor = Pressure::CALM.with_limit_floor(Duration::ZERO);
        assert_eq!(calm_floor.limit_floor(), Some(Duration::ZERO));
        assert_eq!(calm_floor.and(queue).limit_floor(), Some(ms(5)));
        assert_eq!(cpu.and(queue).retry_after(), None);
        let lag = Pressure::refuse(Cause::RuntimeLag).with_retry_after(ms(10));
        assert_eq!(cpu.and(lag).retry_after(), Some(ms(10)));
        assert_eq!(Pressure::CALM.limit_floor(), None);
    }

    #[test]
    fn the_queue_outranks_the_probe_and_the_cpu_both() {
        let queue = Pressure::overloaded(Cause::Queue);
        let lag = Pressure::overloaded(Cause::RuntimeLag);
        let cpu = Pressure::overloaded(Cause::Cpu);
        assert_eq!(lag.and(queue).cause(), Some(Cause::Queue));
        assert_eq!(queue.and(cpu).cause(), Some(Cause::Cpu));
    }
}
