//! The process-wide CPU sampler behind [`SystemCpu`].

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::reader::{Reader, UsageSource};
use super::sample::{Sample, SourceKind};
use super::{CpuSignal, Smoother, Smoothing, UNKNOWN, decode, encode};

/// How often the sampler reads the CPU usage (go-zero's `cpuRefreshInterval`).
pub(crate) const TICK: Duration = Duration::from_millis(250);

/// What [`SystemCpu`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CpuSource {
    /// The usage and limits of the process's cgroup, cgroup v2 (`cpu.stat`, `cpu.max`,
    /// `cpuset.cpus.effective`).
    CgroupV2,
    /// The usage and limits of the process's cgroup, cgroup v1 (`cpuacct.usage`,
    /// `cpu.cfs_quota_us`, `cpuset.cpus`).
    CgroupV1,
    /// The process's own CPU time, against its CPU affinity mask (or the available parallelism
    /// where there is none): no readable cgroup, or a process pinned to fewer CPUs than its
    /// cgroup may use.
    ProcessTime,
    /// The process's own CPU time as `sysinfo` reads it, against the available parallelism:
    /// the source on Windows, [`SystemCpu::sysinfo`]'s, and the fallback wherever nothing else
    /// can be read (where sysinfo is built: on Windows, or with the `sysinfo` feature).
    Sysinfo,
    /// Nothing could be measured: the signal reports `None`.
    Unavailable,
    /// The sampler has not finished its first measurement yet.
    Starting,
}

impl From<SourceKind> for CpuSource {
    fn from(kind: SourceKind) -> Self {
        match kind {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            SourceKind::CgroupV2 => CpuSource::CgroupV2,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            SourceKind::CgroupV1 => CpuSource::CgroupV1,
            SourceKind::ProcessTime => CpuSource::ProcessTime,
            #[cfg(any(windows, feature = "sysinfo"))]
            SourceKind::Sysinfo => CpuSource::Sysinfo,
        }
    }
}

const SOURCES: [CpuSource; 6] = [
    CpuSource::CgroupV2,
    CpuSource::CgroupV1,
    CpuSource::ProcessTime,
    CpuSource::Sysinfo,
    CpuSource::Unavailable,
    CpuSource::Starting,
];

/// The index of `CpuSource::Starting` in [`SOURCES`].
const STARTING: u8 = 5;

fn source_index(source: CpuSource) -> u8 {
    SOURCES
        .iter()
        .position(|s| *s == source)
        .map_or(STARTING, |i| i as u8)
}

/// One [`SystemCpu`] handle's smoothing, fed by the sampler thread.
#[derive(Debug)]
struct Subscriber {
    published: AtomicU32,
    /// Whose sampler feeds it.
    reader: Reader,
    /// Only the sampler thread locks it, once per tick.
    smoother: Mutex<Smoother>,
}

#[derive(Debug)]
struct Registry {
    running: bool,
    subscribers: Vec<Weak<Subscriber>>,
}

/// The sampler of one [`Reader`], one per process.
#[derive(Debug)]
struct Sampler {
    registry: Mutex<Registry>,
    raw: AtomicU32,
    source: AtomicU8,
}

impl Sampler {
    const fn new() -> Sampler {
        Sampler {
            registry: Mutex::new(Registry {
                running: false,
                subscribers: Vec::new(),
            }),
            raw: AtomicU32::new(UNKNOWN),
            source: AtomicU8::new(STARTING),
        }
    }
}

static NATIVE: Sampler = Sampler::new();
#[cfg(any(windows, feature = "sysinfo"))]
static SYSINFO: Sampler = Sampler::new();

impl Reader {
    fn sampler(self) -> &'static Sampler {
        match self {
            Reader::Native => &NATIVE,
            #[cfg(any(windows, feature = "sysinfo"))]
            Reader::Sysinfo => &SYSINFO,
        }
    }

    fn thread_name(self) -> &'static str {
        match self {
            Reader::Native => "admit-cpu-sampler",
            #[cfg(any(windows, feature = "sysinfo"))]
            Reader::Sysinfo => "admit-cpu-sysinfo",
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can be left half-updated by a panic.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// CPU load of the process's cgroup (or the process), measured by one background thread per
/// process every 250 ms and smoothed.
///
/// The first `SystemCpu` starts the sampler thread (named `admit-cpu-sampler`); it exits within
/// 250 ms after the last handle is dropped. Reading the signal is one atomic load. Until the
/// first measurement completes (one tick), and whenever nothing can be measured, the signal
/// reports `None`; [`source`](SystemCpu::source) says which case applies. See the
/// [module docs](super) for what is measured.
///
/// [`sysinfo`](SystemCpu::sysinfo) (on Windows, or with the `sysinfo` feature) reads the
/// process's CPU time through the `sysinfo` crate instead, on a thread of its own
/// (`admit-cpu-sysinfo`), with the same meaning, smoothing and `None`.
///
/// Each handle created with [`new`](SystemCpu::new), [`sysinfo`](SystemCpu::sysinfo) or their
/// `with_smoothing` forms keeps its own average; clones share it.
///
/// # Example
///
/// ```
/// use admit::signal::cpu::{CpuSignal, Smoothing, SystemCpu};
///
/// let cpu = SystemCpu::with_smoothing(Smoothing::GoZero);
/// // `None` until the first 250 ms measurement, then the go-zero average in ‰.
/// if let Some(load) = cpu.load_permille() {
///     assert!(load <= 1000);
/// }
/// println!("measuring {:?}", cpu.source());
/// ```
#[derive(Clone)]
pub struct SystemCpu {
    subscriber: Arc<Subscriber>,
    smoothing: Smoothing,
}

impl SystemCpu {
    /// A signal with the default [`Smoothing`] (a 4.9 s exponential average).
    pub fn new() -> Self {
        Self::with_smoothing(Smoothing::default())
    }

    /// A signal with the given smoothing.
    pub fn with_smoothing(smoothing: Smoothing) -> Self {
        Self::subscribe(Reader::Native, smoothing)
    }

    /// A signal read through the `sysinfo` crate, with the default [`Smoothing`]: the process's
    /// own CPU time against the available parallelism ([`CpuSource::Sysinfo`]), on every
    /// platform sysinfo supports. On Linux it counts the process alone, not its cgroup, and a
    /// quota only as `available_parallelism` does, rounded down to whole CPUs.
    ///
    /// ```
    /// use admit::signal::cpu::{CpuSignal, CpuSource, SystemCpu};
    ///
    /// let cpu = SystemCpu::sysinfo();
    /// assert!(matches!(cpu.source(), CpuSource::Starting | CpuSource::Sysinfo));
    /// // `None` until its first 250 ms measurement, then the average in ‰.
    /// if let Some(load) = cpu.load_permille() {
    ///     assert!(load <= 1000);
    /// }
    /// ```
    #[cfg(any(windows, feature = "sysinfo"))]
    #[cfg_attr(docsrs, doc(cfg(any(windows, feature = "sysinfo"))))]
    pub fn sysinfo() -> Self {
        Self::sysinfo_with_smoothing(Smoothing::default())
    }

    /// A signal read through the `sysinfo` crate (see [`sysinfo`](Self::sysinfo)), with the
    /// given smoothing.
    #[cfg(any(windows, feature = "sysinfo"))]
    #[cfg_attr(docsrs, doc(cfg(any(windows, feature = "sysinfo"))))]
    pub fn sysinfo_with_smoothing(smoothing: Smoothing) -> Self {
        Self::subscribe(Reader::Sysinfo, smoothing)
    }

    /// A handle fed by `reader`'s sampler, which it starts if it is not running.
    fn subscribe(reader: Reader, smoothing: Smoothing) -> Self {
        let sampler = reader.sampler();
        let subscriber = Arc::new(Subscriber {
            published: AtomicU32::new(UNKNOWN),
            reader,
            smoother: Mutex::new(Smoother::new(smoothing)),
        });
        let mut registry = lock(&sampler.registry);
        registry.subscribers.push(Arc::downgrade(&subscriber));
        if !registry.running {
            let spawned = thread::Builder::new()
                .name(reader.thread_name().into())
                .spawn(move || run(reader));
            match spawned {
                Ok(_) => {
                    registry.running = true;
                    sampler
                        .source
                        .store(source_index(CpuSource::Starting), Ordering::Release);
                }
                Err(_) => sampler
                    .source
                    .store(source_index(CpuSource::Unavailable), Ordering::Release),
            }
        }
        SystemCpu {
            subscriber,
            smoothing,
        }
    }

    /// What this handle's sampler measures, process-wide.
    pub fn source(&self) -> CpuSource {
        let index = self.sampler().source.load(Ordering::Acquire);
        SOURCES[usize::from(index.min(STARTING))]
    }

    /// The latest unsmoothed reading of this handle's sampler, process-wide, or `None`.
    pub fn raw_permille(&self) -> Option<u32> {
        decode(self.sampler().raw.load(Ordering::Acquire))
    }

    fn sampler(&self) -> &'static Sampler {
        self.subscriber.reader.sampler()
    }
}

impl Default for SystemCpu {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SystemCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemCpu")
            .field("permille", &self.load_permille())
            .field("raw_permille", &self.raw_permille())
            .field("source", &self.source())
            .field("smoothing", &self.smoothing)
            .finish()
    }
}

impl CpuSignal for SystemCpu {
    #[inline]
    fn load_permille(&self) -> Option<u32> {
        decode(self.subscriber.published.load(Ordering::Acquire))
    }
}

/// CPU utilisation in ‰ of `limit_cpus`: `1000 · used / (wall · limit)`, capped at 1000 (a
/// reading can exceed the limit by the jitter between the kernel's accounting and our wall
/// clock, and a CFS quota is enforced per period, not per instant). Unrounded: go-zero's average
/// truncates it, the others round it.
pub(crate) fn utilisation_permille(used_nanos: u64, wall_nanos: u64, limit_cpus: f64) -> f64 {
    if wall_nanos == 0 || limit_cpus.is_nan() || limit_cpus <= 0.0 {
        return 0.0;
    }
    (1000.0 * used_nanos as f64 / (wall_nanos as f64 * limit_cpus)).min(1000.0)
}

/// Ticks between two discoveries of the process's cgroup, so that a process moved to another
/// cgroup is followed within 10 s.
const REDISCOVER_TICKS: u32 = 40;

/// Leaves the registry and the published values consistent however the sampler thread ends,
/// a panic included: the next `SystemCpu` starts a new thread, and nobody reads a stale load.
struct Stopping(&'static Sampler);

impl Drop for Stopping {
    fn drop(&mut self) {
        if thread::panicking() {
            let sampler = self.0;
            let mut registry = lock(&sampler.registry);
            registry.running = false;
            for subscriber in registry.subscribers.iter().filter_map(Weak::upgrade) {
                subscriber.published.store(UNKNOWN, Ordering::Release);
            }
            sampler.raw.store(UNKNOWN, Ordering::Release);
            sampler
                .source
                .store(source_index(CpuSource::Unavailable), Ordering::Release);
        }
    }
}

/// `reader`'s sampler thread: measures every tick and feeds every live subscriber, until none
/// is left.
fn run(reader: Reader) {
    let sampler = reader.sampler();
    let _stopping = Stopping(sampler);
    sampler.raw.store(UNKNOWN, Ordering::Release);
    let mut source = UsageSource::discover(reader);
    let mut previous: Option<(Instant, Sample)> = None;
    let mut subscribers = Vec::new();
    let mut ticks = 0u32;
    loop {
        ticks = ticks.wrapping_add(1);
        let reading = source.as_mut().and_then(|source| {
            let sample = source.sample()?;
            Some((Instant::now(), sample))
        });
        // A delta needs two readings of the same kind.
        let measured = match (previous, reading) {
            (Some((then, before)), Some((now, after))) if before.kind == after.kind => {
                let wall = now.saturating_duration_since(then);
                let used = after.used_nanos.saturating_sub(before.used_nanos);
                let wall_nanos = u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX);
                let exact = utilisation_permille(used, wall_nanos, after.limit_cpus);
                Some((exact, wall, CpuSource::from(after.kind)))
            }
            _ => None,
        };
        // After an outage, or when what is measured changes, averages start over.
        let restart = reading.is_none()
            || matches!((previous, reading), (Some((_, a)), Some((_, b))) if a.kind != b.kind);
        previous = reading;
        if reading.is_none() || ticks.is_multiple_of(REDISCOVER_TICKS) {
            // The cgroup may have been removed or the process moved: look again, and measure
            // the next delta from the new source.
            source = UsageSource::discover(reader);
            previous = source.as_mut().and_then(|source| {
                let sample = source.sample()?;
                Some((Instant::now(), sample))
            });
        }
        match measured {
            Some((exact, _, kind)) => {
                sampler.raw.store(exact.round() as u32, Ordering::Release);
                sampler.source.store(source_index(kind), Ordering::Release);
            }
            None if reading.is_none() => {
                sampler.raw.store(UNKNOWN, Ordering::Release);
                sampler
                    .source
                    .store(source_index(CpuSource::Unavailable), Ordering::Release);
            }
            None => {} // a first reading: nothing to compare it with yet
        }

        {
            let mut registry = lock(&sampler.registry);
            registry.subscribers.retain(|s| s.strong_count() > 0);
            if registry.subscribers.is_empty() {
                registry.running = false;
                return;
            }
            subscribers.clear();
            subscribers.extend(registry.subscribers.iter().filter_map(Weak::upgrade));
        }
        for subscriber in subscribers.drain(..) {
            let mut smoother = lock(&subscriber.smoother);
            if restart {
                *smoother = Smoother::new(smoother.smoothing());
            }
            let value = match measured {
                Some((exact, elapsed, _)) => {
                    let raw = match smoother.smoothing() {
                        Smoothing::GoZero => exact.trunc(),
                        _ => exact.round(),
                    };
                    Some(smoother.update(raw as u32, elapsed))
                }
                None if reading.is_none() => None,
                None => continue,
            };
            subscriber.published.store(encode(value), Ordering::Release);
        }
        thread::sleep(TICK);
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    #[test]
    fn vector_21_utilisation_against_the_limit() {
        // 250 ms of CPU in 250 ms of wall time, limit 2 CPUs: half the limit.
        let quarter = 250_000_000;
        assert_eq!(utilisation_permille(quarter, quarter, 2.0), 500.0);
        // The same against a 0.5 CPU quota: 2000 ‰, capped.
        assert_eq!(utilisation_permille(quarter, quarter, 0.5), 1000.0);
        assert_eq!(utilisation_permille(quarter, 2 * quarter, 1.0), 500.0);
        assert_eq!(utilisation_permille(2, 3, 1.0), 2000.0 / 3.0);
        assert_eq!(utilisation_permille(1, 0, 1.0), 0.0);
        assert_eq!(utilisation_permille(1, 1, 0.0), 0.0);
    }
}
