//! The queue-delay gate: CoDel on a grid of intervals, lock-free.

use std::time::Duration;

#[cfg(feature = "metrics")]
use super::histogram::{WaitHistogram, Waits};
use crate::ConfigError;
use crate::signal::{Arrival, Cause, OverloadSignal, Pressure};
use crate::sync::{AtomicU64, Ordering};

/// The default target: sojourns above it make an interval count against the service.
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);
/// The default interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
/// The default hot share: the gate is hot after an interval in which at least 90 % of the waits
/// exceeded the target.
pub const DEFAULT_HOT_SHARE: f64 = 0.9;

/// Bits of each of the interval's two counts (waits recorded, waits above the target).
const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Where the interval number sits, above the two counts.
const TAG_SHIFT: u32 = 2 * COUNT_BITS;
const TAG_BITS: u32 = 64 - TAG_SHIFT;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// One more wait recorded.
const ONE_RECORDED: u64 = 1 << COUNT_BITS;
/// Shares are kept in parts per million.
const PPM: u64 = 1_000_000;

/// A queue-delay gate: CoDel's test ("the requests of the last interval waited longer than the
/// target") on intervals aligned to a grid of the clock, lock-free and allocation-free.
///
/// Each request [`record`](Self::record)s how long it waited (its *sojourn*). Time is cut into
/// intervals of `interval` counted from the clock's zero; the gate is hot for a whole interval
/// if the interval just before it had samples and at least the
/// [hot share](QueueGateBuilder::hot_share) of them (90 %, by default) waited longer than
/// `target`. As an [`OverloadSignal`], a hot gate reads overloaded ([`Cause::Queue`]), and a
/// request that waited more than twice the target is not worth serving: the gate refuses it
/// ([`Cause::QueueDelay`]); its client has probably given up, and serving it makes every request
/// behind it later still. A hot reading hints one interval as the client's retry delay, and
/// every reading floors the shedder's limit at the concurrency whose requests wait the target.
///
/// A hot share of 1 is CoDel's own test, on the interval's *smallest* sojourn. Unlike folly's
/// `Codel`, the intervals do not re-anchor on traffic and the request that closes an interval
/// is not exempt; an interval with no sample before it is never hot, so an idle service starts
/// cold. The gate engages one to two intervals after nearly every request starts to wait longer
/// than the target. See the [guide](crate::guide::signals) for why a share and not the minimum.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::signal::queue::QueueGate;
/// use admit::signal::{Arrival, Cause, OverloadSignal};
///
/// let gate = QueueGate::default(); // 5 ms target, 100 ms intervals, hot share 0.9
/// let ms = |ms: u64| ms * 1_000_000;
/// let waited = |at: u64, wait: u64| {
///     gate.assess(&Arrival::new().at(ms(at)).with_wait(Duration::from_nanos(ms(wait))))
/// };
/// // The requests from 100 ms to 200 ms waited 30 ms or more: hot from 200 ms to 300 ms,
/// // as soon as a sample of that interval closes the one before.
/// gate.record(ms(110), ms(30));
/// gate.record(ms(190), ms(40));
/// let late = waited(210, 25);
/// assert!(late.refuses(), "waited more than twice the target: shed");
/// assert_eq!(late.cause(), Some(Cause::QueueDelay));
/// assert_eq!(late.retry_after(), Some(Duration::from_millis(100)));
/// assert_eq!(gate.pressure(ms(220)).cause(), Some(Cause::Queue));
/// assert!(!waited(230, 3).refuses(), "waited less: served");
/// // Two of the three waits from 200 ms were short: cold again from 300 ms.
/// gate.record(ms(300), ms(40));
/// assert_eq!(gate.pressure(ms(300)).cause(), None);
/// ```
#[derive(Debug)]
pub struct QueueGate {
    target_ns: u64,
    interval_ns: u64,
    /// The hot share, in parts per million (1 to 1 000 000).
    hot_ppm: u64,
    /// The interval being measured (its number modulo 2^24) and its two counts: waits recorded
    /// and waits above the target.
    current: AtomicU64,
    /// `interval << 2 | state` ([`QueueState`] as 0, 1, 2): the verdict for the interval it
    /// names, stored by the first sample of that interval; only ever raised.
    verdict: AtomicU64,
    /// The interval of a recent reading: spares most readings a 64-bit division.
    hint: AtomicU64,
    /// Every wait recorded, by [`WaitSource`], for the metrics.
    #[cfg(feature = "metrics")]
    waits: [WaitHistogram; 2],
}

/// Where a wait recorded in a [`QueueGate`] was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitSource {
    /// Before a request reached the shedder: a layer's reader (`RequestStart`), or
    /// [`Shedder::allow_with`](crate::shed::Shedder::allow_with).
    Request = 0,
    /// In a pool inside the process ([`QueueStamp`](super::QueueStamp)).
    Pool = 1,
}

/// What the metrics read of a [`QueueGate`]: every wait it recorded, by source, and whether it
/// is hot.
#[cfg(feature = "metrics")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GateSnapshot {
    /// The requests' waits.
    pub(crate) request: Waits,
    /// The pool jobs' waits.
    pub(crate) pool: Waits,
    /// Whether the gate is hot.
    pub(crate) hot: bool,
}

impl QueueGate {
    /// A gate that is hot for an interval after one in which at least 90 % of the sojourns
    /// exceeded `target`; [`builder`](Self::builder) sets the share.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueTargetOutOfRange`] unless `0 < target < interval` and the target is
    /// at most about 18 minutes; [`ConfigError::DurationTooLong`] for an interval beyond
    /// 584 years.
    pub fn new(target: Duration, interval: Duration) -> Result<Self, ConfigError> {
        QueueGate::builder()
            .target(target)
            .interval(interval)
            .build()
    }

    /// A builder with the defaults: 5 ms target, 100 ms intervals, hot share 0.9.
    pub fn builder() -> QueueGateBuilder {
        QueueGateBuilder {
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            hot_share: DEFAULT_HOT_SHARE,
        }
    }

    /// The interval number of clock reading `now_ns`.
    #[inline]
    fn interval_of(&self, now_ns: u64) -> u64 {
        // The hint is some earlier `now / interval_ns`, so the product cannot overflow; it is
        // used only if `now_ns` falls inside its interval.
        let hint = self.hint.load(Ordering::Relaxed);
        let start = hint * self.interval_ns;
        if now_ns >= start && now_ns - start < self.interval_ns {
            return hint;
        }
        let interval = now_ns / self.interval_ns;
        self.hint.store(interval, Ordering::Relaxed);
        interval
    }

    /// Records that a request waited `sojourn_ns` before being served, at clock reading
    /// `now_ns`, without judging it. A reading from an interval older than the one being
    /// measured (a thread whose clock read lags) is ignored.
    #[inline]
    pub fn record(&self, now_ns: u64, sojourn_ns: u64) {
        self.record_at(WaitSource::Request, self.interval_of(now_ns), sojourn_ns);
    }

    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn record_at(&self, source: WaitSource, interval: u64, sojourn_ns: u64) {
        #[cfg(feature = "metrics")]
        self.waits[source as usize].record(sojourn_ns);
        self.record_in(interval, sojourn_ns);
    }

    /// What the metrics read at clock reading `now_ns`: every wait recorded since the gate was
    /// built, by source, and whether the gate is hot.
    #[cfg(feature = "metrics")]
    pub(crate) fn snapshot(&self, now_ns: u64) -> GateSnapshot {
        GateSnapshot {
            request: self.waits[WaitSource::Request as usize].get(),
            pool: self.waits[WaitSource::Pool as usize].get(),
            hot: self.state(now_ns) == QueueState::Hot,
        }
    }

    #[inline]
    fn record_in(&self, interval: u64, sojourn_ns: u64) {
        let tag = interval & TAG_MASK;
        let above = u64::from(sojourn_ns > self.target_ns);
        let mut word = self.current.load(Ordering::Acquire);
        loop {
            let ahead = tag.wrapping_sub(word >> TAG_SHIFT) & TAG_MASK;
            let next = if ahead == 0 {
                if (word >> COUNT_BITS) & COUNT_MASK == COUNT_MASK {
                    return; // a million waits in one interval: its share is settled
                }
                word + ONE_RECORDED + above
            } else if ahead >= 1 << (TAG_BITS - 1) {
                return; // an older interval
            } else {
                tag << TAG_SHIFT | ONE_RECORDED | above
            };
            match self.current.compare_exchange_weak(
                word,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if ahead != 0 {
                        self.close(interval, ahead == 1, word);
                    }
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// The first sample of `interval` closes the one `word` held: hot if that was the interval
    /// just before (`adjacent`) and enough of its waits exceeded the target, cold if it was and
    /// they did not, unknown if it was older or had no sample.
    #[cold]
    fn close(&self, interval: u64, adjacent: bool, word: u64) {
        let recorded = (word >> COUNT_BITS) & COUNT_MASK;
        let above = word & COUNT_MASK;
        let state = if !adjacent || recorded == 0 {
            QueueState::Unknown
        } else if above * PPM >= self.hot_ppm * recorded {
            QueueState::Hot
        } else {
            QueueState::Cold
        };
        self.verdict
            .fetch_max(interval << 2 | state as u64, Ordering::AcqRel);
    }

    #[inline]
    fn state_in(&self, interval: u64) -> QueueState {
        let verdict = self.verdict.load(Ordering::Acquire);
        if verdict >> 2 != interval {
            return QueueState::Unknown;
        }
        match verdict & 3 {
            2 => QueueState::Hot,
            1 => QueueState::Cold,
            _ => QueueState::Unknown,
        }
    }

    /// What the gate knows at clock reading `now_ns` (see [`QueueState`]): hot if the interval
    /// before this one had samples and at least the hot share of them exceeded the target.
    /// Known from the first sample of this interval on.
    #[inline]
    pub(crate) fn state(&self, now_ns: u64) -> QueueState {
        self.state_in(self.interval_of(now_ns))
    }

    /// Records the `sojourn_ns` of a request from `source`, if known, and judges it: the state
    /// it was judged in, and the reading for it (refused if the gate is hot and it waited more
    /// than twice the target).
    #[inline]
    pub(crate) fn judge(
        &self,
        source: WaitSource,
        now_ns: u64,
        sojourn_ns: Option<u64>,
    ) -> (QueueState, Pressure) {
        let interval = self.interval_of(now_ns);
        if let Some(sojourn) = sojourn_ns {
            self.record_at(source, interval, sojourn);
        }
        let state = self.state_in(interval);
        let late = sojourn_ns.is_some_and(|ns| ns > 2 * self.target_ns);
        (state, self.reading(state, late))
    }

    /// The gate's reading in `state`, for a request that waited more than twice the target if
    /// `late`: hot, it names the queue and hints one interval; hot and late, it refuses. Every
    /// reading floors the shedder's limit at the target.
    #[inline]
    fn reading(&self, state: QueueState, late: bool) -> Pressure {
        let pressure = match state {
            QueueState::Hot if late => Pressure::refuse(Cause::QueueDelay),
            QueueState::Hot => Pressure::overloaded(Cause::Queue),
            QueueState::Cold | QueueState::Unknown => Pressure::CALM,
        };
        let pressure = if state == QueueState::Hot {
            pressure.with_retry_after_nanos(self.interval_ns)
        } else {
            pressure
        };
        pressure.with_limit_floor_nanos(self.target_ns)
    }
}

/// Configures a [`QueueGate`]; created by [`QueueGate::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::signal::queue::QueueGate;
///
/// // CoDel's own test: hot only after an interval in which every wait exceeded 10 ms.
/// let gate = QueueGate::builder()
///     .target(Duration::from_millis(10))
///     .interval(Duration::from_millis(200))
///     .hot_share(1.0)
///     .build()?;
/// # let _ = gate;
///
/// let none = QueueGate::builder().hot_share(0.0).build();
/// assert!(matches!(none, Err(ConfigError::HotShareOutOfRange { .. })));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct QueueGateBuilder {
    target: Duration,
    interval: Duration,
    hot_share: f64,
}

impl QueueGateBuilder {
    /// The wait above which a request counts against the service (default 5 ms); above zero
    /// and below the interval.
    pub fn target(mut self, target: Duration) -> Self {
        self.target = target;
        self
    }

    /// How long each judged interval lasts (default 100 ms).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The share of an interval's waits that must exceed the target for the next interval to
    /// be hot (default 0.9); above 0, at most 1. At 1, every wait must: CoDel's test on the
    /// interval's smallest sojourn.
    pub fn hot_share(mut self, hot_share: f64) -> Self {
        self.hot_share = hot_share;
        self
    }

    /// Validates the settings and builds the gate.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueTargetOutOfRange`] unless `0 < target < interval` and the target is
    /// at most about 18 minutes; [`ConfigError::DurationTooLong`] for an interval beyond
    /// 584 years; [`ConfigError::HotShareOutOfRange`] for a share outside `(0, 1]`.
    pub fn build(self) -> Result<QueueGate, ConfigError> {
        let QueueGateBuilder {
            target,
            interval,
            hot_share,
        } = self;
        let interval_ns =
            u64::try_from(interval.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "interval",
                value: interval,
            })?;
        let max = Duration::from_nanos(MAX_TARGET_NS);
        if target.is_zero() || target >= interval || target > max {
            return Err(ConfigError::QueueTargetOutOfRange {
                target,
                interval,
                max,
            });
        }
        if !(hot_share > 0.0 && hot_share <= 1.0) {
            return Err(ConfigError::HotShareOutOfRange { hot_share });
        }
        Ok(QueueGate {
            target_ns: target.as_nanos() as u64,
            interval_ns,
            hot_ppm: ((hot_share * PPM as f64).ceil() as u64).clamp(1, PPM),
            // The interval "before zero", with no sample: interval 0 is not hot.
            current: AtomicU64::new(TAG_MASK << TAG_SHIFT),
            verdict: AtomicU64::new(0),
            hint: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            waits: std::array::from_fn(|_| WaitHistogram::new()),
        })
    }
}

/// The longest target: about 18 minutes (sojourns are compared in ns, and `2 × target` must
/// not overflow).
const MAX_TARGET_NS: u64 = (1 << 40) - 1;

/// What a [`QueueGate`] knows of the queue in the current interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QueueState {
    /// No verdict: the interval before had no sample (or none of this interval has come yet).
    Unknown = 0,
    /// The interval before had samples, and fewer than the hot share waited longer than the
    /// target: no standing queue.
    Cold = 1,
    /// At least the hot share of the interval before waited longer than the target: a
    /// standing queue.
    Hot = 2,
}

/// Overloaded ([`Cause::Queue`]) while hot, with one interval as the retry hint; every reading
/// floors the limit at the target. A request deciding records its wait, if known, and is
/// refused ([`Cause::QueueDelay`]) if the gate is hot and it waited more than twice the target.
impl OverloadSignal for QueueGate {
    #[inline]
    fn pressure(&self, now_nanos: u64) -> Pressure {
        self.reading(self.state(now_nanos), false)
    }

    #[inline]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        let (_, pressure) = self.judge(
            WaitSource::Request,
            arrival.now_nanos(),
            arrival.wait_nanos(),
        );
        pressure
    }
}

/// A 5 ms target over 100 ms intervals (CoDel's and folly's defaults), hot share 0.9.
impl Default for QueueGate {
    fn default() -> Self {
        QueueGate::new(DEFAULT_TARGET, DEFAULT_INTERVAL).expect("the defaults are valid")
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use std::time::Duration;

    use loom::sync::Arc;
    use loom::thread;

    use super::{COUNT_BITS, COUNT_MASK, QueueGate, QueueState, TAG_MASK, TAG_SHIFT};
    use crate::sync::Ordering;

    const ABOVE: u64 = 10_000_000; // 10 ms, above the 5 ms target
    const BELOW: u64 = 1_000_000;

    /// CoDel's test (hot share 1): one wait below the target makes an interval cold.
    fn gate() -> Arc<QueueGate> {
        let gate = QueueGate::builder()
            .target(Duration::from_millis(5))
            .interval(Duration::from_millis(100))
            .hot_share(1.0)
            .build()
            .unwrap();
        Arc::new(gate)
    }

    /// `(interval tag, recorded, above target)` of the interval being measured.
    fn current(gate: &QueueGate) -> (u64, u64, u64) {
        let word = gate.current.load(Ordering::Acquire);
        (
            word >> TAG_SHIFT & TAG_MASK,
            word >> COUNT_BITS & COUNT_MASK,
            word & COUNT_MASK,
        )
    }

    /// Two first samples of interval 6 race: one closes interval 5, the other counts in 6,
    /// and neither is lost or counted twice.
    #[test]
    fn loom_racing_first_samples_both_count() {
        loom::model(|| {
            let gate = gate();
            gate.record_in(5, ABOVE);
            // Both samplers are threads of their own: on the spawning thread, right after the
            // spawn, a sampler's first read is never preceded by the other's write in loom's
            // exploration.
            let samplers = [ABOVE, BELOW].map(|wait| {
                let gate = Arc::clone(&gate);
                thread::spawn(move || gate.record_in(6, wait))
            });
            for sampler in samplers {
                sampler.join().unwrap();
            }
            assert_eq!(current(&gate), (6, 2, 1));
            assert_eq!(gate.state_in(6), QueueState::Hot, "interval 5's one wait");
        });
    }

    /// A late sample of interval 5 races the first of interval 6: it either counts in 5
    /// before 5 is closed (and the verdict includes it) or is dropped, never counted in 6; a
    /// reader sees no verdict or the final one.
    #[test]
    fn loom_a_late_sample_counts_in_its_interval_or_not_at_all() {
        loom::model(|| {
            let gate = gate();
            gate.record_in(5, ABOVE);
            let late = {
                let gate = Arc::clone(&gate);
                thread::spawn(move || gate.record_in(5, BELOW))
            };
            let next = {
                let gate = Arc::clone(&gate);
                thread::spawn(move || gate.record_in(6, ABOVE))
            };
            let seen = gate.state_in(6);
            late.join().unwrap();
            next.join().unwrap();
            assert_eq!(current(&gate), (6, 1, 1), "the late wait never counts in 6");
            let verdict = gate.state_in(6);
            // Cold if the late wait below the target counted in 5, hot if it was dropped.
            assert!(matches!(verdict, QueueState::Hot | QueueState::Cold));
            assert!(
                seen == QueueState::Unknown || seen == verdict,
                "{seen:?} then {verdict:?}"
            );
        });
    }
}

#[cfg(all(test, not(admit_loom)))]
#[path = "gate_tests.rs"]
mod tests;
