//! A replica behind round-robin: it receives every `n`-th arrival of a Poisson stream of rate
//! λ, so its interarrival times are Erlang-`n` (`A*(s) = (λ / (λ + s))ⁿ`), and it queues on its
//! own for its `k` servers of rate μ: the GI/M/k queue, whose waits are known exactly.
//!
//! - `σ`, the root in `(0, 1)` of `σ = A*(kμ(1 − σ))`, gives the wait of those who wait:
//!   exponential of rate `kμ(1 − σ)`.
//! - The probability of waiting is Takács' (1962): with `βⱼ = A*(jμ)` and
//!   `Cⱼ = Πᵢ≤ⱼ βᵢ / (1 − βᵢ)`,
//!   `P(W > 0) = 1 / ((1 − σ)·(1/(1 − σ) + Σⱼ₌₁..ₖ C(k, j) / (Cⱼ(1 − βⱼ)) · (k(1 − βⱼ) − j) /
//!   (k(1 − σ) − j)))`. At `k = 1` it is `σ`; at `n = 1` (Poisson arrivals) Erlang C.
//!
//! Each term is summed in logarithms (the binomials and `1/Cⱼ` overflow `f64` from `k` of a
//! few hundred), against the largest so far, in one pass that allocates nothing.

/// The most Newton steps the root takes; it converges in a few dozen from any stable queue.
const ROOT_STEPS: u32 = 200;

/// The Erlang-`n` arrivals of one round-robin replica: `n` replicas share a Poisson stream of
/// `arrival` per unit time.
#[derive(Clone, Copy, Debug)]
pub(super) struct ErlangArrivals {
    /// The number of replicas the stream is dealt over, `n ≥ 1`.
    pub(super) replicas: f64,
    /// The whole stream's rate λ.
    pub(super) arrival: f64,
}

impl ErlangArrivals {
    /// `ln A*(s)`, `−n·ln(1 + s/λ)`: never underflows.
    fn ln_transform(&self, s: f64) -> f64 {
        -self.replicas * (s / self.arrival).ln_1p()
    }

    /// `u = 1 − σ` for `capacity = kμ`, stable (`λ/n < kμ`): Newton's method on the convex
    /// `g(u) = A*(capacity·u) − (1 − u)` from `u = 1`, where `g > 0`, falls monotonically to
    /// the root. `g` is evaluated as `u + expm1(ln A*)`, exact near `u = 0`.
    pub(super) fn one_minus_root(&self, capacity: f64) -> f64 {
        let mut u: f64 = 1.0;
        for _ in 0..ROOT_STEPS {
            let ln_a = self.ln_transform(capacity * u);
            let g = u + ln_a.exp_m1();
            let slope =
                1.0 - capacity * self.replicas / capacity.mul_add(u, self.arrival) * ln_a.exp();
            if g <= 0.0 || slope <= 0.0 {
                break;
            }
            let next = u - g / slope;
            if !(next < u && next > 0.0) {
                break;
            }
            u = next;
        }
        u
    }

    /// Takács' probability of waiting for `servers` = k servers of rate `service`, given
    /// `u = 1 − σ` (from [`one_minus_root`](Self::one_minus_root) at `k·service`). `None` if
    /// rounding left the sum without a positive value (not seen in tests up to k = 10 000).
    pub(super) fn prob_wait(&self, servers: u64, service: f64, u: f64) -> Option<f64> {
        let k = servers as f64;
        let ku = k * u;
        // The running sum, scaled by e^(−max): starts with the 1/(1 − σ) term.
        let mut max = -u.ln();
        let mut sum = 1.0;
        let mut ln_binomial = 0.0;
        let mut ln_c = 0.0;
        for j in 1..=servers {
            let jf = j as f64;
            let ln_beta = self.ln_transform(jf * service);
            let beta = ln_beta.exp();
            let ln_one_minus_beta = (-ln_beta.exp_m1()).ln();
            ln_binomial += ((k - jf + 1.0) / jf).ln();
            ln_c += ln_beta - ln_one_minus_beta;
            let ratio = self.ratio(k, jf, service, beta, ku);
            if ratio == 0.0 {
                continue;
            }
            let ln_term = ln_binomial - ln_c - ln_one_minus_beta + ratio.abs().ln();
            let term = ratio.signum();
            if ln_term > max {
                sum = sum * (max - ln_term).exp() + term;
                max = ln_term;
            } else {
                sum += term * (ln_term - max).exp();
            }
        }
        if !(sum > 0.0 && sum.is_finite()) {
            return None;
        }
        // P = 1 / ((1 − σ) · e^max · sum).
        Some((-(max + sum.ln() + u.ln())).exp().min(1.0))
    }

    /// `(k(1 − βⱼ) − j) / (k(1 − σ) − j)`. Both vanish together where `j = k(1 − σ)` (there
    /// `βⱼ = σ`): within a relative 1e-7 of it, the limit `1 − h'(j)` of
    /// `h(y) = k(1 − A*(yμ))`, whose fixed point is `k(1 − σ)`.
    fn ratio(&self, k: f64, j: f64, service: f64, beta: f64, ku: f64) -> f64 {
        let gap = ku - j;
        if gap.abs() <= 1e-7 * j {
            let slope = k * service * self.replicas / j.mul_add(service, self.arrival) * beta;
            1.0 - slope
        } else {
            (k * (1.0 - beta) - j) / gap
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::ErlangArrivals;

    fn arrivals(replicas: f64, arrival: f64) -> ErlangArrivals {
        ErlangArrivals { replicas, arrival }
    }

    /// `bound-and-order.md` §7: the p99 sojourn of a single-server round-robin replica is
    /// `ln 100 / (μ(1 − σ))` (GI/M/1 sojourns are exponential): 10.3, 13.7 and 26.6 mean
    /// service times.
    #[test]
    fn single_server_sojourns_match_the_reference_table() {
        for (replicas, rho, p99) in [(4.0, 0.7, 10.3), (8.0, 0.8, 13.7), (8.0, 0.9, 26.6)] {
            let u = arrivals(replicas, rho * replicas).one_minus_root(1.0);
            let sojourn = 100f64.ln() / u;
            assert!(
                (sojourn - p99).abs() < 0.05,
                "{replicas} at {rho}: {sojourn}"
            );
        }
    }

    /// At one server Takács' sum is σ; with one replica (Poisson arrivals) the root is ρ.
    #[test]
    fn the_sum_reduces_to_the_root_and_the_root_to_rho() {
        for (replicas, rho) in [(2.0, 0.5), (4.0, 0.7), (64.0, 0.95), (1000.0, 0.3)] {
            let queue = arrivals(replicas, rho * replicas);
            let u = queue.one_minus_root(1.0);
            let wait = queue.prob_wait(1, 1.0, u).unwrap();
            assert!(
                (wait - (1.0 - u)).abs() < 1e-13,
                "{replicas}, {rho}: {wait}"
            );
        }
        for rho in [0.01, 0.5, 0.99, 0.999_999] {
            let u = arrivals(1.0, rho * 3.0).one_minus_root(3.0);
            assert!(
                (u - (1.0 - rho)).abs() < 1e-12 * (1.0 - rho).max(1e-3),
                "{rho}: {u}"
            );
        }
    }

    /// Against 80-digit values of Takács' formula (Python `decimal`, bisection for σ).
    #[test]
    fn takacs_matches_high_precision_values() {
        for (replicas, servers, rho, expected) in [
            (4.0, 8, 0.8, 0.329_712_856_380_311_2),
            (10.0, 16, 0.8, 0.160_249_058_291_050_43),
            (50.0, 64, 0.9, 0.162_679_516_566_503_98),
            (100.0, 128, 0.95, 0.306_767_924_323_845_2),
            (3.0, 256, 0.9, 0.024_893_987_498_537_613),
            (10.0, 1024, 0.95, 0.016_073_115_302_182),
            (1000.0, 64, 0.8, 0.007_498_264_435_486_950_5),
        ] {
            let queue = arrivals(replicas, rho * replicas * servers as f64);
            let u = queue.one_minus_root(servers as f64);
            let wait = queue.prob_wait(servers, 1.0, u).unwrap();
            assert!(
                ((wait - expected) / expected).abs() < 1e-9,
                "{replicas} × {servers} at {rho}: {wait} vs {expected}"
            );
        }
    }
}
