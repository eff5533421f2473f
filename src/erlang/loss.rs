//! Erlang B by the warm-started forward recurrence.
//!
//! `B(0) = 1`, `B(k) = a·B(k−1) / (k + a·B(k−1))` (Jagerman 1974) is forward-stable, but it costs
//! one step per server. Starting at `k0 = ⌊min(c, a) − 10√a⌋` from the overload asymptote
//! `1 − k0/a` instead of at 0 cuts that to about `(10 + β)√a` steps for `c = a + β√a`: an error
//! in the start is multiplied by about `e^(−m²/2)` = `e^(−50)` on the way up, so it is forgotten
//! to full precision (within 7e-15 of 50-digit references up to `a = 1e7`).
//!
//! Each step is evaluated as `λB / (kμ + λB)` (`k·μ + λB` with one rounding), which is the same
//! ratio but uses the exact rates: the offered load `a = λ/μ` rounded to `f64` would otherwise
//! cost up to 1e-12 relative at ten million erlangs.

/// How many standard deviations below the mean load the recurrence starts.
const WARM_START_DEVIATIONS: f64 = 10.0;

/// Where the recurrence starts for a walk up to `upto` servers at load `a`: `(k0, B(k0))`,
/// exact for `k0 = 0`, the overload asymptote otherwise.
pub(crate) fn warm_start(a: f64, upto: f64) -> (u64, f64) {
    let start = (upto.min(a) - WARM_START_DEVIATIONS * a.sqrt()).floor();
    if start <= 0.0 {
        (0, 1.0)
    } else {
        (start as u64, 1.0 - start / a)
    }
}

/// The rates of a queue: arrivals λ and services per server μ.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rates {
    pub(crate) arrival: f64,
    pub(crate) service: f64,
}

impl Rates {
    /// The offered load `a = λ/μ`.
    pub(crate) fn load(&self) -> f64 {
        self.arrival / self.service
    }

    /// One step of the recurrence: `B(k)` from `B(k − 1)`, as `λB / (kμ + λB)`.
    #[inline]
    pub(crate) fn step(&self, k: u64, previous: f64) -> f64 {
        let lb = self.arrival * previous;
        lb / (k as f64).mul_add(self.service, lb)
    }

    /// Erlang B, `B(c, a)`: the blocking probability of `c` servers offered `a` erlangs with
    /// no queue. Defined for every `a ≥ 0`, overload included.
    pub(crate) fn erlang_b(&self, servers: u64) -> f64 {
        let (start, b) = warm_start(self.load(), servers as f64);
        self.erlang_b_from(start, b, servers)
    }

    /// `B(servers)` stepped up from `b = B(start)`, `start ≤ servers`: `servers − start` steps
    /// at most.
    ///
    /// The walk stops, with 0, once B is subnormal: that happens only above the load (from
    /// about `a + 38√a`), where B falls at every step, and a subnormal B would only lose its
    /// digits (and time: subnormal arithmetic is slow) while it crept down to 0, which takes
    /// until `2a` servers.
    pub(crate) fn erlang_b_from(&self, start: u64, mut b: f64, servers: u64) -> f64 {
        for k in start + 1..=servers {
            if b < f64::MIN_POSITIVE {
                break;
            }
            b = self.step(k, b);
        }
        if b < f64::MIN_POSITIVE { 0.0 } else { b }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(a: f64) -> Rates {
        Rates {
            arrival: a,
            service: 1.0,
        }
    }

    /// `B` from `k = 0`, the slow exact path.
    fn from_zero(servers: u64, a: f64) -> f64 {
        (1..=servers).fold(1.0, |b, k| rates(a).step(k, b))
    }

    #[test]
    fn the_warm_start_agrees_with_the_full_recurrence() {
        for (a, servers) in [
            (150.0, 120),
            (150.0, 150),
            (150.0, 200),
            (2_000.0, 1_900),
            (2_000.0, 2_100),
            (10_000.3, 10_000),
            (10_000.3, 10_400),
            (50_000.0, 49_000),
        ] {
            let warm = rates(a).erlang_b(servers);
            let exact = from_zero(servers, a);
            assert!(
                ((warm - exact) / exact).abs() < 1e-13,
                "a {a}, c {servers}: {warm} vs {exact}"
            );
        }
    }

    #[test]
    fn small_loads_start_exactly_at_zero() {
        assert_eq!(warm_start(100.0, 120.0), (0, 1.0));
        assert_eq!(rates(0.5).erlang_b(1), 1.0 / 3.0);
        assert_eq!(rates(0.0).erlang_b(3), 0.0);
    }

    #[test]
    fn far_beyond_the_load_it_underflows_to_zero() {
        assert_eq!(rates(1_000_000.0).erlang_b(2_000_000), 0.0);
        // Between about a + 38√a and 2a the recurrence would keep a subnormal B (5e-324 here)
        // for a million slow steps; the walk stops at the first one.
        assert_eq!(rates(1_000_000.0).erlang_b(1_900_000), 0.0);
        assert!(rates(1_000_000.0).erlang_b(1_037_000) >= f64::MIN_POSITIVE);
    }
}
