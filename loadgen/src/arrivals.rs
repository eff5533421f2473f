//! Open-loop Poisson arrivals over a [`Trace`].
//!
//! The process is non-homogeneous, with the trace's rate `λ(t)`, and is drawn by a time change
//! (inversion of the cumulative rate `Λ(t) = ∫₀ᵗ λ`): the points `E₁, E₁+E₂, …` of a unit-rate
//! Poisson process (`Eᵢ` exponential with mean 1) are mapped through `Λ⁻¹`. `Λ` is linear on a
//! constant segment and quadratic on a ramp, so `Λ⁻¹` has a closed form on each segment. Unlike
//! thinning, it needs no bound on the rate, draws exactly one random number per arrival however
//! far the rate varies (a 10× spike costs no rejected candidates), and spends no draws on
//! segments whose rate is zero.

use std::time::Duration;

use rand::SeedableRng;
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;

use crate::trace::Trace;

/// One request of a run: its index (0, 1, 2, … in time order), when it is due, from the
/// start of the run, and which attempt at it this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arrival {
    /// The arrival's rank, from 0.
    pub index: u64,
    /// When the request is due, from the start of the run; for a retry, when it is sent.
    pub at: Duration,
    /// 0 for the first attempt, `k` for the `k`-th retry ([`Retry`](crate::Retry)).
    pub attempt: u32,
}

impl Arrival {
    /// The second of the run the arrival falls in (0 for the first second).
    pub fn second(&self) -> usize {
        usize::try_from(self.at.as_secs()).unwrap_or(usize::MAX)
    }
}

/// The arrivals of a non-homogeneous Poisson process over a [`Trace`], in time order, from a
/// seeded generator: the same trace and seed give the same arrivals (PCG-64 MCG, whose stream
/// `rand_pcg` keeps stable across versions, and `rand_distr`'s exponential sampler).
///
/// ```
/// use std::time::Duration;
/// use admit_loadgen::Trace;
///
/// let trace = Trace::constant(50.0, Duration::from_secs(10))?;
/// let arrivals: Vec<_> = trace.arrivals(7).collect();
/// assert_eq!(arrivals, trace.arrivals(7).collect::<Vec<_>>());
/// assert!(arrivals.iter().all(|a| a.at < trace.duration()));
/// # Ok::<(), admit_loadgen::TraceError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Arrivals {
    trace: Trace,
    rng: Pcg64Mcg,
    /// The segment the last arrival fell in; `segments().len()` once done.
    segment: usize,
    /// The expected arrivals from the segment's start to the last arrival: `Λ` within the
    /// segment.
    mass: f64,
    /// The seconds into the segment of the last arrival (never decreases within a segment).
    into: f64,
    next_index: u64,
}

impl Arrivals {
    /// Arrivals over `trace` from `seed`; [`Trace::arrivals`] says the same.
    pub fn new(trace: Trace, seed: u64) -> Arrivals {
        Arrivals {
            trace,
            rng: Pcg64Mcg::seed_from_u64(seed),
            segment: 0,
            mass: 0.0,
            into: 0.0,
            next_index: 0,
        }
    }

    /// The trace the arrivals follow.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }
}

impl Iterator for Arrivals {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        let mut gap: f64 = Exp1.sample(&mut self.rng);
        loop {
            let segment = *self.trace.segments().get(self.segment)?;
            let length = segment.duration().as_secs_f64();
            let target = self.mass + gap;
            if target < segment.mass(length) {
                let into = segment.time_of_mass(target).max(self.into);
                let at = self.trace.segment_start(self.segment)? + Duration::from_secs_f64(into);
                // Rounding could put the last arrival on the segment's end, where the next
                // one begins: it belongs to this one.
                if at
                    < self
                        .trace
                        .segment_start(self.segment + 1)
                        .unwrap_or(Duration::MAX)
                {
                    self.mass = target;
                    self.into = into;
                    let index = self.next_index;
                    self.next_index += 1;
                    return Some(Arrival {
                        index,
                        at,
                        attempt: 0,
                    });
                }
            }
            // The unit-rate process moves past this segment's mass: carry the rest of the
            // gap into the next segment.
            gap = (target - segment.mass(length)).max(0.0);
            self.segment += 1;
            self.mass = 0.0;
            self.into = 0.0;
        }
    }
}

impl Trace {
    /// Open-loop Poisson arrivals over this trace, reproducible from `seed`: see
    /// [`Arrivals`].
    pub fn arrivals(&self, seed: u64) -> Arrivals {
        Arrivals::new(self.clone(), seed)
    }
}
