//! The queue-delay gate: CoDel on a grid of intervals, lock-free.

use std::time::Duration;

use super::histogram::{WaitHistogram, WaitSource, Waits};
use crate::ConfigError;
use crate::sync::{AtomicU64, Ordering};

/// The default target: sojourns above it, all through an interval, make the gate hot.
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);
/// The default interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// Bits of the interval's minimum sojourn, in ns (about 18 minutes; longer sojourns count as
/// that long).
const MIN_BITS: u32 = 40;
const MIN_MASK: u64 = (1 << MIN_BITS) - 1;
/// Bits of the interval number beside it.
const TAG_BITS: u32 = 64 - MIN_BITS;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

/// A queue-delay gate: CoDel's rule ("every request of the last interval waited longer than
/// the target") on intervals aligned to a grid of the clock, lock-free and allocation-free.
///
/// Each request [`record`](Self::record)s how long it waited (its *sojourn*). Time is cut into
/// intervals of `interval` counted from the clock's zero; the gate is [hot](Self::hot) for a
/// whole interval if the interval just before it had samples and the smallest was above
/// `target`. While hot, a request that waited more than twice the target is not worth serving
/// ([`check`](Self::check)): its client has probably given up, and serving it makes every
/// request behind it later still.
///
/// Compared with folly's `Codel` (the rule's reference), the intervals do not re-anchor on
/// traffic and the request that closes an interval is not exempt; an interval with no sample
/// before it is never hot, so an idle service starts cold. The gate engages one to two intervals
/// after every request starts to wait longer than the target.
///
/// # Example
///
/// ```
/// use admit::signal::queue::QueueGate;
///
/// let gate = QueueGate::default(); // 5 ms target, 100 ms intervals
/// let ms = |ms: u64| ms * 1_000_000;
/// // Every request from 100 ms to 200 ms waited 30 ms or more: hot from 200 ms to 300 ms,
/// // as soon as a sample of that interval closes the one before.
/// gate.record(ms(110), ms(30));
/// gate.record(ms(190), ms(40));
/// assert!(gate.check(ms(210), ms(25)), "waited more than twice the target: shed");
/// assert!(gate.hot(ms(220)));
/// assert!(!gate.check(ms(230), ms(3)), "waited less: served");
/// // The interval from 200 ms held a 3 ms sojourn: cold again from 300 ms.
/// gate.record(ms(300), ms(40));
/// assert!(!gate.hot(ms(300)));
/// ```
#[derive(Debug)]
pub struct QueueGate {
    target_ns: u64,
    interval_ns: u64,
    /// The interval being measured (its number modulo 2^24) and its smallest sojourn so far.
    current: AtomicU64,
    /// `interval << 2 | state` ([`QueueState`] as 0, 1, 2): the verdict for the interval it
    /// names, stored by the first sample of that interval; only ever raised.
    verdict: AtomicU64,
    /// The interval of a recent reading: spares most readings a 64-bit division.
    hint: AtomicU64,
    /// Every wait recorded, by source.
    waits: [WaitHistogram; 3],
}

impl QueueGate {
    /// A gate that is hot for an interval after one whose every sojourn exceeded `target`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::QueueTargetOutOfRange`] unless `0 < target < interval` and the target is
    /// at most about 18 minutes; [`ConfigError::DurationTooLong`] for an interval beyond
    /// 584 years.
    pub fn new(target: Duration, interval: Duration) -> Result<Self, ConfigError> {
        let interval_ns =
            u64::try_from(interval.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "interval",
                value: interval,
            })?;
        let max = Duration::from_nanos(MIN_MASK);
        if target.is_zero() || target >= interval || target > max {
            return Err(ConfigError::QueueTargetOutOfRange {
                target,
                interval,
                max,
            });
        }
        Ok(QueueGate {
            target_ns: target.as_nanos() as u64,
            interval_ns,
            // The interval "before zero", with no sample: interval 0 is not hot.
            current: AtomicU64::new(TAG_MASK << MIN_BITS),
            verdict: AtomicU64::new(0),
            hint: AtomicU64::new(0),
            waits: std::array::from_fn(|_| WaitHistogram::new()),
        })
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
    /// `now_ns`. A reading from an interval older than the one being measured (a thread whose
    /// clock read lags) is ignored.
    #[inline]
    pub fn record(&self, now_ns: u64, sojourn_ns: u64) {
        self.record_from(WaitSource::Request, now_ns, sojourn_ns);
    }

    /// [`record`](Self::record), counting the wait in `source`'s histogram
    /// ([`waits`](Self::waits)).
    #[inline]
    pub fn record_from(&self, source: WaitSource, now_ns: u64, sojourn_ns: u64) {
        self.waits[source.index()].record(sojourn_ns);
        self.record_in(self.interval_of(now_ns), sojourn_ns);
    }

    /// Every wait recorded from `source` since the gate was built, by bucket.
    pub fn waits(&self, source: WaitSource) -> Waits {
        self.waits[source.index()].get()
    }

    #[inline]
    fn record_in(&self, interval: u64, sojourn_ns: u64) {
        let tag = interval & TAG_MASK;
        let sojourn = sojourn_ns.min(MIN_MASK);
        let mut word = self.current.load(Ordering::Acquire);
        loop {
            let (held, min) = (word >> MIN_BITS, word & MIN_MASK);
            let ahead = tag.wrapping_sub(held) & TAG_MASK;
            if ahead == 0 {
                if sojourn >= min {
                    return;
                }
            } else if ahead >= 1 << (TAG_BITS - 1) {
                return; // an older interval
            }
            match self.current.compare_exchange_weak(
                word,
                tag << MIN_BITS | sojourn,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if ahead != 0 {
                        // The first sample of a new interval closes the one it holds: hot if
                        // that was the interval just before and it never dipped below target,
                        // cold if it was and did, unknown if it was older.
                        let state = match (ahead == 1, min > self.target_ns) {
                            (false, _) => QueueState::Unknown,
                            (true, false) => QueueState::Cold,
                            (true, true) => QueueState::Hot,
                        };
                        self.verdict
                            .fetch_max(interval << 2 | state as u64, Ordering::AcqRel);
                    }
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Whether the gate is hot at clock reading `now_ns`: the interval before this one had
    /// samples, all above the target. Known from the first sample of this interval on.
    #[inline]
    pub fn hot(&self, now_ns: u64) -> bool {
        self.hot_in(self.interval_of(now_ns))
    }

    #[inline]
    fn hot_in(&self, interval: u64) -> bool {
        self.state_in(interval) == QueueState::Hot
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

    /// What the gate knows at clock reading `now_ns` (see [`QueueState`]).
    #[inline]
    pub fn state(&self, now_ns: u64) -> QueueState {
        self.state_in(self.interval_of(now_ns))
    }

    /// [`record`](Self::record)s the sojourn, if any, and returns the [`state`](Self::state).
    #[inline]
    pub fn observe_state(&self, now_ns: u64, sojourn_ns: impl Into<Option<u64>>) -> QueueState {
        self.observe_from(WaitSource::Request, now_ns, sojourn_ns.into())
    }

    #[inline]
    pub(crate) fn observe_from(
        &self,
        source: WaitSource,
        now_ns: u64,
        sojourn_ns: Option<u64>,
    ) -> QueueState {
        let interval = self.interval_of(now_ns);
        if let Some(sojourn) = sojourn_ns {
            self.waits[source.index()].record(sojourn);
            self.record_in(interval, sojourn);
        }
        self.state_in(interval)
    }

    /// Whether a request that waited `sojourn_ns` waited too long to be worth serving while
    /// the gate is hot: more than twice the target.
    #[inline]
    pub fn too_late(&self, sojourn_ns: u64) -> bool {
        sojourn_ns > 2 * self.target_ns
    }

    /// [`record`](Self::record)s the sojourn, then says whether to shed the request: the gate
    /// is hot and the request waited more than twice the target.
    #[inline]
    pub fn check(&self, now_ns: u64, sojourn_ns: u64) -> bool {
        self.observe(now_ns, sojourn_ns) && self.too_late(sojourn_ns)
    }

    /// [`record`](Self::record)s the sojourn, if any, and returns [`hot`](Self::hot): one
    /// interval computation for both.
    #[inline]
    pub fn observe(&self, now_ns: u64, sojourn_ns: impl Into<Option<u64>>) -> bool {
        self.observe_state(now_ns, sojourn_ns) == QueueState::Hot
    }

    /// The smallest sojourn recorded in the interval of `now_ns`, if any was.
    pub fn min_sojourn(&self, now_ns: u64) -> Option<Duration> {
        let word = self.current.load(Ordering::Acquire);
        (word >> MIN_BITS == self.interval_of(now_ns) & TAG_MASK)
            .then(|| Duration::from_nanos(word & MIN_MASK))
    }

    /// The target.
    pub fn target(&self) -> Duration {
        Duration::from_nanos(self.target_ns)
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }
}

/// What a [`QueueGate`] knows of the queue in the current interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueState {
    /// No verdict: the interval before had no sample (or none of this interval has come yet).
    Unknown = 0,
    /// The interval before had samples, and one waited at most the target: no standing queue.
    Cold = 1,
    /// Every sample of the interval before waited longer than the target: a standing queue.
    Hot = 2,
}

/// A 5 ms target over 100 ms intervals (CoDel's and folly's defaults).
impl Default for QueueGate {
    fn default() -> Self {
        QueueGate::new(DEFAULT_TARGET, DEFAULT_INTERVAL).expect("the defaults are valid")
    }
}
