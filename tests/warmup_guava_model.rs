//! Differential test: `WarmUp` against an independent, plain floating-point model of Guava's
//! `SmoothWarmingUp` with admit's documented extensions (`tests/support/guava_model.rs`), on
//! random configurations and random traces of calls. Every decision, every wait (and every
//! refusal's retry hint) and the stored permits a snapshot reports must agree.
//!
//! It drives the public API only (`try_acquire`, `reserve`, `set_rate`, `snapshot`) on a
//! `ManualClock`, from a fixed seed, to guard rewrites of the engine (`src/warmup/smooth/`).
//!
//! The model works in floating point with whole ns wherever the schedule needs them. What the
//! implementation may do differently, and how far, is stated where the tolerance is applied:
//!
//! - **Roundings to whole ns** (`Run::tolerance`, `Run::set_rate`): the implementation evaluates
//!   the same prices in another order and keeps the stored permits as a fraction of `max`.
//!   Each such truncation may move its schedule by 1 ns from the model's. The model counts
//!   only the truncations that can go either way (within rounding of a whole ns); the drift
//!   they allow is cleared whenever the implementation shows
//!   its schedule exactly (a wait `reserve` returns, a refusal's retry hint).
//! - **The stored permits** (`STORED_PRECISION`): equal to `1e-12` of `max`, plus what the
//!   drift above changes in the idle time credited.
//!
//! A decision within the drift of its boundary may go either way; the test then follows the
//! implementation (which always shows its schedule when it refuses). Where the drift would
//! grow beyond [`MAX_DRIFT`] (a restart lead depending on which side of the boundary the
//! schedule lies), the trace ends there; the tally at the end shows how rarely.

#[path = "support/guava_model.rs"]
mod guava_model;

use std::cell::RefCell;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::{Payment, WarmUp};
use guava_model::{Admission, GuavaModel, SEC};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, RngSeed, TestRunner};

/// The clock's reading when a limiter is built: the limiter counts from there.
const ORIGIN: u64 = 3 * 86_400 * SEC + 123_456_789;
/// The most a trace moves the clock: well inside the schedule's range (9.1 years today).
const TIME_BUDGET: u64 = 3 * 3600 * SEC;
/// The most ns the implementation's schedule may have drifted from the model's by roundings
/// it has not shown yet. Below the shortest spacing (1000 ns at 10⁶ per second), so that a
/// drift never hides a whole permit, and far below any error in a rule.
const MAX_DRIFT: u64 = 100;
/// How far, as a share of `max`, the stored permits a snapshot reports may lie outside the
/// model's (the range the drift allows). The implementation keeps them as a fraction of `max`
/// (`stored · (1 / max)`, read back times `max`) and works out the refill as a product where
/// the model divides: a few ulps of `max` apart. `1e-12` is thousands of times that, and still
/// a millionth of a permit in a bucket of a million.
const STORED_PRECISION: f64 = 1e-12;
/// How many random cases the property runs, and from which seed.
const CASES: u32 = 512;
const SEED: u64 = 0x6775_6176_615f_6d64;

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Clone, Debug)]
struct Config {
    rate: f64,
    period: Duration,
    cold_factor: f64,
    burst: Duration,
    payment: Payment,
    start_warm: bool,
}

/// How long the clock moves before a call.
#[derive(Clone, Copy, Debug)]
enum Gap {
    None,
    Nanos(u64),
    /// A multiple of the full-rate spacing in force (below 1: within one interval).
    Stable(f64),
    /// A multiple of the cold spacing in force.
    Cold(f64),
    /// A multiple of the warm-up period (above 1: long enough to cool down completely).
    Period(f64),
    /// The last refusal's retry hint: exactly the moment it names.
    Hint,
    /// The last wait `reserve` returned: sleeping as told, as `acquire` does.
    Wait,
}

/// How long a `reserve` may wait.
#[derive(Clone, Copy, Debug)]
enum MaxWait {
    Zero,
    Forever,
    Nanos(u64),
    Stable(f64),
    Cold(f64),
}

#[derive(Clone, Copy, Debug)]
enum Call {
    TryAcquire,
    Reserve(u32, MaxWait),
    /// `set_rate` to the rate in force times `10^x`, within 0.5..=10⁶ per second.
    SetRate(f64),
    /// Only the snapshot.
    Look,
}

/// Log-uniform between `low` and `high`.
fn log_uniform(low: f64, high: f64) -> impl Strategy<Value = f64> {
    (low.log10()..high.log10()).prop_map(|exponent| 10f64.powf(exponent))
}

fn config() -> impl Strategy<Value = Config> {
    let rate = prop_oneof![
        4 => log_uniform(0.5, 1e6),
        1 => prop::sample::select(vec![0.5, 1.0, 2.0, 10.0, 100.0, 1000.0, 1e6]),
    ];
    let period = prop_oneof![
        4 => log_uniform(1e6, 60e9).prop_map(|nanos| Duration::from_nanos(nanos as u64)),
        1 => prop::sample::select(vec![1, 1000, 4000, 10_000, 60_000])
            .prop_map(Duration::from_millis),
    ];
    // Whole factors, and fractions as Guava allows.
    let cold_factor = prop_oneof![
        2 => (1u32..=10).prop_map(f64::from),
        2 => 1.0f64..10.0,
        1 => Just(1.0),
        1 => Just(3.0),
        1 => Just(10.0),
    ];
    let burst = prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_secs(1)),
        (0..3 * SEC).prop_map(Duration::from_nanos),
    ];
    let payment = prop_oneof![Just(Payment::Now), Just(Payment::Later)];
    (rate, period, cold_factor, burst, payment, any::<bool>()).prop_map(
        |(rate, period, cold_factor, burst, payment, start_warm)| Config {
            rate,
            period,
            cold_factor,
            burst,
            payment,
            start_warm,
        },
    )
}

fn gap() -> impl Strategy<Value = Gap> {
    prop_oneof![
        6 => Just(Gap::None),
        2 => (1u64..2_000).prop_map(Gap::Nanos),
        6 => (0.0f64..1.0).prop_map(Gap::Stable),
        3 => (1.0f64..30.0).prop_map(Gap::Stable),
        3 => (0.0f64..3.0).prop_map(Gap::Cold),
        2 => (0.0f64..1.0).prop_map(Gap::Period),
        1 => (1.0f64..3.0).prop_map(Gap::Period),
        2 => Just(Gap::Hint),
        2 => Just(Gap::Wait),
    ]
}

fn max_wait() -> impl Strategy<Value = MaxWait> {
    prop_oneof![
        3 => Just(MaxWait::Zero),
        2 => Just(MaxWait::Forever),
        1 => (0u64..2_000).prop_map(MaxWait::Nanos),
        3 => (0.0f64..5.0).prop_map(MaxWait::Stable),
        1 => (0.0f64..3.0).prop_map(MaxWait::Cold),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        8 => Just(Call::TryAcquire),
        4 => max_wait().prop_map(|wait| Call::Reserve(1, wait)),
        2 => (2u32..6, max_wait()).prop_map(|(n, wait)| Call::Reserve(n, wait)),
        1 => (6u32..60, max_wait()).prop_map(|(n, wait)| Call::Reserve(n, wait)),
        1 => max_wait().prop_map(|wait| Call::Reserve(0, wait)),
        1 => (-1.0f64..1.0).prop_map(Call::SetRate),
        1 => Just(Call::Look),
    ]
}

fn trace() -> impl Strategy<Value = Vec<(Gap, Call)>> {
    proptest::collection::vec((gap(), call()), 1..120)
}

/// Declares [`Tally`]: counters summed over the traces, and maxima.
macro_rules! tally {
    (sums { $($(#[$sum_doc:meta])* $sum:ident,)* } maxima { $($(#[$max_doc:meta])* $max:ident,)* }) => {
        /// What the traces exercised.
        #[derive(Clone, Copy, Debug, Default)]
        struct Tally {
            $($(#[$sum_doc])* $sum: u64,)*
            $($(#[$max_doc])* $max: u64,)*
        }

        impl Tally {
            fn add(&mut self, other: &Tally) {
                $(self.$sum += other.$sum;)*
                $(self.$max = self.$max.max(other.$max);)*
            }
        }
    };
}

tally! {
    sums {
        traces,
        /// Traces ended early: the drift would have grown past [`MAX_DRIFT`].
        ended,
        calls,
        compared,
        admitted,
        refused,
        /// Admissions whose wait `reserve` returned exactly (the schedule seen).
        seen,
        /// Admissions within the burst, whose wait does not show the schedule.
        unseen,
        restarts,
        multi_permit,
        set_rates,
        /// Decisions made with the implementation's schedule known only to within some drift.
        drifting,
        /// Decisions within that drift of their boundary, which followed the implementation.
        followed,
    }
    maxima {
        /// The widest tolerance applied to a turn, in ns.
        widest,
    }
}

/// Why a call stopped the comparison.
#[derive(Debug)]
enum Stop {
    /// The implementation and the model disagree.
    Fail(String),
    /// The model can no longer say what the implementation must do within [`MAX_DRIFT`].
    Ended(String),
}

/// One limiter and its model, driven together.
struct Run {
    clock: ManualClock,
    limiter: WarmUp<ManualClock>,
    model: GuavaModel,
    burst: u64,
    /// How many ns the implementation's schedule may lie off the model's, by the roundings
    /// since it was last seen exactly.
    drift: u64,
    last_hint: u64,
    last_wait: u64,
    elapsed: u64,
    tally: Tally,
}

impl Run {
    fn new(config: &Config) -> Run {
        let clock = ManualClock::new();
        clock.set(Duration::from_nanos(ORIGIN));
        let limiter = WarmUp::builder(config.rate)
            .warm_up_period(config.period)
            .cold_factor(config.cold_factor)
            .burst(config.burst)
            .payment(config.payment)
            .start_warm(config.start_warm)
            .clock(clock.clone())
            .build()
            .expect("a valid configuration");
        let model = GuavaModel::new(
            config.rate,
            config.period,
            config.cold_factor,
            config.payment,
            config.burst,
            config.start_warm,
        );
        Run {
            clock,
            limiter,
            model,
            burst: nanos(config.burst),
            drift: 0,
            last_hint: 0,
            last_wait: 0,
            elapsed: 0,
            tally: Tally::default(),
        }
    }

    /// Ns since the limiter was built.
    fn now(&self) -> u64 {
        nanos(self.clock.now()) - ORIGIN
    }

    fn advance(&mut self, gap: Gap) {
        let curve = *self.model.curve();
        let by = match gap {
            Gap::None => 0,
            Gap::Nanos(nanos) => nanos,
            Gap::Stable(times) => (times * curve.stable) as u64,
            Gap::Cold(times) => (times * curve.cold) as u64,
            Gap::Period(times) => (times * curve.period) as u64,
            Gap::Hint => self.last_hint,
            Gap::Wait => self.last_wait,
        };
        let by = by.min(TIME_BUDGET - self.elapsed);
        self.elapsed += by;
        self.clock.advance(Duration::from_nanos(by));
    }

    fn call(&mut self, call: Call) -> Result<(), Stop> {
        let curve = *self.model.curve();
        match call {
            Call::TryAcquire => self.request(1, None),
            Call::Reserve(permits, max_wait) => {
                let max_wait = match max_wait {
                    MaxWait::Zero => Duration::ZERO,
                    MaxWait::Forever => Duration::MAX,
                    MaxWait::Nanos(nanos) => Duration::from_nanos(nanos),
                    MaxWait::Stable(times) => Duration::from_nanos((times * curve.stable) as u64),
                    MaxWait::Cold(times) => Duration::from_nanos((times * curve.cold) as u64),
                };
                self.request(permits, Some(max_wait))
            }
            Call::SetRate(exponent) => {
                self.set_rate((curve.rate * 10f64.powf(exponent)).clamp(0.5, 1e6))
            }
            Call::Look => self.check_snapshot(None),
        }
    }

    /// How many ns the implementation's turn for `permits` may lie from the model's `due`: the
    /// only difference allowed in a decision or a wait. Zero in the common case, an exact
    /// comparison.
    ///
    /// The implementation truncates the same prices to whole ns, but evaluates them in another
    /// order, from the stored permits kept as a fraction of `max`. So each truncation the model
    /// finds within rounding of a whole ns ([`guava_model::near_whole`]) may move the
    /// implementation's schedule 1 ns off the model's: those since the schedule was last seen
    /// exactly (`drift`, at most [`MAX_DRIFT`]), and those of the prices this request reads
    /// ([`GuavaModel::uncertainty`]).
    fn tolerance(&self, permits: u32) -> u64 {
        self.drift + self.model.uncertainty(permits)
    }

    /// `try_acquire` (`max_wait` `None`) or `reserve(permits, max_wait)`, checked against the
    /// model to within [`Run::tolerance`]: a refusal names its turn exactly (its retry hint),
    /// and so does an admission whose wait shows past the burst; the model then takes that turn
    /// as its own. An admission within the burst only bounds it.
    fn request(&mut self, permits: u32, max_wait: Option<Duration>) -> Result<(), Stop> {
        let now = self.now();
        let (outcome, accepted) = match max_wait {
            None => (self.limiter.try_acquire().map(|()| Duration::ZERO), 0),
            Some(max_wait) => (self.limiter.reserve(permits, max_wait), nanos(max_wait)),
        };
        if permits == 0 {
            // "Reserving 0 permits always succeeds at once and changes nothing."
            if outcome != Ok(Duration::ZERO) {
                return Err(Stop::Fail(format!("reserving 0 permits: {outcome:?}")));
            }
            return self.check_snapshot(None);
        }
        // The latest turn the request accepts: its wait, plus the burst.
        let limit = now.saturating_add(accepted).saturating_add(self.burst);
        let due = self.model.due(permits);
        let tolerance = self.tolerance(permits);
        let (mut low, mut high) = (-i128::from(tolerance), i128::from(tolerance));
        let before = self.model.clone();
        let described = |turn: &str| {
            format!(
                "{permits} permit(s) accepting a turn up to {} ns away: {turn}; the model's turn is \
                 {} ns away (± {tolerance} ns); model: {:?}",
                limit - now,
                due as i128 - now as i128,
                before
            )
        };
        self.tally.drifting += u64::from(tolerance > 0);
        self.tally.widest = self.tally.widest.max(tolerance);
        let wait = match outcome {
            Err(rejected) => {
                // A refusal names its turn exactly: `limit + retry_after`.
                let hint = nanos(rejected.retry_after());
                let turn = limit.saturating_add(hint);
                self.last_hint = hint;
                if hint == 0 || turn.abs_diff(due) > tolerance {
                    let why = format!("refused, its turn {} ns away", turn - now);
                    return Err(Stop::Fail(described(&why)));
                }
                self.tally.refused += 1;
                self.tally.followed += u64::from(due <= limit);
                self.drift = self.model.sync(permits, turn);
                self.model.refuse();
                return self.check_snapshot(None);
            }
            Ok(wait) => nanos(wait),
        };
        self.last_wait = wait;
        self.tally.admitted += 1;
        self.tally.multi_permit += u64::from(permits > 1);
        self.tally.followed += u64::from(due > limit);
        // `reserve` returns the wait less the burst: with a burst, a zero hides how far within
        // it the turn was.
        if wait > 0 || self.burst == 0 {
            let turn = now + wait + self.burst;
            if turn > now {
                if turn.abs_diff(due) > tolerance {
                    let why = format!("admitted, its turn {} ns away", turn - now);
                    return Err(Stop::Fail(described(&why)));
                }
                self.tally.seen += 1;
                self.model.sync(permits, turn);
                (low, high) = (0, 0);
            } else {
                // Passed at once: its turn had come.
                high = high.min(now as i128 - due as i128);
            }
        } else {
            self.tally.unseen += 1;
            high = high.min((now + self.burst) as i128 - due as i128);
        }
        if high < low {
            let why = "admitted within the burst".to_string();
            return Err(Stop::Fail(described(&why)));
        }
        self.admit(now, permits, low, high)
    }

    /// The model's admission of a request the implementation admitted, its schedule lying
    /// `low..=high` ns off the model's: evaluated at both ends and at the boundary where the
    /// request restarts the schedule, continuing from the nearest to the model's own.
    fn admit(&mut self, now: u64, permits: u32, low: i128, high: i128) -> Result<(), Stop> {
        let due = self.model.due(permits);
        let just_due = now as i128 - due as i128;
        let mut shifts = [
            low,
            high,
            0.clamp(low, high),
            just_due.clamp(low, high),
            (just_due + 1).clamp(low, high),
        ];
        shifts.sort_unstable();
        let outcomes: Vec<(i128, GuavaModel, Admission)> = shifts
            .iter()
            .map(|&shift| {
                let mut model = self.model.clone();
                model.shift(shift as i64);
                let admission = model.admit(now, permits);
                (shift, model, admission)
            })
            .collect();
        let chosen = outcomes
            .iter()
            .find(|(shift, ..)| *shift == 0.clamp(low, high))
            .expect("evaluated")
            .clone();
        let next = chosen.1.due(1);
        // The drift after the admission: how far the next turn moves across the range, and the
        // roundings of this admission's own truncations.
        let spread = outcomes
            .iter()
            .map(|(_, model, _)| model.due(1).abs_diff(next))
            .max()
            .unwrap_or(0);
        let roundings = outcomes
            .iter()
            .map(|(.., a)| a.roundings)
            .max()
            .unwrap_or(0);
        let drift = spread + roundings;
        if drift > MAX_DRIFT {
            return Err(Stop::Ended(format!(
                "admitted {permits} at {now} ns with the schedule known to {low}..={high} ns: the \
                 next turn spreads over {spread} ns ({outcomes:?})"
            )));
        }
        let stored = outcomes.iter().map(|(_, model, _)| model.stored());
        let range = (
            stored.clone().fold(f64::INFINITY, f64::min),
            stored.fold(f64::NEG_INFINITY, f64::max),
        );
        self.tally.restarts += u64::from(chosen.2.restart);
        self.model = chosen.1;
        self.drift = drift;
        self.check_snapshot(Some(range))
    }

    /// `set_rate` in both. Paying now, the implementation re-prices the permit due next: it
    /// takes off the old price as it recomputes it and adds the new one, each truncated to whole
    /// ns, so its schedule may move 1 ns off the model's for each of those truncations the model
    /// finds within rounding of a whole ns: added to the drift.
    fn set_rate(&mut self, rate: f64) -> Result<(), Stop> {
        if let Err(error) = self.limiter.set_rate(rate) {
            return Err(Stop::Fail(format!("set_rate({rate}): {error}")));
        }
        self.drift += self.model.set_rate(rate);
        self.tally.set_rates += 1;
        if self.limiter.permits_per_second() != rate {
            let rate_now = self.limiter.permits_per_second();
            return Err(Stop::Fail(format!("set_rate({rate}) left {rate_now}")));
        }
        if self.drift > MAX_DRIFT {
            return Err(Stop::Ended(format!(
                "drift {} ns after set_rate",
                self.drift
            )));
        }
        self.check_snapshot(None)
    }

    /// The snapshot against the model: the curve's constants, and the stored permits within
    /// `stored` (the range an admission's evaluation left) or the range the drift allows, to
    /// [`STORED_PRECISION`].
    /// While the schedule is busy the snapshot reports the stored permits themselves, and the
    /// model takes them as its own.
    fn check_snapshot(&mut self, stored: Option<(f64, f64)>) -> Result<(), Stop> {
        let now = self.now();
        let snapshot = self.limiter.snapshot();
        let curve = *self.model.curve();
        let drift = self.drift + self.model.uncertainty(1);
        let (low, high) = stored.unwrap_or_else(|| {
            // Credited idle time falls as the schedule moves later.
            let at = |shift: i64| {
                let mut model = self.model.clone();
                model.shift(shift);
                model.stored_at(now)
            };
            (at(drift as i64), at(-(drift as i64)))
        });
        let tolerance = STORED_PRECISION * curve.max;
        let reported = snapshot.stored_tokens;
        if !(low - tolerance <= reported && reported <= high + tolerance) {
            return Err(Stop::Fail(format!(
                "snapshot at {now} ns: {reported} stored, the model {low}..={high} (max {}); \
                 model: {:?}",
                curve.max, self.model
            )));
        }
        // Guava's constants: the same formulas, to rounding.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        if !close(snapshot.max_tokens, curve.max)
            || !close(snapshot.warning_tokens, curve.threshold)
        {
            return Err(Stop::Fail(format!(
                "curve: max {} and warning level {}, the model {} and {}",
                snapshot.max_tokens, snapshot.warning_tokens, curve.max, curve.threshold
            )));
        }
        if self.model.busy_at(now, drift) {
            self.model.set_stored(reported);
        }
        Ok(())
    }
}

/// Drives `config` through `trace`, comparing every call.
fn compare(config: &Config, trace: &[(Gap, Call)]) -> Result<Tally, TestCaseError> {
    let mut run = Run::new(config);
    run.tally.traces = 1;
    if let Err(Stop::Fail(why)) = run.check_snapshot(None) {
        return Err(TestCaseError::fail(format!("when built: {why}")));
    }
    for (i, &(gap, call)) in trace.iter().enumerate() {
        run.advance(gap);
        run.tally.calls += 1;
        match run.call(call) {
            Ok(()) => run.tally.compared += 1,
            Err(Stop::Ended(why)) => {
                eprintln!("trace ended at call {i}: {why}");
                run.tally.ended += 1;
                break;
            }
            Err(Stop::Fail(why)) => {
                return Err(TestCaseError::fail(format!(
                    "call {i} ({gap:?}, {call:?}) at {} ns: {why}",
                    run.now()
                )));
            }
        }
    }
    Ok(run.tally)
}

/// The property: on every configuration and trace, `WarmUp` decides, waits and stores as the
/// model says, to the roundings stated above. Deterministic (a fixed seed, no regression
/// file); then checks that the traces exercised what they should and seldom ended early.
#[test]
fn every_decision_wait_and_level_matches_the_model() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: CASES,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(SEED),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let tally = RefCell::new(Tally::default());
    let result = runner.run(&(config(), trace()), |(config, trace)| {
        let run = compare(&config, &trace)?;
        tally.borrow_mut().add(&run);
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    let tally = tally.into_inner();
    eprintln!("{tally:#?}");
    assert_eq!(tally.traces, u64::from(CASES));
    assert!(tally.ended * 50 <= tally.traces, "{tally:?}");
    assert!(tally.compared * 100 >= tally.calls * 98, "{tally:?}");
    for (what, count) in [
        ("admissions", tally.admitted),
        ("refusals", tally.refused),
        ("seen waits", tally.seen),
        ("unseen waits", tally.unseen),
        ("restarts", tally.restarts),
        ("multi-permit admissions", tally.multi_permit),
        ("set_rate calls", tally.set_rates),
        ("decisions under drift", tally.drifting),
    ] {
        assert!(count >= 100, "only {count} {what}: {tally:?}");
    }
}

/// Eight blocking acquires as Guava's tests make them, through both: reserve, then sleep as
/// long as told. Returns the waits in µs, rounded to the nearest. Each wait is also the model's
/// to the ns, or 1 ns off: both truncate the same price, which here is mostly a whole number
/// of ns, and the implementation may evaluate it just below.
fn eight_acquires(run: &mut Run) -> Vec<u64> {
    (0..8)
        .map(|_| {
            run.advance(Gap::Wait);
            let before = run.now();
            let expected = run.model.clone().request(before, 1, u64::MAX).unwrap();
            run.request(1, Some(Duration::MAX)).expect("agrees");
            let wait = run.last_wait;
            assert!(
                wait.abs_diff(expected) <= 1,
                "at {before} ns: {wait} vs {expected}"
            );
            (run.last_wait + 500) / 1000
        })
        .collect()
}

fn guava(rate: f64, cold_factor: f64) -> Run {
    Run::new(&Config {
        rate,
        period: Duration::from_secs(4),
        cold_factor,
        burst: Duration::ZERO,
        payment: Payment::Later,
        start_warm: false,
    })
}

#[test]
fn the_model_reproduces_guavas_vectors() {
    guava_model::self_check();
}

/// TV-30 (Guava's `testWarmUp`) through `WarmUp`, paying later with no burst: every wait as
/// the model's, and exactly Guava's, to the µs.
#[test]
fn tv30_through_warm_up_matches_the_model() {
    let mut run = guava(2.0, 3.0);
    let cold = [
        0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000, 500_000,
    ];
    assert_eq!(eight_acquires(&mut run), cold);
    run.advance(Gap::Nanos(4_500_000_000));
    assert_eq!(eight_acquires(&mut run), cold);
    run.advance(Gap::Nanos(2_500_000_000));
    assert_eq!(
        eight_acquires(&mut run),
        [
            0, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000
        ]
    );
}

/// TV-31 (Guava's `testWarmUpWithColdFactor`) through `WarmUp`, and
/// `testWarmUpWithColdFactor1`: a factor of 1 is a plain rate limiter, the same spacing cold
/// or warm.
#[test]
fn tv31_through_warm_up_matches_the_model() {
    let mut run = guava(5.0, 10.0);
    let cold = [
        0, 1_752_500, 1_257_500, 762_500, 300_227, 200_000, 200_000, 200_000,
    ];
    assert_eq!(eight_acquires(&mut run), cold);
    run.advance(Gap::Nanos(4_200_000_000));
    assert_eq!(eight_acquires(&mut run), cold);
    run.advance(Gap::Nanos(1_200_000_000));
    assert_eq!(
        eight_acquires(&mut run),
        [
            0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000
        ]
    );

    let mut run = guava(5.0, 1.0);
    let flat = [
        0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000,
    ];
    assert_eq!(eight_acquires(&mut run), flat);
    run.advance(Gap::Nanos(340_000_000));
    assert_eq!(eight_acquires(&mut run), flat);
}

/// google/guava#3552, where admit departs from Guava on purpose: 5 requests per second at 10
/// per second, factor 3 (cold: 3.3 per second). Refused in part at first; in the model and in
/// `WarmUp`, the gaps after a refusal do not cool the limiter, so it warms up and admits every
/// request, either way of paying.
#[test]
fn a_load_refused_in_part_warms_up_as_the_model_says() {
    for payment in [Payment::Now, Payment::Later] {
        let mut run = Run::new(&Config {
            rate: 10.0,
            period: Duration::from_secs(10),
            cold_factor: 3.0,
            burst: Duration::ZERO,
            payment,
            start_warm: false,
        });
        let mut admitted = Vec::new();
        for _ in 0..60 {
            let before = run.tally.admitted;
            for _ in 0..5 {
                run.request(1, None).expect("agrees");
                run.advance(Gap::Nanos(200_000_000));
            }
            admitted.push(run.tally.admitted - before);
        }
        assert!(admitted[0] < 5, "{payment:?}: {admitted:?}");
        assert!(
            admitted[30..].iter().all(|&n| n == 5),
            "{payment:?}: {admitted:?}"
        );
        assert!(
            run.tally.refused > 0 && run.drift == 0,
            "{payment:?}: {:?}",
            run.tally
        );
    }
}
