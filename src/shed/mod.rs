//! An adaptive load shedder: go-zero's algorithm, lock-free.
//!
//! A service overloaded past its capacity gets slower for everyone: queues grow, every request
//! waits longer, clients time out and retry. A [`Shedder`] refuses the excess early and cheaply,
//! but only when two things are true at once:
//!
//! 1. **The CPU is hot**: its load is at or above `cpu_threshold` (900 ‰ by default), or was
//!    less than `cool_off` (1 s) ago and the shedder has dropped requests since.
//! 2. **More requests are in flight than the service has proven it can carry**: both the current
//!    and the smoothed number of requests in flight exceed
//!    `max_flight = max(1, max_pass × min_rt × buckets per second / 1000)`, scaled down by the
//!    overload factor `(1000 − cpu) / (1000 − cpu_threshold)` (clamped to 0.1..=1). Here
//!    `max_pass` is the most requests that passed in one bucket, and `min_rt` the lowest
//!    per-bucket mean latency in ms, over the rolling `window` (5 s in 50 buckets by default):
//!    Little's law applied to the best the service has recently done.
//!
//! With a cool CPU nothing is shed, whatever the concurrency; a burst of requests with a hot CPU
//! passes until the smoothed concurrency catches up.
//!
//! # Using it
//!
//! Call [`allow`](Shedder::allow) when a request arrives; it returns a [`Permit`] or
//! [`Overloaded`]. When the request ends, call [`Permit::pass`] if it succeeded or
//! [`Permit::fail`] if it did not (a timeout, an error the service caused). Dropping a permit
//! without either counts as a failure: a cancelled request did no useful work. Only passes feed
//! the throughput and latency the limit is computed from.
//!
//! In a tower stack (axum, tonic, hyper), [`ShedLayer`] does all of this per request; its
//! [classifier](classify) decides pass or fail from the response.
//!
//! # Parity with go-zero
//!
//! The decision reproduces go-zero's `adaptiveShedder` (`core/load`, 2024) exactly: the `>=` CPU
//! comparison and strict `>` for both concurrency tests, the strict `<` of the cool-off and the
//! way a drop arms it, the rolling window aligned to the shedder's construction with the bucket
//! in progress ignored, `max_pass` at least 1, `min_rt` 1000 ms when there is no data and the
//! per-bucket mean rounded half away from zero, latencies recorded as whole milliseconds rounded
//! up, `max_flight` at least 1, the overload factor's clamp, and the smoothed concurrency updated
//! only when a request completes, with the count after it left. The differences:
//!
//! - A latency is recorded as at least 1 ms. go-zero's rounding up yields 0 only for a request
//!   that took exactly 0 ns, which never happens on its clock but happens all the time on a
//!   coarse one ([`CoarseClock`](crate::clock::CoarseClock)); a zero `min_rt` would cap the
//!   concurrency at 1.
//! - An unknown CPU load (see [`cpu::CpuSignal`]) is never overloaded, like go-zero's silent 0,
//!   but the [snapshot](Shedder::snapshot) says it is unknown.
//! - The limit (`max_flight`) is computed once per bucket and cached, since the window ignores
//!   the bucket in progress: go-zero scans both windows under a lock on every hot decision. A
//!   latency recorded late by a thread whose clock reading is a bucket old can therefore be
//!   missed by the cache; go-zero has the same race.
//! - A request's latency is measured from the clock reading its admission decision used;
//!   go-zero reads the clock again after deciding, so its latencies also include the decision
//!   (nanoseconds, or microseconds for the first hot decision of a bucket).
//! - The smoothed concurrency is updated with a load and a store, not under a lock: two
//!   requests completing at the same instant can start from the same average, and one of the
//!   two samples is then lost. Exact with one thread; go-zero serialises the update.
//! - Per bucket, counts and latency sums saturate at 2^32 − 1 (go-zero sums in 64 bits); a
//!   bucket whose latency sum saturated (4.3 million request-seconds in one bucket) is left out
//!   of `min_rt` rather than letting it understate the latency.
//!
//! # Cost
//!
//! With a cool CPU, [`allow`](Shedder::allow) is a clock read, a CPU-signal load, a flag load and
//! one atomic add. With a hot CPU it also records the time of the overload (a compare-and-swap
//! whenever the clock has moved on), reads the cached limit (three loads), and, for the first
//! hot decision of each bucket, scans the window (two loads per bucket). A refusal counts
//! itself (an atomic add and a compare-and-swap). Completing a permit is a clock read and a
//! handful of atomic updates. Nothing allocates, [`allow_owned`] included.
//!
//! [`allow_owned`]: Shedder::allow_owned

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod classify;
pub mod cpu;
pub mod error;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod future;
#[cfg(feature = "tower")]
mod layer;
mod permit;
#[cfg(feature = "tower")]
mod service;
#[cfg(feature = "tower")]
mod shared;
mod window;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use self::cpu::{CpuSignal, SystemCpu};
pub use self::error::{OverloadReason, Overloaded};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::layer::ShedLayer;
pub use self::permit::{OwnedPermit, Permit};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::service::ShedService;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::shared::SharedShedder;
use self::window::RollingWindow;
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};

/// go-zero's `flyingBeta`: the weight of the old smoothed concurrency.
const FLYING_BETA: f64 = 0.9;
/// `1 − FLYING_BETA` as Go folds it: exactly 0.1 (`1.0 - 0.9` is 0.09999999999999998).
const FLYING_WEIGHT: f64 = 0.1;
/// The default `min_rt` when the window holds no latency, in ms.
const DEFAULT_MIN_RT_MS: u64 = 1000;
/// The overload factor's floor: even a saturated CPU admits 10 % of the limit.
const OVERLOAD_FACTOR_FLOOR: f64 = 0.1;
const NANOS_PER_MS: u64 = 1_000_000;

/// Window counters: passes and their latency sum (ms) for each bucket, plus failures and drops.
/// A pass adds its latency before counting itself (see the window's read order), so a bucket
/// never shows a pass without its latency.
const PASSES: usize = 0;
const LATENCY_SUM: usize = 1;
const OTHERS: usize = 2;

/// A latency sum at this value has saturated: its bucket's mean is unknown.
const SATURATED: u64 = u32::MAX as u64;

/// The most buckets a window may have.
const MAX_BUCKETS: u32 = 65_536;

/// An adaptive load shedder. Build one with [`Shedder::builder`].
///
/// `Shedder` is `Send + Sync`; share it with an `Arc` (which [`allow_owned`](Self::allow_owned)
/// needs anyway). All methods take `&self`, never block and never allocate.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use admit::shed::Shedder;
///
/// let shedder = Arc::new(Shedder::builder().build()?);
///
/// fn handle(shedder: &Arc<Shedder>) -> Result<&'static str, &'static str> {
///     let Ok(permit) = shedder.allow_owned() else {
///         return Err("503 Service Unavailable");
///     };
///     let response = "200 OK"; // do the work
///     permit.pass();
///     Ok(response)
/// }
///
/// assert_eq!(handle(&shedder), Ok("200 OK"));
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct Shedder<C: Clock = MonotonicClock, S: CpuSignal = SystemCpu> {
    /// Written by every admission and completion.
    flight: CachePadded<Flight>,
    /// Written while the CPU is hot.
    heat: CachePadded<Heat>,
    window: RollingWindow,
    /// The epoch the last completion fell in: a hint that spares most completions a 64-bit
    /// division. Written once per bucket, so it shares the read-mostly line with the config.
    epoch_hint: AtomicU64,
    config: Config,
    clock: C,
    cpu: S,
}

/// Requests in flight and their lifetime totals.
///
/// The number in flight is `admitted − passed − failed`: an admitted request that passes costs
/// two atomic additions, not the three an in-flight counter plus a pass total would.
#[derive(Debug)]
struct Flight {
    admitted: AtomicU64,
    passed: AtomicU64,
    failed: AtomicU64,
    /// `f64` bits of go-zero's `avgFlying`.
    avg_flying: AtomicU64,
}

impl Flight {
    /// Requests admitted and not yet completed. The completions are read before the
    /// admissions: every completion counted follows its own admission, so the difference
    /// is never negative.
    fn flying(&self) -> u64 {
        let ended = self.passed.load(Ordering::Acquire) + self.failed.load(Ordering::Acquire);
        self.admitted.load(Ordering::Acquire).saturating_sub(ended)
    }
}

#[derive(Debug)]
struct Heat {
    /// The latest clock reading at which the CPU was at or above the threshold, plus one
    /// (0: never).
    overloaded_at: AtomicU64,
    dropped_recently: AtomicBool,
    dropped: AtomicU64,
    /// The epoch (plus one) whose `max_flight` is in `max_flight`; 0 while being written.
    limit_epoch: AtomicU64,
    /// `f64` bits of go-zero's `maxFlight` for `limit_epoch`.
    max_flight: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    window: Duration,
    buckets: u32,
    bucket_nanos: u64,
    /// go-zero's `windowScale`: buckets per second / 1000.
    window_scale: f64,
    cpu_threshold: u32,
    cool_off_nanos: u64,
    /// The clock reading at construction: buckets are aligned to it.
    origin_nanos: u64,
}

impl Shedder<MonotonicClock, SystemCpu> {
    /// Starts configuring a shedder with go-zero's defaults: a 5 s window of 50 buckets, a
    /// 900 ‰ CPU threshold, a 1 s cool-off, a [`MonotonicClock`] and the system CPU signal
    /// ([`SystemCpu`], created by [`build`](ShedderBuilder::build) unless another signal is
    /// given).
    pub fn builder() -> ShedderBuilder<MonotonicClock, SystemCpu> {
        ShedderBuilder {
            window: Duration::from_secs(5),
            buckets: 50,
            cpu_threshold: 900,
            cool_off: Duration::from_secs(1),
            clock: MonotonicClock::new(),
            cpu: CpuChoice::Default(SystemCpu::new),
        }
    }
}

impl<C: Clock, S: CpuSignal> Shedder<C, S> {
    /// Admits a request, or refuses it if the service is overloaded (see the
    /// [module docs](self) for the rule).
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::shed::Shedder;
    /// use admit::shed::cpu::ManualCpu;
    ///
    /// let shedder = Shedder::builder().cpu(ManualCpu::new(200)).build()?;
    /// let permit = shedder.allow().expect("a cool CPU sheds nothing");
    /// assert_eq!(shedder.snapshot().flying, 1);
    /// permit.pass();
    /// assert_eq!(shedder.snapshot().flying, 0);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn allow(&self) -> Result<Permit<'_, C, S>, Overloaded> {
        let now = self.admit(self.clock.now_nanos())?;
        Ok(Permit::new(self, now))
    }

    /// The decision for a request arriving now: its admission time, or the refusal.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn admit_now(&self) -> Result<u64, Overloaded> {
        self.admit(self.clock.now_nanos())
    }

    /// [`allow`](Self::allow) for a shedder in an `Arc`: the permit holds a clone of the `Arc`
    /// (no allocation) and can move into a future or another thread.
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    #[inline]
    pub fn allow_owned(self: &Arc<Self>) -> Result<OwnedPermit<C, S>, Overloaded> {
        let now = self.admit(self.clock.now_nanos())?;
        Ok(OwnedPermit::new(Arc::clone(self), now))
    }

    /// The decision: on admission counts the request in flight and returns `now`.
    #[inline]
    fn admit(&self, now: u64) -> Result<u64, Overloaded> {
        let cpu = self.cpu.load_permille().map(|load| load.min(1000));
        if let Some(reason) = self.should_drop(now, cpu) {
            let heat = &self.heat;
            if !heat.dropped_recently.load(Ordering::Relaxed) {
                heat.dropped_recently.store(true, Ordering::Release);
            }
            heat.dropped.fetch_add(1, Ordering::Relaxed);
            self.window.add(self.epoch(now), OTHERS, 1);
            return Err(Overloaded::new(reason, self.retry_after(now, reason)));
        }
        self.flight.admitted.fetch_add(1, Ordering::AcqRel);
        Ok(now)
    }

    /// go-zero's `shouldDrop`: `(systemOverloaded || stillHot) && highThroughput`.
    #[inline]
    fn should_drop(&self, now: u64, cpu: Option<u32>) -> Option<OverloadReason> {
        let overloaded = cpu.is_some_and(|load| load >= self.config.cpu_threshold);
        let reason = if overloaded {
            self.note_overload(now);
            OverloadReason::Cpu
        } else if self.still_hot(now, true) {
            OverloadReason::CoolOff
        } else {
            return None;
        };
        let limit = self.max_flight(now) * self.overload_factor(cpu.unwrap_or(0));
        let avg_flying = f64::from_bits(self.flight.avg_flying.load(Ordering::Acquire));
        let flying = self.flight.flying() as f64;
        (avg_flying > limit && flying > limit).then_some(reason)
    }

    /// Records that the CPU was hot at `now` (go-zero stores it on every hot decision; storing
    /// only newer readings is the same value, with fewer writes under a coarse clock).
    fn note_overload(&self, now: u64) {
        let stamp = now.saturating_add(1);
        let overloaded_at = &self.heat.overloaded_at;
        let mut current = overloaded_at.load(Ordering::Acquire);
        while current < stamp {
            match overloaded_at.compare_exchange_weak(
                current,
                stamp,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// go-zero's `stillHot`: a drop happened and the CPU was hot less than `cool_off` ago. Once
    /// the cool-off has passed it clears the drop flag, if `clear`.
    fn still_hot(&self, now: u64, clear: bool) -> bool {
        let heat = &self.heat;
        if !heat.dropped_recently.load(Ordering::Acquire) {
            return false;
        }
        let stamp = heat.overloaded_at.load(Ordering::Acquire);
        if stamp == 0 {
            return false;
        }
        if now.saturating_sub(stamp - 1) < self.config.cool_off_nanos {
            return true;
        }
        if clear {
            heat.dropped_recently.store(false, Ordering::Release);
        }
        false
    }

    /// go-zero's `overloadFactor`.
    fn overload_factor(&self, cpu: u32) -> f64 {
        let factor = (1000.0 - f64::from(cpu)) / (1000.0 - f64::from(self.config.cpu_threshold));
        factor.clamp(OVERLOAD_FACTOR_FLOOR, 1.0)
    }

    /// The bucket `now` falls in, counted from the shedder's construction.
    #[inline]
    fn epoch(&self, now: u64) -> u64 {
        let elapsed = now.saturating_sub(self.config.origin_nanos);
        // The hint is some earlier `elapsed / bucket_nanos`, so the product cannot overflow;
        // it is used only if `elapsed` falls inside its bucket.
        let hint = self.epoch_hint.load(Ordering::Relaxed);
        let start = hint * self.config.bucket_nanos;
        if elapsed >= start && elapsed - start < self.config.bucket_nanos {
            return hint;
        }
        let epoch = elapsed / self.config.bucket_nanos;
        self.epoch_hint.store(epoch, Ordering::Relaxed);
        epoch
    }

    /// go-zero's `maxFlight`, cached once per bucket, since the window ignores the bucket in
    /// progress. The two cache words are written like a sequence lock: the epoch word is
    /// cleared, the value written, then the epoch set; a reader uses the value only if it saw
    /// the same epoch before and after reading it.
    #[inline]
    fn max_flight(&self, now: u64) -> f64 {
        let epoch = self.epoch(now);
        let tag = epoch.wrapping_add(1).max(1);
        let heat = &self.heat;
        if heat.limit_epoch.load(Ordering::Acquire) == tag {
            let cached = heat.max_flight.load(Ordering::Acquire);
            if heat.limit_epoch.load(Ordering::Acquire) == tag {
                return f64::from_bits(cached);
            }
        }
        let (max_pass, min_rt) = self.scan(epoch);
        let max_flight = self.max_flight_of(max_pass, min_rt);
        heat.limit_epoch.store(0, Ordering::Release);
        heat.max_flight
            .store(max_flight.to_bits(), Ordering::Release);
        heat.limit_epoch.store(tag, Ordering::Release);
        max_flight
    }

    /// `max(maxPass · minRt · windowScale, 1)`, multiplied in go-zero's order.
    fn max_flight_of(&self, max_pass: u64, min_rt: u64) -> f64 {
        (max_pass as f64 * min_rt as f64 * self.config.window_scale).max(1.0)
    }

    /// go-zero's `maxPass` and `minRt`, read from the window. A bucket whose latency sum
    /// saturated (2^32 − 1 ms) has no known mean and is left out of `minRt`.
    fn scan(&self, epoch: u64) -> (u64, u64) {
        let mut max_pass = 1;
        let mut min_rt = DEFAULT_MIN_RT_MS;
        for seen in self.window.visible(epoch, true) {
            let bucket = self.window.values(seen).0;
            max_pass = max_pass.max(bucket[PASSES]);
            if bucket[PASSES] > 0 && bucket[LATENCY_SUM] < SATURATED {
                let mean = (bucket[LATENCY_SUM] as f64 / bucket[PASSES] as f64).round() as u64;
                min_rt = min_rt.min(mean);
            }
        }
        (max_pass, min_rt)
    }

    fn retry_after(&self, now: u64, reason: OverloadReason) -> u64 {
        match reason {
            OverloadReason::Cpu => self.config.bucket_nanos,
            OverloadReason::CoolOff => {
                let since = now.saturating_sub(
                    self.heat
                        .overloaded_at
                        .load(Ordering::Acquire)
                        .saturating_sub(1),
                );
                self.config.cool_off_nanos.saturating_sub(since).max(1)
            }
        }
    }

    /// Ends a request admitted at `admitted_at` (go-zero's `Promise.Pass` / `Fail`).
    pub(crate) fn complete(&self, admitted_at: u64, passed: bool) {
        let now = self.clock.now_nanos();
        let flight = &self.flight;
        // Count the completion, then read how many remain in flight after it.
        let (own, other) = if passed {
            (&flight.passed, &flight.failed)
        } else {
            (&flight.failed, &flight.passed)
        };
        let ended = own.fetch_add(1, Ordering::AcqRel) + 1 + other.load(Ordering::Acquire);
        let flying = flight
            .admitted
            .load(Ordering::Acquire)
            .saturating_sub(ended);
        // A load and a store, not a compare-and-swap loop: two completions at the same instant
        // may both start from the same average, and one update is then lost (go-zero takes a
        // lock here). The average is a smoothing, and the lost sample is one of two
        // simultaneous ones; an atomic read-modify-write would cost every request.
        let avg = f64::from_bits(flight.avg_flying.load(Ordering::Acquire)) * FLYING_BETA
            + flying as f64 * FLYING_WEIGHT;
        flight.avg_flying.store(avg.to_bits(), Ordering::Release);
        let epoch = self.epoch(now);
        if passed {
            // Whole milliseconds, rounded up, as go-zero's `math.Ceil` of float milliseconds,
            // and at least 1: go-zero reads 0 only for exactly 0 ns, which a coarse clock
            // reports for every request shorter than its tick (and a zero `min_rt` would cap
            // the concurrency at 1).
            let rt_ms = now
                .saturating_sub(admitted_at)
                .div_ceil(NANOS_PER_MS)
                .max(1);
            self.window.add_pass(epoch, rt_ms);
        } else {
            self.window.add(epoch, OTHERS, 1);
        }
    }

    /// The shedder's state now. Reads atomics and the window; changes nothing (in particular it
    /// does not end a cool-off the way a decision would), allocates nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::shed::Shedder;
    /// use admit::shed::cpu::ManualCpu;
    ///
    /// let shedder = Shedder::builder().cpu(ManualCpu::new(1000)).build()?;
    /// let snapshot = shedder.snapshot();
    /// // An empty window: max_pass 1, min_rt 1000 ms, so max_flight = 1 · 1000 · 10 / 1000.
    /// assert_eq!((snapshot.max_pass, snapshot.min_rt_ms), (1, 1000));
    /// assert_eq!(snapshot.max_flight, 10.0);
    /// assert_eq!(snapshot.overload_factor, 0.1);
    /// assert!(snapshot.hot);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> ShedSnapshot {
        let now = self.clock.now_nanos();
        let epoch = self.epoch(now);
        let cpu = self.cpu.load_permille().map(|load| load.min(1000));
        let (max_pass, min_rt) = self.scan(epoch);
        let mut passes = 0;
        let mut latency = 0;
        let mut others = 0;
        let mut buckets = 0;
        for seen in self.window.visible(epoch, true) {
            let bucket = self.window.values(seen).0;
            passes += bucket[PASSES];
            latency += bucket[LATENCY_SUM];
            others += bucket[OTHERS];
            buckets += 1;
        }
        let span = buckets as f64 * self.config.bucket_nanos as f64 / 1e9;
        ShedSnapshot {
            cpu_permille: cpu,
            cpu_threshold: self.config.cpu_threshold,
            flying: self.flight.flying(),
            avg_flying: f64::from_bits(self.flight.avg_flying.load(Ordering::Acquire)),
            max_pass,
            min_rt_ms: min_rt,
            max_flight: self.max_flight_of(max_pass, min_rt),
            overload_factor: self.overload_factor(cpu.unwrap_or(0)),
            hot: cpu.is_some_and(|load| load >= self.config.cpu_threshold)
                || self.still_hot(now, false),
            passed: self.flight.passed.load(Ordering::Acquire),
            failed: self.flight.failed.load(Ordering::Acquire),
            dropped: self.heat.dropped.load(Ordering::Relaxed),
            arrival_rate: if span > 0.0 {
                (passes + others) as f64 / span
            } else {
                0.0
            },
            mean_service_time_ms: (passes > 0).then(|| latency as f64 / passes as f64),
        }
    }

    /// The clock this shedder reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The CPU signal this shedder reads.
    pub fn cpu(&self) -> &S {
        &self.cpu
    }

    /// The rolling window's length.
    pub fn window(&self) -> Duration {
        self.config.window
    }

    /// How many buckets the window has.
    pub fn buckets(&self) -> u32 {
        self.config.buckets
    }

    /// The CPU threshold, in ‰.
    pub fn cpu_threshold(&self) -> u32 {
        self.config.cpu_threshold
    }

    /// The cool-off period.
    pub fn cool_off(&self) -> Duration {
        Duration::from_nanos(self.config.cool_off_nanos)
    }
}

impl<C: Clock, S: CpuSignal> fmt::Debug for Shedder<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shedder")
            .field("window", &self.config.window)
            .field("buckets", &self.config.buckets)
            .field("cpu_threshold", &self.config.cpu_threshold)
            .field("cool_off", &self.cool_off())
            .finish_non_exhaustive()
    }
}

/// A point-in-time view of a [`Shedder`], for dashboards and capacity planning.
///
/// `arrival_rate` and `mean_service_time_ms` are the inputs an Erlang-C model needs (offered
/// load `λ` and service time `1/μ`), measured over the visible window.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ShedSnapshot {
    /// The CPU load in ‰ of the CPU limit, or `None` if the signal does not know.
    pub cpu_permille: Option<u32>,
    /// The threshold the load is compared with, in ‰.
    pub cpu_threshold: u32,
    /// Requests admitted and not yet completed.
    pub flying: u64,
    /// The smoothed number in flight (go-zero's `avgFlying`), updated at each completion.
    pub avg_flying: f64,
    /// The most requests that passed in one bucket of the visible window (at least 1).
    pub max_pass: u64,
    /// The lowest per-bucket mean latency in the visible window, in ms (1000 with no data).
    pub min_rt_ms: u64,
    /// The concurrency the service has proven it carries, before the overload factor.
    pub max_flight: f64,
    /// The factor applied to `max_flight` at the current load (0.1..=1).
    pub overload_factor: f64,
    /// Whether the shedder is in its shedding state: the CPU is at or above the threshold, or
    /// cooling off after a drop.
    pub hot: bool,
    /// Requests that passed, since the shedder was built.
    pub passed: u64,
    /// Requests that failed or were cancelled, since the shedder was built.
    pub failed: u64,
    /// Requests refused, since the shedder was built.
    pub dropped: u64,
    /// Requests per second that reached the shedder over the visible window (completed or
    /// refused there).
    pub arrival_rate: f64,
    /// Mean latency of the requests that passed in the visible window, in ms (whole
    /// milliseconds per request, rounded up); `None` if none did.
    pub mean_service_time_ms: Option<f64>,
}

/// The CPU signal a builder will use: go-zero's system signal unless one is given.
#[derive(Debug)]
enum CpuChoice<S> {
    Default(fn() -> S),
    Given(S),
}

/// Configures a [`Shedder`]; created by [`Shedder::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::shed::Shedder;
/// use admit::shed::cpu::ManualCpu;
///
/// let shedder = Shedder::builder()
///     .window(Duration::from_secs(10))
///     .buckets(100)
///     .cpu_threshold(800)
///     .cool_off(Duration::from_secs(2))
///     .cpu(ManualCpu::new(0))
///     .build()?;
/// assert_eq!(shedder.buckets(), 100);
///
/// assert_eq!(
///     Shedder::builder().cpu_threshold(1000).cpu(ManualCpu::new(0)).build().unwrap_err(),
///     ConfigError::CpuThresholdOutOfRange { cpu_threshold: 1000 }
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ShedderBuilder<C, S> {
    window: Duration,
    buckets: u32,
    cpu_threshold: u32,
    cool_off: Duration,
    clock: C,
    cpu: CpuChoice<S>,
}

impl<C: Clock, S: CpuSignal> ShedderBuilder<C, S> {
    /// The rolling window over which throughput and latency are measured (default 5 s).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How many buckets the window is divided into (default 50, so 100 ms buckets). From 2 to
    /// 65 536; a bucket must last at least 1 ms.
    pub fn buckets(mut self, buckets: u32) -> Self {
        self.buckets = buckets;
        self
    }

    /// The CPU load, in ‰ of the CPU limit, from which the CPU counts as hot (default 900).
    /// Between 1 and 999.
    pub fn cpu_threshold(mut self, permille: u32) -> Self {
        self.cpu_threshold = permille;
        self
    }

    /// How long the shedder stays hot after the CPU was last seen hot, once it has dropped a
    /// request (default 1 s). Zero disables the cool-off.
    pub fn cool_off(mut self, cool_off: Duration) -> Self {
        self.cool_off = cool_off;
        self
    }

    /// The clock to read (default: a [`MonotonicClock`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> ShedderBuilder<C2, S> {
        ShedderBuilder {
            window: self.window,
            buckets: self.buckets,
            cpu_threshold: self.cpu_threshold,
            cool_off: self.cool_off,
            clock,
            cpu: self.cpu,
        }
    }

    /// The CPU signal to read (default: [`SystemCpu::new`]).
    pub fn cpu<S2: CpuSignal>(self, cpu: S2) -> ShedderBuilder<C, S2> {
        ShedderBuilder {
            window: self.window,
            buckets: self.buckets,
            cpu_threshold: self.cpu_threshold,
            cool_off: self.cool_off,
            clock: self.clock,
            cpu: CpuChoice::Given(cpu),
        }
    }

    /// Validates the configuration and builds the shedder; its buckets are aligned to this
    /// moment.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting:
    /// [`TooFewBuckets`](ConfigError::TooFewBuckets) (fewer than 2),
    /// [`TooManyBuckets`](ConfigError::TooManyBuckets) (more than 65 536),
    /// [`BucketTooShort`](ConfigError::BucketTooShort) (`window / buckets` under 1 ms),
    /// [`CpuThresholdOutOfRange`](ConfigError::CpuThresholdOutOfRange) (outside 1..=999 ‰) or
    /// [`DurationTooLong`](ConfigError::DurationTooLong).
    pub fn build(self) -> Result<Shedder<C, S>, ConfigError> {
        if self.buckets < 2 {
            return Err(ConfigError::TooFewBuckets {
                buckets: self.buckets,
                min: 2,
            });
        }
        if self.buckets > MAX_BUCKETS {
            return Err(ConfigError::TooManyBuckets {
                buckets: self.buckets,
                max: MAX_BUCKETS,
            });
        }
        let window_nanos =
            u64::try_from(self.window.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "window",
                value: self.window,
            })?;
        // Go divides the window `Duration` by the bucket count in integer nanoseconds.
        let bucket_nanos = window_nanos / u64::from(self.buckets);
        if bucket_nanos < NANOS_PER_MS {
            return Err(ConfigError::BucketTooShort {
                window: self.window,
                buckets: self.buckets,
                min: Duration::from_millis(1),
            });
        }
        if !(1..=999).contains(&self.cpu_threshold) {
            return Err(ConfigError::CpuThresholdOutOfRange {
                cpu_threshold: self.cpu_threshold,
            });
        }
        let cool_off_nanos =
            u64::try_from(self.cool_off.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "cool_off",
                value: self.cool_off,
            })?;
        let cpu = match self.cpu {
            CpuChoice::Default(make) => make(),
            CpuChoice::Given(cpu) => cpu,
        };
        Ok(Shedder {
            flight: CachePadded::new(Flight {
                admitted: AtomicU64::new(0),
                passed: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                avg_flying: AtomicU64::new(0.0f64.to_bits()),
            }),
            heat: CachePadded::new(Heat {
                overloaded_at: AtomicU64::new(0),
                dropped_recently: AtomicBool::new(false),
                dropped: AtomicU64::new(0),
                limit_epoch: AtomicU64::new(0),
                max_flight: AtomicU64::new(0),
            }),
            window: RollingWindow::new(self.buckets as usize),
            epoch_hint: AtomicU64::new(0),
            config: Config {
                window: self.window,
                buckets: self.buckets,
                bucket_nanos,
                window_scale: 1e9 / bucket_nanos as f64 / 1000.0,
                cpu_threshold: self.cpu_threshold,
                cool_off_nanos,
                origin_nanos: self.clock.now_nanos(),
            },
            clock: self.clock,
            cpu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::shed::cpu::ManualCpu;

    fn shedder() -> (ManualClock, ManualCpu, Shedder<ManualClock, ManualCpu>) {
        let clock = ManualClock::new();
        let cpu = ManualCpu::new(900);
        let shedder = Shedder::builder()
            .clock(clock.clone())
            .cpu(cpu.clone())
            .build()
            .unwrap();
        (clock, cpu, shedder)
    }

    fn set_flight(shedder: &Shedder<ManualClock, ManualCpu>, avg_flying: f64, flying: u64) {
        let ended = shedder.flight.passed.load(Ordering::Acquire)
            + shedder.flight.failed.load(Ordering::Acquire);
        shedder
            .flight
            .admitted
            .store(ended + flying, Ordering::Release);
        shedder
            .flight
            .avg_flying
            .store(avg_flying.to_bits(), Ordering::Release);
    }

    /// Vector 9, with go-zero's state injected as its own test does: the window of vector 8
    /// (max_pass 900, min_rt 6 ⇒ max_flight 54) and explicit in-flight counts.
    #[test]
    fn vector_9_should_drop() {
        let (clock, cpu, shedder) = shedder();
        for i in 0..10u64 {
            let passes = (i + 1) * 100;
            shedder.window.add(i, PASSES, passes);
            // `passes` latencies averaging i · 10 + 5.5 ms.
            shedder
                .window
                .add(i, LATENCY_SUM, (i + 1) * (1000 * i + 550));
        }
        clock.set(Duration::from_millis(950)); // bucket 9 is current
        assert_eq!(shedder.max_flight(shedder.clock.now_nanos()), 54.0);
        let now = shedder.clock.now_nanos();
        for (avg_flying, flying, drop) in [
            (50.0, 0, false),
            (80.0, 49, false),
            (80.0, 54, false),
            (80.0, 55, true),
            (54.5, 80, true),
            (80.0, 80, true),
        ] {
            set_flight(&shedder, avg_flying, flying);
            assert_eq!(
                shedder.should_drop(now, Some(900)).is_some(),
                drop,
                "avg_flying {avg_flying}, flying {flying}"
            );
        }
        // 899 ‰ and no recent drop: not hot, whatever the concurrency.
        let (_, _, fresh) = self::shedder();
        set_flight(&fresh, 80.0, 80);
        assert_eq!(fresh.should_drop(0, Some(899)), None);
        // 900 ‰: `allow` refuses and arms the cool-off.
        cpu.set(900);
        set_flight(&shedder, 80.0, 80);
        assert!(!shedder.heat.dropped_recently.load(Ordering::Acquire));
        assert_eq!(shedder.allow().unwrap_err().reason(), OverloadReason::Cpu);
        assert!(shedder.heat.dropped_recently.load(Ordering::Acquire));
    }

    /// Vector 11: go-zero's `stillHot`, with its state injected.
    #[test]
    fn vector_11_still_hot() {
        let (clock, _, shedder) = shedder();
        clock.set(Duration::from_secs(10));
        let now = shedder.clock.now_nanos();
        let heat = &shedder.heat;
        let overloaded_at = |at: u64| heat.overloaded_at.store(at + 1, Ordering::Release);

        heat.dropped_recently.store(true, Ordering::Release);
        heat.overloaded_at.store(0, Ordering::Release); // never overloaded
        assert!(!shedder.still_hot(now, true));

        overloaded_at(now - 2_000_000_000);
        assert!(!shedder.still_hot(now, true));
        assert!(!heat.dropped_recently.load(Ordering::Acquire), "cleared");

        heat.dropped_recently.store(true, Ordering::Release);
        overloaded_at(now);
        assert!(shedder.still_hot(now, true));
        overloaded_at(now - 999_000_000);
        assert!(shedder.still_hot(now, true));
        overloaded_at(now - 1_000_000_000);
        assert!(!shedder.still_hot(now, false), "strict <");
        assert!(
            heat.dropped_recently.load(Ordering::Acquire),
            "observing clears nothing"
        );
    }
}
