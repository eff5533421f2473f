//! Time sources for the limiters.
//!
//! Every limiter in `admit` reads time through the [`Clock`] trait: a monotonic count of
//! nanoseconds since the clock's own origin. Nothing in the crate reads wall-clock time, so
//! changing the system time never affects a limiter, and tests can drive time by hand with
//! [`ManualClock`].
//!
//! | clock | resolution | a read | use it for |
//! |---|---|---|---|
//! | [`MonotonicClock`] (every limiter's default) | the nanosecond | `clock_gettime(CLOCK_MONOTONIC)` through the vDSO | everything; correct on every platform |
//! | [`CoarseClock`] | its tick (e.g. 1 ms) | one atomic load | the hottest paths, where a clock read per decision matters more than a thread waking every tick |
//! | [`ManualClock`] | the nanosecond | one atomic load | tests and simulations |
//!
//! The README's Performance section gives each read's measured cost (`cargo bench -p
//! admit-benches --bench clock`). On hosts whose clocksource is not the TSC (`hpet`,
//! `acpi_pm`, some hypervisors' clocks) a [`MonotonicClock`] read can cost far more, which is
//! when [`CoarseClock`] pays off.
//!
//! # Why not the TSC directly?
//!
//! Reading the CPU's time-stamp counter (as the `quanta` crate does) costs ≈ 10 ns, but on
//! machines whose cores' counters are not synchronised it can go backwards when a thread
//! migrates (metrics-rs/quanta#111, boinkor-net/governor#299), and a limiter that sees time go
//! backwards misjudges its windows. `admit` therefore uses the operating system's monotonic
//! clock, or a cached copy of it.
//!
//! # Clocks that go backwards
//!
//! Implementations must be monotonic. If one is not (or if a [`ManualClock`] is [`set`] to an
//! earlier time), the limiters keep using the latest time they have already acted on: state is
//! never rewound.
//!
//! [`set`]: ManualClock::set

use std::fmt;
use std::io;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc as StdArc, Mutex, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicU64, Ordering};

/// A monotonic time source with nanosecond resolution.
///
/// `now_nanos` returns the nanoseconds elapsed since the clock's origin (whatever instant the
/// implementation chose as zero). Successive readings must never decrease. Limiters that divide
/// time into windows (such as [`SentinelWarmUp`](crate::warmup::sentinel::SentinelWarmUp))
/// align those windows to the origin.
///
/// # Example
///
/// A clock driven by the application's own event loop:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use admit::clock::Clock;
///
/// struct LoopClock(AtomicU64);
///
/// impl Clock for LoopClock {
///     fn now_nanos(&self) -> u64 {
///         self.0.load(Ordering::Acquire)
///     }
/// }
///
/// let clock = LoopClock(AtomicU64::new(5));
/// assert_eq!(clock.now_nanos(), 5);
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin. Never decreases.
    fn now_nanos(&self) -> u64;

    /// How far a reading may lag the true time: the refresh interval of a cached clock, zero
    /// (the default) for a clock read on demand.
    ///
    /// Limiters that space requests in time ([`WarmUp`](crate::warmup::WarmUp))
    /// let a request pass up to this much before its turn, so that a cached clock, which
    /// returns the same reading for a whole tick, does not cap them at one request per tick.
    /// The long-run rate is unchanged.
    fn resolution_nanos(&self) -> u64 {
        0
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    #[inline]
    fn resolution_nanos(&self) -> u64 {
        (**self).resolution_nanos()
    }
}

impl<C: Clock + ?Sized> Clock for StdArc<C> {
    #[inline]
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    #[inline]
    fn resolution_nanos(&self) -> u64 {
        (**self).resolution_nanos()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    #[inline]
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    #[inline]
    fn resolution_nanos(&self) -> u64 {
        (**self).resolution_nanos()
    }
}

/// Converts a duration to whole nanoseconds, saturating at `u64::MAX` (about 584 years).
fn saturating_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The operating system's monotonic clock, counted from the moment the clock was created.
///
/// The default clock of the warm-up buckets. It is the clock [`std::time::Instant`] reads
/// (`CLOCK_MONOTONIC` on Linux and Android, read with `clock_gettime` and converted to
/// nanoseconds with integer arithmetic, which saves the 5 ns that `Instant`'s `Duration`
/// arithmetic costs; `Instant` itself elsewhere). One read costs about 18 ns on a Linux x86_64
/// host with a TSC clocksource (see the [module docs](self) for the measurement).
///
/// The clock is `Copy`: copies share the origin.
///
/// # Example
///
/// ```
/// use admit::clock::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let a = clock.now_nanos();
/// let b = clock.now_nanos();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: os_monotonic::Reading,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: os_monotonic::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        os_monotonic::nanos_since(self.origin)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod os_monotonic {
    use rustix::time::{ClockId, clock_gettime};

    /// Nanoseconds of `CLOCK_MONOTONIC` (time since boot, excluding suspend).
    pub(super) type Reading = u64;

    #[inline]
    pub(super) fn now() -> Reading {
        let now = clock_gettime(ClockId::Monotonic);
        // The kernel keeps both fields non-negative and `tv_nsec` below one second.
        (now.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(now.tv_nsec as u64)
    }

    #[inline]
    pub(super) fn nanos_since(origin: Reading) -> u64 {
        now().saturating_sub(origin)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod os_monotonic {
    use std::time::Instant;

    pub(super) type Reading = Instant;

    pub(super) fn now() -> Reading {
        Instant::now()
    }

    #[inline]
    pub(super) fn nanos_since(origin: Reading) -> u64 {
        super::saturating_nanos(Instant::now().saturating_duration_since(origin))
    }
}

/// A clock that only moves when told to: the deterministic clock for tests and simulations.
///
/// It starts at zero. Clones share the same time, so a test can keep one handle and give another
/// to the limiter. Reading it is a single atomic load.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(shared.now(), Duration::from_millis(1500));
/// shared.set(Duration::from_secs(10));
/// assert_eq!(clock.now_nanos(), 10_000_000_000);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves every clone of this clock forward by `by`, saturating at `u64::MAX` nanoseconds
    /// (about 584 years).
    pub fn advance(&self, by: Duration) {
        let by = saturating_nanos(by);
        let mut current = self.nanos.load(Ordering::Acquire);
        loop {
            let next = current.saturating_add(by);
            match self.nanos.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Sets every clone of this clock to `to` after its origin (saturating at `u64::MAX`
    /// nanoseconds).
    ///
    /// Setting an earlier time than before is allowed, but limiters never rewind: they keep
    /// acting on the latest time they have seen (see the [module docs](self)).
    pub fn set(&self, to: Duration) {
        self.nanos.store(saturating_nanos(to), Ordering::Release);
    }

    /// The current reading as a [`Duration`].
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_nanos())
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }
}

/// Its reading as nanoseconds since the Unix epoch: a manual wall clock for tests.
impl WallClock for ManualClock {
    #[inline]
    fn unix_nanos(&self) -> u64 {
        self.now_nanos()
    }
}

/// A wall clock: the time of day, which request-start headers are stamped with. Everything
/// else in admit reads a monotonic [`Clock`]; a wall clock may jump, so only the parsing of
/// headers uses one.
pub trait WallClock: Send + Sync {
    /// Nanoseconds since the Unix epoch (1970-01-01 UTC).
    fn unix_nanos(&self) -> u64;
}

/// The system's wall clock ([`std::time::SystemTime`]); a time before the epoch reads as 0.
///
/// ```
/// use admit::clock::{SystemWallClock, WallClock};
///
/// assert!(SystemWallClock.unix_nanos() > 1_700_000_000_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    #[inline]
    fn unix_nanos(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            })
    }
}

/// A cached monotonic clock: a background thread refreshes it every `resolution`, and a read is
/// one atomic load instead of [`MonotonicClock`]'s system call through the vDSO.
///
/// This is the approach of Sentinel's own `TimeUtil`. The price is resolution, lag and idle
/// work: a reading can be up to one `resolution` old, plus however long the refreshing thread
/// waits for a CPU, and the thread wakes every `resolution` even while nothing reads it.
/// On a machine so overloaded that the thread is starved, time appears to slow down, so a limiter
/// stretches its windows and admits less, not more. Prefer [`MonotonicClock`] unless the clock
/// read shows up in your profile.
///
/// Clones share one refreshing thread (named `admit-coarse-clock`). The thread exits within one
/// `resolution` after the last clone is dropped.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::CoarseClock;
/// use admit::warmup::WarmUp;
///
/// let clock = CoarseClock::start(Duration::from_millis(1))?;
/// let limiter = WarmUp::builder(1000.0).clock(clock.clone()).build()?;
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    shared: StdArc<CoarseShared>,
}

/// [`CoarseShared::nanos`] of a clock without a refreshing thread, read on demand instead:
/// never a reading (584 years), and in the same cache line as one.
const ON_DEMAND: u64 = u64::MAX;

struct CoarseShared {
    /// The latest reading, or [`ON_DEMAND`].
    nanos: CachePadded<StdAtomicU64>,
    origin: Instant,
    /// The refresh interval in ns (0: read on demand), which every warm-up decision adds to
    /// its tolerance.
    resolution_nanos: u64,
}

impl CoarseShared {
    fn refresh(&self) {
        let now = saturating_nanos(self.origin.elapsed());
        self.nanos.store(now, std::sync::atomic::Ordering::Release);
    }
}

impl CoarseClock {
    /// Starts a clock refreshed every `resolution`; its origin is now.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if `resolution` is zero, or the operating system's error
    /// if the refreshing thread cannot be spawned.
    pub fn start(resolution: Duration) -> io::Result<Self> {
        if resolution.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "CoarseClock resolution must be greater than zero",
            ));
        }
        let shared = StdArc::new(CoarseShared {
            nanos: CachePadded::new(StdAtomicU64::new(0)),
            origin: Instant::now(),
            resolution_nanos: saturating_nanos(resolution),
        });
        let weak = StdArc::downgrade(&shared);
        thread::Builder::new()
            .name("admit-coarse-clock".into())
            .spawn(move || refresh_until_dropped(&weak, resolution))?;
        Ok(CoarseClock { shared })
    }

    /// The process's shared 1 ms clock.
    ///
    /// Every call returns a clone of the same clock (one refreshing thread, one origin) for as
    /// long as a clone is alive; after the last is dropped and its thread has exited, the next
    /// call starts a new one. If the thread cannot be spawned, the clock returned reads the
    /// operating system's clock on every call instead (exact, at [`MonotonicClock`]'s cost;
    /// [`resolution`](Self::resolution) is then zero).
    ///
    /// # Example
    ///
    /// ```
    /// use admit::clock::{Clock, CoarseClock};
    ///
    /// let a = CoarseClock::shared();
    /// let b = CoarseClock::shared();
    /// assert!(b.now_nanos() >= a.now_nanos()); // one clock, one origin
    /// ```
    pub fn shared() -> Self {
        static SHARED: Mutex<Weak<CoarseShared>> = Mutex::new(Weak::new());
        let resolution = Duration::from_millis(1);
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = shared.upgrade() {
            return CoarseClock { shared: live };
        }
        let clock = CoarseClock::start(resolution).unwrap_or_else(|_| CoarseClock::on_demand());
        *shared = StdArc::downgrade(&clock.shared);
        clock
    }

    /// A clock without a refreshing thread: every read asks the operating system.
    fn on_demand() -> Self {
        CoarseClock {
            shared: StdArc::new(CoarseShared {
                nanos: CachePadded::new(StdAtomicU64::new(ON_DEMAND)),
                origin: Instant::now(),
                resolution_nanos: 0,
            }),
        }
    }

    /// How often the clock is refreshed (zero: read on demand), in whole ns up to 584 years.
    pub fn resolution(&self) -> Duration {
        Duration::from_nanos(self.shared.resolution_nanos)
    }
}

fn refresh_until_dropped(clock: &Weak<CoarseShared>, resolution: Duration) {
    loop {
        thread::sleep(resolution);
        match clock.upgrade() {
            Some(shared) => shared.refresh(),
            None => return,
        }
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("resolution", &self.resolution())
            .field("now_nanos", &self.now_nanos())
            .finish()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        let nanos = self.shared.nanos.load(std::sync::atomic::Ordering::Acquire);
        if nanos == ON_DEMAND {
            return saturating_nanos(self.shared.origin.elapsed());
        }
        nanos
    }

    #[inline]
    fn resolution_nanos(&self) -> u64 {
        self.shared.resolution_nanos
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    /// The fallback when no refreshing thread can be spawned reads the OS clock every time.
    #[test]
    fn a_coarse_clock_without_its_thread_reads_on_demand() {
        let clock = CoarseClock::on_demand();
        assert_eq!(clock.resolution_nanos(), 0);
        let first = clock.now_nanos();
        assert_ne!(first, ON_DEMAND);
        // No thread refreshes it, yet it moves.
        let os = Instant::now();
        while clock.now_nanos() == first {
            assert!(os.elapsed() < Duration::from_secs(10), "the clock is stuck");
        }
    }
}
