//! What a shedder reports about itself.

use std::time::Duration;

use super::Shedder;
use crate::clock::Clock;
use crate::criticality::Criticality;
use crate::signal::Cause;
use crate::signal::queue::header::HeaderError;

impl<C: Clock> Shedder<C> {
    /// The shedder's state now. Reads the CPU load once, consults the other signals, and reads
    /// atomics and the window; changes nothing (in particular it does not end a cool-off the
    /// way a decision would), allocates nothing.
    ///
    /// Cheap enough for a metrics scrape, but it scans the window: not for every request.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::shed::Shedder;
    /// use admit::signal::cpu::ManualCpu;
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
        let cpu = self.cpu.load_permille();
        let pressure = self.pressure_with(now, cpu);
        let cause = pressure.cause();
        let hot = cause.is_some() || self.still_hot(now, false);
        let window = self.scan(epoch);
        let (max_pass, min_rt) = (window.max_pass, window.min_rt);
        let ledger = self.ledger();
        let (passed, failed) = ledger.ended();
        let span = window.buckets as f64 * self.config.bucket_nanos as f64 / 1e9;
        ShedSnapshot {
            cpu_permille: cpu,
            cpu_threshold: self.cpu.threshold(),
            flying: ledger.flying(),
            avg_flying: ledger.avg_flying(),
            max_pass,
            min_rt_ms: min_rt,
            max_flight: self.max_flight_of(max_pass, min_rt),
            overload_factor: pressure.limit_scale(),
            hot,
            cause,
            cut: hot.then(|| self.cut.level()),
            by_class: ledger.by_class(),
            passed,
            failed,
            dropped: self.dropped_by().total(),
            service_time: Duration::from_micros(ledger.service_micros()),
            offered: ledger.offered(),
            arrival_rate: if span > 0.0 {
                (window.passes + window.others) as f64 / span
            } else {
                0.0
            },
            mean_service_time_ms: (window.timed > 0)
                .then(|| window.latency_ms as f64 / window.timed as f64),
            clock_offset_nanos: self.floor.floor(now),
            header_errors: ledger.header_errors(),
        }
    }
}

/// A point-in-time view of a [`Shedder`], for dashboards and capacity planning.
///
/// `arrival_rate` and `mean_service_time_ms` are the inputs an Erlang-C model needs (offered
/// load `λ` and service time `1/μ`), measured over the visible window, as long as every request
/// reaches the shedder: a layer refusing outside it (a `WarmUpLayer`) keeps its refusals out
/// of `arrival_rate`; `offered`, summed over the limiters, counts them.
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
    /// The factor applied to `max_flight` now (0.1..=1 from the CPU; the smallest headroom of
    /// all signals): go-zero's overload factor. 1 while a signal sets a
    /// [floor](crate::signal::Pressure::with_limit_floor) for the limit, as a queue gate does.
    pub overload_factor: f64,
    /// Whether the shedder is in its shedding state: the CPU is at or above the threshold (or
    /// another signal, or the queue gate, reports overload), or it is cooling off after a drop.
    pub hot: bool,
    /// The signal reporting overload now, if any, ranked as decisions rank them (the CPU,
    /// then the added signals, the queue gate, and the runtime lag probe where the gate has no
    /// verdict); `None` while only cooling off or calm.
    pub cause: Option<Cause>,
    /// While hot, the marginal request class: the classes below it are refused, the ones above
    /// it served ([Request criticality](super#request-criticality)). `None` while not hot.
    pub cut: Option<Criticality>,
    /// Requests admitted and refused, by class (in [`Criticality::ALL`]'s order), since the
    /// shedder was built. A request without a class counts as
    /// [`Critical`](Criticality::Critical).
    pub by_class: [ClassCounts; Criticality::COUNT],
    /// Requests that passed, since the shedder was built.
    pub passed: u64,
    /// Requests that failed or were cancelled, since the shedder was built.
    pub failed: u64,
    /// Requests refused, since the shedder was built.
    pub dropped: u64,
    /// The time the completed requests (`passed` and `failed`) spent between admission and
    /// completion, summed, since the shedder was built: divided by their number, the mean
    /// service time; its rate, the mean number busy. Each request counts to the nearest µs.
    pub service_time: Duration,
    /// Requests that this shedder's layer saw before any other admit layer, refused ones
    /// included, since the shedder was built: its share of the offered load (0 behind another
    /// admit layer). The tower glue counts them, not direct calls such as [`Shedder::allow`].
    pub offered: u64,
    /// Requests per second that reached the shedder over the visible window (completed or
    /// refused there).
    pub arrival_rate: f64,
    /// Mean latency of the requests that passed in the visible window, in ms (whole
    /// milliseconds per request, rounded up); `None` if none did.
    pub mean_service_time_ms: Option<f64>,
    /// The [skew floor](super::ShedderBuilder::skew_floor): how far the service's wall clock
    /// is ahead of the stamping proxy's (negative: behind), network time included, in ns.
    /// `None` until a stamped request arrived.
    pub clock_offset_nanos: Option<i64>,
    /// Request-start stamps that could not be read, by error (in [`HeaderError::ALL`]'s
    /// order), since the shedder was built; such a request's wait is unknown.
    pub header_errors: [u64; HeaderError::ALL.len()],
}

/// A class's decisions (see [`ShedSnapshot::by_class`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Requests admitted.
    pub admitted: u64,
    /// Requests refused.
    pub refused: u64,
}
