//! Configuring a shedder.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Shedder;
use super::ledger::NANOS_PER_MS;
use super::shedder::{Config, MAX_BUCKETS};
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};
use crate::signal::OverloadSignal;
use crate::signal::cpu::{CpuOverload, CpuSignal, Source, SystemCpu};
use crate::signal::queue::floor::SkewFloor;
use crate::signal::queue::{LagProbe, QueueGate, QueueSignal};

/// Configures a [`Shedder`]; created by [`Shedder::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::ConfigError;
/// use admit::shed::Shedder;
/// use admit::signal::cpu::ManualCpu;
///
/// let shedder = Shedder::builder()
///     .window(Duration::from_secs(10))
///     .buckets(100)
///     .cpu_threshold(800)
///     .cool_off(Duration::from_secs(2))
///     .cpu(ManualCpu::new(0))
///     .build()?;
/// assert_eq!(shedder.snapshot().cpu_threshold, 800);
///
/// assert_eq!(
///     Shedder::builder().cpu_threshold(1000).cpu(ManualCpu::new(0)).build().unwrap_err(),
///     ConfigError::CpuThresholdOutOfRange { cpu_threshold: 1000 }
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct ShedderBuilder<C> {
    window: Duration,
    buckets: u32,
    cpu_threshold: u32,
    cool_off: Duration,
    clock: C,
    /// `None`: a [`SystemCpu`], created by `build`.
    cpu: Option<Source>,
    signals: Vec<Box<dyn OverloadSignal>>,
    queue: Option<Arc<QueueGate>>,
    probe: Option<LagProbe>,
    floor: SkewFloor,
    name: Option<Cow<'static, str>>,
}

impl Shedder<MonotonicClock> {
    /// Starts configuring a shedder with go-zero's defaults: a 5 s window of 50 buckets, a
    /// 900 ‰ CPU threshold, a 1 s cool-off, the operating system's monotonic clock
    /// ([`MonotonicClock`]) and the system CPU signal
    /// ([`SystemCpu`]), unnamed. The signal is taken by
    /// [`build`](ShedderBuilder::build), and only if no other is given.
    pub fn builder() -> ShedderBuilder<MonotonicClock> {
        ShedderBuilder::new()
    }
}

impl ShedderBuilder<MonotonicClock> {
    fn new() -> Self {
        ShedderBuilder {
            window: Duration::from_secs(5),
            buckets: 50,
            cpu_threshold: 900,
            cool_off: Duration::from_secs(1),
            clock: MonotonicClock::new(),
            cpu: None,
            signals: Vec::new(),
            queue: None,
            probe: None,
            floor: SkewFloor::default(),
            name: None,
        }
    }
}

impl<C: Clock> ShedderBuilder<C> {
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

    /// How long the shedder stays hot after a signal was last seen hot, once it has dropped a
    /// request (default 1 s). Zero disables the cool-off.
    pub fn cool_off(mut self, cool_off: Duration) -> Self {
        self.cool_off = cool_off;
        self
    }

    /// The clock to read (default: a [`MonotonicClock`] whose origin is the builder's creation).
    ///
    /// The shedder reads its clock twice per request. Latencies are whole milliseconds rounded
    /// up, as go-zero's; on a [`CoarseClock`](crate::clock::CoarseClock) a request spanning `k`
    /// ticks (each a little over 1 ms) reads `k + 1` ms, so a latency reads up to a millisecond
    /// high, half a millisecond above go-zero's on average.
    ///
    /// A [`LagProbe`] must run on a copy of the same clock.
    pub fn clock<C2: Clock>(self, clock: C2) -> ShedderBuilder<C2> {
        ShedderBuilder {
            window: self.window,
            buckets: self.buckets,
            cpu_threshold: self.cpu_threshold,
            cool_off: self.cool_off,
            clock,
            cpu: self.cpu,
            signals: self.signals,
            queue: self.queue,
            probe: self.probe,
            floor: self.floor,
            name: self.name,
        }
    }

    /// The CPU signal to read (default: [`SystemCpu::new`]).
    pub fn cpu(mut self, cpu: impl CpuSignal + 'static) -> Self {
        self.cpu = Some(Source::new(cpu));
        self
    }

    /// Adds an overload signal beside the CPU: the shedder is hot while any signal reports
    /// overload, and the smallest headroom scales its limit (see [`signal`](crate::signal)).
    /// Consulted on every decision, in the order added.
    ///
    /// # Example
    ///
    /// ```
    /// use admit::shed::Shedder;
    /// use admit::signal::cpu::ManualCpu;
    /// use admit::signal::{Cause, Pressure};
    ///
    /// // Overloaded whatever the CPU says, with half the proven concurrency allowed.
    /// let shedder = Shedder::builder()
    ///     .cpu(ManualCpu::new(0))
    ///     .signal(|_now: u64| Pressure::overloaded(Cause::Custom("drill")).with_headroom(0.5))
    ///     .build()?;
    /// let snapshot = shedder.snapshot();
    /// assert!(snapshot.hot);
    /// assert_eq!(snapshot.overload_factor, 0.5);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn signal(mut self, signal: impl OverloadSignal + 'static) -> Self {
        self.signals.push(Box::new(signal));
        self
    }

    /// A queue-delay gate (default: none): the requests' waits, given to
    /// [`allow_with`](Shedder::allow_with) (the layers read them from a request-start header
    /// when asked to) or recorded by work queued inside the process, make the shedder hot
    /// within one to two of the gate's intervals of an overload, and while it is hot a request
    /// that waited more than twice the target is refused. Every reading of the gate carries
    /// its target as the [limit's floor](crate::signal::Pressure::with_limit_floor), so the
    /// concurrency limit is not scaled down by the CPU and is at least the throughput times the
    /// target (see the [module docs](super)). Pass an `Arc` to share the gate with
    /// [`QueueStamp`](crate::signal::queue::QueueStamp)s.
    ///
    /// Without a gate the shedder decides exactly as go-zero's.
    pub fn queue_gate(mut self, gate: impl Into<Arc<QueueGate>>) -> Self {
        self.queue = Some(gate.into());
        self
    }

    /// A runtime lag probe (default: none): while its timer fires late (the runtime's workers
    /// are busy with work done inline), the shedder refuses a share of requests that its
    /// controller raises as long as the lateness stays above target, whatever the
    /// concurrency ([`Cause::RuntimeLag`](crate::signal::Cause::RuntimeLag)), unless
    /// a [queue gate](Self::queue_gate) has a verdict from measured waits. Spawn the probe's
    /// task on a copy of the shedder's [clock](Self::clock) (`tokio::spawn(probe.run(clock))`,
    /// feature `tokio`) for it to tick.
    pub fn runtime_probe(mut self, probe: LagProbe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// The clock-skew floor subtracted from the raw queue time of requests a proxy stamped
    /// (default: [`SkewFloor::default`], a 4 s window and 2 ms of quiet): see
    /// [`allow_with`](Shedder::allow_with) and the [floor's rule](crate::signal::queue::floor).
    pub fn skew_floor(mut self, floor: SkewFloor) -> Self {
        self.floor = floor;
        self
    }

    /// A name for this shedder, for metric labels and logs (default: none).
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
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
    /// [`CpuThresholdOutOfRange`](ConfigError::CpuThresholdOutOfRange) (outside 1..=999 ‰),
    /// [`DurationTooLong`](ConfigError::DurationTooLong) or
    /// [`EmptyName`](ConfigError::EmptyName).
    pub fn build(self) -> Result<Shedder<C>, ConfigError> {
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
        crate::error::check_name(self.name.as_deref())?;
        let cool_off_nanos =
            u64::try_from(self.cool_off.as_nanos()).map_err(|_| ConfigError::DurationTooLong {
                setting: "cool_off",
                value: self.cool_off,
            })?;
        let cpu = self.cpu.unwrap_or_else(|| Source::new(SystemCpu::new()));
        let cpu = CpuOverload::of(cpu, self.cpu_threshold)?;
        let config = Config {
            window: self.window,
            buckets: self.buckets,
            bucket_nanos,
            window_scale: 1e9 / bucket_nanos as f64 / 1000.0,
            cool_off_nanos,
            origin_nanos: self.clock.now_nanos(),
        };
        Ok(Shedder::new(
            config,
            self.clock,
            cpu,
            QueueSignal {
                gate: self.queue,
                probe: self.probe,
            },
            self.floor,
            self.signals.into_boxed_slice(),
            self.name,
        ))
    }
}

impl<C: fmt::Debug> fmt::Debug for ShedderBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedderBuilder")
            .field("name", &self.name)
            .field("window", &self.window)
            .field("buckets", &self.buckets)
            .field("cpu_threshold", &self.cpu_threshold)
            .field("cool_off", &self.cool_off)
            .field("clock", &self.clock)
            .field("signals", &self.signals.len())
            .field("floor", &self.floor)
            .finish_non_exhaustive()
    }
}
