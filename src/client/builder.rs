//! Configuring a throttle.

use std::borrow::Cow;
use std::hash::Hash;
use std::time::Duration;

use super::draw::Draws;
use super::per_destination::{Template, Throttles};
use super::tally::Tally;
use super::throttle::Throttle;
use super::window::Window;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};

/// The default window: long enough to hold a few hundred requests of a modest client, short
/// enough that the refusals end within seconds of the backend's recovery.
const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
const DEFAULT_BUCKETS: u32 = 20;
/// The SRE book's multiplier.
const DEFAULT_K: f64 = 2.0;
/// The most buckets a window may have: each takes 16 bytes, and a long pause walks them all.
const MAX_BUCKETS: u32 = 1 << 16;
/// The most destinations a map of throttles may hold.
const MAX_DESTINATIONS: usize = 1 << 16;
/// The shortest bucket.
const MIN_BUCKET: Duration = Duration::from_millis(1);

/// Configures a [`Throttle`]. Every setting has a default; [`build`](Self::build) checks them.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::client::Throttle;
///
/// // The SRE book's own settings: two minutes, k = 2.
/// let throttle = Throttle::builder()
///     .window(Duration::from_secs(120), 60)
///     .k(2.0)
///     .name("checkout")
///     .build()?;
/// assert!(format!("{throttle:?}").contains("checkout"));
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ThrottleBuilder<C> {
    window: Duration,
    buckets: u32,
    k: f64,
    name: Option<Cow<'static, str>>,
    clock: C,
}

impl Throttle<MonotonicClock> {
    /// A builder with the defaults: a window of 10 s in 20 buckets, `k = 2`.
    pub fn builder() -> ThrottleBuilder<MonotonicClock> {
        ThrottleBuilder {
            window: DEFAULT_WINDOW,
            buckets: DEFAULT_BUCKETS,
            k: DEFAULT_K,
            name: None,
            clock: MonotonicClock::new(),
        }
    }
}

impl<C: Clock> ThrottleBuilder<C> {
    /// The window the requests and accepts are counted over, in `buckets` steps (default 10 s
    /// in 20): it slides one bucket at a time, so what was counted leaves it between
    /// `window − window / buckets` and `window` later. Refusals end at most `window` after the
    /// backend accepts again.
    pub fn window(mut self, window: Duration, buckets: u32) -> Self {
        self.window = window;
        self.buckets = buckets;
        self
    }

    /// The multiplier `k` (default 2): the client sends up to `k` times what the backend
    /// accepts. Lower refuses sooner and wastes less of the backend on refusals; higher leaves
    /// more room for the backend's recovery to be seen.
    pub fn k(mut self, k: f64) -> Self {
        self.k = k;
        self
    }

    /// The name that labels the throttle in logs and metrics. Default: none.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The clock the window moves with (default [`MonotonicClock`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> ThrottleBuilder<C2> {
        ThrottleBuilder {
            window: self.window,
            buckets: self.buckets,
            k: self.k,
            name: self.name,
            clock,
        }
    }

    /// The throttle, its window allocated.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::TooFewBuckets`], [`ConfigError::TooManyBuckets`]: not 1 to 65 536
    ///   buckets;
    /// - [`ConfigError::BucketTooShort`]: `window / buckets` is below 1 ms;
    /// - [`ConfigError::MultiplierOutOfRange`]: `k` is below 1 or not finite;
    /// - [`ConfigError::EmptyName`]: the name is empty.
    pub fn build(self) -> Result<Throttle<C>, ConfigError> {
        crate::error::check_name(self.name.as_deref())?;
        if !(self.k.is_finite() && self.k >= 1.0) {
            return Err(ConfigError::MultiplierOutOfRange { k: self.k });
        }
        let bucket_nanos = bucket_nanos(self.window, self.buckets)?;
        Ok(Throttle {
            window: Window::new(self.buckets as usize, bucket_nanos),
            k: self.k,
            draws: Draws::seeded(),
            name: self.name,
            clock: self.clock,
            attempts: Tally::new(),
            throttled: Tally::new(),
        })
    }

    /// A throttle per destination, each with these settings, at most `capacity` of them
    /// (1 to 65 536); the map is allocated now, each throttle on its destination's first use.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build)'s, and [`ConfigError::TooManyDestinations`] for a capacity of
    /// 0 or above 65 536.
    pub fn per_destination<K>(self, capacity: usize) -> Result<Throttles<K, C>, ConfigError>
    where
        K: Hash + Eq + Clone,
        C: Clone,
    {
        if !(1..=MAX_DESTINATIONS).contains(&capacity) {
            return Err(ConfigError::TooManyDestinations {
                capacity,
                max: MAX_DESTINATIONS,
            });
        }
        let throttle = self.build()?;
        Ok(Throttles::new(
            capacity,
            Template {
                buckets: throttle.window.buckets(),
                bucket_nanos: throttle.window.bucket_nanos(),
                k: throttle.k,
                name: throttle.name,
                clock: throttle.clock,
            },
        ))
    }
}

/// The length of a bucket of a `window` in `buckets`, in nanoseconds, checked: 1 to 65 536
/// buckets of at least 1 ms, within the clock's range.
pub(super) fn bucket_nanos(window: Duration, buckets: u32) -> Result<u64, ConfigError> {
    if buckets == 0 {
        return Err(ConfigError::TooFewBuckets { buckets, min: 1 });
    }
    if buckets > MAX_BUCKETS {
        return Err(ConfigError::TooManyBuckets {
            buckets,
            max: MAX_BUCKETS,
        });
    }
    let bucket = window / buckets;
    if bucket < MIN_BUCKET {
        return Err(ConfigError::BucketTooShort {
            window,
            buckets,
            min: MIN_BUCKET,
        });
    }
    u64::try_from(bucket.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
        setting: "window",
        value: window,
    })
}
