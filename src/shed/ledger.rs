//! The shedder's lifetime counts: requests admitted and ended, their service time and pass
//! codes, refusals by cause, and the smoothed number in flight. The window marks them.

use crossbeam_utils::CachePadded;

use super::error::Drops;
use super::snapshot::ClassCounts;
use crate::criticality::Criticality;
use crate::signal::Cause;
use crate::signal::queue::floor::LastActivity;
use crate::signal::queue::header::HeaderError;
use crate::sync::{AtomicU64, Ordering, Striped};

/// go-zero's `flyingBeta`: the weight of the old smoothed concurrency.
const FLYING_BETA: f64 = 0.9;
/// `1 − FLYING_BETA` as Go folds it: exactly 0.1 (`1.0 - 0.9` is 0.09999999999999998).
const FLYING_WEIGHT: f64 = 0.1;
pub(super) const NANOS_PER_MS: u64 = 1_000_000;
const NANOS_PER_MICRO: u64 = 1_000;

/// The striped lifetime totals: service time in µs of every completion, the passes'
/// [codes](pass_code) (pass count and latency sum in ms), and the requests a
/// layer offered to this shedder first.
const SERVICE_MICROS: usize = 0;
const PASS_CODE: usize = 1;
const OFFERED: usize = 2;

/// Bits of the pass field in [`pass_code`]; the latency field has the rest.
pub(super) const PASS_BITS: u32 = 20;
pub(super) const PASS_MASK: u64 = (1 << PASS_BITS) - 1;
/// The largest latency one pass can add: 2^44 − 1 ms, 557 years.
pub(super) const MAX_LATENCY_MS: u64 = u64::MAX >> PASS_BITS;

/// `passes` passes whose latencies sum to `latency_ms`, as one linear code
/// `passes + latency_ms · 2^20` (wrapping): codes add up as the passes do.
#[inline]
pub(super) fn pass_code(passes: u64, latency_ms: u64) -> u64 {
    passes.wrapping_add(latency_ms << PASS_BITS)
}

/// One pass of `latency_ms` (capped at 2^44 − 1 ms).
#[inline]
pub(super) fn one_pass(latency_ms: u64) -> u64 {
    pass_code(1, latency_ms.min(MAX_LATENCY_MS))
}

/// The shedder's lifetime totals at some instant: what a mark records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Totals {
    /// Passes, counted exactly.
    pub(super) passes: u64,
    /// The sum of every pass's [`one_pass`] code.
    pub(super) pass_code: u64,
    /// Failures and refusals.
    pub(super) others: u64,
}

/// What a shedder has counted since it was built.
#[derive(Debug)]
pub(super) struct Ledger {
    /// Written by every admission and completion.
    pub(super) flight: CachePadded<Flight>,
    /// Striped by thread: [`SERVICE_MICROS`], [`PASS_CODE`] and [`OFFERED`].
    service: Striped<3>,
    /// Refusals by cause ([`Cause::index`]), striped by thread.
    dropped: Striped<{ Cause::COUNT }>,
    /// Decisions by class, but for the default class, [`Critical`](Criticality::Critical),
    /// whose counts are what the others leave of the totals: admitted at `2·index`, refused at
    /// `2·index + 1`, striped by thread. A service that sets no class writes none of them.
    classed: Striped<{ 2 * Criticality::COUNT }>,
    /// Request-start stamps that could not be read, by [`HeaderError::ALL`]'s order: rare,
    /// so not striped.
    header_errors: [AtomicU64; HeaderError::ALL.len()],
}

/// Requests in flight and their lifetime totals.
///
/// The number in flight is `admitted − passed − failed`: an admitted request that passes costs
/// two atomic additions, not the three an in-flight counter plus a pass total would.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) admitted: AtomicU64,
    pub(super) passed: AtomicU64,
    pub(super) failed: AtomicU64,
    /// `f64` bits of go-zero's `avgFlying`.
    pub(super) avg_flying: AtomicU64,
    /// When a request last completed and was last refused (to a granule), on the shedder's
    /// clock plus one (0: never): what tells whether the next request found the service idle.
    pub(super) completed_at: AtomicU64,
    pub(super) refused_at: AtomicU64,
}

impl Flight {
    /// Requests admitted and not yet completed. The completions are read before the
    /// admissions: every completion counted follows its own admission, so the difference
    /// is never negative.
    pub(super) fn flying(&self) -> u64 {
        let ended = self.passed.load(Ordering::Acquire) + self.failed.load(Ordering::Acquire);
        self.admitted.load(Ordering::Acquire).saturating_sub(ended)
    }
}

impl Ledger {
    pub(super) fn new() -> Self {
        Ledger {
            flight: CachePadded::new(Flight {
                admitted: AtomicU64::new(0),
                passed: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                avg_flying: AtomicU64::new(0.0f64.to_bits()),
                completed_at: AtomicU64::new(0),
                refused_at: AtomicU64::new(0),
            }),
            service: Striped::new(),
            dropped: Striped::new(),
            classed: Striped::new(),
            header_errors: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts an admitted request in flight.
    #[inline]
    pub(super) fn admit(&self) {
        self.flight.admitted.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts a request refused for `cause`.
    #[inline]
    pub(super) fn refuse(&self, cause: Cause) {
        self.dropped.add(cause.index(), 1);
    }

    /// Counts a decision for a request of `class`, unless of the default class.
    #[inline]
    pub(super) fn decide(&self, class: Criticality, refused: bool) {
        if class != Criticality::Critical {
            self.classed
                .add(2 * class.index() + usize::from(refused), 1);
        }
    }

    /// Requests admitted and refused by class, since the shedder was built. The default
    /// class's are the totals less the other classes'.
    pub(super) fn by_class(&self) -> [ClassCounts; Criticality::COUNT] {
        let mut counts = Criticality::ALL.map(|class| ClassCounts {
            admitted: self.classed.sum(2 * class.index()),
            refused: self.classed.sum(2 * class.index() + 1),
        });
        let others = counts
            .iter()
            .fold((0u64, 0u64), |(admitted, refused), count| {
                (admitted + count.admitted, refused + count.refused)
            });
        counts[Criticality::Critical.index()] = ClassCounts {
            admitted: self
                .flight
                .admitted
                .load(Ordering::Acquire)
                .saturating_sub(others.0),
            refused: self.dropped_by().total().saturating_sub(others.1),
        };
        counts
    }

    /// Counts a request a layer offered to this shedder first.
    #[cfg(feature = "tower")]
    #[inline]
    pub(super) fn offer(&self) {
        self.service.add(OFFERED, 1);
    }

    /// Ends a request in flight for `elapsed_nanos`, as a pass or a failure (go-zero's
    /// `Promise.Pass` / `Fail`). A pass whose work waited `cpu_wait_nanos` for a CPU records its
    /// latency less that wait; the service time stays whole.
    #[inline]
    pub(super) fn complete(&self, elapsed_nanos: u64, passed: bool, cpu_wait_nanos: u64) {
        let micros = elapsed_nanos.saturating_add(NANOS_PER_MICRO / 2) / NANOS_PER_MICRO;
        let flight = &self.flight;
        let (own, other) = if passed {
            // Whole milliseconds, rounded up, as go-zero's `math.Ceil` of float milliseconds,
            // and at least 1: go-zero reads 0 only for exactly 0 ns, which a coarse clock
            // reports for every request shorter than its tick (and a zero `min_rt` would cap
            // the concurrency at 1).
            let rt_ms = elapsed_nanos
                .saturating_sub(cpu_wait_nanos)
                .div_ceil(NANOS_PER_MS)
                .max(1);
            self.service
                .add_two((SERVICE_MICROS, micros), (PASS_CODE, one_pass(rt_ms)));
            (&flight.passed, &flight.failed)
        } else {
            self.service.add(SERVICE_MICROS, micros);
            (&flight.failed, &flight.passed)
        };
        // How many remain in flight once this completion counts (completions read before
        // admissions), then the count: the average's arithmetic overlaps the locked add, and
        // its store does not hold up the next locked instruction. A completion racing this one
        // between the loads and the add is seen one completion late, like the average's lost
        // update below.
        let ended = own.load(Ordering::Acquire) + 1 + other.load(Ordering::Acquire);
        let flying = flight
            .admitted
            .load(Ordering::Acquire)
            .saturating_sub(ended);
        own.fetch_add(1, Ordering::AcqRel);
        // A load and a store, not a compare-and-swap loop: two completions at the same instant
        // may both start from the same average, and one update is then lost (go-zero takes a
        // lock here). The average is a smoothing, and the lost sample is one of two
        // simultaneous ones; an atomic read-modify-write would cost every request.
        let avg = f64::from_bits(flight.avg_flying.load(Ordering::Acquire)) * FLYING_BETA
            + flying as f64 * FLYING_WEIGHT;
        flight.avg_flying.store(avg.to_bits(), Ordering::Release);
    }

    /// The totals a window mark records. Each is read once, passes before their code; the
    /// window resolves what completions land between the two.
    pub(super) fn totals(&self) -> Totals {
        let flight = &self.flight;
        let passes = flight.passed.load(Ordering::Acquire);
        let pass_code = self.service.sum(PASS_CODE);
        let others = flight
            .failed
            .load(Ordering::Acquire)
            .wrapping_add(self.dropped_by().total());
        Totals {
            passes,
            pass_code,
            others,
        }
    }

    /// Requests admitted and not yet completed.
    #[inline]
    pub(super) fn flying(&self) -> u64 {
        self.flight.flying()
    }

    /// Notes that a request completed at `now`: one store, to the line the completion's count
    /// has just written.
    #[inline]
    pub(super) fn note_completion(&self, now: u64) {
        self.flight
            .completed_at
            .store(now.wrapping_add(1), Ordering::Relaxed);
    }

    /// Notes that a request was refused at `now`, unless the note is already within `granule`
    /// of it: refusals write nothing else to this line, so it is stored at most once a
    /// granule, not once a refusal.
    #[inline]
    pub(super) fn note_refusal(&self, now: u64, granule: u64) {
        let refused_at = &self.flight.refused_at;
        let noted = refused_at.load(Ordering::Relaxed);
        let now = now.wrapping_add(1);
        if noted == 0 || now.saturating_sub(noted) >= granule {
            refused_at.store(now, Ordering::Relaxed);
        }
    }

    /// When a request last completed, and was last refused (to the granule of
    /// [`note_refusal`](Self::note_refusal)).
    #[inline]
    pub(super) fn last_activity(&self) -> LastActivity {
        let read = |at: &AtomicU64| match at.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at - 1),
        };
        let flight = &self.flight;
        LastActivity {
            completed: read(&flight.completed_at),
            refused: read(&flight.refused_at),
        }
    }

    /// Counts a request-start stamp that could not be read.
    pub(super) fn count_header_error(&self, error: HeaderError) {
        let kind = HeaderError::ALL
            .iter()
            .position(|&known| known == error)
            .unwrap_or(0);
        self.header_errors[kind].fetch_add(1, Ordering::Relaxed);
    }

    /// Request-start stamps that could not be read, by [`HeaderError::ALL`]'s order.
    pub(super) fn header_errors(&self) -> [u64; HeaderError::ALL.len()] {
        std::array::from_fn(|i| self.header_errors[i].load(Ordering::Relaxed))
    }

    /// go-zero's `avgFlying`, updated at each completion.
    #[inline]
    pub(super) fn avg_flying(&self) -> f64 {
        f64::from_bits(self.flight.avg_flying.load(Ordering::Acquire))
    }

    /// Requests that passed, and that failed or were cancelled.
    pub(super) fn ended(&self) -> (u64, u64) {
        let flight = &self.flight;
        (
            flight.passed.load(Ordering::Acquire),
            flight.failed.load(Ordering::Acquire),
        )
    }

    /// The service time of every completion, in µs.
    pub(super) fn service_micros(&self) -> u64 {
        self.service.sum(SERVICE_MICROS)
    }

    /// Requests offered to this shedder first.
    pub(super) fn offered(&self) -> u64 {
        self.service.sum(OFFERED)
    }

    /// Refusals by cause.
    pub(super) fn dropped_by(&self) -> Drops {
        Drops(std::array::from_fn(|i| self.dropped.sum(i)))
    }

    /// Counts `passes` passes whose latencies sum to `latency_ms`, as that many completions
    /// would (for tests that fill a window).
    #[cfg(test)]
    pub(super) fn add_passes(&self, passes: u64, latency_ms: u64) {
        self.service.add(PASS_CODE, pass_code(passes, latency_ms));
        self.flight.passed.fetch_add(passes, Ordering::AcqRel);
    }
}
