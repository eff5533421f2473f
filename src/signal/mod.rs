//! Overload signals: whether the system is under pressure right now.
//!
//! A [`Shedder`](crate::shed::Shedder) refuses requests only while some signal reports
//! pressure *and* more requests are in flight than the service has proven it can carry. The
//! signal says "the system is overloaded" and how much of the proven concurrency to allow
//! ([`Pressure`]); the shedder's concurrency rule, go-zero's, decides which requests go.
//!
//! - [`cpu`]: the CPU signal, go-zero's: hot at or above a threshold in ‰ of the CPU the
//!   process may use, with go-zero's overload factor as its headroom. Every shedder has one
//!   ([`CpuOverload`](cpu::CpuOverload), configured through the shedder's builder).
//! - Any other [`OverloadSignal`], added with
//!   [`ShedderBuilder::signal`](crate::shed::ShedderBuilder::signal): the shedder is hot while
//!   any of its signals is. Signals are type-erased, so adding one changes no type.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use admit::signal::{Cause, OverloadSignal, Pressure};
//!
//! /// Hot while an operator flag is set.
//! #[derive(Debug, Default)]
//! struct Maintenance(AtomicBool);
//!
//! impl OverloadSignal for Maintenance {
//!     fn pressure(&self, _now_nanos: u64) -> Pressure {
//!         if self.0.load(Ordering::Relaxed) {
//!             Pressure::overloaded(Cause::Custom("maintenance"))
//!         } else {
//!             Pressure::CALM
//!         }
//!     }
//! }
//!
//! let flag = Arc::new(Maintenance::default());
//! assert_eq!(flag.pressure(0), Pressure::CALM);
//! flag.0.store(true, Ordering::Relaxed);
//! assert_eq!(flag.pressure(0).cause(), Some(Cause::Custom("maintenance")));
//! ```

pub mod cpu;
pub mod queue;

use std::fmt;
use std::sync::Arc;

/// What put the system under pressure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// The CPU is at or above its threshold.
    Cpu,
    /// Requests wait in a queue longer than its target: a
    /// [`QueueGate`](queue::QueueGate) is hot.
    Queue,
    /// The runtime runs its timers late: a [`LagProbe`](queue::LagProbe) is shedding.
    RuntimeLag,
    /// A signal of your own, by its name.
    Custom(&'static str),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Cpu => f.write_str("cpu"),
            Cause::Queue => f.write_str("queue"),
            Cause::RuntimeLag => f.write_str("runtime-lag"),
            Cause::Custom(name) => f.write_str(name),
        }
    }
}

/// One signal's reading for one decision: whether the system is overloaded, and which share
/// of the concurrency the service has proven to carry may still be admitted (the headroom).
///
/// The headroom scales the shedder's limit whether or not this signal is hot: go-zero's CPU
/// signal lowers it from 1 at the threshold to 0.1 at a saturated CPU. With several signals
/// the smallest headroom applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pressure {
    cause: Option<Cause>,
    headroom: f64,
}

impl Pressure {
    /// No pressure, full headroom.
    pub const CALM: Pressure = Pressure {
        cause: None,
        headroom: 1.0,
    };

    /// Overloaded by `cause`, with full headroom.
    #[inline]
    pub const fn overloaded(cause: Cause) -> Pressure {
        Pressure {
            cause: Some(cause),
            headroom: 1.0,
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

    /// What overloads the system, or `None` if this signal sees no overload.
    #[inline]
    pub fn cause(&self) -> Option<Cause> {
        self.cause
    }

    /// The share of the proven concurrency to admit, `0.0..=1.0`.
    #[inline]
    pub fn headroom(&self) -> f64 {
        self.headroom
    }

    /// Two readings combined: overloaded if either is (by `self`'s cause first), with the
    /// smaller headroom.
    #[inline]
    #[must_use]
    pub fn and(self, other: Pressure) -> Pressure {
        Pressure {
            cause: self.cause.or(other.cause),
            headroom: if other.headroom < self.headroom {
                other.headroom
            } else {
                self.headroom
            },
        }
    }
}

/// A source of [`Pressure`]: is the system overloaded now?
///
/// Called on every admission decision of the shedder it is attached to, with the shedder's
/// clock reading, so it must be cheap (a few atomic loads) and must not block or allocate.
/// Closures `Fn(u64) -> Pressure` are signals too.
pub trait OverloadSignal: Send + Sync {
    /// The reading at `now_nanos` (the shedder's clock).
    fn pressure(&self, now_nanos: u64) -> Pressure;
}

impl<F: Fn(u64) -> Pressure + Send + Sync> OverloadSignal for F {
    #[inline]
    fn pressure(&self, now_nanos: u64) -> Pressure {
        self(now_nanos)
    }
}

impl<S: OverloadSignal + ?Sized> OverloadSignal for Arc<S> {
    #[inline]
    fn pressure(&self, now_nanos: u64) -> Pressure {
        (**self).pressure(now_nanos)
    }
}
