//! The shedder: go-zero's decision over lock-free counters.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::cut::{Cut, Place};
use super::error::{Drops, Overloaded};
use super::ledger::Ledger;
use super::permit::{OwnedPermit, Permit};
use super::window::RollingWindow;
use crate::Shared;
use crate::clock::{Clock, MonotonicClock};
use crate::criticality::Criticality;
use crate::signal::cpu::CpuOverload;
use crate::signal::queue::floor::SkewFloor;
use crate::signal::queue::{LagProbe, QueueGate, QueueSignal};
use crate::signal::{Arrival, Cause, OverloadSignal, Pressure};
use crate::sync::{AtomicBool, AtomicU64, Ordering, SeqLock};

/// The default `min_rt` when the window holds no latency, in ms.
const DEFAULT_MIN_RT_MS: u64 = 1000;

/// The most buckets a window may have.
pub(super) const MAX_BUCKETS: u32 = 65_536;

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
pub struct Shedder<C: Clock = MonotonicClock> {
    /// Written while the service is hot.
    pub(super) heat: CachePadded<Heat>,
    /// go-zero's window, and the lifetime counts it marks.
    pub(super) window: RollingWindow,
    pub(super) config: Config,
    pub(super) clock: C,
    /// go-zero's CPU signal.
    pub(super) cpu: CpuOverload,
    /// The queue gate and runtime probe added with
    /// [`ShedderBuilder::queue_gate`](super::ShedderBuilder::queue_gate) and
    /// [`ShedderBuilder::runtime_probe`](super::ShedderBuilder::runtime_probe), if any.
    pub(super) queue: QueueSignal,
    /// What is subtracted from a stamped request's raw queue time: the clocks' offset.
    pub(super) floor: SkewFloor,
    /// Signals added with [`ShedderBuilder::signal`](super::ShedderBuilder::signal).
    pub(super) signals: Box<[Box<dyn OverloadSignal>]>,
    pub(super) name: Option<Cow<'static, str>>,
    /// Which request classes are served while overloaded.
    pub(super) cut: Cut,
}

#[derive(Debug)]
pub(super) struct Heat {
    /// The latest clock reading at which a signal reported overload, plus one
    /// (0: never).
    pub(super) overloaded_at: AtomicU64,
    pub(super) dropped_recently: AtomicBool,
    /// The epoch (plus one, 0: none yet), the `f64` bits of go-zero's `maxFlight`, and the
    /// `maxPass` it was computed from.
    pub(super) limit: SeqLock<3>,
}

/// What a scan of the visible window finds.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WindowScan {
    /// go-zero's `maxPass` (at least 1) and `minRt` in ms (1000 without data).
    pub(super) max_pass: u64,
    pub(super) min_rt: u64,
    /// Sums over the visible buckets: passes, the passes with a known latency and that
    /// latency, failures and refusals, and the buckets visited.
    pub(super) passes: u64,
    pub(super) timed: u64,
    pub(super) latency_ms: u64,
    pub(super) others: u64,
    pub(super) buckets: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Config {
    pub(super) window: Duration,
    pub(super) buckets: u32,
    pub(super) bucket_nanos: u64,
    /// go-zero's `windowScale`: buckets per second / 1000.
    pub(super) window_scale: f64,
    pub(super) cool_off_nanos: u64,
    /// The clock reading at construction: buckets are aligned to it.
    pub(super) origin_nanos: u64,
}

impl<C: Clock> Shedder<C> {
    /// A shedder with nothing counted yet, deciding with `config` (validated by the builder,
    /// its window aligned to `config.origin_nanos`), on `clock`, with the CPU signal `cpu`, the
    /// `queue` signal and the `signals` added to it.
    pub(super) fn new(
        config: Config,
        clock: C,
        cpu: CpuOverload,
        queue: QueueSignal,
        floor: SkewFloor,
        signals: Box<[Box<dyn OverloadSignal>]>,
        name: Option<Cow<'static, str>>,
    ) -> Self {
        Shedder {
            heat: CachePadded::new(Heat {
                overloaded_at: AtomicU64::new(0),
                dropped_recently: AtomicBool::new(false),
                limit: SeqLock::new([0, 0, 0]),
            }),
            window: RollingWindow::new(config.buckets as usize, config.bucket_nanos),
            config,
            clock,
            cpu,
            queue,
            floor,
            signals,
            name,
            cut: Cut::new(),
        }
    }

    /// Admits a request, or refuses it if the service is overloaded (see the
    /// [module docs](super) for the rule). The request is of the default class,
    /// [`Critical`](Criticality::Critical), and its wait is unknown: [`allow_with`](Self::allow_with)
    /// says more.
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::shed::Shedder;
    /// use admit::signal::cpu::ManualCpu;
    ///
    /// let shedder = Shedder::builder().cpu(ManualCpu::new(200)).build()?;
    /// let permit = shedder.allow().expect("a cool CPU sheds nothing");
    /// assert_eq!(shedder.snapshot().flying, 1);
    /// permit.pass();
    /// assert_eq!(shedder.snapshot().flying, 0);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn allow(&self) -> Result<Permit<'_, C>, Overloaded> {
        self.allow_with(Arrival::new())
    }

    /// [`allow`](Self::allow) for a request known by `arrival`; the layers call this for each
    /// request, with what their [readers](crate::middleware::Inspect) read. The shedder reads
    /// its clock once and decides at that reading (the arrival's own is replaced).
    ///
    /// - **Its class** ([`Arrival::with_class`]): while hot, the shedder refuses the classes
    ///   below a marginal class outright, serves the ones above it, and decides the marginal
    ///   one as it decides every request without classes (see
    ///   [Request criticality](super#request-criticality)).
    /// - **Its wait** ([`Arrival::with_wait`]): how long it waited before reaching the shedder
    ///   (in a proxy's queue, a socket backlog, a pool). The signals see it: the
    ///   [queue gate](super::ShedderBuilder::queue_gate) records it, and while the gate is hot
    ///   a request that waited more than twice its target is refused ([`Cause::QueueDelay`]).
    /// - **Its stamp's age** ([`Arrival::with_stamp_age`]), without a wait: the service's wall
    ///   clock less the request-start stamp a proxy put on it (what
    ///   [`RequestStart`](crate::middleware::RequestStart) reads), the wait plus the clocks'
    ///   offset. The [skew floor](super::ShedderBuilder::skew_floor) learns the offset from
    ///   requests that find the service idle, and the wait is the age less it. A stamp that
    ///   could not be read is counted by its error
    ///   ([`ShedSnapshot::header_errors`](super::ShedSnapshot::header_errors)), and the wait is
    ///   unknown.
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use admit::clock::ManualClock;
    /// use admit::criticality::Criticality;
    /// use admit::shed::Shedder;
    /// use admit::signal::{Arrival, Cause};
    /// use admit::signal::queue::QueueGate;
    ///
    /// const MS: i64 = 1_000_000;
    /// let clock = ManualClock::new();
    /// let shedder = Shedder::builder()
    ///     .clock(clock.clone())
    ///     .queue_gate(QueueGate::default()) // 5 ms target, 100 ms intervals
    ///     .build()?;
    /// let waited = |ms: u64| Arrival::new().with_wait(Duration::from_millis(ms));
    /// // From 100 ms to 200 ms every request waited 40 ms: the gate is hot after 200 ms.
    /// clock.set(Duration::from_millis(150));
    /// shedder.allow_with(waited(40)).unwrap().pass();
    /// clock.set(Duration::from_millis(250));
    /// let refused = shedder.allow_with(waited(40)).unwrap_err();
    /// assert_eq!(refused.reason(), Cause::QueueDelay);
    /// // A request that waited little is served, whatever its class.
    /// shedder.allow_with(waited(2).with_class(Criticality::Sheddable)).unwrap().pass();
    ///
    /// // The service's clock is 300 ms ahead of the proxy's: a request that finds the service
    /// // idle is stamped 300 ms old, and waited nothing.
    /// let stamped = |age: i64| Arrival::new().with_stamp_age(Ok(age));
    /// clock.set(Duration::from_millis(2_000));
    /// shedder.allow_with(stamped(300 * MS)).unwrap().pass();
    /// assert_eq!(shedder.snapshot().clock_offset_nanos, Some(300 * MS));
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    #[inline]
    pub fn allow_with(&self, arrival: Arrival) -> Result<Permit<'_, C>, Overloaded> {
        let now = self.admit(arrival)?;
        Ok(Permit::new(self, now))
    }

    /// [`allow`](Self::allow) for a shedder in an `Arc`: the permit holds a clone of the `Arc`
    /// (no allocation) and can move into a future or another thread.
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    #[inline]
    pub fn allow_owned(self: &Arc<Self>) -> Result<OwnedPermit<C>, Overloaded>
    where
        C: 'static,
    {
        self.allow_owned_with(Arrival::new())
    }

    /// [`allow_with`](Self::allow_with) for a shedder in an `Arc`, as
    /// [`allow_owned`](Self::allow_owned).
    ///
    /// # Errors
    ///
    /// [`Overloaded`], with the reason and a retry hint.
    #[inline]
    pub fn allow_owned_with(
        self: &Arc<Self>,
        arrival: Arrival,
    ) -> Result<OwnedPermit<C>, Overloaded>
    where
        C: 'static,
    {
        let now = self.admit(arrival)?;
        Ok(OwnedPermit::new(Shared::Arc(Arc::clone(self)), now))
    }

    /// The wait of a request arriving at `now` whose stamp is `age_ns` old: the age less the
    /// skew floor, which records it if the request found the service idle (or the age is below
    /// the floor). `None` while the floor knows nothing.
    #[inline]
    fn stamped_wait(&self, now: u64, age_ns: i64) -> Option<u64> {
        let ledger = self.ledger();
        let idle = self
            .floor
            .is_idle(ledger.flying(), ledger.last_activity(), now);
        self.floor.excess(age_ns, now, idle)
    }

    /// The decision for `arrival` at one reading of the clock: on admission counts the request
    /// in flight and returns the reading.
    #[inline(always)]
    fn admit(&self, arrival: Arrival) -> Result<u64, Overloaded> {
        let now = self.clock.now_nanos();
        let wait = match (arrival.wait_nanos(), arrival.stamp_age()) {
            (Some(wait), _) => Some(wait),
            (None, Some(Ok(age))) => self.stamped_wait(now, age),
            (None, Some(Err(error))) => {
                self.ledger().count_header_error(error);
                None
            }
            (None, None) => None,
        };
        self.decide(arrival.at(now).with_wait_nanos(wait))
    }

    /// The decision for `arrival`, timed and with its wait resolved.
    #[inline(always)]
    fn decide(&self, arrival: Arrival) -> Result<u64, Overloaded> {
        let (now, class) = (arrival.now_nanos(), arrival.class().unwrap_or_default());
        let pressure = self.assess(&arrival);
        if let Some(cause) = self.should_drop(now, pressure, arrival.wait_nanos(), class) {
            let heat = &self.heat;
            if !heat.dropped_recently.load(Ordering::Relaxed) {
                self.start_shedding(cause);
            }
            // The epoch first: the first event of an epoch marks it before counting itself.
            self.epoch(now);
            self.ledger().refuse(cause);
            self.ledger().note_refusal(now, self.floor.granule());
            self.ledger().decide(class, true);
            let retry = self.retry_after(now, cause, pressure);
            return Err(Overloaded::new(cause, class, retry));
        }
        self.ledger().admit();
        self.ledger().decide(class, false);
        Ok(now)
    }

    /// Every signal's reading for `arrival`, combined: the CPU's (read once), the queue's,
    /// then the added signals'.
    #[inline(always)]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        let mut pressure = self.cpu.assess(arrival).and(self.queue.assess(arrival));
        for signal in &self.signals {
            pressure = pressure.and(signal.assess(arrival));
        }
        pressure
    }

    /// Every signal's reading at `now`, for no request, combined as [`assess`](Self::assess)
    /// does, given the CPU's load (`None`: unknown).
    pub(super) fn pressure_with(&self, now: u64, cpu: Option<u32>) -> Pressure {
        let mut pressure = self.cpu.pressure_at(cpu).and(self.queue.pressure(now));
        for signal in &self.signals {
            pressure = pressure.and(signal.pressure(now));
        }
        pressure
    }

    /// go-zero's `shouldDrop`: `(systemOverloaded || stillHot) && highThroughput`, where
    /// "system overloaded" is any signal's overload and the limit is scaled by the headroom
    /// (go-zero's overload factor, with the CPU alone). A reading that refuses the request
    /// refuses it whatever the concurrency. That decides a request of the
    /// [cut](super::cut)'s marginal class, which with one class in use is every request; under
    /// pressure, the classes below it are refused and the ones above it served.
    #[inline(always)]
    fn should_drop(
        &self,
        now: u64,
        pressure: Pressure,
        waited: Option<u64>,
        class: Criticality,
    ) -> Option<Cause> {
        let cause = if let Some(cause) = pressure.cause() {
            self.note_overload(now);
            cause
        } else if self.still_hot(now, true) {
            Cause::CoolOff
        } else {
            return None;
        };
        let (place, counted) =
            self.cut
                .place(class, || self.epoch(now), |epoch| self.scan(epoch).max_pass);
        let refused = match place {
            Place::Below => true,
            Place::Above => {
                if counted && waited.is_some_and(|waited| waited > self.config.bucket_nanos) {
                    self.cut.count_late();
                }
                false
            }
            Place::Marginal => {
                pressure.refuses() || {
                    let limit = self.limit(now, &pressure);
                    let ledger = self.ledger();
                    let (avg_flying, flying) = (ledger.avg_flying(), ledger.flying() as f64);
                    avg_flying > limit && flying > limit
                }
            }
        };
        if counted {
            self.cut.count(class, refused);
        }
        refused.then_some(cause)
    }

    /// The first drop since the shedder last cooled off: arms the cool-off (go-zero's
    /// `dropTime`), and with the `tracing` feature logs that shedding started, once.
    #[cold]
    fn start_shedding(&self, _reason: Cause) {
        let _was = self.heat.dropped_recently.swap(true, Ordering::AcqRel);
        #[cfg(feature = "tracing")]
        if !_was {
            tracing::warn!(
                target: "admit::shed",
                limiter = self.name().unwrap_or_default(),
                reason = %_reason,
                in_flight = self.ledger().flying(),
                "shedding started"
            );
        }
    }

    /// Records that a signal was hot at `now` (go-zero stores it on every hot decision; storing
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

    /// go-zero's `stillHot`: a drop happened and a signal was hot less than `cool_off` ago.
    /// Once the cool-off has passed it clears the drop flag, if `clear`.
    pub(super) fn still_hot(&self, now: u64, clear: bool) -> bool {
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
        if clear && heat.dropped_recently.swap(false, Ordering::AcqRel) {
            #[cfg(feature = "tracing")]
            tracing::info!(
                target: "admit::shed",
                limiter = self.name().unwrap_or_default(),
                dropped_total = self.dropped_by().total(),
                "shedding stopped"
            );
        }
        false
    }

    /// The bucket `now` falls in, counted from the shedder's construction. The first caller
    /// in a new bucket marks it in the window: call this before counting an event.
    #[inline]
    pub(super) fn epoch(&self, now: u64) -> u64 {
        self.window
            .epoch(now.saturating_sub(self.config.origin_nanos))
    }

    /// What the shedder has counted since it was built.
    #[inline]
    pub(super) fn ledger(&self) -> &Ledger {
        self.window.ledger()
    }

    /// The limit on requests in flight under `pressure`: go-zero's `maxFlight` scaled by the
    /// headroom or, with a [floor](Pressure::with_limit_floor), at least `maxFlight` and
    /// `maxPass · floor · windowScale` (the floor in ms), the throughput times the floor.
    #[inline(always)]
    fn limit(&self, now: u64, pressure: &Pressure) -> f64 {
        let (max_flight, max_pass) = self.max_flight(now);
        let scaled = max_flight * pressure.limit_scale();
        match pressure.floor_nanos() {
            None => scaled,
            Some(floor) => {
                let floor_ms = Duration::from_nanos(floor).as_secs_f64() * 1e3;
                scaled.max(max_pass as f64 * floor_ms * self.config.window_scale)
            }
        }
    }

    /// go-zero's `maxFlight` and the `maxPass` it was computed from, cached once per bucket,
    /// since the window ignores the bucket in progress. The cache is the epoch (plus one) and
    /// the values under the crate's sequence lock: a reader uses it only for its own epoch, and
    /// a thread that finds it stale scans the window and stores its result unless another
    /// thread is storing at that moment.
    #[inline]
    fn max_flight(&self, now: u64) -> (f64, u64) {
        let epoch = self.epoch(now);
        let tag = epoch.wrapping_add(1).max(1);
        let cached = self.heat.limit.try_read();
        if let Some([cached_tag, value, max_pass]) = cached
            && cached_tag == tag
        {
            return (f64::from_bits(value), max_pass);
        }
        let WindowScan {
            max_pass, min_rt, ..
        } = self.scan(epoch);
        let max_flight = self.max_flight_of(max_pass, min_rt);
        // A thread whose clock reading lags leaves a newer bucket's limit in place.
        if cached.is_none_or(|[cached_tag, ..]| cached_tag < tag) {
            self.heat
                .limit
                .try_write([tag, max_flight.to_bits(), max_pass]);
        }
        (max_flight, max_pass)
    }

    /// `max(maxPass · minRt · windowScale, 1)`, multiplied in go-zero's order.
    pub(super) fn max_flight_of(&self, max_pass: u64, min_rt: u64) -> f64 {
        (max_pass as f64 * min_rt as f64 * self.config.window_scale).max(1.0)
    }

    /// The window as a go-zero `Reduce` at `epoch` sees it (the bucket in progress ignored),
    /// in one pass. A bucket whose latency sum is unknown, or below one millisecond a pass (the
    /// least a pass records), is left out of `minRt` and the latency sums: its marks were read
    /// out of order.
    pub(super) fn scan(&self, epoch: u64) -> WindowScan {
        let mut scan = WindowScan {
            max_pass: 1,
            min_rt: DEFAULT_MIN_RT_MS,
            ..WindowScan::default()
        };
        self.window.for_each_visible(epoch, true, |_, bucket| {
            scan.max_pass = scan.max_pass.max(bucket.passes);
            scan.passes += bucket.passes;
            scan.others += bucket.others;
            scan.buckets += 1;
            if let Some(latency) = bucket.latency_ms
                && bucket.passes > 0
                && latency >= bucket.passes
            {
                let mean = (latency as f64 / bucket.passes as f64).round() as u64;
                scan.min_rt = scan.min_rt.min(mean);
                scan.timed += bucket.passes;
                scan.latency_ms += latency;
            }
        });
        scan
    }

    /// The retry hint for a refusal by `cause` under `pressure`: the rest of the cool-off, else
    /// the reading's hint, else one bucket.
    fn retry_after(&self, now: u64, cause: Cause, pressure: Pressure) -> u64 {
        if cause == Cause::CoolOff {
            let overloaded_at = self.heat.overloaded_at.load(Ordering::Acquire);
            let since = now.saturating_sub(overloaded_at.saturating_sub(1));
            return self.config.cool_off_nanos.saturating_sub(since).max(1);
        }
        match pressure.retry_nanos() {
            0 => self.config.bucket_nanos,
            hint => hint,
        }
    }

    /// Ends a request admitted at `admitted_at` (go-zero's `Promise.Pass` / `Fail`). A pass
    /// whose work waited `cpu_wait_nanos` for a CPU records its latency less that wait.
    pub(crate) fn complete(&self, admitted_at: u64, passed: bool, cpu_wait_nanos: u64) {
        let now = self.clock.now_nanos();
        // The epoch first: the first event of an epoch marks it before counting itself.
        self.epoch(now);
        let ledger = self.ledger();
        ledger.complete(now.saturating_sub(admitted_at), passed, cpu_wait_nanos);
        ledger.note_completion(now);
    }

    /// The clock this shedder reads.
    #[cfg(any(test, feature = "metrics"))]
    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    /// The queue-delay gate, if the shedder has one: record the waits of work queued inside
    /// the process into it (see [`QueueStamp`](crate::signal::queue::QueueStamp)).
    pub fn queue_gate(&self) -> Option<&Arc<QueueGate>> {
        self.queue.gate.as_ref()
    }

    /// Requests refused since the shedder was built, by cause.
    pub fn dropped_by(&self) -> Drops {
        self.ledger().dropped_by()
    }

    /// The runtime lag probe, if the shedder has one.
    pub fn runtime_probe(&self) -> Option<&LagProbe> {
        self.queue.probe.as_ref()
    }

    /// The name given with [`ShedderBuilder::name`](super::ShedderBuilder::name), if any: for
    /// metric labels and logs.
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The cool-off period.
    pub(crate) fn cool_off(&self) -> Duration {
        Duration::from_nanos(self.config.cool_off_nanos)
    }
}

impl<C: Clock> fmt::Debug for Shedder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shedder")
            .field("name", &self.name)
            .field("window", &self.config.window)
            .field("buckets", &self.config.buckets)
            .field("cpu_threshold", &self.cpu.threshold())
            .field("signals", &self.signals.len())
            .field("cool_off", &self.cool_off())
            .finish_non_exhaustive()
    }
}

/// The shedder in the tower glue: an admitted request holds an [`OwnedPermit`], which the
/// layer finishes as passed or failed by its classifier's verdict.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Limiter for Shedder<C> {
    type Permit = OwnedPermit<C>;
    type Refusal = Overloaded;
    type Wait = crate::middleware::NoWait<OwnedPermit<C>, Overloaded>;

    /// [`Shedder::allow_with`], the permit holding the shared handle.
    #[inline(always)]
    fn admit(
        this: &Shared<Self>,
        arrival: Arrival,
    ) -> crate::middleware::Admission<OwnedPermit<C>, Overloaded, Self::Wait> {
        match this.admit(arrival) {
            Ok(now) => crate::middleware::Admission::Enter(OwnedPermit::new(this.clone(), now)),
            Err(refusal) => crate::middleware::Admission::Refuse(refusal),
        }
    }

    #[inline]
    fn count_offered(this: &Shared<Self>) {
        this.ledger().offer();
    }
}

#[cfg(test)]
mod tests {
    use super::super::ledger::NANOS_PER_MS;
    use super::*;
    use crate::clock::ManualClock;
    use crate::signal::cpu::ManualCpu;
    use crate::signal::queue::{QueueGate, QueueState};

    fn shedder() -> (ManualClock, ManualCpu, Shedder<ManualClock>) {
        let clock = ManualClock::new();
        let cpu = ManualCpu::new(900);
        let shedder = Shedder::builder()
            .clock(clock.clone())
            .cpu(cpu.clone())
            .build()
            .unwrap();
        (clock, cpu, shedder)
    }

    /// Counts `passes` passes with latencies summing to `latency_ms` in bucket `epoch`, as
    /// completions in that bucket would.
    fn record(shedder: &Shedder<ManualClock>, epoch: u64, passes: u64, latency_ms: u64) {
        let bucket_start = shedder.config.origin_nanos + epoch * shedder.config.bucket_nanos;
        shedder.epoch(bucket_start);
        shedder.ledger().add_passes(passes, latency_ms);
    }

    fn set_flight(shedder: &Shedder<ManualClock>, avg_flying: f64, flying: u64) {
        let flight = &shedder.ledger().flight;
        let ended = flight.passed.load(Ordering::Acquire) + flight.failed.load(Ordering::Acquire);
        flight.admitted.store(ended + flying, Ordering::Release);
        flight
            .avg_flying
            .store(avg_flying.to_bits(), Ordering::Release);
    }

    /// Decisions are counted by class, a request without one as critical; the snapshot says
    /// the cut while hot.
    #[test]
    fn decisions_are_counted_by_class() {
        use crate::shed::ClassCounts;

        let (clock, cpu, shedder) = shedder();
        for i in 0..10u64 {
            record(&shedder, i, (i + 1) * 100, (i + 1) * (1000 * i + 550));
        }
        clock.set(Duration::from_millis(950));
        cpu.set(900);
        set_flight(&shedder, 80.0, 80);
        assert!(shedder.allow().is_err());
        assert!(
            shedder
                .allow_with(Arrival::new().with_class(Criticality::Sheddable))
                .is_err()
        );
        let snapshot = shedder.snapshot();
        assert_eq!(snapshot.cut, Some(Criticality::Sheddable));
        // The injected history counts as critical admissions: only the refusals are new.
        let [sheddable, sheddable_plus, critical, critical_plus] = snapshot.by_class;
        let refused = ClassCounts {
            admitted: 0,
            refused: 1,
        };
        assert_eq!((sheddable, critical.refused), (refused, 1));
        assert_eq!((sheddable_plus, critical_plus), Default::default());
        // Calm again, and cooled off.
        cpu.set(100);
        clock.set(Duration::from_secs(3));
        shedder
            .allow_with(Arrival::new().with_class(Criticality::SheddablePlus))
            .unwrap()
            .pass();
        shedder.allow().unwrap().pass();
        let after = shedder.snapshot();
        assert_eq!(after.cut, None);
        let served = ClassCounts {
            admitted: 1,
            refused: 0,
        };
        assert_eq!(after.by_class[1], served);
        assert_eq!(after.by_class[2].admitted, critical.admitted + 1);
    }

    /// The cut rises past a class refused whole when most requests of the class above it
    /// waited longer than a step (work done inline: they queue before the shedder sees them),
    /// though they are admitted far fewer than the shedder has seen complete in a step.
    #[test]
    fn the_cut_rises_when_the_classes_above_wait_longer_than_a_step() {
        for (waited_ms, risen) in [(150, true), (50, false)] {
            let (clock, _cpu, shedder) = shedder();
            // Up to 1000 completions a bucket.
            for i in 0..10u64 {
                record(&shedder, i, (i + 1) * 100, (i + 1) * (1000 * i + 550));
            }
            let waited = Some(waited_ms * NANOS_PER_MS);
            let step = |bucket: u64| {
                clock.set(Duration::from_millis(bucket * 100 + 50));
                set_flight(&shedder, 80.0, 80);
                assert!(
                    shedder
                        .admit(Arrival::new().with_class(Criticality::Sheddable))
                        .is_err()
                );
                for _ in 0..10 {
                    assert!(
                        shedder
                            .admit(Arrival::new().with_wait_nanos(waited))
                            .is_ok()
                    );
                }
            };
            // The first step shows the cut two classes in use; then RISE_STEPS steps, and a
            // decision in the step that reads them.
            let rise = super::super::cut::RISE_STEPS;
            for bucket in 10..=10 + rise {
                step(bucket);
            }
            clock.set(Duration::from_millis((11 + rise) * 100 + 50));
            assert!(
                shedder
                    .admit(Arrival::new().with_class(Criticality::Sheddable))
                    .is_err()
            );
            let cut = shedder.snapshot().cut;
            let expected = if risen {
                Criticality::Critical
            } else {
                Criticality::Sheddable
            };
            assert_eq!(cut, Some(expected), "waited {waited_ms} ms");
        }
    }

    /// A pass reported with a CPU wait teaches its latency less the wait, and at least 1 ms;
    /// its service time stays whole.
    #[test]
    fn a_pass_after_a_cpu_wait_records_its_latency_less_the_wait() {
        use crate::signal::cpu::CpuWait;

        let (clock, _cpu, shedder) = shedder();
        for wait_ms in [7, 50] {
            let permit = shedder.allow().unwrap();
            clock.advance(Duration::from_millis(10));
            permit.pass_after(CpuWait(Duration::from_millis(wait_ms)));
        }
        let permit = shedder.allow().unwrap();
        clock.advance(Duration::from_millis(10));
        permit.pass();
        clock.set(Duration::from_millis(150)); // the first bucket is complete
        let snapshot = shedder.snapshot();
        // Latencies 3, 1 and 10 ms.
        assert_eq!(snapshot.mean_service_time_ms, Some(14.0 / 3.0));
        assert_eq!(snapshot.service_time, Duration::from_millis(30));
        assert_eq!(snapshot.passed, 3);
    }

    /// Vector 9, with go-zero's state injected as its own test does: the window of vector 8
    /// (max_pass 900, min_rt 6 ⇒ max_flight 54) and explicit in-flight counts.
    #[test]
    fn vector_9_should_drop() {
        let (clock, cpu, shedder) = shedder();
        for i in 0..10u64 {
            let passes = (i + 1) * 100;
            // `passes` latencies averaging i · 10 + 5.5 ms.
            record(&shedder, i, passes, (i + 1) * (1000 * i + 550));
        }
        clock.set(Duration::from_millis(950)); // bucket 9 is current
        assert_eq!(shedder.max_flight(shedder.clock.now_nanos()).0, 54.0);
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
                shedder
                    .should_drop(
                        now,
                        shedder.cpu.pressure_at(Some(900)),
                        None,
                        Criticality::Critical
                    )
                    .is_some(),
                drop,
                "avg_flying {avg_flying}, flying {flying}"
            );
        }
        // 899 ‰ and no recent drop: not hot, whatever the concurrency.
        let (_, _, fresh) = self::shedder();
        set_flight(&fresh, 80.0, 80);
        assert_eq!(
            fresh.should_drop(
                0,
                fresh.cpu.pressure_at(Some(899)),
                None,
                Criticality::Critical
            ),
            None
        );
        // 900 ‰: `allow` refuses and arms the cool-off.
        cpu.set(900);
        set_flight(&shedder, 80.0, 80);
        assert!(!shedder.heat.dropped_recently.load(Ordering::Acquire));
        assert_eq!(shedder.allow().unwrap_err().reason(), Cause::Cpu);
        assert!(shedder.heat.dropped_recently.load(Ordering::Acquire));
    }

    /// A shedder with a queue gate (5 ms target, 100 ms intervals), the CPU at `cpu` ‰ and a
    /// window whose limit is 20 (max_pass 100, min_rt 20 ms), the clock at 1050 ms; with
    /// `hot_queue`, every request of the interval before (900–1000 ms) waited 30 ms.
    fn queued(cpu: u32, hot_queue: bool) -> (ManualClock, Shedder<ManualClock>) {
        let clock = ManualClock::new();
        let gate = QueueGate::default();
        if hot_queue {
            gate.record(950 * NANOS_PER_MS, 30 * NANOS_PER_MS);
        }
        let shedder = Shedder::builder()
            .clock(clock.clone())
            .cpu(ManualCpu::new(cpu))
            .queue_gate(gate)
            .build()
            .unwrap();
        for epoch in 0..10 {
            record(&shedder, epoch, 100, 100 * 20);
        }
        clock.set(Duration::from_millis(1050));
        (clock, shedder)
    }

    fn waited(ms: u64) -> Option<Duration> {
        Some(Duration::from_millis(ms))
    }

    /// The decision vectors of the queue signal (limit 20, target 5 ms, threshold 900 ‰).
    #[test]
    fn queue_decision_vectors() {
        let decide = |shedder: &Shedder<ManualClock>, waited: Option<Duration>| {
            shedder
                .admit(Arrival::new().with_wait_nanos(waited.map(|w| w.as_nanos() as u64)))
                .err()
                .map(|e| e.reason())
        };
        let (_, cold) = queued(500, false);
        assert_eq!(cold.max_flight(cold.clock.now_nanos()).0, 20.0);
        set_flight(&cold, 50.0, 50);
        assert_eq!(
            decide(&cold, waited(30)),
            None,
            "queue cold, CPU cool: go-zero's"
        );

        let (_, hot) = queued(500, true);
        set_flight(&hot, 50.0, 50);
        assert_eq!(decide(&hot, waited(3)), Some(Cause::Queue));
        assert_eq!(
            decide(&hot, waited(30)),
            Some(Cause::QueueDelay),
            "a late request is refused as late, over the limit too"
        );

        let (clock, hot) = queued(500, true);
        set_flight(&hot, 2.0, 2);
        assert_eq!(decide(&hot, waited(8)), None, "not twice the target");
        assert_eq!(decide(&hot, None), None, "no wait known");
        assert_eq!(decide(&hot, waited(30)), Some(Cause::QueueDelay));
        // The drop armed the cool-off: half a second later, with the queue cold and the
        // concurrency over the limit, go-zero's cool-off refuses; a second later it is over.
        clock.set(Duration::from_millis(1550));
        set_flight(&hot, 50.0, 50);
        assert_ne!(
            hot.queue_gate().unwrap().state(hot.clock.now_nanos()),
            QueueState::Hot
        );
        assert_eq!(decide(&hot, None), Some(Cause::CoolOff));
        clock.set(Duration::from_millis(2050));
        assert_eq!(decide(&hot, None), None);

        let (_, busy) = queued(950, false);
        set_flight(&busy, 2.0, 2);
        assert_eq!(
            decide(&busy, waited(30)),
            None,
            "CPU hot, queue cold: no lateness rule"
        );
        set_flight(&busy, 50.0, 50);
        assert_eq!(
            decide(&busy, waited(3)),
            Some(Cause::Cpu),
            "the gate knows nothing of the interval before: the CPU decides"
        );

        // With a gate, a hot CPU makes the shedder hot but does not scale go-zero's limit down
        // (without one, 999 ‰ would scale 20 to 2).
        let (_, scorched) = queued(999, false);
        assert_eq!(scorched.max_flight(scorched.clock.now_nanos()), (20.0, 100));
        set_flight(&scorched, 20.0, 20);
        assert_eq!(decide(&scorched, None), None);
        set_flight(&scorched, 21.0, 21);
        assert_eq!(decide(&scorched, None), Some(Cause::Cpu));
    }

    /// With a gate the limit is never below the concurrency at which requests wait the gate's
    /// target: max_pass × target × window scale, here 100 × 5 × 0.01 = 5 in flight, where
    /// go-zero's limit for 1 ms requests is 100 × 1 × 0.01 = 1.
    #[test]
    fn a_gate_floors_the_limit_at_its_target() {
        let clock = ManualClock::new();
        let shedder = Shedder::builder()
            .clock(clock.clone())
            .cpu(ManualCpu::new(950))
            .queue_gate(QueueGate::default())
            .build()
            .unwrap();
        for epoch in 0..10 {
            record(&shedder, epoch, 100, 100);
        }
        clock.set(Duration::from_millis(1050));
        assert_eq!(shedder.max_flight(shedder.clock.now_nanos()), (1.0, 100));
        let decide = || {
            shedder
                .admit(Arrival::new().with_class(Criticality::Critical))
                .err()
                .map(|e| e.reason())
        };
        set_flight(&shedder, 5.0, 5);
        assert_eq!(decide(), None);
        set_flight(&shedder, 6.0, 6);
        assert_eq!(decide(), Some(Cause::Cpu));
    }

    /// go-zero's defaults: a 5 s window of 50 buckets, 900 ‰, a 1 s cool-off.
    #[test]
    fn go_zero_defaults_build() {
        let shedder = Shedder::builder().cpu(ManualCpu::new(0)).build().unwrap();
        assert_eq!(shedder.config.window, Duration::from_secs(5));
        assert_eq!(shedder.config.buckets, 50);
        assert_eq!(shedder.cpu.threshold(), 900);
        assert_eq!(shedder.cool_off(), Duration::from_secs(1));
        assert_eq!(shedder.clock().resolution_nanos(), 0, "an exact clock");
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

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::*;
    use crate::clock::ManualClock;
    use crate::signal::cpu::ManualCpu;

    /// Admissions and completions racing a reader of the in-flight count: completions are
    /// read before admissions, so the reader never counts more requests ended than admitted
    /// (the subtraction in `Flight::flying` never saturates), and the totals settle exactly.
    ///
    /// The reader is a thread of its own: on the spawning thread, right after the spawns, it
    /// never saw a completion in loom's exploration. The test asserts that it did.
    #[test]
    fn loom_in_flight_never_reads_negative() {
        static SAW_AN_END: std::sync::atomic::AtomicBool =
            std::sync::atomic::AtomicBool::new(false);
        loom::model(|| {
            let shedder = Arc::new(
                Shedder::builder()
                    .clock(ManualClock::new())
                    .cpu(ManualCpu::new(0))
                    .build()
                    .unwrap(),
            );
            let workers: Vec<_> = [true, false]
                .into_iter()
                .map(|passes| {
                    let shedder = Arc::clone(&shedder);
                    thread::spawn(move || {
                        let permit = shedder.allow().unwrap();
                        if passes { permit.pass() } else { permit.fail() }
                    })
                })
                .collect();
            let reader = {
                let shedder = Arc::clone(&shedder);
                thread::spawn(move || {
                    let flight = &shedder.ledger().flight;
                    let ended = flight.passed.load(Ordering::Acquire)
                        + flight.failed.load(Ordering::Acquire);
                    (ended, flight.admitted.load(Ordering::Acquire))
                })
            };
            let (ended, admitted) = reader.join().unwrap();
            assert!(admitted >= ended, "{ended} ended of {admitted} admitted");
            if ended > 0 {
                SAW_AN_END.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            for worker in workers {
                worker.join().unwrap();
            }
            let flight = &shedder.ledger().flight;
            assert_eq!(flight.flying(), 0);
            assert_eq!(flight.passed.load(Ordering::Acquire), 1);
            assert_eq!(flight.failed.load(Ordering::Acquire), 1);
        });
        assert!(SAW_AN_END.load(std::sync::atomic::Ordering::Relaxed));
    }
}
