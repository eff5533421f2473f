//! One request, as the layer's readers fill it and the limiters and signals read it.

use std::time::Duration;

use crate::clock::saturating_nanos;
use crate::criticality::Criticality;
use crate::signal::queue::header::HeaderError;

/// One request as admit sees it: what the layer's [readers](crate::middleware::Inspect) read
/// from it (its wait, the age of a proxy's stamp, its class, its HTTP version), and the clock
/// reading its limiter decides at. Readers fill it, limiters take it
/// ([`Shedder::allow_with`](crate::shed::Shedder::allow_with),
/// [`WarmUp::try_acquire_with`](crate::warmup::WarmUp::try_acquire_with),
/// [`Limiter::admit`](crate::middleware::Limiter::admit)), and signals read it
/// ([`OverloadSignal::assess`](super::OverloadSignal::assess)). What no reader read is unknown:
/// `None`, or `false`.
///
/// The clock reading is the limiter's: it reads its own clock once as it decides and sets it
/// with [`at`](Self::at) before its signals see the request.
///
/// ```
/// use std::time::Duration;
/// use admit::criticality::Criticality;
/// use admit::signal::Arrival;
///
/// let arrival = Arrival::new()
///     .with_wait(Duration::from_millis(3))
///     .with_class(Criticality::Sheddable);
/// assert_eq!(arrival.wait_nanos(), Some(3_000_000));
/// assert_eq!(arrival.class(), Some(Criticality::Sheddable));
/// assert_eq!(arrival.now_nanos(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    now_nanos: u64,
    wait_nanos: Option<u64>,
    stamp_age: Option<Result<i64, HeaderError>>,
    class: Option<Criticality>,
    http1: bool,
    time_left_nanos: Option<u64>,
}

impl Arrival {
    /// Nothing known, at clock reading 0.
    pub const fn new() -> Self {
        Arrival {
            now_nanos: 0,
            wait_nanos: None,
            stamp_age: None,
            class: None,
            http1: false,
            time_left_nanos: None,
        }
    }

    /// The same request deciding at `now_nanos` on its limiter's clock.
    #[inline]
    #[must_use]
    pub const fn at(self, now_nanos: u64) -> Self {
        Arrival { now_nanos, ..self }
    }

    /// With how long the request waited before reaching the limiter (in a proxy's queue, a
    /// socket backlog, a pool); saturates at 584 years.
    #[inline]
    #[must_use]
    pub const fn with_wait(self, wait: Duration) -> Self {
        self.with_wait_nanos(Some(saturating_nanos(wait)))
    }

    /// With the wait in ns, or none.
    #[inline]
    pub(crate) const fn with_wait_nanos(self, wait_nanos: Option<u64>) -> Self {
        Arrival { wait_nanos, ..self }
    }

    /// With the age of the request-start stamp a proxy put on the request: the service's wall
    /// clock less the stamp in signed ns (the wait plus the clocks' offset), or why the stamp
    /// could not be read. Without a [wait](Self::with_wait), the shedder takes the age less
    /// its [skew floor](crate::shed::ShedderBuilder::skew_floor) as the wait, and counts the
    /// errors ([`ShedSnapshot::header_errors`](crate::shed::ShedSnapshot::header_errors)).
    #[inline]
    #[must_use]
    pub const fn with_stamp_age(self, age: Result<i64, HeaderError>) -> Self {
        Arrival {
            stamp_age: Some(age),
            ..self
        }
    }

    /// With the request's class.
    #[inline]
    #[must_use]
    pub const fn with_class(self, class: Criticality) -> Self {
        Arrival {
            class: Some(class),
            ..self
        }
    }

    /// With whether the request came over HTTP/1 (0.9, 1.0 or 1.1).
    #[inline]
    #[must_use]
    pub const fn with_http1(self, http1: bool) -> Self {
        Arrival { http1, ..self }
    }

    /// The clock reading the decision uses (0 until a limiter sets it).
    #[inline]
    pub const fn now_nanos(&self) -> u64 {
        self.now_nanos
    }

    /// How long the request waited before reaching the limiter, in ns, if known.
    #[inline]
    pub const fn wait_nanos(&self) -> Option<u64> {
        self.wait_nanos
    }

    /// The age of the request's start stamp, or why it could not be read; `None` without a
    /// stamp.
    #[inline]
    pub const fn stamp_age(&self) -> Option<Result<i64, HeaderError>> {
        self.stamp_age
    }

    /// The request's class, if read. A limiter takes a request without one as
    /// [`Critical`](Criticality::Critical), the default.
    #[inline]
    pub const fn class(&self) -> Option<Criticality> {
        self.class
    }

    /// Whether the request came over HTTP/1: the drain then closes its connection when it
    /// answers.
    #[inline]
    pub const fn http1(&self) -> bool {
        self.http1
    }

    /// With the time the request has left before its caller gives up (its deadline, as
    /// gRPC's `grpc-timeout` carries it): a [`Bound`](crate::bound::Bound) refuses it rather
    /// than let it wait past the time its service would still fit in. Saturates at 584
    /// years.
    #[inline]
    #[must_use]
    pub const fn with_time_left(self, left: Duration) -> Self {
        Arrival {
            time_left_nanos: Some(saturating_nanos(left)),
            ..self
        }
    }

    /// The time the request has left, ns, if known.
    #[inline]
    pub const fn time_left_nanos(&self) -> Option<u64> {
        self.time_left_nanos
    }

    /// What `self` knows, and what `other` knows that `self` does not (the clock reading is
    /// `self`'s unless it is 0).
    #[inline]
    #[must_use]
    #[cfg(feature = "tower")]
    pub(crate) const fn or(self, other: Arrival) -> Self {
        Arrival {
            now_nanos: if self.now_nanos != 0 {
                self.now_nanos
            } else {
                other.now_nanos
            },
            wait_nanos: match self.wait_nanos {
                Some(wait) => Some(wait),
                None => other.wait_nanos,
            },
            stamp_age: match self.stamp_age {
                Some(age) => Some(age),
                None => other.stamp_age,
            },
            class: match self.class {
                Some(class) => Some(class),
                None => other.class,
            },
            http1: self.http1 || other.http1,
            time_left_nanos: match self.time_left_nanos {
                Some(left) => Some(left),
                None => other.time_left_nanos,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "tower")]
    fn or_keeps_what_the_first_knows_and_adds_the_rest() {
        let wait = Arrival::new().with_wait(Duration::from_millis(7));
        let class = Arrival::new()
            .with_class(Criticality::Sheddable)
            .with_http1(true)
            .with_wait(Duration::from_millis(1));
        let both = wait.or(class);
        assert_eq!(both.wait_nanos(), Some(7_000_000));
        assert_eq!(both.class(), Some(Criticality::Sheddable));
        assert!(both.http1());
        assert_eq!(Arrival::new().or(both), both);
        assert_eq!(both.or(Arrival::new()), both);
    }

    #[test]
    fn a_wait_beyond_u64_nanos_saturates() {
        let arrival = Arrival::new().with_wait(Duration::MAX);
        assert_eq!(arrival.wait_nanos(), Some(u64::MAX));
    }
}
