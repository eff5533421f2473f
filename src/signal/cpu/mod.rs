//! How loaded the CPU is: go-zero's overload signal.
//!
//! A [`CpuSignal`] reports load in permille (‰) of the CPU the process may use, `0..=1000`, or
//! `None` when it cannot tell. The shedder treats `None` as "not overloaded" and shows it in
//! its snapshot.
//!
//! - [`SystemCpu`]: the real signal. One sampler thread per process measures every 250 ms how
//!   much CPU the process's cgroup (or, failing that, the process) used, relative to what it may
//!   use, and smooths it (see [`Smoothing`]).
//! - [`ManualCpu`]: a value you set, for tests and simulations.
//! - Any `Fn() -> Option<u32>` closure, to plug in your own signal.
//!
//! [`CpuWait`] is the other side of a busy CPU: how long one request's work waited for a core,
//! which a pass can report so the shedder's latency leaves out processor sharing.
//!
//! # What "the CPU the process may use" means
//!
//! On Linux the sampler finds the process's own cgroup (v1 through its `cpuacct`/`cpu`/`cpuset`
//! controllers, else v2, through `/proc/self/cgroup` and `/proc/self/mountinfo`), reads the
//! cgroup's CPU usage, and divides by wall time times the limit: the smallest of the CFS quota
//! on the cgroup's path (`cpu.max`, `cpu.cfs_quota_us`), its cpuset and the process's CPU
//! affinity mask. A process whose affinity mask covers fewer CPUs than its cgroup may use is
//! measured by its own CPU time against those CPUs (and the quota) instead. Without a readable
//! cgroup it measures the process's own CPU time against its affinity mask. The sampler looks
//! for the process's cgroup again every 10 s and whenever a read fails. On other Unix systems
//! (macOS) it measures the process's CPU time against the available parallelism. On Windows it
//! reads the same through the `sysinfo` crate; elsewhere it reports `None`.
//!
//! [`SystemCpu::sysinfo`] (on Windows, or with the `sysinfo` feature) measures through sysinfo
//! on any platform: the process's own CPU time against the available parallelism. With the
//! feature, sysinfo is also what [`SystemCpu::new`] falls back to where its own sources find
//! no reading.
//!
//! See the [guide](crate::guide::signals) for why, and for when the CPU signal applies.

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux;
mod overload;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod portable;
mod reader;
mod sample;
mod sampler;
mod smoothing;
#[cfg(any(windows, feature = "sysinfo"))]
mod sysinfo_source;
mod wait;

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) use self::overload::CpuOverload;
pub(crate) use self::overload::Source;
pub use self::sampler::{CpuSource, SystemCpu};
pub(crate) use self::smoothing::Smoother;
pub use self::smoothing::Smoothing;
pub use self::wait::CpuWait;

/// How loaded the CPU is, in permille of what the process may use.
///
/// `load_permille` is called on every admission decision, so it must be cheap (an atomic load)
/// and must not block. Values above 1000 are treated as 1000. `None` means "unknown": the
/// shedder then does not consider the CPU overloaded.
///
/// # Example
///
/// ```
/// use admit::signal::cpu::CpuSignal;
///
/// // A closure is a signal.
/// let always_busy = || Some(1000);
/// assert_eq!(always_busy.load_permille(), Some(1000));
/// ```
pub trait CpuSignal: Send + Sync {
    /// The current load in ‰, or `None` if it is not known.
    fn load_permille(&self) -> Option<u32>;
}

impl<F: Fn() -> Option<u32> + Send + Sync> CpuSignal for F {
    #[inline]
    fn load_permille(&self) -> Option<u32> {
        self()
    }
}

impl<S: CpuSignal + ?Sized> CpuSignal for Arc<S> {
    #[inline]
    fn load_permille(&self) -> Option<u32> {
        (**self).load_permille()
    }
}

/// The published encoding of an optional load: `u32::MAX` means unknown.
const UNKNOWN: u32 = u32::MAX;

fn encode(load: Option<u32>) -> u32 {
    load.map_or(UNKNOWN, |load| load.min(UNKNOWN - 1))
}

fn decode(word: u32) -> Option<u32> {
    (word != UNKNOWN).then_some(word)
}

/// A CPU load you set by hand: the deterministic signal for tests and simulations.
///
/// Clones share the value. [`set`](Self::set) gives the load itself; a signal made with
/// [`smoothed`](Self::smoothed) is fed raw readings with [`sample`](Self::sample) and reads
/// their average, as [`SystemCpu`] smooths its own (for a simulated machine).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::signal::cpu::{CpuSignal, ManualCpu, Smoothing};
///
/// let cpu = ManualCpu::new(300);
/// let shared = cpu.clone();
/// cpu.set(950);
/// assert_eq!(shared.load_permille(), Some(950));
/// cpu.set_unknown();
/// assert_eq!(shared.load_permille(), None);
///
/// // go-zero's average after 5 s of full load from idle, one raw reading per 250 ms.
/// let go_zero = ManualCpu::smoothed(Smoothing::GoZero);
/// let tick = Duration::from_millis(250);
/// let read = (0..20).map(|_| go_zero.sample(1000, tick)).last();
/// assert_eq!(read, Some(636));
/// assert_eq!(go_zero.load_permille(), Some(636));
/// ```
#[derive(Clone)]
pub struct ManualCpu {
    load: Arc<AtomicU32>,
    /// The average [`sample`](Self::sample) feeds.
    smoother: Arc<Mutex<Smoother>>,
}

impl ManualCpu {
    /// A signal reading `permille`; [`sample`](Self::sample) sets raw readings as they are.
    pub fn new(permille: u32) -> Self {
        ManualCpu {
            load: Arc::new(AtomicU32::new(encode(Some(permille)))),
            smoother: Arc::new(Mutex::new(Smoother::new(Smoothing::Raw))),
        }
    }

    /// A signal that reads "unknown" until its first [`sample`](Self::sample), then the
    /// samples' average by `smoothing`.
    pub fn smoothed(smoothing: Smoothing) -> Self {
        ManualCpu {
            load: Arc::new(AtomicU32::new(UNKNOWN)),
            smoother: Arc::new(Mutex::new(Smoother::new(smoothing))),
        }
    }

    /// Sets the load every clone reads.
    pub fn set(&self, permille: u32) {
        self.load.store(encode(Some(permille)), Ordering::Release);
    }

    /// Makes every clone report "unknown".
    pub fn set_unknown(&self) {
        self.load.store(UNKNOWN, Ordering::Release);
    }

    /// Feeds a raw reading taken `elapsed` after the previous one, in ‰ (at most 1000), and
    /// sets the load to the new average, which it returns.
    pub fn sample(&self, raw_permille: u32, elapsed: Duration) -> u32 {
        let mut smoother = self
            .smoother
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let load = smoother.update(raw_permille.min(1000), elapsed);
        self.set(load);
        load
    }
}

impl fmt::Debug for ManualCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualCpu")
            .field("permille", &self.load_permille())
            .finish()
    }
}

impl CpuSignal for ManualCpu {
    #[inline]
    fn load_permille(&self) -> Option<u32> {
        decode(self.load.load(Ordering::Acquire))
    }
}
