//! Why an acquire did not pass.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// The limiter has no room for this request now.
///
/// Carries a retry hint: the earliest time at which the same request could pass if nothing else
/// arrived in the meantime and the limit did not change. Use it for an HTTP `Retry-After`
/// header (round up to whole seconds) or a gRPC `grpc-retry-pushback-ms` trailer. Producing it
/// allocates nothing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::warmup::WarmUp;
/// use admit::warmup::sentinel::SentinelWarmUp;
///
/// let clock = ManualClock::new();
/// // A flat 10 per second (cold factor 1), spaced exactly (no burst): one every 100 ms.
/// let limiter = WarmUp::builder(10.0)
///     .cold_factor(1)
///     .burst(Duration::ZERO)
///     .clock(clock.clone())
///     .build()?;
/// limiter.try_acquire().unwrap();
/// clock.advance(Duration::from_millis(30));
/// let rejected = limiter.try_acquire().unwrap_err();
/// assert_eq!(rejected.retry_after(), Duration::from_millis(70));
///
/// // Sentinel counts passes per rolling second. Cold: 10 / 3 ⇒ three requests fit.
/// let limiter = SentinelWarmUp::builder(10.0).clock(ManualClock::new()).build()?;
/// for _ in 0..3 {
///     limiter.try_acquire().unwrap();
/// }
/// let rejected = limiter.try_acquire().unwrap_err();
/// // The three passes leave the rolling one-second window one second after they passed.
/// assert_eq!(rejected.retry_after(), Duration::from_secs(1));
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    retry_after_nanos: u64,
}

impl Rejected {
    pub(crate) fn new(retry_after_nanos: u64) -> Self {
        Rejected { retry_after_nanos }
    }

    /// How long to wait before trying again.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos)
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate limit reached; retry after {:?}",
            self.retry_after()
        )
    }
}

/// With the `tower` feature its [`source`](Error::source) is
/// [`Refused`](crate::respond::Refused), so [`is_refusal`](crate::respond::is_refusal)
/// recognises it.
impl Error for Rejected {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        crate::error::refusal_source()
    }
}

#[cfg(feature = "tower")]
impl crate::respond::Refusal for Rejected {
    fn retry_after(&self) -> Duration {
        Rejected::retry_after(self)
    }

    fn reason(&self) -> &'static str {
        "rate-limit"
    }
}

/// `RESOURCE_EXHAUSTED` with the retry hint as `grpc-retry-pushback-ms`.
#[cfg(feature = "tonic")]
impl From<Rejected> for tonic::Status {
    fn from(rejected: Rejected) -> tonic::Status {
        crate::respond::GrpcResponder::default().status(rejected)
    }
}

/// `RESOURCE_EXHAUSTED`; for a request that can never fit, with a pushback of −1 ("do not
/// retry").
#[cfg(feature = "tonic")]
impl From<AcquireError> for tonic::Status {
    fn from(error: AcquireError) -> tonic::Status {
        match error {
            AcquireError::Rejected(rejected) => rejected.into(),
            AcquireError::ExceedsCapacity { .. } => crate::respond::status(
                tonic::Code::ResourceExhausted,
                error.to_string(),
                Some((-1, "rate-limit")),
                std::sync::Arc::new(crate::respond::Refused),
            ),
        }
    }
}

/// Why [`SentinelWarmUp::try_acquire_n`](super::sentinel::SentinelWarmUp::try_acquire_n) did not
/// pass.
///
/// # Example
///
/// ```
/// use admit::warmup::AcquireError;
/// use admit::warmup::sentinel::SentinelWarmUp;
///
/// // Sentinel admits at most its highest per-second limit at once.
/// let limiter = SentinelWarmUp::builder(10.0).build()?;
/// assert_eq!(
///     limiter.try_acquire_n(11),
///     Err(AcquireError::ExceedsCapacity { requested: 11, capacity: 10 })
/// );
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireError {
    /// No room now; retrying later can succeed.
    Rejected(Rejected),
    /// `requested` is more than the limiter can ever admit at once (`capacity`, the floor of its
    /// highest limit). Retrying cannot help; split the request.
    ExceedsCapacity {
        /// The permits asked for.
        requested: u32,
        /// The most permits a single acquire can obtain.
        capacity: u32,
    },
}

impl AcquireError {
    /// The retry hint, or `None` if retrying cannot succeed.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AcquireError::Rejected(rejected) => Some(rejected.retry_after()),
            AcquireError::ExceedsCapacity { .. } => None,
        }
    }
}

impl From<Rejected> for AcquireError {
    fn from(rejected: Rejected) -> Self {
        AcquireError::Rejected(rejected)
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Rejected(rejected) => rejected.fmt(f),
            AcquireError::ExceedsCapacity {
                requested,
                capacity,
            } => write!(
                f,
                "requested {requested} permits but at most {capacity} can ever be acquired at once"
            ),
        }
    }
}

impl Error for AcquireError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            AcquireError::Rejected(rejected) => Some(rejected),
            AcquireError::ExceedsCapacity { .. } => None,
        }
    }
}
