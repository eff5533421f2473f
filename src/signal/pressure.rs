//! One signal's reading, and the request it is read for.

use std::time::Duration;

use super::Cause;

/// One signal's reading: whether the system is overloaded, which share of the concurrency the
/// service has proven to carry may still be admitted (the headroom), and whether the request
/// it was read for is refused outright.
///
/// The headroom scales the shedder's limit whether or not this signal is hot: go-zero's CPU
/// signal lowers it from 1 at the threshold to 0.1 at a saturated CPU. Readings combine with
/// [`and`](Self::and).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pressure {
    cause: Option<Cause>,
    headroom: f64,
    /// How the reading ranks when combined: 0 without a cause, else the cause's rank plus one,
    /// with [`REFUSES`] set if it refuses.
    rank: u8,
}

/// The rank bit of a reading that refuses: above every cause's.
const REFUSES: u8 = 0x80;

impl Pressure {
    /// No pressure, full headroom.
    pub const CALM: Pressure = Pressure {
        cause: None,
        headroom: 1.0,
        rank: 0,
    };

    /// Overloaded by `cause`, with full headroom: the shedder applies its concurrency rule.
    #[inline]
    pub const fn overloaded(cause: Cause) -> Pressure {
        Pressure {
            cause: Some(cause),
            headroom: 1.0,
            rank: cause.rank() + 1,
        }
    }

    /// Overloaded by `cause`, and the request read for is refused whatever the concurrency.
    #[inline]
    pub const fn refuse(cause: Cause) -> Pressure {
        Pressure {
            cause: Some(cause),
            headroom: 1.0,
            rank: (cause.rank() + 1) | REFUSES,
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

    /// Whether the request read for is refused whatever the concurrency.
    #[inline]
    pub fn refuses(&self) -> bool {
        self.rank & REFUSES != 0
    }

    /// Two readings combined: overloaded if either is, refusing if either does, with the
    /// smaller headroom. The cause is the refusing reading's, else the higher-ranked one's
    /// (the CPU, then signals of your own, the queue, the runtime probe), else `self`'s.
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
        let (cause, rank) = if other.rank > self.rank {
            (other.cause, other.rank)
        } else {
            (self.cause, self.rank)
        };
        Pressure {
            cause,
            headroom: if other.headroom < self.headroom {
                other.headroom
            } else {
                self.headroom
            },
            rank: rank | (self.rank | other.rank) & REFUSES,
        }
    }
}

/// What a signal knows of one request as the shedder decides on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    now_nanos: u64,
    waited_nanos: Option<u64>,
}

impl Arrival {
    /// A request deciding at `now_nanos` (the shedder's clock), its wait unknown.
    #[inline]
    pub const fn at(now_nanos: u64) -> Arrival {
        Arrival {
            now_nanos,
            waited_nanos: None,
        }
    }

    /// The same request, having waited `waited` before reaching the shedder (in a proxy's
    /// queue, a socket backlog, a pool); saturates at 584 years.
    #[inline]
    #[must_use]
    pub fn with_wait(self, waited: Duration) -> Arrival {
        self.with_wait_nanos(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX))
    }

    /// [`with_wait`](Self::with_wait) in ns.
    #[inline]
    #[must_use]
    pub const fn with_wait_nanos(self, waited_nanos: u64) -> Arrival {
        Arrival {
            waited_nanos: Some(waited_nanos),
            ..self
        }
    }

    /// The clock reading of the decision.
    #[inline]
    pub const fn now_nanos(&self) -> u64 {
        self.now_nanos
    }

    /// How long the request waited before reaching the shedder, in ns, if known.
    #[inline]
    pub const fn wait_nanos(&self) -> Option<u64> {
        self.waited_nanos
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
    fn the_queue_outranks_the_probe_and_the_cpu_both() {
        let queue = Pressure::overloaded(Cause::Queue);
        let lag = Pressure::overloaded(Cause::RuntimeLag);
        let cpu = Pressure::overloaded(Cause::Cpu);
        assert_eq!(lag.and(queue).cause(), Some(Cause::Queue));
        assert_eq!(queue.and(cpu).cause(), Some(Cause::Cpu));
    }
}
