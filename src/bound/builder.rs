//! Configuring a bound.

use std::borrow::Cow;
use std::time::Duration;

use super::Bound;
use super::limiter::Settings;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};

/// The default queue: 1024 places.
const DEFAULT_CAPACITY: u32 = 1024;
/// The most places a queue may have.
const MAX_CAPACITY: u32 = 1 << 20;
/// The default ceiling: this many times the floor.
const CEILING_PER_FLOOR: u32 = 256;
/// The default controlled-delay target and interval (Facebook's queue timeouts).
const DEFAULT_TARGET: Duration = Duration::from_millis(5);
const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// Configures a [`Bound`]. Every setting has a default; [`build`](Self::build) checks them.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::bound::Bound;
///
/// let bound = Bound::builder()
///     .floor(2)
///     .ceiling(64)
///     .queue_capacity(128)
///     .wait_limits(Duration::from_millis(10), Duration::from_millis(200))
///     .build()?;
/// assert_eq!(bound.snapshot().limit, 2);
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BoundBuilder<C> {
    floor: Option<u32>,
    ceiling: Option<u32>,
    capacity: u32,
    target: Duration,
    interval: Duration,
    /// Whether [`wait_limits`](Self::wait_limits) fixed the target.
    fixed_target: bool,
    name: Option<Cow<'static, str>>,
    clock: C,
}

impl Bound<MonotonicClock> {
    /// A builder with the defaults: the floor at the available parallelism, the ceiling at 256
    /// times the floor, 1024 places in the queue, waits limited to 5 ms while the queue stays
    /// busy and to 100 ms otherwise.
    pub fn builder() -> BoundBuilder<MonotonicClock> {
        BoundBuilder {
            floor: None,
            ceiling: None,
            capacity: DEFAULT_CAPACITY,
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            fixed_target: false,
            name: None,
            clock: MonotonicClock::new(),
        }
    }
}

impl<C: Clock> BoundBuilder<C> {
    /// The lowest the bound goes, and where it starts (default: the available parallelism,
    /// `std::thread::available_parallelism`, or 1 where it is unknown): as many requests as the
    /// cores can run at once.
    pub fn floor(mut self, floor: u32) -> Self {
        self.floor = Some(floor);
        self
    }

    /// The highest the bound goes (default: 256 times the floor).
    pub fn ceiling(mut self, ceiling: u32) -> Self {
        self.ceiling = Some(ceiling);
        self
    }

    /// How many requests may wait (default 1024, at most 2^20; 0: none waits, a request that
    /// finds no room is refused). The places are allocated by [`build`](Self::build).
    pub fn queue_capacity(mut self, capacity: u32) -> Self {
        self.capacity = capacity;
        self
    }

    /// How long a request may wait: `target` while the queue stands for its class (requests of
    /// its class or above have waited without a break for `interval`, or one timed out within
    /// the last `interval`), `interval` otherwise. Without this setting, the interval is
    /// 100 ms and the target follows the requests: twenty recent mean times in service, at
    /// least 5 ms and at most the interval.
    pub fn wait_limits(mut self, target: Duration, interval: Duration) -> Self {
        self.target = target;
        self.interval = interval;
        self.fixed_target = true;
        self
    }

    /// The name that labels the bound's metrics (`limiter="<name>"`; see
    /// [`ReporterBuilder::bound`](crate::metrics::ReporterBuilder::bound)). Default: none.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The clock waits and service times are measured with (default [`MonotonicClock`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> BoundBuilder<C2> {
        BoundBuilder {
            floor: self.floor,
            ceiling: self.ceiling,
            capacity: self.capacity,
            target: self.target,
            interval: self.interval,
            fixed_target: self.fixed_target,
            name: self.name,
            clock,
        }
    }

    /// The bound, its queue allocated.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::BoundOutOfRange`]: the floor is 0 or above the ceiling;
    /// - [`ConfigError::QueueTooLong`]: more than 2^20 places;
    /// - [`ConfigError::QueueTargetOutOfRange`]: the target is zero or not below the interval;
    /// - [`ConfigError::DurationTooLong`]: the interval is beyond the clock's range;
    /// - [`ConfigError::EmptyName`]: the name is empty.
    pub fn build(self) -> Result<Bound<C>, ConfigError> {
        crate::error::check_name(self.name.as_deref())?;
        let floor = self.floor.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        });
        let ceiling = self
            .ceiling
            .unwrap_or_else(|| floor.saturating_mul(CEILING_PER_FLOOR));
        if floor == 0 || floor > ceiling {
            return Err(ConfigError::BoundOutOfRange { floor, ceiling });
        }
        if self.capacity > MAX_CAPACITY {
            return Err(ConfigError::QueueTooLong {
                queue_capacity: self.capacity,
                max: MAX_CAPACITY,
            });
        }
        if u64::try_from(self.interval.as_nanos()).is_err() {
            return Err(ConfigError::DurationTooLong {
                setting: "interval",
                value: self.interval,
            });
        }
        if self.target.is_zero() || self.target >= self.interval {
            return Err(ConfigError::QueueTargetOutOfRange {
                target: self.target,
                interval: self.interval,
                max: self.interval,
            });
        }
        Ok(Bound::new(Settings {
            floor,
            ceiling,
            capacity: self.capacity,
            target: self.target,
            interval: self.interval,
            follow_service: !self.fixed_target,
            name: self.name,
            clock: self.clock,
        }))
    }
}
