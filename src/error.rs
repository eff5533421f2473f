//! The crate-wide configuration error.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// A limiter's configuration was rejected by its builder.
///
/// Builders validate everything up front, so a limiter that was built never panics, never
/// computes NaN and never silently admits nothing forever. Each variant names the offending
/// setting (also available as [`setting`](ConfigError::setting)) and carries the value that was
/// refused.
///
/// # Example
///
/// ```
/// use admit::ConfigError;
/// use admit::warmup::WarmUp;
///
/// let err = WarmUp::builder(f64::NAN).build().unwrap_err();
/// assert!(matches!(err, ConfigError::InvalidRate { .. }));
/// assert_eq!(err.setting(), "permits_per_second");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `permits_per_second` is zero, negative, NaN or infinite. A rate must be a finite number
    /// greater than zero (and, for [`WarmUp`](crate::warmup::WarmUp), not so extreme, around 1e-299
    /// or 1e298 per second, that its curve leaves the range of a double).
    InvalidRate {
        /// The rate that was given.
        permits_per_second: f64,
    },
    /// `permits_per_second` is larger than Sentinel's bucket can count: a half-second window counts at
    /// most `max` admissions.
    RateTooHigh {
        /// The rate that was given.
        permits_per_second: f64,
        /// The largest rate supported.
        max: f64,
    },
    /// `cold_factor` is below `min`, or not a finite number. The cold rate is
    /// `permits_per_second / cold_factor`: below 1 the bucket would run faster cold than warm;
    /// Sentinel's formulas need a whole factor of at least 2 (at 1 they divide by zero).
    ColdFactorTooSmall {
        /// The factor that was given.
        cold_factor: f64,
        /// The smallest factor accepted.
        min: f64,
    },
    /// `warm_up_period` is zero. With no warm-up period there is no curve to follow; Guava's
    /// equivalent silently stops limiting (google/guava#2730).
    ZeroWarmUpPeriod,
    /// `warm_up_period` is not a whole number of seconds, which Sentinel's bucket requires (Sentinel
    /// counts the period in integer seconds).
    FractionalWarmUpPeriod {
        /// The period that was given.
        warm_up_period: Duration,
    },
    /// `permits_per_second × warm_up_period` is too large for Sentinel's 32-bit integer
    /// arithmetic: the product, and the maximum token count, must stay below 2³¹. (Java would
    /// silently saturate or wrap and build a different curve than the one configured.)
    TokenOverflow {
        /// The rate that was given.
        permits_per_second: f64,
        /// The period that was given.
        warm_up_period: Duration,
    },
    /// The cold limit is below one request per second.
    ///
    /// The cold limit is `permits_per_second / cold_factor`, as Sentinel computes it: in
    /// [`SentinelWarmUp`](crate::warmup::sentinel::SentinelWarmUp) Java's integer truncations can
    /// push it just below one even where the quotient is exactly one (5 rps, factor 5, 7 s gives
    /// 0.9999999999999999). Such a configuration is not a warm-up limiter: started cold, a
    /// per-second limiter cannot admit a single request, and since it only warms up by admitting
    /// requests, it admits nothing, forever. Sentinel does exactly that, except when
    /// `(int)(P·c) < f − 1` (its warning level `W` is 0) and its maximum `M` is not 0: its first
    /// token update then lands in its dead zone at `W`, and it never warms up but admits the full
    /// rate from the start (3 rps, 1 s, factor 5 admits 3 per second). Raise the rate or lower
    /// the cold factor.
    ColdRateBelowOne {
        /// The rate that was given.
        permits_per_second: f64,
        /// The factor that was given.
        cold_factor: u32,
        /// The cold limit those settings give, in requests per second.
        cold_limit: f64,
    },
    /// A rolling window has fewer than `min` buckets. The shedder never counts the bucket in
    /// progress, so its window needs two to see any history; a client throttle's needs one.
    TooFewBuckets {
        /// The bucket count that was given.
        buckets: u32,
        /// The fewest buckets allowed.
        min: u32,
    },
    /// A rolling window has more than `max` buckets: each bucket takes memory, and the
    /// shedder's window is scanned once per bucket while the CPU is hot.
    TooManyBuckets {
        /// The bucket count that was given.
        buckets: u32,
        /// The most buckets allowed.
        max: u32,
    },
    /// `window / buckets` is shorter than `min`: the shedder measures latencies in whole
    /// milliseconds, so shorter buckets cannot hold meaningful samples, and a client
    /// throttle's window would move on every request.
    BucketTooShort {
        /// The window that was given.
        window: Duration,
        /// The bucket count that was given.
        buckets: u32,
        /// The shortest bucket allowed.
        min: Duration,
    },
    /// `cpu_threshold` is outside `1..=999` ‰. At 0 every moment would count as overloaded; at
    /// 1000 or above the CPU could never reach it (and go-zero's overload factor divides by
    /// `1000 − threshold`).
    CpuThresholdOutOfRange {
        /// The threshold that was given, in ‰.
        cpu_threshold: u32,
    },
    /// A duration setting is shorter than `min` (zero included).
    DurationTooShort {
        /// The setting's name.
        setting: &'static str,
        /// The duration that was given.
        value: Duration,
        /// The shortest duration accepted.
        min: Duration,
    },
    /// A duration setting is longer than the clock can count (about 584 years).
    DurationTooLong {
        /// The setting's name.
        setting: &'static str,
        /// The duration that was given.
        value: Duration,
    },
    /// A client throttle's multiplier `k` is below 1 or not a finite number. Below 1 the
    /// throttle would refuse requests from a backend that accepts every one.
    MultiplierOutOfRange {
        /// The multiplier that was given.
        k: f64,
    },
    /// A retry budget's `ratio` is outside 0 to 1000, or its `floor_per_second` is negative
    /// or not a finite number (or so large that the window's floor is not).
    BudgetOutOfRange {
        /// The setting's name.
        setting: &'static str,
        /// The value that was given.
        value: f64,
    },
    /// A retry policy's `max_attempts` is not 1 to `max`: 0 would send nothing, and each
    /// attempt beyond a few multiplies what an overloaded server is offered.
    AttemptsOutOfRange {
        /// The attempts that were given.
        attempts: u32,
        /// The most allowed.
        max: u32,
    },
    /// A map of client throttles may hold 0 destinations, or more than `max`: each holds a
    /// window.
    TooManyDestinations {
        /// The capacity that was given.
        capacity: usize,
        /// The most allowed.
        max: usize,
    },
    /// A limiter's `name` is empty: names label metrics and logs, and an empty label reads
    /// as no label at all. Leave the name unset instead.
    EmptyName,
    /// A queue-delay gate's `target` is not between zero and its `interval` (both exclusive),
    /// or longer than `max`: CoDel sheds when every sojourn of an interval exceeded the target,
    /// so the target must be positive and shorter than the interval.
    QueueTargetOutOfRange {
        /// The target that was given.
        target: Duration,
        /// The interval that was given.
        interval: Duration,
        /// The longest target supported.
        max: Duration,
    },
    /// A queue-delay gate's `hot_share` is not in `(0, 1]` (NaN included): it is the share of an
    /// interval's waits that must exceed the target for the gate to be hot, so zero would make
    /// every interval hot.
    HotShareOutOfRange {
        /// The share that was given.
        hot_share: f64,
    },
    /// A warm-up bucket's `critical_share` is not in `[0, 1]` (NaN included): it is the share
    /// of the burst that only the critical classes may use.
    CriticalShareOutOfRange {
        /// The share that was given.
        critical_share: f64,
    },
    /// A drain's `deadline` is not after its `propagation_delay`: the drain would expire before
    /// it refused a single request.
    DeadlineNotAfterDelay {
        /// The deadline that was given (counted from the drain's start).
        deadline: Duration,
        /// The delay that was given.
        propagation_delay: Duration,
    },
    /// A drain's `reconnect_spread` is not shorter than the time between the end of the
    /// propagation delay and the deadline: the last sessions would be told to reconnect after
    /// the drain expired.
    ReconnectSpreadTooLong {
        /// The spread that was given.
        reconnect_spread: Duration,
        /// `deadline − propagation_delay`.
        window: Duration,
    },
    /// A bound's `floor` is zero or above its `ceiling`: the bound lives between them, and a
    /// bound of zero would let nothing in.
    BoundOutOfRange {
        /// The floor that was given (or the default).
        floor: u32,
        /// The ceiling that was given (or the default).
        ceiling: u32,
    },
    /// A bound's `queue_capacity` is above `max`: the places are allocated up front.
    QueueTooLong {
        /// The capacity that was given.
        queue_capacity: u32,
        /// The largest capacity accepted.
        max: u32,
    },
}

impl ConfigError {
    /// The name of the builder setting that was refused.
    pub fn setting(&self) -> &'static str {
        match self {
            ConfigError::InvalidRate { .. } | ConfigError::RateTooHigh { .. } => {
                "permits_per_second"
            }
            ConfigError::ColdFactorTooSmall { .. } => "cold_factor",
            ConfigError::ZeroWarmUpPeriod | ConfigError::FractionalWarmUpPeriod { .. } => {
                "warm_up_period"
            }
            ConfigError::TokenOverflow { .. } => "permits_per_second × warm_up_period",
            ConfigError::ColdRateBelowOne { .. } => "permits_per_second / cold_factor",
            ConfigError::TooFewBuckets { .. } | ConfigError::TooManyBuckets { .. } => "buckets",
            ConfigError::BucketTooShort { .. } => "window / buckets",
            ConfigError::CpuThresholdOutOfRange { .. } => "cpu_threshold",
            ConfigError::DurationTooShort { setting, .. }
            | ConfigError::DurationTooLong { setting, .. } => setting,
            ConfigError::MultiplierOutOfRange { .. } => "k",
            ConfigError::BudgetOutOfRange { setting, .. } => setting,
            ConfigError::AttemptsOutOfRange { .. } => "max_attempts",
            ConfigError::TooManyDestinations { .. } => "capacity",
            ConfigError::EmptyName => "name",
            ConfigError::QueueTargetOutOfRange { .. } => "target",
            ConfigError::HotShareOutOfRange { .. } => "hot_share",
            ConfigError::CriticalShareOutOfRange { .. } => "critical_share",
            ConfigError::DeadlineNotAfterDelay { .. } => "deadline",
            ConfigError::ReconnectSpreadTooLong { .. } => "reconnect_spread",
            ConfigError::BoundOutOfRange { .. } => "floor",
            ConfigError::QueueTooLong { .. } => "queue_capacity",
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidRate { permits_per_second } => write!(
                f,
                "invalid `permits_per_second` ({permits_per_second}): must be a finite number \
                 greater than zero"
            ),
            ConfigError::RateTooHigh {
                permits_per_second,
                max,
            } => write!(
                f,
                "invalid `permits_per_second` ({permits_per_second}): Sentinel's bucket counts at most \
                 {max} permits per second"
            ),
            ConfigError::ColdFactorTooSmall { cold_factor, min } => write!(
                f,
                "invalid `cold_factor` ({cold_factor}): must be a finite number at least {min}"
            ),
            ConfigError::ZeroWarmUpPeriod => {
                write!(
                    f,
                    "invalid `warm_up_period` (0 s): must be greater than zero"
                )
            }
            ConfigError::FractionalWarmUpPeriod { warm_up_period } => write!(
                f,
                "invalid `warm_up_period` ({warm_up_period:?}): Sentinel's bucket needs a whole number \
                 of seconds"
            ),
            ConfigError::TokenOverflow {
                permits_per_second,
                warm_up_period,
            } => write!(
                f,
                "invalid `permits_per_second` × `warm_up_period` ({permits_per_second} × \
                 {warm_up_period:?}): the token count would overflow 32-bit integers"
            ),
            ConfigError::ColdRateBelowOne {
                permits_per_second,
                cold_factor,
                cold_limit,
            } => write!(
                f,
                "invalid `permits_per_second` / `cold_factor` ({permits_per_second} / \
                 {cold_factor}): the cold limit ({cold_limit} per second) is below one request \
                 per second, so the limiter could never admit a request while cold and would \
                 never warm up"
            ),
            ConfigError::TooFewBuckets { buckets, min } => write!(
                f,
                "invalid `buckets` ({buckets}): the window needs at least {min}, because the \
                 bucket in progress is never counted"
            ),
            ConfigError::TooManyBuckets { buckets, max } => {
                write!(f, "invalid `buckets` ({buckets}): at most {max}")
            }
            ConfigError::BucketTooShort {
                window,
                buckets,
                min,
            } => write!(
                f,
                "invalid `window` / `buckets` ({window:?} / {buckets}): a bucket must last at \
                 least {min:?}"
            ),
            ConfigError::CpuThresholdOutOfRange { cpu_threshold } => write!(
                f,
                "invalid `cpu_threshold` ({cpu_threshold} ‰): must be between 1 and 999 ‰"
            ),
            ConfigError::DurationTooShort {
                setting,
                value,
                min,
            } => write!(
                f,
                "invalid `{setting}` ({value:?}): must be at least {min:?}"
            ),
            ConfigError::DurationTooLong { setting, value } => write!(
                f,
                "invalid `{setting}` ({value:?}): longer than the clock can count (584 years)"
            ),
            ConfigError::TooManyDestinations { capacity, max } => write!(
                f,
                "invalid `capacity` ({capacity}): a map of throttles holds 1 to {max} destinations"
            ),
            ConfigError::AttemptsOutOfRange { attempts, max } => {
                write!(f, "invalid `max_attempts` ({attempts}): must be 1 to {max}")
            }
            ConfigError::BudgetOutOfRange { setting, value } => write!(
                f,
                "invalid `{setting}` ({value}): a ratio must be within 0 and 1000, a floor a \
                 finite number at least 0"
            ),
            ConfigError::MultiplierOutOfRange { k } => {
                write!(f, "invalid `k` ({k}): must be a finite number at least 1")
            }
            ConfigError::EmptyName => {
                f.write_str("invalid `name` (\"\"): must not be empty; leave it unset instead")
            }
            ConfigError::QueueTargetOutOfRange {
                target,
                interval,
                max,
            } => write!(
                f,
                "invalid `target` ({target:?}): must be above zero, below the interval \
                 ({interval:?}) and at most {max:?}"
            ),
            ConfigError::HotShareOutOfRange { hot_share } => write!(
                f,
                "invalid `hot_share` ({hot_share}): must be above 0 and at most 1"
            ),
            ConfigError::CriticalShareOutOfRange { critical_share } => write!(
                f,
                "invalid `critical_share` ({critical_share}): must be between 0 and 1"
            ),
            ConfigError::DeadlineNotAfterDelay {
                deadline,
                propagation_delay,
            } => write!(
                f,
                "invalid `deadline` ({deadline:?}): must be after the propagation delay \
                 ({propagation_delay:?})"
            ),
            ConfigError::ReconnectSpreadTooLong {
                reconnect_spread,
                window,
            } => write!(
                f,
                "invalid `reconnect_spread` ({reconnect_spread:?}): must be shorter than the \
                 deadline minus the propagation delay ({window:?})"
            ),
            ConfigError::BoundOutOfRange { floor, ceiling } => write!(
                f,
                "invalid `floor` ({floor}): must be at least 1 and at most the ceiling ({ceiling})"
            ),
            ConfigError::QueueTooLong {
                queue_capacity,
                max,
            } => write!(
                f,
                "invalid `queue_capacity` ({queue_capacity}): must be at most {max}"
            ),
        }
    }
}

impl Error for ConfigError {}

/// The check every builder makes of the name it was given: an empty one is
/// [`ConfigError::EmptyName`].
pub(crate) fn check_name(name: Option<&str>) -> Result<(), ConfigError> {
    match name {
        Some("") => Err(ConfigError::EmptyName),
        _ => Ok(()),
    }
}

/// What a limiter's refusal reports as its [`source`](Error::source): with the `tower` feature
/// the [`Refused`](crate::respond::Refused) marker, which
/// [`is_refusal`](crate::respond::is_refusal) looks for.
pub(crate) fn refusal_source() -> Option<&'static (dyn Error + 'static)> {
    #[cfg(feature = "tower")]
    return Some(&crate::respond::Refused);
    #[cfg(not(feature = "tower"))]
    None
}
