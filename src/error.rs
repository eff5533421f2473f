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
    /// greater than zero.
    InvalidRate {
        /// The rate that was given.
        permits_per_second: f64,
    },
    /// `permits_per_second` is larger than the profile can count: a warm-up window counts at
    /// most `max` admissions.
    RateTooHigh {
        /// The rate that was given.
        permits_per_second: f64,
        /// The largest rate the profile supports.
        max: f64,
    },
    /// `cold_factor` is below `min`. The cold rate is `permits_per_second / cold_factor`, so a
    /// factor of 1 would mean no warm-up at all (and divides by zero in Sentinel's formulas).
    ColdFactorTooSmall {
        /// The factor that was given.
        cold_factor: u32,
        /// The smallest factor the profile accepts.
        min: u32,
    },
    /// `warm_up_period` is zero. With no warm-up period there is no curve to follow; Guava's
    /// equivalent silently stops limiting (google/guava#2730).
    ZeroWarmUpPeriod,
    /// `warm_up_period` is not a whole number of seconds, which the profile requires (Sentinel
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
    /// The cold limit is `permits_per_second / cold_factor`, as the profile computes it: in
    /// [`SentinelExact`](crate::warmup::Profile::SentinelExact) Java's integer truncations can
    /// push it just below one even where the quotient is exactly one (5 rps, factor 5, 7 s gives
    /// 0.9999999999999999). A per-second limiter then cannot admit even a single request while
    /// cold, and since it only warms up by admitting requests, it would admit nothing, forever
    /// (Sentinel behaves exactly so). Raise the rate or lower the cold factor.
    ColdRateBelowOne {
        /// The rate that was given.
        permits_per_second: f64,
        /// The factor that was given.
        cold_factor: u32,
        /// The cold limit those settings give, in requests per second.
        cold_limit: f64,
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
                "invalid `permits_per_second` ({permits_per_second}): this profile counts at most \
                 {max} permits per second"
            ),
            ConfigError::ColdFactorTooSmall { cold_factor, min } => write!(
                f,
                "invalid `cold_factor` ({cold_factor}): must be at least {min}"
            ),
            ConfigError::ZeroWarmUpPeriod => {
                write!(
                    f,
                    "invalid `warm_up_period` (0 s): must be greater than zero"
                )
            }
            ConfigError::FractionalWarmUpPeriod { warm_up_period } => write!(
                f,
                "invalid `warm_up_period` ({warm_up_period:?}): this profile needs a whole number \
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
        }
    }
}

impl Error for ConfigError {}
