//! Erlang-A (M/M/N+M): an M/M/N queue whose customers abandon after an exponential patience.

use super::ErlangError;
use super::loss::Rates;
use super::mmc::{finite, non_negative, positive_rate, rates, search_cap, target};

/// The longest stretch of growing terms the series may have: `(λ − Nμ)/θ`, the overload in
/// units of the abandonment rate. Beyond it (deep overload with very patient customers)
/// queries return [`ErlangError::OutOfRange`] for `abandon_rate` rather than sum millions of
/// terms and lose accuracy.
const MAX_GROWING_TERMS: f64 = 1e6;

/// Erlang-A, the M/M/N+M queue (Garnett, Mandelbaum & Reiman, 2002): Poisson arrivals at
/// `arrival_rate`, exponential service at `service_rate` per server, and customers who give up
/// waiting after an exponential patience with mean `1 / abandon_rate`.
///
/// Unlike [`MMc`](super::MMc) it is stable for any load: impatient customers leave, so fewer
/// servers than the offered load is allowed. As `abandon_rate → 0` it tends to Erlang C.
///
/// # Example
///
/// ```
/// use admit::erlang::{ErlangA, ImpatientTarget};
///
/// // 10 erlangs, patience 2 service times on average, 8 agents: fewer than the load.
/// let queue = ErlangA::new(10.0, 1.0, 0.5)?;
/// let p_abandon = queue.prob_abandon(8)?;
/// assert!((p_abandon - 0.22721842746115274).abs() < 1e-13);
/// // Answer 80 % of all offered calls within 0.2 time units:
/// let n = queue.min_servers(ImpatientTarget::ServedWithin { within: 0.2, at_least: 0.8 })?;
/// assert!(queue.service_level(n, 0.2)? >= 0.8);
/// # Ok::<(), admit::erlang::ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErlangA {
    rates: Rates,
    abandon_rate: f64,
    load: f64,
}

/// A staffing goal for [`ErlangA::min_servers`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ImpatientTarget {
    /// At least a fraction `at_least` (in `[0, 1)`) of all offered customers is served after
    /// waiting at most `within` (abandonment counts as failure).
    ServedWithin {
        /// The wait bound.
        within: f64,
        /// The fraction to meet, in `[0, 1)`.
        at_least: f64,
    },
    /// At most a fraction `at_most` (in `(0, 1)`) of customers abandons.
    AbandonAtMost {
        /// The largest acceptable abandonment probability.
        at_most: f64,
    },
}

/// `A(x, y) = Σ t_j` and `D(x, y) = Σ j·t_j` with `t_0 = 1`, `t_j = t_{j−1}·y/(x + j)`, as
/// `(A, D)` scaled by `e^(−log_scale)`: summed relative to the largest term, so a heavy overload
/// (terms far beyond `f64::MAX`) stays representable.
#[derive(Clone, Copy, Debug)]
struct Series {
    a: f64,
    d: f64,
    log_scale: f64,
}

impl Series {
    /// Sums the series; the caller has checked that `x` and `y` are finite and that
    /// `y − x ≤ MAX_GROWING_TERMS`, so the loop ends: after about `y − x` growing terms the
    /// ratio `y/(x + j)` falls below 1 and the terms decay at least geometrically.
    fn sum(x: f64, y: f64) -> Series {
        const RESCALE_ABOVE: f64 = 1e280;
        let (mut term, mut a, mut d, mut log_scale) = (1.0f64, 1.0f64, 0.0f64, 0.0f64);
        // Kahan compensation: the sums can run to a million terms.
        let (mut a_carry, mut d_carry) = (0.0f64, 0.0f64);
        let mut j = 0.0f64;
        loop {
            j += 1.0;
            term *= y / (x + j);
            kahan(&mut a, &mut a_carry, term);
            kahan(&mut d, &mut d_carry, j * term);
            if a > RESCALE_ABOVE {
                term /= RESCALE_ABOVE;
                a /= RESCALE_ABOVE;
                d /= RESCALE_ABOVE;
                a_carry /= RESCALE_ABOVE;
                d_carry /= RESCALE_ABOVE;
                log_scale += RESCALE_ABOVE.ln();
            }
            // Once terms decay (ratio < 1), the rest is bounded by a geometric series with the
            // next ratio q: Σ t ≤ t·q/(1−q), Σ i·t ≤ t·(j·q/(1−q) + q/(1−q)²).
            let q = y / (x + j + 1.0);
            if q < 1.0 {
                let rest = term * q / (1.0 - q);
                let rest_weighted = term * (j * q / (1.0 - q) + q / ((1.0 - q) * (1.0 - q)));
                if rest <= 1e-17 * a && rest_weighted <= 1e-17 * d.max(f64::MIN_POSITIVE) {
                    break;
                }
            }
            if term == 0.0 {
                break;
            }
        }
        Series { a, d, log_scale }
    }
}

/// Adds `value` to `sum`, carrying the rounding error in `carry` (Kahan summation).
fn kahan(sum: &mut f64, carry: &mut f64, value: f64) {
    let adjusted = value - *carry;
    let next = *sum + adjusted;
    *carry = (next - *sum) - adjusted;
    *sum = next;
}

/// The state for `N` servers.
#[derive(Clone, Copy, Debug)]
struct AtServers {
    /// `x = Nμ/θ`.
    x: f64,
    /// `y = λ/θ`.
    y: f64,
    series: Series,
    /// `P(W > 0)`.
    wait: f64,
}

impl ErlangA {
    /// A queue with `arrival_rate` λ ≥ 0, `service_rate` μ > 0 per server and `abandon_rate`
    /// θ > 0 (the reciprocal of the mean patience).
    ///
    /// # Errors
    ///
    /// [`NonFinite`](ErlangError::NonFinite), [`Negative`](ErlangError::Negative) (λ < 0),
    /// [`NonPositiveRate`](ErlangError::NonPositiveRate) (μ or θ ≤ 0; without abandonment use
    /// [`MMc`](super::MMc)), or [`OutOfRange`](ErlangError::OutOfRange) for an offered load
    /// above 10¹² erlangs.
    pub fn new(
        arrival_rate: f64,
        service_rate: f64,
        abandon_rate: f64,
    ) -> Result<Self, ErlangError> {
        finite(abandon_rate, "abandon_rate")?;
        let (rates, load) = rates(arrival_rate, service_rate)?;
        let abandon_rate = positive_rate(abandon_rate, "abandon_rate")?;
        Ok(ErlangA {
            rates,
            abandon_rate,
            load,
        })
    }

    /// The offered load `a = λ/μ`, in erlangs.
    pub fn offered_load(&self) -> f64 {
        self.load
    }

    /// The state at `servers` servers, whose Erlang B is `erlang_b`.
    fn at_with(&self, servers: u64, erlang_b: f64) -> Result<AtServers, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        let x = servers as f64 * self.rates.service / self.abandon_rate;
        let y = self.rates.arrival / self.abandon_rate;
        if !(x.is_finite() && y.is_finite()) || y - x > MAX_GROWING_TERMS {
            return Err(ErlangError::OutOfRange {
                field: "abandon_rate",
                value: self.abandon_rate,
            });
        }
        let series = Series::sum(x, y);
        // P(W > 0) = A·E / (1 + (A − 1)·E) = E / (E + (1 − E)/A), with A scaled.
        let inverse_a = (-series.log_scale).exp() / series.a;
        let wait = if erlang_b == 0.0 {
            0.0
        } else {
            (erlang_b / (erlang_b + (1.0 - erlang_b) * inverse_a)).min(1.0)
        };
        Ok(AtServers { x, y, series, wait })
    }

    fn at(&self, servers: u64) -> Result<AtServers, ErlangError> {
        self.at_with(servers, self.rates.erlang_b(servers))
    }

    /// `P(W > 0)`: the probability that an arrival finds all `servers` busy and waits.
    ///
    /// # Errors
    ///
    /// [`ZeroServers`](ErlangError::ZeroServers), or [`OutOfRange`](ErlangError::OutOfRange)
    /// for `abandon_rate` when `(λ − Nμ)/θ` exceeds 10⁶: a deep overload with very patient
    /// customers, where the series behind every quantity would need more than a million
    /// growing terms (nearly everyone waits there, and `P(Ab)` approaches `1 − Nμ/λ`).
    pub fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.at(servers)?.wait)
    }

    /// `P(Ab | W > 0)`: the probability that a customer who waits abandons.
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait).
    pub fn prob_abandon_given_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(Self::abandon_given_wait(&self.at(servers)?))
    }

    fn abandon_given_wait(state: &AtServers) -> f64 {
        if state.y == 0.0 {
            return 1.0 / (state.x + 1.0); // the limit as λ → 0
        }
        // D/(yA): the textbook 1/(ρA) + 1 − 1/ρ cancels as θ → 0.
        (state.series.d / (state.y * state.series.a)).clamp(0.0, 1.0)
    }

    fn abandon(state: &AtServers) -> f64 {
        state.wait * Self::abandon_given_wait(state)
    }

    /// `P(Ab)`: the probability that a customer abandons.
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait).
    pub fn prob_abandon(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(Self::abandon(&self.at(servers)?))
    }

    /// `E[W]`: the mean time in queue over all arrivals (served or abandoning), `P(Ab)/θ`.
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait).
    pub fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.prob_abandon(servers)? / self.abandon_rate)
    }

    /// `E[Q] = λ · E[W]`: the mean number waiting.
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait).
    pub fn mean_queue_len(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.rates.arrival * self.mean_wait(servers)?)
    }

    /// The fraction of time each server is busy: `λ(1 − P(Ab)) / (Nμ)`.
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait).
    pub fn occupancy(&self, servers: u64) -> Result<f64, ErlangError> {
        let abandon = self.prob_abandon(servers)?;
        let busy = self.rates.arrival * (1.0 - abandon) / (servers as f64 * self.rates.service);
        Ok(busy.min(1.0))
    }

    /// `A(x', z)/A(x', y) · e^(y − z − θt·x')` for `x' = x` or `x + 1`, with `z = y·e^(−θt)`,
    /// `at_y = A(x', y)` and the exponent formed without cancellation (`y − z = −y·expm1(−θt)`).
    fn decay(&self, y: f64, x: f64, at_y: Series, t: f64) -> f64 {
        let theta_t = self.abandon_rate * t;
        let z = y * (-theta_t).exp();
        let exponent = -y * (-theta_t).exp_m1() - theta_t * x;
        let at_z = Series::sum(x, z);
        at_z.a / at_y.a * (at_z.log_scale - at_y.log_scale + exponent).exp()
    }

    /// `P(V > t)` for a validated `t`.
    fn virtual_wait_exceeds(&self, state: &AtServers, t: f64) -> f64 {
        if state.wait == 0.0 {
            return 0.0;
        }
        (state.wait * self.decay(state.y, state.x, state.series, t)).clamp(0.0, 1.0)
    }

    /// `P(V > t)`: the probability that an infinitely patient arrival would wait longer than `t`
    /// (the offered wait).
    ///
    /// # Errors
    ///
    /// As [`prob_wait`](Self::prob_wait), or a `t` that is not finite and non-negative.
    pub fn prob_virtual_wait_exceeds(&self, servers: u64, t: f64) -> Result<f64, ErlangError> {
        let t = non_negative(t, "t")?;
        Ok(self.virtual_wait_exceeds(&self.at(servers)?, t))
    }

    /// `P(W ≤ t)`, counting an abandonment before `t` as within: `1 − P(V > t)·e^(−θt)`.
    ///
    /// # Errors
    ///
    /// As [`prob_virtual_wait_exceeds`](Self::prob_virtual_wait_exceeds).
    pub fn prob_wait_within(&self, servers: u64, t: f64) -> Result<f64, ErlangError> {
        let t = non_negative(t, "t")?;
        let exceeds = self.virtual_wait_exceeds(&self.at(servers)?, t);
        // (1 − P(V>t)) − P(V>t)·expm1(−θt): the second term keeps its digits when θt is tiny.
        let within = (1.0 - exceeds) - exceeds * (-self.abandon_rate * t).exp_m1();
        Ok(within.clamp(0.0, 1.0))
    }

    /// The service level over all offered customers: the probability of being served after
    /// waiting at most `t` (abandonment counts as failure).
    ///
    /// # Errors
    ///
    /// As [`prob_virtual_wait_exceeds`](Self::prob_virtual_wait_exceeds).
    pub fn service_level(&self, servers: u64, t: f64) -> Result<f64, ErlangError> {
        let t = non_negative(t, "t")?;
        Ok(self.served_within(&self.at(servers)?, t))
    }

    /// The service level for a validated `t`.
    fn served_within(&self, state: &AtServers, t: f64) -> f64 {
        if state.wait == 0.0 {
            return 1.0;
        }
        // 1 − P(W>0) + P(W>0)·(x/(x+1))·[A(x+1,y) − A(x+1,z)·e^(y−z−θtx)·z/y] / A(x,y),
        // with z/y = e^(−θt) folded into the exponent and A(x+1, ·) taken relative to
        // A(x+1, y).
        let x = state.x;
        let next = Series::sum(x + 1.0, state.y);
        let bracket = 1.0 - self.decay(state.y, x + 1.0, next, t);
        let ratio = next.a / state.series.a * (next.log_scale - state.series.log_scale).exp();
        let served = (1.0 - state.wait) + state.wait * (x / (x + 1.0)) * ratio * bracket;
        served.clamp(0.0, 1.0)
    }

    /// The fewest servers that meet `target`, by an upward walk from a lower bound (at least
    /// `⌈at_least · a⌉` servers can serve a fraction `at_least`; abandonment is at least
    /// `1 − N/a`). Erlang B advances one step per server; the series is re-summed, about
    /// `√(Nμ/θ)` terms per step.
    ///
    /// # Errors
    ///
    /// A target outside its range (`at_least` in `[0, 1)`, `at_most` in `(0, 1)`: both
    /// [`TargetOutOfRange`](ErlangError::TargetOutOfRange)); the errors of
    /// [`prob_wait`](Self::prob_wait) for a server count on the way;
    /// [`Unreachable`](ErlangError::Unreachable) beyond `a + 60√a + 100` servers.
    pub fn min_servers(&self, target: ImpatientTarget) -> Result<u64, ErlangError> {
        let cap = search_cap(self.load);
        let start = match target {
            ImpatientTarget::ServedWithin { within, at_least } => {
                finite(within, "within")?;
                finite(at_least, "at_least")?;
                non_negative(within, "within")?;
                self::target(at_least, "at_least")? * self.load
            }
            ImpatientTarget::AbandonAtMost { at_most } => {
                if self::target(at_most, "at_most")? == 0.0 {
                    return Err(ErlangError::TargetOutOfRange { target: at_most });
                }
                (1.0 - at_most) * self.load
            }
        };
        let start = (start.ceil() as u64).max(1);
        let mut erlang_b = self.rates.erlang_b(start);
        for servers in start..=cap {
            if servers > start {
                erlang_b = self.rates.step(servers, erlang_b);
            }
            let state = self.at_with(servers, erlang_b)?;
            let met = match target {
                ImpatientTarget::ServedWithin { within, at_least } => {
                    self.served_within(&state, within) >= at_least
                }
                ImpatientTarget::AbandonAtMost { at_most } => Self::abandon(&state) <= at_most,
            };
            if met {
                return Ok(servers);
            }
        }
        Err(ErlangError::Unreachable { max_servers: cap })
    }
}
