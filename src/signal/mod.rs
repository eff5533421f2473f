//! Overload signals: whether the system is under pressure right now.
//!
//! A [`Shedder`](crate::shed::Shedder) refuses requests only while some signal reports
//! pressure *and* more requests are in flight than the service has proven it can carry. The
//! signal says "the system is overloaded" and how much of the proven concurrency to allow
//! ([`Pressure`]); the shedder's concurrency rule, go-zero's, decides which requests go. A
//! signal may also refuse one request outright ([`Pressure::refuse`]).
//!
//! Every signal is an [`OverloadSignal`], read once per decision for the request deciding
//! ([`Arrival`]); the readings combine with [`Pressure::and`], which ranks their causes, for
//! decisions and snapshots alike.
//!
//! - [`cpu`]: the CPU signal, go-zero's: hot at or above a threshold in ‰ of the CPU the
//!   process may use, with go-zero's overload factor as its headroom. Every shedder has one
//!   (configured through the shedder's builder).
//! - [`queue`]: the queue-delay gate, hot while requests wait longer than a target, which
//!   refuses a request that waited too long; and the runtime lag probe, which estimates the
//!   waits where none are measured.
//! - Any other [`OverloadSignal`], added with
//!   [`ShedderBuilder::signal`](crate::shed::ShedderBuilder::signal): the shedder is hot while
//!   any of its signals is. Signals are type-erased, so adding one changes no type.
//!
//! See the [guide](crate::guide::signals) for what each signal sees and when it applies.
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

mod arrival;
mod cause;
mod pressure;

use std::sync::Arc;

pub use self::arrival::Arrival;
pub use self::cause::Cause;
pub use self::pressure::Pressure;

/// A source of [`Pressure`]: is the system overloaded now?
///
/// Read on every admission decision of the shedder it is attached to, so it must be cheap (a
/// few atomic loads) and must not block or allocate. Closures `Fn(u64) -> Pressure` are
/// signals too.
pub trait OverloadSignal: Send + Sync {
    /// The reading at `now_nanos` (the shedder's clock), for no request in particular: what
    /// snapshots report. Changes nothing.
    fn pressure(&self, now_nanos: u64) -> Pressure;

    /// The reading for one request as the shedder decides on it (default:
    /// [`pressure`](Self::pressure) at its time). A signal may record what the request tells
    /// (a queue gate records its wait) and refuse it outright.
    #[inline]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        self.pressure(arrival.now_nanos())
    }
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

    #[inline]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        (**self).assess(arrival)
    }
}
