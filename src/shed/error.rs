//! Why the shedder refused a request.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::signal::Cause;

/// What made the shedder refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OverloadReason {
    /// The CPU is at or above the threshold, and more requests are in flight than the service
    /// has shown it can carry.
    Cpu,
    /// No signal is hot any more, but one was less than the cool-off period ago, and more
    /// requests are in flight than the service has shown it can carry.
    CoolOff,
    /// A signal added with [`ShedderBuilder::signal`](super::ShedderBuilder::signal), by the
    /// name its [`Cause::Custom`] gives, reports overload, and
    /// more requests are in flight than the service has shown it can carry.
    Signal(&'static str),
    /// The shedder's [queue gate](super::ShedderBuilder::queue_gate) is hot (every request of
    /// the last interval waited longer than its target), and more requests are in flight than
    /// the service has shown it can carry.
    Queue,
    /// The queue gate is hot and this request waited more than twice its target: by the time
    /// it would be served, its client has likely given up.
    QueueDelay,
    /// The shedder's [runtime lag probe](super::ShedderBuilder::runtime_probe) fires late: the
    /// runtime is too busy to serve more (refused at random, in the share the probe's controller
    /// sets, or all while the probe misses its heartbeat).
    RuntimeLag,
}

impl OverloadReason {
    /// The reason for a refusal while `cause` reports overload.
    #[inline]
    pub(crate) fn of(cause: Cause) -> OverloadReason {
        match cause {
            Cause::Cpu => OverloadReason::Cpu,
            Cause::Queue => OverloadReason::Queue,
            Cause::RuntimeLag => OverloadReason::RuntimeLag,
            Cause::Custom(name) => OverloadReason::Signal(name),
        }
    }

    /// A short name for logs and labels: `cpu`, `cool-off`, `queue`, `queue-delay`,
    /// `runtime-lag`, or the signal's name.
    ///
    /// ```
    /// use admit::shed::OverloadReason;
    ///
    /// assert_eq!(OverloadReason::CoolOff.as_str(), "cool-off");
    /// assert_eq!(OverloadReason::Signal("queue").to_string(), "queue");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            OverloadReason::Cpu => "cpu",
            OverloadReason::CoolOff => "cool-off",
            OverloadReason::Signal(name) => name,
            OverloadReason::Queue => "queue",
            OverloadReason::QueueDelay => "queue-delay",
            OverloadReason::RuntimeLag => "runtime-lag",
        }
    }
}

impl OverloadReason {
    /// The reason as one of a fixed set of tokens: [`as_str`](Self::as_str), with every added
    /// signal as `signal` (its name is the signal's own and may be any string).
    #[cfg(any(feature = "tower", feature = "metrics"))]
    pub(crate) fn label(&self) -> &'static str {
        match self {
            OverloadReason::Signal(_) => "signal",
            reason => reason.as_str(),
        }
    }

    /// How many reasons there are, counting every added signal as one.
    pub(crate) const COUNT: usize = 6;

    /// Every reason, an added signal's under an empty name, in the order of
    /// [`index`](Self::index).
    pub(crate) const ALL: [OverloadReason; Self::COUNT] = [
        OverloadReason::Cpu,
        OverloadReason::CoolOff,
        OverloadReason::Signal(""),
        OverloadReason::Queue,
        OverloadReason::QueueDelay,
        OverloadReason::RuntimeLag,
    ];

    /// The reason's counter among [`COUNT`](Self::COUNT).
    #[inline]
    pub(crate) fn index(&self) -> usize {
        match self {
            OverloadReason::Cpu => 0,
            OverloadReason::CoolOff => 1,
            OverloadReason::Signal(_) => 2,
            OverloadReason::Queue => 3,
            OverloadReason::QueueDelay => 4,
            OverloadReason::RuntimeLag => 5,
        }
    }
}

/// How many requests a [`Shedder`](super::Shedder) refused, by reason
/// ([`Shedder::dropped_by`](super::Shedder::dropped_by)); the refusals of all added signals
/// count together.
///
/// # Example
///
/// ```
/// use admit::shed::{OverloadReason, Shedder};
///
/// let shedder = Shedder::builder().build()?;
/// let drops = shedder.dropped_by();
/// assert_eq!(drops.total(), 0);
/// assert_eq!(drops.get(OverloadReason::QueueDelay), 0);
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops(pub(crate) [u64; OverloadReason::COUNT]);

impl Drops {
    /// The refusals for `reason` (for an added signal, all added signals').
    pub fn get(&self, reason: OverloadReason) -> u64 {
        self.0[reason.index()]
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `(reason, count)` for every reason; added signals appear once, as
    /// `OverloadReason::Signal("")`, and label as `signal`.
    pub fn iter(&self) -> impl Iterator<Item = (OverloadReason, u64)> + '_ {
        OverloadReason::ALL.into_iter().zip(self.0)
    }
}

/// [`as_str`](OverloadReason::as_str).
impl fmt::Display for OverloadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
/// use admit::shed::{OverloadReason, Shedder};
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
/// assert_eq!(overloaded.reason(), OverloadReason::Cpu);
/// assert_eq!(overloaded.retry_after(), Duration::from_millis(100)); // one bucket
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overloaded {
    reason: OverloadReason,
    retry_after_nanos: u64,
}

impl Overloaded {
    #[inline]
    pub(crate) fn new(reason: OverloadReason, retry_after_nanos: u64) -> Self {
        Overloaded {
            reason,
            retry_after_nanos,
        }
    }

    /// Why the request was refused.
    pub fn reason(&self) -> OverloadReason {
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
            OverloadReason::Cpu => f.write_str("service overloaded: CPU at or above its threshold"),
            OverloadReason::CoolOff => {
                f.write_str("service overloaded: cooling off after an overload")
            }
            OverloadReason::Signal(name) => write!(f, "service overloaded: {name}"),
            OverloadReason::Queue => {
                f.write_str("service overloaded: requests wait longer than the queue target")
            }
            OverloadReason::QueueDelay => {
                f.write_str("service overloaded: the request waited too long in the queue")
            }
            OverloadReason::RuntimeLag => {
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
    type Boxed = ShedRejection;

    fn retry_after(&self) -> Duration {
        Overloaded::retry_after(self)
    }

    fn reason(&self) -> &'static str {
        self.reason.label()
    }
}

/// `RESOURCE_EXHAUSTED` with the retry hint as `grpc-retry-pushback-ms`.
#[cfg(feature = "tonic")]
impl From<Overloaded> for tonic::Status {
    fn from(overloaded: Overloaded) -> tonic::Status {
        crate::respond::GrpcResponder::default().status(overloaded)
    }
}

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::rejection::ShedRejection;

#[cfg(feature = "tower")]
mod rejection {
    use std::error::Error;
    use std::fmt;

    /// The error a [`ShedLayer`](crate::shed::ShedLayer) service returns, boxed, for a request
    /// it refused (with the default [`BoxErrorResponder`](crate::respond::BoxErrorResponder)).
    ///
    /// It is zero-sized, so boxing it into a [`BoxError`](crate::respond::BoxError) allocates
    /// nothing: shedding stays cheap exactly when the service is overloaded. Test for it with
    /// `error.is::<ShedRejection>()`; its [`source`](Error::source) is
    /// [`Refused`](crate::respond::Refused), like every admit refusal's. It carries no retry
    /// hint; the
    /// [`HttpResponder`](crate::respond::HttpResponder) and
    /// [`GrpcResponder`](crate::respond::GrpcResponder) send one.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::respond::BoxError;
    /// use admit::shed::error::ShedRejection;
    ///
    /// let error: BoxError = Box::new(ShedRejection::new());
    /// assert!(error.is::<ShedRejection>());
    /// assert_eq!(error.to_string(), "service overloaded");
    /// ```
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct ShedRejection {
        _private: (),
    }

    impl ShedRejection {
        /// A rejection.
        pub const fn new() -> Self {
            ShedRejection { _private: () }
        }
    }

    impl fmt::Debug for ShedRejection {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("ShedRejection")
        }
    }

    impl fmt::Display for ShedRejection {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("service overloaded")
        }
    }

    impl Error for ShedRejection {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&crate::respond::Refused)
        }
    }

    /// `RESOURCE_EXHAUSTED`, without a pushback (the boxed error carries no retry hint).
    #[cfg(feature = "tonic")]
    impl From<ShedRejection> for tonic::Status {
        fn from(rejection: ShedRejection) -> tonic::Status {
            crate::respond::rejection_status(rejection)
        }
    }
}
