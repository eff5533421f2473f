//! Time sources for the limiters.
//!
//! Every limiter in `admit` reads time through the [`Clock`] trait: a monotonic count of
//! nanoseconds since the clock's own origin. No limiter reads wall-clock time (only the parsing
//! of request-start headers does, through a [`WallClock`]), so changing the system time never
//! affects a limiter, and tests can drive time by hand with [`ManualClock`].
//!
//! | clock | resolution | a read | use it for |
//! |---|---|---|---|
//! | [`MonotonicClock`] (every limiter's default) | the nanosecond | `clock_gettime(CLOCK_MONOTONIC)` through the vDSO | everything; correct on every platform |
//! | [`CoarseClock`] | its tick (e.g. 1 ms) | two atomic loads; after 100 ms unread, an OS read that wakes its thread | the hottest paths, where a clock read per decision matters more than a thread waking every tick while it is read |
//! | [`ManualClock`] | the nanosecond | one atomic load | tests and simulations |
//!
//! `admit` never reads the CPU's time-stamp counter directly: only the operating system's
//! monotonic clock, or a cached copy of it. See the [guide](crate::guide::platforms) for the
//! clocks' costs and why.
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
use std::sync::{Arc as StdArc, Mutex, OnceLock, PoisonError, Weak};
use std::thread::{self, Thread};
use std::time::Duration;

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
pub(crate) const fn saturating_nanos(duration: Duration) -> u64 {
    let nanos = duration.as_nanos();
    if nanos > u64::MAX as u128 {
        u64::MAX
    } else {
        nanos as u64
    }
}

/// The operating system's monotonic clock, counted from the moment the clock was created.
///
/// The default clock of the warm-up buckets. It is the clock [`std::time::Instant`] reads
/// (`CLOCK_MONOTONIC` on Linux and Android, read with `clock_gettime` and converted to
/// nanoseconds with integer arithmetic; `Instant` itself elsewhere).
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

impl MonotonicClock {
    /// The clock whose origin is the first call in this process: readings of every copy are
    /// comparable, so one part can stamp a deadline that another reads (the request scope and
    /// the clients' deadline layer).
    #[cfg(feature = "tower")]
    pub(crate) fn process() -> Self {
        static PROCESS: std::sync::LazyLock<MonotonicClock> =
            std::sync::LazyLock::new(MonotonicClock::new);
        *PROCESS
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

/// A cached monotonic clock: while it is read, a background thread refreshes it every
/// `resolution`, and a read is two atomic loads on one cache line instead of
/// [`MonotonicClock`]'s system call through the vDSO.
///
/// This is the approach of Sentinel's own `TimeUtil`. The price is resolution and lag: a
/// reading can be up to one `resolution` old, plus however long the refreshing thread waits for
/// a CPU. On a machine so overloaded that the thread is starved, time appears to slow down, so a
/// limiter stretches its windows and admits less, not more. Prefer [`MonotonicClock`] unless the
/// clock read shows up in your profile.
///
/// An unread clock costs nothing: after 100 ms (and at least one tick) without a read, the
/// thread parks. The next read asks the operating system, as [`MonotonicClock`] does, and wakes
/// the thread; the reads after it are cached again. Readings never decrease across the two.
///
/// Clones share one refreshing thread (named `admit-coarse-clock`). The thread exits after the
/// last clone is dropped: at once if parked, otherwise within one `resolution`.
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

/// How long a [`CoarseClock`] goes unread before its thread parks.
const PARK_AFTER: Duration = Duration::from_millis(100);

struct CoarseShared {
    /// The reading and the thread's state, on one cache line.
    cache: CachePadded<Cache>,
    origin: os_monotonic::Reading,
    /// The refresh interval in ns (0: read on demand), which every warm-up decision adds to
    /// its tolerance.
    resolution_nanos: u64,
    /// The refreshing thread, for readers to wake; it sets this before it first parks.
    thread: OnceLock<Thread>,
}

impl CoarseShared {
    /// The operating system's monotonic clock, in ns since the origin.
    #[inline]
    fn os_nanos(&self) -> u64 {
        os_monotonic::nanos_since(self.origin)
    }

    fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

impl Drop for CoarseShared {
    /// Wakes a parked thread, which then finds the clock gone and exits.
    fn drop(&mut self) {
        self.wake();
    }
}

/// [`Cache::state`]: the thread refreshes the reading; no read since its last tick.
const RUNNING: u64 = 0;
/// The thread refreshes the reading, and a read came since its last tick.
const READ: u64 = 1;
/// The thread is parked (or about to be): a read asks the operating system and wakes it.
const PARKED: u64 = 2;
/// No thread (it could not be spawned): every read asks the operating system.
const ON_DEMAND: u64 = 3;

/// A [`CoarseClock`]'s reading and the protocol between its readers and its thread, apart from
/// the thread and the operating system's clock so that loom can model it.
///
/// Readings never decrease: every write to `nanos` is a `fetch_max`, so its values never
/// decrease in its modification order, and a read returns a load of it or what its own
/// `fetch_max` left there. No wake-up is lost: the thread parks only by moving `state` from
/// [`RUNNING`] to [`PARKED`], which fails once a read has set [`READ`]; only the reader that
/// moves it out of [`PARKED`] wakes the thread, and an `unpark` before the `park` makes the
/// `park` return at once.
struct Cache {
    /// The latest reading, in ns since the clock's origin.
    nanos: AtomicU64,
    /// [`RUNNING`], [`READ`], [`PARKED`] or [`ON_DEMAND`].
    state: AtomicU64,
}

impl Cache {
    fn new(state: u64) -> Self {
        Cache {
            nanos: AtomicU64::new(0),
            state: AtomicU64::new(state),
        }
    }

    /// The current reading; `os_nanos` reads the operating system's clock and `wake` unparks
    /// the thread, each only when needed.
    #[inline]
    fn read(&self, os_nanos: impl FnOnce() -> u64, wake: impl FnOnce()) -> u64 {
        let state = self.state.load(Ordering::Acquire);
        if state == READ {
            // Read since the last tick: nothing to write.
            return self.nanos.load(Ordering::Acquire);
        }
        self.read_other(state, os_nanos, wake)
    }

    /// [`read`](Self::read) in any `state` but [`READ`]: the first read after a tick marks it,
    /// a read while parked asks the operating system and wakes the thread.
    #[inline(never)]
    fn read_other(
        &self,
        mut state: u64,
        os_nanos: impl FnOnce() -> u64,
        wake: impl FnOnce(),
    ) -> u64 {
        loop {
            match state {
                RUNNING => {
                    match self.state.compare_exchange(
                        RUNNING,
                        READ,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) | Err(READ) => return self.nanos.load(Ordering::Acquire),
                        Err(actual) => state = actual,
                    }
                }
                READ => return self.nanos.load(Ordering::Acquire),
                PARKED => {
                    // Publish the fresh reading before the state that lets others use it.
                    let now = os_nanos();
                    let cached = self.nanos.fetch_max(now, Ordering::AcqRel);
                    if self
                        .state
                        .compare_exchange(PARKED, READ, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        wake();
                    }
                    return now.max(cached);
                }
                _ => return os_nanos(),
            }
        }
    }

    /// One tick of the thread: records `now` and clears the read mark. Returns whether to park:
    /// `idle_ticks` counts the ticks without a read, up to `park_after`.
    fn tick(&self, now: u64, idle_ticks: &mut u64, park_after: u64) -> bool {
        self.nanos.fetch_max(now, Ordering::AcqRel);
        if self
            .state
            .compare_exchange(READ, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            *idle_ticks = 0;
            return false;
        }
        *idle_ticks += 1;
        if *idle_ticks < park_after {
            return false;
        }
        *idle_ticks = 0;
        // Fails if a read came since the exchange above: then keep refreshing.
        self.state
            .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Whether the thread is parked and no read has woken it.
    fn parked(&self) -> bool {
        self.state.load(Ordering::Acquire) == PARKED
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
            cache: CachePadded::new(Cache::new(RUNNING)),
            origin: os_monotonic::now(),
            resolution_nanos: saturating_nanos(resolution),
            thread: OnceLock::new(),
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
    /// [`resolution_nanos`](Clock::resolution_nanos) is then zero).
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
                cache: CachePadded::new(Cache::new(ON_DEMAND)),
                origin: os_monotonic::now(),
                resolution_nanos: 0,
                thread: OnceLock::new(),
            }),
        }
    }

    /// How often the clock is refreshed (zero: read on demand), in whole ns up to 584 years.
    pub(crate) fn resolution(&self) -> Duration {
        Duration::from_nanos(self.shared.resolution_nanos)
    }

    /// Whether the refreshing thread is parked.
    #[cfg(all(test, not(admit_loom)))]
    fn is_parked(&self) -> bool {
        self.shared.cache.parked()
    }
}

/// The refreshing thread: a tick every `resolution` while the clock is read, parked while it is
/// not, until the last clone is dropped.
fn refresh_until_dropped(clock: &Weak<CoarseShared>, resolution: Duration) {
    match clock.upgrade() {
        Some(shared) => {
            let _ = shared.thread.set(thread::current());
        }
        None => return,
    }
    let park_after = u64::try_from(PARK_AFTER.as_nanos().div_ceil(resolution.as_nanos()))
        .unwrap_or(u64::MAX)
        .max(1);
    let mut idle_ticks = 0;
    loop {
        thread::sleep(resolution);
        let Some(shared) = clock.upgrade() else {
            return;
        };
        if !shared
            .cache
            .tick(shared.os_nanos(), &mut idle_ticks, park_after)
        {
            continue;
        }
        // Parked, it holds no clone: dropping the last one unparks it, and it exits.
        drop(shared);
        loop {
            thread::park();
            let Some(shared) = clock.upgrade() else {
                return;
            };
            if !shared.cache.parked() {
                break;
            }
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
        let shared = &*self.shared;
        shared.cache.read(|| shared.os_nanos(), || shared.wake())
    }

    #[inline]
    fn resolution_nanos(&self) -> u64 {
        self.shared.resolution_nanos
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use std::cell::Cell;
    use std::time::Instant;

    use super::*;

    /// The operating system's clock and the thread's wake-ups, played by hand.
    #[derive(Default)]
    struct Os {
        now: Cell<u64>,
        reads: Cell<u32>,
        wakes: Cell<u32>,
    }

    impl Os {
        fn read(&self, cache: &Cache) -> u64 {
            cache.read(
                || {
                    self.reads.set(self.reads.get() + 1);
                    self.now.get()
                },
                || self.wakes.set(self.wakes.get() + 1),
            )
        }
    }

    #[test]
    fn a_cache_read_every_tick_never_parks() {
        let (cache, os, mut idle) = (Cache::new(RUNNING), Os::default(), 0);
        for tick in 1..=10 {
            assert!(!cache.tick(tick, &mut idle, 2));
            assert_eq!(os.read(&cache), tick);
            assert_eq!(os.read(&cache), tick);
        }
        assert_eq!((os.reads.get(), os.wakes.get()), (0, 0));
    }

    #[test]
    fn an_unread_cache_parks_and_the_next_read_asks_the_os_and_wakes_it() {
        let (cache, os, mut idle) = (Cache::new(RUNNING), Os::default(), 0);
        assert!(!cache.tick(10, &mut idle, 3));
        assert!(!cache.tick(20, &mut idle, 3));
        assert!(cache.tick(30, &mut idle, 3), "three ticks unread");
        assert!(cache.parked());
        os.now.set(500);
        assert_eq!(os.read(&cache), 500, "fresh, not the cached 30");
        assert_eq!((os.reads.get(), os.wakes.get()), (1, 1));
        assert!(!cache.parked());
        // The next reads are cached again, and the woken thread counts from zero.
        os.now.set(600);
        assert_eq!(os.read(&cache), 500);
        assert_eq!((os.reads.get(), os.wakes.get()), (1, 1));
        assert!(!cache.tick(700, &mut idle, 3));
        assert!(!cache.tick(800, &mut idle, 3));
        assert!(!cache.tick(900, &mut idle, 3));
        assert!(cache.tick(1000, &mut idle, 3));
    }

    #[test]
    fn cache_readings_never_decrease_across_parking() {
        let (cache, os, mut idle) = (Cache::new(RUNNING), Os::default(), 0);
        assert!(cache.tick(200, &mut idle, 1));
        // A parked read whose OS reading is older than the cached one returns the cached one.
        os.now.set(180);
        assert_eq!(os.read(&cache), 200);
        assert!(!cache.tick(210, &mut idle, 1), "read since the last tick");
        assert!(cache.tick(220, &mut idle, 1));
        os.now.set(300);
        assert_eq!(os.read(&cache), 300);
        // The thread read the OS before that read and records its time after it: no step back.
        assert!(!cache.tick(250, &mut idle, 1));
        assert_eq!(os.read(&cache), 300);
    }

    #[test]
    fn an_on_demand_cache_asks_the_os_every_time_and_wakes_nothing() {
        let (cache, os) = (Cache::new(ON_DEMAND), Os::default());
        os.now.set(7);
        assert_eq!(os.read(&cache), 7);
        os.now.set(9);
        assert_eq!(os.read(&cache), 9);
        assert_eq!((os.reads.get(), os.wakes.get()), (2, 0));
    }

    /// The fallback when no refreshing thread can be spawned reads the OS clock every time.
    #[test]
    fn a_coarse_clock_without_its_thread_reads_on_demand() {
        let clock = CoarseClock::on_demand();
        assert_eq!(clock.resolution_nanos(), 0);
        let first = clock.now_nanos();
        // No thread refreshes it, yet it moves.
        let os = Instant::now();
        while clock.now_nanos() == first {
            assert!(os.elapsed() < Duration::from_secs(10), "the clock is stuck");
        }
    }

    /// An unread clock's thread parks; the next read is fresh and sets it ticking again.
    #[test]
    fn an_unread_coarse_clock_parks_and_its_next_read_wakes_it() {
        let clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !clock.is_parked() {
            assert!(Instant::now() < deadline, "the thread never parked");
            thread::sleep(Duration::from_millis(5));
        }
        let floor = clock.shared.os_nanos();
        let woken = clock.now_nanos();
        assert!(woken >= floor, "a read while parked asks the OS");
        // Only the thread's ticks move the reading now.
        let deadline = Instant::now() + Duration::from_secs(10);
        while clock.now_nanos() == woken {
            assert!(Instant::now() < deadline, "the thread never woke");
            thread::yield_now();
        }
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use loom::thread;

    use super::*;
    use crate::sync::{Arc, AtomicBool};

    /// `refresh_until_dropped`'s loop for `ticks` ticks, on the operating system's clock `os`.
    fn refresher(cache: &Cache, os: &AtomicU64, ticks: u32, park_after: u64) {
        let mut idle_ticks = 0;
        for _ in 0..ticks {
            if cache.tick(
                os.fetch_add(1, Ordering::AcqRel) + 1,
                &mut idle_ticks,
                park_after,
            ) {
                loop {
                    thread::park();
                    if !cache.parked() {
                        break;
                    }
                }
            }
        }
    }

    /// `readers` threads besides this one read while the thread ticks twice, parking whenever a
    /// tick goes unread. Each reader's readings never decrease, and reading on lets the thread
    /// finish: a thread left parked while readers see it running would never be woken.
    fn model(readers: usize) {
        loom::model(move || {
            let cache = Arc::new(Cache::new(RUNNING));
            let os = Arc::new(AtomicU64::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let refreshing = {
                let (cache, os, done) = (Arc::clone(&cache), Arc::clone(&os), Arc::clone(&done));
                thread::spawn(move || {
                    refresher(&cache, &os, 2, 1);
                    done.store(true, Ordering::Release);
                })
            };
            let reader = {
                let (cache, os, done) = (Arc::clone(&cache), Arc::clone(&os), Arc::clone(&done));
                let refresher = refreshing.thread().clone();
                move |until_done: bool| {
                    let mut last = 0;
                    let mut read = || {
                        let now = cache.read(
                            || os.fetch_add(1, Ordering::AcqRel) + 1,
                            || refresher.unpark(),
                        );
                        assert!(now >= last, "{last} then {now}");
                        last = now;
                    };
                    read();
                    while until_done && !done.load(Ordering::Acquire) {
                        read();
                        thread::yield_now();
                    }
                }
            };
            let others: Vec<_> = (0..readers)
                .map(|_| {
                    let reader = reader.clone();
                    thread::spawn(move || reader(false))
                })
                .collect();
            reader(true);
            for other in others {
                other.join().unwrap();
            }
            refreshing.join().unwrap();
        });
    }

    #[test]
    fn loom_coarse_clock_one_reader() {
        model(0);
    }

    #[test]
    fn loom_coarse_clock_two_readers() {
        model(1);
    }
}
