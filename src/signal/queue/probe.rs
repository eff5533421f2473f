//! The runtime lag probe: how late a timer fires, for work done inline in async handlers.
//!
//! A task wakes every `interval`; how late it wakes measures how long tokio's workers were busy
//! before they got to it, the backlog that work done inline leaves in the run queue.
//!
//! # The controller
//!
//! Every tick the probe's task measures its lateness, `max(0, now − deadline)`, and steps an
//! integral controller: the drop probability `p` rises by 50 000 ppm if the lateness exceeded
//! the target, and falls by 10 000 ppm otherwise, within `0..=1_000_000`. A request is dropped
//! with probability `p`.
//!
//! Every decision also checks a heartbeat: a last tick more than `interval + 4·target` old
//! means the runtime has not run the probe since, and the request is dropped at once.
//!
//! Defaults: a tick every 10 ms, a 5 ms target. See the [guide](crate::guide::signals) for why
//! the controller is integral and why these defaults.
//!
//! # Concurrency
//!
//! The probe's task is the only writer of the tick state (the last tick and `p`; `run` lets one
//! task at a time run a probe), so a step is a load and a store, no read-modify-write.
//! Decisions read the state with relaxed loads and allocate nothing.

use std::sync::Arc;
use std::time::Duration;

use super::gate::DEFAULT_TARGET;
#[cfg(feature = "metrics")]
use super::histogram::{WaitHistogram, Waits};
use super::rng::{draw_ppm, draw_shared_ppm};
use crate::ConfigError;
use crate::signal::{Arrival, Cause, OverloadSignal, Pressure};
#[cfg(feature = "tokio")]
use crate::sync::AtomicBool;
use crate::sync::{AtomicU64, Ordering};

/// The default tick interval.
const DEFAULT_TICK: Duration = Duration::from_millis(10);
/// The shortest tick interval: tokio's timer resolution.
const MIN_TICK: Duration = Duration::from_millis(1);
/// The drop probability's scale: parts per million.
const PPM: u64 = 1_000_000;
/// What a late tick adds to the drop probability.
const STEP_UP: u64 = 50_000;
/// What a tick on time takes from it.
const STEP_DOWN: u64 = 10_000;
/// The heartbeat is missed once the next tick is this many targets overdue.
const HEARTBEAT_TARGETS: u64 = 4;
/// `last_tick` of a probe whose task has not started: its heartbeat is never missed.
const NEVER: u64 = u64::MAX;

/// The runtime lag probe: a task that wakes every `interval` and measures how late it woke,
/// and the drop decision that lateness drives, for work done inline in async handlers (see the
/// [guide](crate::guide::signals)).
///
/// Each tick ([`tick`](Self::tick)) moves the drop probability: up 5 % after a tick later than
/// the target, down 1 % otherwise.
/// As an [`OverloadSignal`], it refuses a request with that probability
/// ([`assess`](OverloadSignal::assess), drawn from the thread's generator), or every request if
/// the probe missed its heartbeat (no tick for `interval + 4·target`).
///
/// Clones share one probe. Run its task with [`run`](Self::run) (feature `tokio`); it stops
/// once the last clone is dropped. Until the task starts the probe is cold.
///
/// # Example
///
/// ```
/// use admit::signal::queue::LagProbe;
/// use admit::signal::{Arrival, Cause, OverloadSignal};
///
/// let probe = LagProbe::default(); // a tick every 10 ms, 5 ms target
/// let ms = |ms: u64| ms * 1_000_000;
/// assert!(!probe.assess(&Arrival::new().at(ms(5))).refuses());
/// // Three ticks 22 ms late: 15 % of requests are refused.
/// for tick in 1..=3 {
///     probe.tick(ms(10 * tick), ms(10 * tick + 22));
/// }
/// assert_eq!(probe.pressure(ms(55)).cause(), Some(Cause::RuntimeLag));
/// // No tick for 31 ms: the heartbeat is missed, every request is refused.
/// assert!((0..100).all(|_| probe.assess(&Arrival::new().at(ms(83))).refuses()));
/// ```
#[derive(Clone, Debug)]
pub struct LagProbe {
    pub(super) state: Arc<ProbeState>,
}

/// What the probe's clones and its task share.
#[derive(Debug)]
pub(super) struct ProbeState {
    interval_ns: u64,
    target_ns: u64,
    /// The clock reading of the last tick, or [`NEVER`].
    last_tick: AtomicU64,
    /// The drop probability, in ppm.
    drop_ppm: AtomicU64,
    /// A seeded probe's generator, shared by every thread; `None`: each thread's own.
    seeded: Option<AtomicU64>,
    /// Whether a task runs the probe.
    #[cfg(feature = "tokio")]
    running: AtomicBool,
    /// Every tick's lateness, for the metrics.
    #[cfg(feature = "metrics")]
    lateness: WaitHistogram,
}

/// What the metrics read of a [`LagProbe`].
#[cfg(feature = "metrics")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProbeSnapshot {
    /// Every tick's lateness since the probe was built.
    pub(crate) lateness: Waits,
    /// The drop probability, in parts per million.
    pub(crate) drop_ppm: u32,
}

impl ProbeState {
    /// One controller step; returns the lateness. One writer at a time.
    pub(super) fn tick(&self, deadline_ns: u64, now_ns: u64) -> u64 {
        let lateness = now_ns.saturating_sub(deadline_ns);
        self.last_tick.store(now_ns, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.lateness.record(lateness);
        let p = self.drop_ppm.load(Ordering::Relaxed);
        let p = if lateness > self.target_ns {
            (p + STEP_UP).min(PPM)
        } else {
            p.saturating_sub(STEP_DOWN)
        };
        self.drop_ppm.store(p, Ordering::Relaxed);
        lateness
    }
}

/// What the task needs ([`run`](LagProbe::run)).
#[cfg(feature = "tokio")]
impl ProbeState {
    pub(super) fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Claims the probe for a task starting at `now_ns` and arms the heartbeat; `false` if a
    /// task already runs it.
    pub(super) fn claim(&self, now_ns: u64) -> bool {
        if self.running.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.last_tick.store(now_ns, Ordering::Relaxed);
        true
    }

    /// The task stopped: disarms the heartbeat, clears `p` and frees the probe for another task.
    pub(super) fn release(&self) {
        self.last_tick.store(NEVER, Ordering::Relaxed);
        self.drop_ppm.store(0, Ordering::Relaxed);
        self.running.store(false, Ordering::Release);
    }
}

impl LagProbe {
    /// Starts a probe with the defaults: a tick every 10 ms, a 5 ms target.
    pub fn builder() -> LagProbeBuilder {
        LagProbeBuilder {
            interval: DEFAULT_TICK,
            target: DEFAULT_TARGET,
            seed: None,
        }
    }

    /// One controller step, what the task does each tick: the tick due at `deadline_ns` ran at
    /// `now_ns` (both on the clock of the decisions). Stores the tick, and raises the drop
    /// probability by 50 000 ppm if the lateness, `max(0, now − deadline)`, exceeded the
    /// target, else lowers it by 10 000 ppm, within `0..=1_000_000`. Returns the lateness.
    ///
    /// For tests and drivers of your own: the step is a load and a store, so ticks must not
    /// race each other (do not call it while the probe's task runs).
    pub fn tick(&self, deadline_ns: u64, now_ns: u64) -> u64 {
        self.state.tick(deadline_ns, now_ns)
    }

    /// How overdue the next tick is at `now_ns`: `max(0, now − last tick − interval)`; 0 before
    /// the first tick.
    #[inline]
    fn lag_now(&self, now_ns: u64) -> u64 {
        let last = self.state.last_tick.load(Ordering::Relaxed);
        now_ns
            .saturating_sub(last)
            .saturating_sub(self.state.interval_ns)
    }

    /// Whether the probe missed its heartbeat at `now_ns`: [`lag_now`](Self::lag_now) is above
    /// four targets. Never before the task starts.
    #[inline]
    fn heartbeat_hot(&self, now_ns: u64) -> bool {
        self.lag_now(now_ns) > self.state.target_ns.saturating_mul(HEARTBEAT_TARGETS)
    }

    /// Whether to drop a request at `now_ns`: always if the heartbeat is missed, else with
    /// probability [`drop_ppm`](Self::drop_ppm), drawn from this thread's generator
    /// (SplitMix64, seeded once per thread; drawn only while the probability is above zero).
    /// Lock-free and allocation-free.
    #[inline]
    fn should_drop(&self, now_ns: u64) -> bool {
        match &self.state.seeded {
            None => self.decide(now_ns, draw_ppm),
            Some(state) => self.decide(now_ns, || draw_shared_ppm(state)),
        }
    }

    #[inline]
    fn decide(&self, now_ns: u64, draw: impl FnOnce() -> u32) -> bool {
        if self.heartbeat_hot(now_ns) {
            return true;
        }
        let p = self.state.drop_ppm.load(Ordering::Relaxed);
        p > 0 && u64::from(draw()) < p
    }

    /// The drop probability, in parts per million.
    #[inline]
    fn drop_ppm(&self) -> u32 {
        // At most `PPM`.
        self.state.drop_ppm.load(Ordering::Relaxed) as u32
    }

    /// What the metrics read: every tick's lateness and the drop probability.
    #[cfg(feature = "metrics")]
    pub(crate) fn snapshot(&self) -> ProbeSnapshot {
        ProbeSnapshot {
            lateness: self.state.lateness.get(),
            drop_ppm: self.drop_ppm(),
        }
    }
}

/// Overloaded ([`Cause::RuntimeLag`]) while the probe misses its heartbeat or drops a share of
/// requests. A request deciding is refused with the drop probability (every request while the
/// heartbeat is missed); one it spares sees no pressure, so the probe never applies the
/// shedder's concurrency rule.
impl OverloadSignal for LagProbe {
    #[inline]
    fn pressure(&self, now_nanos: u64) -> Pressure {
        if self.heartbeat_hot(now_nanos) || self.drop_ppm() > 0 {
            Pressure::overloaded(Cause::RuntimeLag).with_retry_after_nanos(self.state.interval_ns)
        } else {
            Pressure::CALM
        }
    }

    #[inline]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        if self.should_drop(arrival.now_nanos()) {
            Pressure::refuse(Cause::RuntimeLag).with_retry_after_nanos(self.state.interval_ns)
        } else {
            Pressure::CALM
        }
    }
}

/// A tick every 10 ms, a 5 ms target.
impl Default for LagProbe {
    fn default() -> Self {
        LagProbe::builder().build().expect("the defaults are valid")
    }
}

/// Configures a [`LagProbe`]; created by [`LagProbe::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::signal::queue::LagProbe;
///
/// let probe = LagProbe::builder()
///     .interval(Duration::from_millis(20))
///     .target(Duration::from_millis(8))
///     .build()?;
/// # let _ = probe;
///
/// let zero = LagProbe::builder().interval(Duration::ZERO).build();
/// assert!(matches!(zero, Err(ConfigError::DurationTooShort { .. })));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LagProbeBuilder {
    interval: Duration,
    target: Duration,
    seed: Option<u64>,
}

impl LagProbeBuilder {
    /// Draws from one generator seeded with `seed`, shared by every thread (an atomic add per
    /// draw while the probe sheds), instead of each thread's own: the same decisions on every
    /// run of a single-threaded test or simulation (default: per-thread, unseeded).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// How often the probe ticks (default 10 ms); at least 1 ms, tokio's timer resolution.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The lateness above which a tick counts as late (default 5 ms); above zero. The probe
    /// misses its heartbeat once its next tick is four targets overdue.
    pub fn target(mut self, target: Duration) -> Self {
        self.target = target;
        self
    }

    /// Validates the settings and builds the probe, cold: no task runs it yet.
    ///
    /// # Errors
    ///
    /// [`DurationTooShort`](ConfigError::DurationTooShort) for a tick interval under 1 ms or a
    /// zero target, [`DurationTooLong`](ConfigError::DurationTooLong) for an interval or a
    /// target beyond 584 years.
    pub fn build(self) -> Result<LagProbe, ConfigError> {
        let nanos = |setting, value: Duration| {
            u64::try_from(value.as_nanos())
                .map_err(|_| ConfigError::DurationTooLong { setting, value })
        };
        if self.interval < MIN_TICK {
            return Err(ConfigError::DurationTooShort {
                setting: "interval",
                value: self.interval,
                min: MIN_TICK,
            });
        }
        let interval_ns = nanos("interval", self.interval)?;
        if self.target.is_zero() {
            return Err(ConfigError::DurationTooShort {
                setting: "target",
                value: self.target,
                min: Duration::from_nanos(1),
            });
        }
        let target_ns = nanos("target", self.target)?;
        Ok(LagProbe {
            state: Arc::new(ProbeState {
                interval_ns,
                target_ns,
                last_tick: AtomicU64::new(NEVER),
                drop_ppm: AtomicU64::new(0),
                seeded: self.seed.map(AtomicU64::new),
                #[cfg(feature = "tokio")]
                running: AtomicBool::new(false),
                #[cfg(feature = "metrics")]
                lateness: WaitHistogram::new(),
            }),
        })
    }
}

#[cfg(all(test, not(admit_loom)))]
#[path = "probe_tests.rs"]
mod tests;
