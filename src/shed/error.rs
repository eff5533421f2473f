//! Why the shedder refused a request.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::criticality::Criticality;
use crate::signal::Cause;

/// How many requests a [`Shedder`](super::Shedder) refused, by cause
/// ([`Shedder::dropped_by`](super::Shedder::dropped_by)); the refusals of all added signals
/// count together.
///
/// # Example
///
/// ```
/// use admit::shed::Shedder;
/// use admit::signal::Cause;
///
/// let shedder = Shedder::builder().build()?;
/// let drops = shedder.dropped_by();
/// assert_eq!(drops.total(), 0);
/// assert_eq!(drops.get(Cause::QueueDelay), 0);
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops(pub(crate) [u64; Cause::COUNT]);

impl Drops {
    /// The refusals for `cause` (for an added signal, all added signals').
    pub fn get(&self, cause: Cause) -> u64 {
        self.0[cause.index()]
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `(cause, count)` for every cause; added signals appear once, as `Cause::Custom("")`,
    /// and label as `signal`.
    pub fn iter(&self) -> impl Iterator<Item = (Cause, u64)> + '_ {
        Cause::ALL.into_iter().zip(self.0)
    }
}

/// The shedder refused a request: the service is overloaded.
///
/// Answer it with HTTP 503 (and `Retry-After`) or gRPC `RESOURCE_EXHAUSTED`. It carries why
/// and a retry hint, allocates nothing and is `Copy`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::signal::cpu::ManualCpu;
/// use admit::shed::Shedder;
/// use admit::signal::Cause;
///
/// let cpu = ManualCpu::new(0);
/// let shedder = Shedder::builder().clock(ManualClock::new()).cpu(cpu.clone()).build()?;
/// // Twenty requests in flight, five completed: the shedder has seen them queue up.
/// let mut permits: Vec<_> = (0..20).map(|_| shedder.allow().unwrap()).collect();
/// for permit in permits.drain(..5) {
///     permit.pass();
/// }
/// cpu.set(1000);
/// let overloaded = shedder.allow().unwrap_err();
/// assert_eq!(overloaded.reason(), Cause::Cpu);
/// assert_eq!(overloaded.retry_after(), Duration::from_millis(100)); // one bucket
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overloaded {
    reason: Cause,
    class: Criticality,
    retry_after_nanos: u64,
}

impl Overloaded {
    #[inline]
    pub(crate) fn new(reason: Cause, class: Criticality, retry_after_nanos: u64) -> Self {
        Overloaded {
            reason,
            class,
            retry_after_nanos,
        }
    }

    /// The class of the refused request ([`Critical`](Criticality::Critical) for one that
    /// carried none).
    pub fn class(&self) -> Criticality {
        self.class
    }

    /// Why the request was refused.
    pub fn reason(&self) -> Cause {
        self.reason
    }

    /// A hint for when to retry: the rest of the cool-off period if that is what refused the
    /// request, otherwise one bucket of the window, when the shedder's limit is next
    /// recomputed.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos)
    }
}

impl fmt::Display for Overloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Cause::Cpu => f.write_str("service overloaded: CPU at or above its threshold"),
            Cause::CoolOff => f.write_str("service overloaded: cooling off after an overload"),
            Cause::Custom(name) => write!(f, "service overloaded: {name}"),
            Cause::Queue => {
                f.write_str("service overloaded: requests wait longer than the queue target")
            }
            Cause::QueueDelay => {
                f.write_str("service overloaded: the request waited too long in the queue")
            }
            Cause::RuntimeLag => {
                f.write_str("service overloaded: the runtime runs its timers late")
            }
        }
    }
}

/// With the `tower` feature its [`source`](Error::source) is
/// [`Refused`](crate::respond::Refused), so [`is_refusal`](crate::respond::is_refusal)
/// recognises it.
impl Error for Overloaded {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        crate::error::refusal_source()
    }
}

#[cfg(feature = "tower")]
impl crate::respond::Refusal for Overloaded {
    fn retry_after(&self) -> Duration {
        Overloaded::retry_after(self)
    }

    fn reason(&self) -> &'static str {
        self.reason.label()
    }

    fn criticality(&self) -> Option<Criticality> {
        Some(self.class)
    }
}

/// `RESOURCE_EXHAUSTED` with the retry hint as `grpc-retry-pushback-ms`.
#[cfg(feature = "tonic")]
impl From<Overloaded> for tonic::Status {
    fn from(overloaded: Overloaded) -> tonic::Status {
        crate::respond::GrpcResponder::default().status(overloaded)
    }
}
