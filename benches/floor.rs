//! The least a warm-up bucket's cold admission can cost next to governor's GCRA step, with a
//! cached clock, on one thread and on two sharing one limiter (the `mostly admit` rows where
//! `WarmUp` stays above governor).
//!
//! ```text
//! cargo bench -p admit-benches --bench floor
//! ```
//!
//! A GCRA step keeps one word, the theoretical arrival time, moved by one compare-and-swap.
//! A warm-up bucket also keeps its stored permits, and a cold admission spends one at a price
//! that depends on how many are left. `WarmUp` counts up to fifteen spends in its schedule word,
//! prices each from a run (fixed-point prices keyed to the stored permits' word), and writes
//! the stored permits on the sixteenth by compare-and-swap, with the run worked out from them
//! in floating point. Beside governor and `WarmUp` (cold, 10⁹/s, admit's `CoarseClock`), the
//! group builds that up from a bare step, each on the same clock:
//!
//! - **a GCRA step**: one word, one compare-and-swap per admission;
//! - **+ a second word once in 16**: every sixteenth admission also writes a word, by one
//!   locked read-modify-write, on a cache line of its own (beside the run's), as `WarmUp`'s
//!   writing spend does;
//! - **+ priced spends**: each admission also loads the stored permits' word and the run,
//!   checks the run's key against the word, and prices its spend with a multiplication and a
//!   shift; the sixteenth writes the stored permits and a run worked out in floating point.
//!   This is the work `WarmUp`'s semantics need, without its other checks and calls.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use admit::clock::{Clock, CoarseClock};
use admit::warmup::WarmUp;
use admit_benches::{coarse_clock, on_threads};
use criterion::measurement::WallTime;
use criterion::{Bencher, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use governor::clock::QuantaUpkeepClock;
use governor::{Quota, RateLimiter};

/// The rate of every limiter here: far above what one core can request.
const RATE: u32 = 1_000_000_000;
/// The time bits of [`Step`]'s word; the four above count spends since the last write.
const TIME_MASK: u64 = (1 << 58) - 1;
const COUNT_SHIFT: u32 = 58;
/// The fixed point of a run's prices: `2^-SHIFT` ns.
const SHIFT: u32 = 32;
/// A run: the key in the top 16 bits, the base price below.
const KEY_SHIFT: u32 = 48;

/// What a [`Step`] does beyond a GCRA step.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    Nothing,
    /// Every sixteenth admission writes a second word by one locked read-modify-write.
    Write,
    /// Every admission prices its spend from the stored permits' word and its run, and the
    /// sixteenth writes both.
    Priced,
}

/// An atomic word alone on its cache lines (two, against the adjacent-line prefetcher).
#[repr(align(128))]
struct Padded(AtomicU64);

/// The stored permits' word and its run, alone on their cache lines.
#[repr(C, align(128))]
struct Stored {
    /// The stored permits as a fraction of `MAX` (`f64` bits), or the second word.
    fill: AtomicU64,
    /// The run worked out from `fill`.
    run: AtomicU64,
}

/// A GCRA step on admit's cached clock, with [`Extra`] work.
struct Step {
    /// The theoretical arrival time in ns, and the spends counted since the last write.
    word: Padded,
    /// The stored permits and their run, on one cache line as `WarmUp` keeps them.
    stored: Stored,
    clock: CoarseClock,
    /// How far ahead of its turn a request may pass, in ns.
    tolerance: u64,
    extra: Extra,
}

/// The stored permits of a full bucket, and the curve's prices around them (ns per permit).
const MAX: f64 = 1e10;
const THRESHOLD: f64 = 5e9;
const STABLE: f64 = 1.0;
const SLOPE: f64 = 4e-10;

/// The key that ties a run to the stored permits' word `bits`.
fn key(bits: u64) -> u64 {
    bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> KEY_SHIFT
}

/// The run worked out from `fill` (a fraction of `MAX`) in floating point: the key, and the
/// price of one permit at that level in `2^-SHIFT` ns.
fn run_for(fill: f64) -> u64 {
    let stored = fill * MAX;
    let price = STABLE + (stored - THRESHOLD).max(0.0) * SLOPE;
    key(fill.to_bits()) << KEY_SHIFT | (price * (1u64 << SHIFT) as f64) as u64
}

impl Step {
    fn new(clock: CoarseClock, extra: Extra) -> Self {
        Step {
            word: Padded(AtomicU64::new(0)),
            stored: Stored {
                fill: AtomicU64::new(1.0f64.to_bits()),
                run: AtomicU64::new(run_for(1.0)),
            },
            clock,
            tolerance: 1_000_000_000,
            extra,
        }
    }

    #[inline(never)]
    fn check(&self) -> bool {
        let now = self.clock.now_nanos();
        let mut word = self.word.0.load(Ordering::Acquire);
        loop {
            let at = (word & TIME_MASK).max(now);
            if at - now > self.tolerance {
                return false;
            }
            let count = (word >> COUNT_SHIFT) + 1;
            let (price, fill) = if self.extra == Extra::Priced {
                let fill = self.stored.fill.load(Ordering::Acquire);
                let mut run = self.stored.run.load(Ordering::Acquire);
                if run >> KEY_SHIFT != key(fill) {
                    // Another thread is between its two writes: price in floating point, as
                    // `WarmUp` does.
                    run = run_for(f64::from_bits(fill));
                }
                // Spend `count` of the run: the slope in fixed point is 2^-SHIFT ns a permit.
                let base = run & ((1 << KEY_SHIFT) - 1);
                ((base - count * 2) >> SHIFT, fill)
            } else {
                (1, 0)
            };
            let counted = if self.extra == Extra::Nothing {
                0
            } else {
                count & 15
            };
            let next = (at + price) | counted << COUNT_SHIFT;
            match self
                .word
                .0
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if counted == 0 && self.extra != Extra::Nothing {
                        self.write(fill);
                    }
                    return true;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// The sixteenth spend's write: the second word, or the stored permits (sixteen fewer,
    /// re-applied to a newer word if another write won a race) and their run.
    #[inline(never)]
    fn write(&self, read: u64) {
        if self.extra == Extra::Write {
            self.stored.fill.fetch_sub(16, Ordering::AcqRel);
            return;
        }
        let mut current = read;
        loop {
            let stored = f64::from_bits(current) * MAX - 16.0;
            // A full bucket refills between samples, so that the benchmark stays cold.
            let next = if stored < THRESHOLD {
                1.0
            } else {
                stored / MAX
            };
            match self.stored.fill.compare_exchange_weak(
                current,
                next.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return self.stored.run.store(run_for(next), Ordering::Release),
                Err(actual) => current = actual,
            }
        }
    }
}

/// Calls `admit` `iters` times on each of `threads` threads at once and returns the wall time,
/// asserting that every call admitted: a refusal would time a cheaper path than the one named.
fn admitting(b: &mut Bencher<'_>, threads: u64, admit: &(dyn Fn() -> bool + Sync)) {
    b.iter_custom(|iters| {
        let admitted = AtomicU64::new(0);
        let elapsed = on_threads(threads as usize, &|| {
            let mut passed = 0;
            for _ in 0..iters {
                passed += u64::from(black_box(admit()));
            }
            admitted.fetch_add(passed, Ordering::Relaxed);
        });
        assert_eq!(admitted.into_inner(), iters * threads, "a call was refused");
        elapsed
    });
}

fn floor(c: &mut Criterion) {
    for threads in [1, 2] {
        let name = if threads == 1 {
            "1 thread"
        } else {
            "2 threads"
        };
        let mut group = c.benchmark_group(format!("floor/{name}"));
        group.throughput(Throughput::Elements(1));
        rows(&mut group, threads);
        group.finish();
    }
}

/// Governor, the steps, and `WarmUp`, each called from `threads` threads.
fn rows(group: &mut BenchmarkGroup<'_, WallTime>, threads: u64) {
    let quota = Quota::per_second(NonZeroU32::new(RATE).expect("non-zero rate"));
    let upkeep = QuantaUpkeepClock::from_interval(Duration::from_millis(1)).expect("upkeep");
    let governor = RateLimiter::direct_with_clock(quota, upkeep);
    group.bench_function("governor/QuantaUpkeepClock", |b| {
        admitting(b, threads, &|| governor.check().is_ok());
    });

    for (name, extra) in [
        ("GCRA step", Extra::Nothing),
        ("+ a second word once in 16", Extra::Write),
        ("+ priced spends", Extra::Priced),
    ] {
        let step = Step::new(coarse_clock(), extra);
        group.bench_function(format!("{name}/CoarseClock"), |b| {
            admitting(b, threads, &|| step.check());
        });
    }

    let warm_up = WarmUp::builder(f64::from(RATE))
        .warm_up_period(Duration::from_secs(1))
        .clock(coarse_clock())
        .build()
        .expect("valid configuration");
    group.bench_function("admit Smooth, cold/CoarseClock", |b| {
        admitting(b, threads, &|| warm_up.try_acquire().is_ok());
    });
}

criterion_group!(benches, floor);
criterion_main!(benches);
