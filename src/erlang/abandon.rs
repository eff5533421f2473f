//! Erlang-A (M/M/N+M): an M/M/N queue whose customers abandon after an exponential patience.

use super::loss::{Rates, warm_start};
use super::mmc::{finite, non_negative, positive_rate, rates, search_cap, target};
use super::{ErlangError, QueueModel};

/// The longest series [`ErlangA::min_servers`] plans to sum at one server count: a
/// sixty-fourth of its terms, so that the twenty or so evaluations of a search (three sums
/// each) fit in them.
const EVALUATION_TERMS: f64 = (ErlangA::SEARCH_TERMS / 64) as f64;

/// Erlang-A, the M/M/N+M queue (Garnett, Mandelbaum & Reiman, 2002): Poisson arrivals at
/// `arrival_rate`, exponential service at `service_rate` per server, and customers who give up
/// waiting after an exponential patience with mean `1 / abandon_rate`.
///
/// Unlike [`MMc`](super::MMc) it is stable for any load: impatient customers leave, so fewer
/// servers than the offered load is allowed. As `abandon_rate → 0` it tends to Erlang C.
///
/// # Cost
///
/// Every quantity sums a series whose length grows with the overload, `(λ − Nμ)/θ` terms, and
/// then with `√(λ/θ)` near `N = a` (geometrically fast once `N` is well above the load). Its
/// work is bounded: a query sums at most [`QUERY_TERMS`](Self::QUERY_TERMS) terms, and
/// [`min_servers`](Self::min_servers) at most [`SEARCH_TERMS`](Self::SEARCH_TERMS) over all
/// its evaluations and [`SEARCH_STEPS`](Self::SEARCH_STEPS) Erlang B steps. Past a bound the
/// computation stops with [`ErlangError::OutOfRange`]: for `abandon_rate` when the series is
/// too long (customers too patient for this load), for `offered_load` when the Erlang B steps
/// are. A query's Erlang B costs `O(√a)` steps, as in [`MMc`](super::MMc).
///
/// The probability of waiting, the mean wait, the service level and the occupancy are its
/// [`QueueModel`] methods.
///
/// # Query errors
///
/// A query at `servers` fails with [`ZeroServers`](ErlangError::ZeroServers), or
/// [`OutOfRange`](ErlangError::OutOfRange) for `abandon_rate` when the series would need more
/// than [`QUERY_TERMS`](Self::QUERY_TERMS) terms: a deep overload with very patient customers
/// (`(λ − Nμ)/θ` growing terms; nearly everyone waits there, and `P(Ab)` approaches
/// `1 − Nμ/λ`), or customers so patient that the `9√(λ/θ)` or so terms near `N = a` exceed it.
///
/// # Example
///
/// ```
/// use admit::erlang::{ErlangA, ImpatientTarget, QueueModel};
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

/// The work an [`ErlangA`] computation did: a measure of its cost that does not depend on the
/// machine, which the tests bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Work {
    /// Series terms summed.
    pub(super) series_terms: u64,
    /// Erlang B recurrence steps: the lengths of the walks (one stops early where B
    /// underflows to 0).
    pub(super) erlang_b_steps: u64,
    /// Server counts evaluated against the target.
    pub(super) evaluations: u64,
}

/// What a computation may still spend, and what it has spent.
#[derive(Debug)]
struct Meter {
    terms_left: u64,
    steps_left: u64,
    work: Work,
}

impl Meter {
    fn new(terms: u64, steps: u64) -> Self {
        Meter {
            terms_left: terms,
            steps_left: steps,
            work: Work::default(),
        }
    }

    /// A query's allowance: its series terms; its Erlang B walk is bounded by the load.
    fn query() -> Self {
        Meter::new(ErlangA::QUERY_TERMS, u64::MAX)
    }

    /// Takes `terms` series terms from the allowance (all that is left, at most).
    fn spend_terms(&mut self, terms: u64) {
        let spent = terms.min(self.terms_left);
        self.terms_left -= spent;
        self.work.series_terms += spent;
    }
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
    /// Sums the series for finite `x` and `y`, taking its terms from `meter`; `None` when they
    /// would exceed what is left there. The terms grow while `j < y − x − 1`, so a series with
    /// more growing terms than that is refused before summing; then the ratio `y/(x + j)` is
    /// below 1 and they decay at least geometrically.
    fn sum(x: f64, y: f64, meter: &mut Meter) -> Option<Series> {
        const RESCALE_ABOVE: f64 = 1e280;
        if y - x - 1.0 > meter.terms_left as f64 {
            return None;
        }
        let (mut term, mut a, mut d, mut log_scale) = (1.0f64, 1.0f64, 0.0f64, 0.0f64);
        // Kahan compensation: the sums can run to millions of terms.
        let (mut a_carry, mut d_carry) = (0.0f64, 0.0f64);
        let mut j = 0.0f64;
        let mut terms = 0u64;
        loop {
            if terms == meter.terms_left {
                meter.spend_terms(terms);
                return None;
            }
            terms += 1;
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
        meter.spend_terms(terms);
        Some(Series { a, d, log_scale })
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
    /// The series terms one query ([`prob_wait`](QueueModel::prob_wait),
    /// [`service_level`](QueueModel::service_level), …) may sum: `2²²`, enough for a service level
    /// (three sums) an overload of a million growing terms deep.
    pub const QUERY_TERMS: u64 = 1 << 22;

    /// The series terms one [`min_servers`](Self::min_servers) may sum over all its
    /// evaluations: `2²³`.
    pub const SEARCH_TERMS: u64 = 1 << 23;

    /// The Erlang B steps one [`min_servers`](Self::min_servers) may take: `2²⁰`, a few
    /// warm starts at a hundred million erlangs (each `10√a` steps).
    pub const SEARCH_STEPS: u64 = 1 << 20;

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

    /// The error of a series longer than its allowance: the customers are too patient (θ too
    /// small) for this load.
    fn too_patient(&self) -> ErlangError {
        ErlangError::OutOfRange {
            field: "abandon_rate",
            value: self.abandon_rate,
        }
    }

    fn sum(&self, x: f64, y: f64, meter: &mut Meter) -> Result<Series, ErlangError> {
        Series::sum(x, y, meter).ok_or_else(|| self.too_patient())
    }

    /// Erlang B at `servers`, stepped up from `below` (a smaller count and its B) where that
    /// is shorter than a warm start, taking the steps from `meter`.
    fn erlang_b(
        &self,
        servers: u64,
        below: Option<(u64, f64)>,
        meter: &mut Meter,
    ) -> Result<f64, ErlangError> {
        let (start, b) = match (warm_start(self.load, servers as f64), below) {
            ((start, _), Some((known, b))) if (start..=servers).contains(&known) => (known, b),
            (warm, _) => warm,
        };
        let steps = servers - start;
        if steps > meter.steps_left {
            return Err(ErlangError::OutOfRange {
                field: "offered_load",
                value: self.load,
            });
        }
        meter.steps_left -= steps;
        meter.work.erlang_b_steps += steps;
        Ok(self.rates.erlang_b_from(start, b, servers))
    }

    /// The state at `servers` servers, whose Erlang B is `erlang_b`.
    fn at_with(
        &self,
        servers: u64,
        erlang_b: f64,
        meter: &mut Meter,
    ) -> Result<AtServers, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        let x = servers as f64 * self.rates.service / self.abandon_rate;
        let y = self.rates.arrival / self.abandon_rate;
        if !(x.is_finite() && y.is_finite()) {
            return Err(self.too_patient());
        }
        let series = self.sum(x, y, meter)?;
        // P(W > 0) = A·E / (1 + (A − 1)·E) = E / (E + (1 − E)/A), with A scaled.
        let inverse_a = (-series.log_scale).exp() / series.a;
        let wait = if erlang_b == 0.0 {
            0.0
        } else {
            (erlang_b / (erlang_b + (1.0 - erlang_b) * inverse_a)).min(1.0)
        };
        Ok(AtServers { x, y, series, wait })
    }

    fn at(&self, servers: u64, meter: &mut Meter) -> Result<AtServers, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        let erlang_b = self.erlang_b(servers, None, meter)?;
        self.at_with(servers, erlang_b, meter)
    }

    /// `P(Ab | W > 0)`: the probability that a customer who waits abandons.
    ///
    /// # Errors
    ///
    /// The [query errors](Self#query-errors).
    pub fn prob_abandon_given_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(Self::abandon_given_wait(
            &self.at(servers, &mut Meter::query())?,
        ))
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
    /// The [query errors](Self#query-errors).
    pub fn prob_abandon(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(Self::abandon(&self.at(servers, &mut Meter::query())?))
    }

    /// `E[Q] = λ · E[W]`: the mean number waiting.
    ///
    /// # Errors
    ///
    /// The [query errors](Self#query-errors).
    pub fn mean_queue_len(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.rates.arrival * self.mean_wait(servers)?)
    }

    /// `A(x', z)/A(x', y) · e^(y − z − θt·x')` for `x' = x` or `x + 1`, with `z = y·e^(−θt)`,
    /// `at_y = A(x', y)` and the exponent formed without cancellation (`y − z = −y·expm1(−θt)`).
    /// Exactly 1 when `θt = 0` (then `z = y`), without summing.
    fn decay(
        &self,
        y: f64,
        x: f64,
        at_y: Series,
        t: f64,
        meter: &mut Meter,
    ) -> Result<f64, ErlangError> {
        let theta_t = self.abandon_rate * t;
        if theta_t == 0.0 {
            return Ok(1.0);
        }
        let z = y * (-theta_t).exp();
        let exponent = -y * (-theta_t).exp_m1() - theta_t * x;
        let at_z = self.sum(x, z, meter)?;
        Ok(at_z.a / at_y.a * (at_z.log_scale - at_y.log_scale + exponent).exp())
    }

    /// `P(V > t)` for a validated `t`.
    fn virtual_wait_exceeds(
        &self,
        state: &AtServers,
        t: f64,
        meter: &mut Meter,
    ) -> Result<f64, ErlangError> {
        if state.wait == 0.0 {
            return Ok(0.0);
        }
        let decay = self.decay(state.y, state.x, state.series, t, meter)?;
        Ok((state.wait * decay).clamp(0.0, 1.0))
    }

    /// `P(V > t)`: the probability that an infinitely patient arrival would wait longer than `t`
    /// (the offered wait).
    ///
    /// # Errors
    ///
    /// The [query errors](Self#query-errors), or a `t` that is not finite and non-negative.
    pub fn prob_virtual_wait_exceeds(&self, servers: u64, t: f64) -> Result<f64, ErlangError> {
        let t = non_negative(t, "t")?;
        let mut meter = Meter::query();
        let state = self.at(servers, &mut meter)?;
        self.virtual_wait_exceeds(&state, t, &mut meter)
    }

    /// `P(W ≤ t)`, counting an abandonment before `t` as within: `1 − P(V > t)·e^(−θt)`.
    ///
    /// # Errors
    ///
    /// As [`prob_virtual_wait_exceeds`](Self::prob_virtual_wait_exceeds).
    pub fn prob_wait_within(&self, servers: u64, t: f64) -> Result<f64, ErlangError> {
        let exceeds = self.prob_virtual_wait_exceeds(servers, t)?;
        // (1 − P(V>t)) − P(V>t)·expm1(−θt): the second term keeps its digits when θt is tiny.
        let within = (1.0 - exceeds) - exceeds * (-self.abandon_rate * t).exp_m1();
        Ok(within.clamp(0.0, 1.0))
    }

    /// The service level for a validated `t`.
    fn served_within(
        &self,
        state: &AtServers,
        t: f64,
        meter: &mut Meter,
    ) -> Result<f64, ErlangError> {
        if state.wait == 0.0 {
            return Ok(1.0);
        }
        // 1 − P(W>0) + P(W>0)·(x/(x+1))·[A(x+1,y) − A(x+1,z)·e^(y−z−θtx)·z/y] / A(x,y),
        // with z/y = e^(−θt) folded into the exponent and A(x+1, ·) taken relative to
        // A(x+1, y).
        let x = state.x;
        let next = self.sum(x + 1.0, state.y, meter)?;
        let bracket = 1.0 - self.decay(state.y, x + 1.0, next, t, meter)?;
        let ratio = next.a / state.series.a * (next.log_scale - state.series.log_scale).exp();
        let served = (1.0 - state.wait) + state.wait * (x / (x + 1.0)) * ratio * bracket;
        Ok(served.clamp(0.0, 1.0))
    }

    /// The fewest servers that meet `target`.
    ///
    /// Both targets improve as servers are added, so the search gallops from the load (down
    /// while the target is met, up while it is not, by 1, 2, 4, … servers) and then bisects:
    /// `O(log a)` evaluations, each a few series sums. It starts at the load: the answer is
    /// usually near it, and below it the series grows with the overload.
    ///
    /// It evaluates no count below a lower bound: at least `⌈at_least · a⌉` servers can serve
    /// a fraction `at_least` (the served rate is at most `Nμ`), abandonment is at least
    /// `1 − N/a`, and it skips the counts whose series it cannot afford: an estimated
    /// [`SEARCH_TERMS`](Self::SEARCH_TERMS)` / 64` terms at most, so no overload deeper than
    /// about that many growing terms (`(λ − Nμ)/θ`), and, when `9√(λ/θ)` is longer, no count
    /// at or just above the load. If a count above the bound misses the target, the answer
    /// is exact: fewer servers miss it too. If the affordable bound itself meets it, the
    /// answer may lie below, and the search refuses rather than over-staff. A target of
    /// `at_least = 0` is met by 1 server.
    ///
    /// # Errors
    ///
    /// A target outside its range (`at_least` in `[0, 1)`, `at_most` in `(0, 1)`: both
    /// [`TargetOutOfRange`](ErlangError::TargetOutOfRange));
    /// [`Unreachable`](ErlangError::Unreachable) beyond `a + 60√a + 100` servers;
    /// [`OutOfRange`](ErlangError::OutOfRange) for `abandon_rate` when the answer lies deeper
    /// in overload than the search evaluates or its series would sum more than
    /// [`SEARCH_TERMS`](Self::SEARCH_TERMS) terms, and for `offered_load` when its Erlang B
    /// would take more than [`SEARCH_STEPS`](Self::SEARCH_STEPS) steps.
    pub fn min_servers(&self, target: ImpatientTarget) -> Result<u64, ErlangError> {
        self.min_servers_counting(target).0
    }

    /// [`min_servers`](Self::min_servers), and the work it did whether it succeeds or not: at
    /// most [`SEARCH_TERMS`](Self::SEARCH_TERMS) series terms and
    /// [`SEARCH_STEPS`](Self::SEARCH_STEPS) Erlang B steps.
    pub(super) fn min_servers_counting(
        &self,
        target: ImpatientTarget,
    ) -> (Result<u64, ErlangError>, Work) {
        let mut meter = Meter::new(Self::SEARCH_TERMS, Self::SEARCH_STEPS);
        let found = self.search(target, &mut meter);
        (found, meter.work)
    }

    fn search(&self, target: ImpatientTarget, meter: &mut Meter) -> Result<u64, ErlangError> {
        let cap = search_cap(self.load);
        // The fraction of the load that must at least be staffed.
        let staffed = match target {
            ImpatientTarget::ServedWithin { within, at_least } => {
                finite(within, "within")?;
                finite(at_least, "at_least")?;
                non_negative(within, "within")?;
                if self::target(at_least, "at_least")? == 0.0 {
                    return Ok(1);
                }
                at_least
            }
            ImpatientTarget::AbandonAtMost { at_most } => {
                if self::target(at_most, "at_most")? == 0.0 {
                    return Err(ErlangError::TargetOutOfRange { target: at_most });
                }
                1.0 - at_most
            }
        };
        let proven = ((staffed * self.load).ceil() as u64).max(1);
        let lower = proven.max(self.affordable());
        if lower > cap {
            return Err(self.too_patient());
        }
        let mut servers = (self.load.ceil() as u64).max(lower).min(cap);

        // Gallop until a count that misses (kept with its Erlang B) lies below one that meets.
        let (mut missed, mut met): (Option<(u64, f64)>, Option<u64>) = (None, None);
        let mut stride = 1u64;
        let (mut miss, mut meet) = loop {
            match self.meets(servers, missed, target, meter)? {
                (true, _) => met = Some(servers),
                (false, erlang_b) => missed = Some((servers, erlang_b)),
            }
            match (missed, met) {
                (Some(miss), Some(meet)) => break (miss, meet),
                (None, Some(_)) if servers == lower => {
                    // Nothing below `proven` meets; below `affordable` is not evaluated.
                    return if lower == proven {
                        Ok(lower)
                    } else {
                        Err(self.too_patient())
                    };
                }
                (None, _) => servers = servers.saturating_sub(stride).max(lower),
                (Some(_), None) if servers == cap => {
                    return Err(ErlangError::Unreachable { max_servers: cap });
                }
                (Some(_), None) => servers = servers.saturating_add(stride).min(cap),
            }
            stride = stride.saturating_mul(2);
        };
        // Bisect: `miss.0` misses, `meet` meets.
        while meet - miss.0 > 1 {
            let middle = miss.0 + (meet - miss.0) / 2;
            let (met, erlang_b) = self.meets(middle, Some(miss), target, meter)?;
            if met {
                meet = middle;
            } else {
                miss = (middle, erlang_b);
            }
        }
        Ok(meet)
    }

    /// The fewest servers whose series the search affords, [`EVALUATION_TERMS`] at most by
    /// an estimate of the length: `(λ − Nμ)/θ` growing terms and about `9√(λ/θ)` more at or
    /// below the load; above it, about `45·N/(N − a)` (the terms decay at least like
    /// `(a/N)ʲ`). Customers so patient that `9√(λ/θ)` alone is too long leave only counts
    /// above the load.
    fn affordable(&self) -> u64 {
        let near_load = 9.0 * (self.rates.arrival / self.abandon_rate).sqrt();
        if near_load <= EVALUATION_TERMS {
            // (λ − Nμ)/θ ≤ EVALUATION_TERMS − 9√y; a negative count saturates to 0.
            let overload = (EVALUATION_TERMS - near_load) * self.abandon_rate;
            ((self.rates.arrival - overload) / self.rates.service).ceil() as u64
        } else {
            // 45·N/(N − a) ≤ EVALUATION_TERMS.
            (self.load * EVALUATION_TERMS / (EVALUATION_TERMS - 45.0)).floor() as u64 + 1
        }
    }

    /// Whether `servers` meet `target`, and their Erlang B (stepped up from `below` where that
    /// is shorter).
    fn meets(
        &self,
        servers: u64,
        below: Option<(u64, f64)>,
        target: ImpatientTarget,
        meter: &mut Meter,
    ) -> Result<(bool, f64), ErlangError> {
        let erlang_b = self.erlang_b(servers, below, meter)?;
        let state = self.at_with(servers, erlang_b, meter)?;
        let met = match target {
            ImpatientTarget::ServedWithin { within, at_least } => {
                self.served_within(&state, within, meter)? >= at_least
            }
            ImpatientTarget::AbandonAtMost { at_most } => Self::abandon(&state) <= at_most,
        };
        meter.work.evaluations += 1;
        Ok((met, erlang_b))
    }
}

/// Every query sums its series afresh, within [`QUERY_TERMS`](ErlangA::QUERY_TERMS); the
/// errors are the [query errors](ErlangA#query-errors), and a `within` that is not finite and
/// non-negative.
impl QueueModel for ErlangA {
    fn offered_load(&self) -> f64 {
        self.load
    }

    /// The probability of being served after waiting at most `within`; an abandonment counts
    /// as a failure.
    fn service_level(&self, servers: u64, within: f64) -> Result<f64, ErlangError> {
        let within = non_negative(within, "t")?;
        let mut meter = Meter::query();
        let state = self.at(servers, &mut meter)?;
        self.served_within(&state, within, &mut meter)
    }

    /// [`min_servers`](ErlangA::min_servers) for [`ImpatientTarget::ServedWithin`].
    fn min_servers_for_service_level(
        &self,
        within: f64,
        at_least: f64,
    ) -> Result<u64, ErlangError> {
        self.min_servers(ImpatientTarget::ServedWithin { within, at_least })
    }

    fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.at(servers, &mut Meter::query())?.wait)
    }

    /// `E[W] = P(Ab)/θ`, over all arrivals (served or abandoning).
    fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.prob_abandon(servers)? / self.abandon_rate)
    }

    /// `λ(1 − P(Ab)) / (Nμ)`.
    fn occupancy(&self, servers: u64) -> Result<f64, ErlangError> {
        let abandon = self.prob_abandon(servers)?;
        let busy = self.rates.arrival * (1.0 - abandon) / (servers as f64 * self.rates.service);
        Ok(busy.min(1.0))
    }
}
