//! The M/M/c queue: Erlang B, Erlang C, waits and staffing.

use super::loss::{Rates, warm_start};
use super::{ErlangError, QueueModel};

/// An M/M/c queue: Poisson arrivals at `arrival_rate`, exponential service at `service_rate`
/// per server, first come first served, unlimited queue.
///
/// Rates share one time unit (per second, say), and every time (waits, `t`) is in that unit.
/// [`with_servers`](Self::with_servers) evaluates one number of servers `c` for the queries
/// ([`Staffed`]); [`QueueModel`] asks the same of any `c`, as of [`ErlangA`](super::ErlangA).
///
/// Everything is computed without overflow or cancellation at any load (see the
/// [module docs](super)), and bad input is an [`ErlangError`], never NaN.
///
/// # Example
///
/// ```
/// use admit::erlang::{MMc, QueueModel, Target};
///
/// // 200 calls an hour, 3 minutes each (20 an hour per agent): 10 erlangs.
/// let centre = MMc::new(200.0, 20.0)?;
/// assert_eq!(centre.offered_load(), 10.0);
/// let p = centre.with_servers(14)?.prob_wait();
/// assert!((p - 0.17413193359504984).abs() < 1e-15);
/// // Answer 80 % of calls within 20 seconds (1/180 hour).
/// let agents = centre.min_servers(Target::ServiceLevel { within: 20.0 / 3600.0, at_least: 0.8 })?;
/// assert_eq!(agents, 14); // 13 agents answer 79.6 %
/// # Ok::<(), admit::erlang::ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MMc {
    rates: Rates,
    load: f64,
}

/// A staffing goal for [`MMc::min_servers`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Target {
    /// At least a fraction `at_least` (in `[0, 1)`) of arrivals wait no longer than `within`:
    /// `P(Wq ≤ within) ≥ at_least`. With `within = 0` this is a bound on the probability of
    /// waiting at all.
    ServiceLevel {
        /// The wait bound, in the rates' time unit.
        within: f64,
        /// The fraction to meet, in `[0, 1)`.
        at_least: f64,
    },
    /// The mean wait over all arrivals (the average speed of answer) is at most `at_most` (> 0).
    MeanWait {
        /// The mean wait bound, in the rates' time unit.
        at_most: f64,
    },
}

/// Adjustments [`MMc::min_servers_with`] applies to the queueing answer.
///
/// # Example
///
/// ```
/// use admit::erlang::{MMc, StaffingOptions, Target};
///
/// let queue = MMc::new(100.0, 1.0)?;
/// let options = StaffingOptions { max_occupancy: Some(0.8), ..StaffingOptions::default() };
/// let target = Target::ServiceLevel { within: 0.1, at_least: 0.9 };
/// assert_eq!(queue.min_servers_with(target, &options)?, 125); // 100 erlangs at 80 %
/// # Ok::<(), admit::erlang::ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StaffingOptions {
    /// Keep each server busy at most this fraction of the time, in `(0, 1]`: at least
    /// `⌈load / max_occupancy⌉` servers.
    pub max_occupancy: Option<f64>,
    /// The fraction of staffed servers that is not available (breaks, failed replicas), in
    /// `[0, 1)`: the answer is divided by `1 − shrinkage` and rounded up.
    pub shrinkage: f64,
    /// Never fewer than this many servers (at least 1 is always returned).
    pub min_servers: u64,
    /// Give up with [`ErlangError::Unreachable`] beyond this many servers (default: far beyond
    /// any answer a valid target can have).
    pub max_servers: Option<u64>,
}

impl Default for StaffingOptions {
    fn default() -> Self {
        StaffingOptions {
            max_occupancy: None,
            shrinkage: 0.0,
            min_servers: 1,
            max_servers: None,
        }
    }
}

/// The largest offered load supported: a search walks `O(√a)` servers (0.2 s at this load),
/// and server counts stay exact in `f64`.
pub(crate) const MAX_LOAD: f64 = 1e12;

pub(crate) fn finite(value: f64, field: &'static str) -> Result<f64, ErlangError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ErlangError::NonFinite { field })
    }
}

/// A finite, non-negative input (−0.0 counts as 0).
pub(crate) fn non_negative(value: f64, field: &'static str) -> Result<f64, ErlangError> {
    if finite(value, field)? < 0.0 {
        return Err(ErlangError::Negative { field });
    }
    Ok(value + 0.0) // −0.0 + 0.0 = +0.0
}

/// A finite, positive rate.
pub(crate) fn positive_rate(value: f64, field: &'static str) -> Result<f64, ErlangError> {
    if finite(value, field)? <= 0.0 {
        return Err(ErlangError::NonPositiveRate { field });
    }
    Ok(value)
}

/// A probability target in `[0, 1)`.
pub(crate) fn target(value: f64, field: &'static str) -> Result<f64, ErlangError> {
    if !(0.0..1.0).contains(&finite(value, field)?) {
        return Err(ErlangError::TargetOutOfRange { target: value });
    }
    Ok(value + 0.0)
}

/// The validated rates of a queue (finiteness of both first, then signs) and its load.
pub(crate) fn rates(arrival_rate: f64, service_rate: f64) -> Result<(Rates, f64), ErlangError> {
    finite(arrival_rate, "arrival_rate")?;
    finite(service_rate, "service_rate")?;
    let rates = Rates {
        arrival: non_negative(arrival_rate, "arrival_rate")?,
        service: positive_rate(service_rate, "service_rate")?,
    };
    let load = rates.load();
    if load > MAX_LOAD {
        return Err(ErlangError::OutOfRange {
            field: "offered_load",
            value: load,
        });
    }
    Ok((rates, load))
}

/// The built-in search cap: `a + 60√a + 100` servers, far beyond any valid target's answer
/// (past `a + 40√a` Erlang B is below 1e-300).
pub(crate) fn search_cap(load: f64) -> u64 {
    (load + 60.0 * load.sqrt() + 100.0).ceil() as u64
}

/// `c·μ − λ` with a single rounding: its sign is an exact stability test.
fn spare_capacity(servers: u64, rates: Rates) -> f64 {
    (servers as f64).mul_add(rates.service, -rates.arrival)
}

impl MMc {
    /// A queue with `arrival_rate` λ ≥ 0 and `service_rate` μ > 0 (per server).
    ///
    /// # Errors
    ///
    /// [`NonFinite`](ErlangError::NonFinite), [`Negative`](ErlangError::Negative) (λ < 0),
    /// [`NonPositiveRate`](ErlangError::NonPositiveRate) (μ ≤ 0), or
    /// [`OutOfRange`](ErlangError::OutOfRange) for an offered load `λ/μ` above 10¹² erlangs.
    /// λ = 0 is a valid, empty system.
    pub fn new(arrival_rate: f64, service_rate: f64) -> Result<Self, ErlangError> {
        let (rates, load) = rates(arrival_rate, service_rate)?;
        Ok(MMc { rates, load })
    }

    /// Erlang B: the probability that an arrival finds all `servers` busy in a system with no
    /// queue (arrivals finding no free server are lost). Defined in overload too.
    ///
    /// # Errors
    ///
    /// [`ZeroServers`](ErlangError::ZeroServers).
    pub fn erlang_b(&self, servers: u64) -> Result<f64, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        Ok(self.rates.erlang_b(servers))
    }

    /// The system with `servers` servers, evaluated once for several queries.
    ///
    /// # Errors
    ///
    /// [`ZeroServers`](ErlangError::ZeroServers), or [`Unstable`](ErlangError::Unstable) if
    /// `λ ≥ servers · μ`.
    pub fn with_servers(&self, servers: u64) -> Result<Staffed, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        let spare = spare_capacity(servers, self.rates);
        let rho = self.load / servers as f64;
        if spare <= 0.0 {
            return Err(ErlangError::Unstable { rho });
        }
        Ok(Staffed::new(
            *self,
            servers,
            self.rates.erlang_b(servers),
            spare,
        ))
    }

    /// The fewest servers that meet `target`.
    ///
    /// One upward pass of the Erlang B recurrence from a warm start: `O(√a)` steps. It
    /// compares the tail `P(Wq > t)` with `1 − at_least`, which stays exact for targets as
    /// close to 1 as `1 − 1e-12`.
    ///
    /// # Errors
    ///
    /// A target outside its range ([`TargetOutOfRange`](ErlangError::TargetOutOfRange),
    /// [`NonFinite`](ErlangError::NonFinite), [`Negative`](ErlangError::Negative),
    /// [`OutOfRange`](ErlangError::OutOfRange) for a mean wait of 0).
    pub fn min_servers(&self, target: Target) -> Result<u64, ErlangError> {
        self.min_servers_with(target, &StaffingOptions::default())
    }

    /// [`min_servers`](Self::min_servers), adjusted by `options`: at least
    /// `⌈load / max_occupancy⌉` and `min_servers` servers, then divided by `1 − shrinkage`.
    ///
    /// # Errors
    ///
    /// As [`min_servers`](Self::min_servers); [`OutOfRange`](ErlangError::OutOfRange) for an
    /// option outside its range; [`Unreachable`](ErlangError::Unreachable) if the answer
    /// exceeds `max_servers`.
    pub fn min_servers_with(
        &self,
        target: Target,
        options: &StaffingOptions,
    ) -> Result<u64, ErlangError> {
        let test = Test::new(target)?;
        options.validate()?;
        let cap = options.max_servers.unwrap_or_else(|| search_cap(self.load));
        let servers = if self.rates.arrival == 0.0 {
            1
        } else {
            self.first_meeting(&test, cap)?
        };
        options.apply(servers, self.load, cap)
    }

    /// The first `c` (up to `cap`) at which `test` holds, by one warm-started upward pass.
    fn first_meeting(&self, test: &Test, cap: u64) -> Result<u64, ErlangError> {
        let (start, mut b) = warm_start(self.load, self.load);
        for servers in start + 1..=cap {
            b = self.rates.step(servers, b);
            let spare = spare_capacity(servers, self.rates);
            if spare > 0.0 && test.holds(&Staffed::new(*self, servers, b, spare)) {
                return Ok(servers);
            }
        }
        Err(ErlangError::Unreachable { max_servers: cap })
    }
}

/// Each query evaluates [`with_servers`](MMc::with_servers), so its errors are that one's:
/// [`ZeroServers`](ErlangError::ZeroServers), or [`Unstable`](ErlangError::Unstable) if
/// `λ ≥ servers · μ`.
impl QueueModel for MMc {
    /// The average number of busy servers.
    fn offered_load(&self) -> f64 {
        self.load
    }

    /// [`Staffed::service_level`] at `servers`: `P(Wq ≤ within)`.
    fn service_level(&self, servers: u64, within: f64) -> Result<f64, ErlangError> {
        self.with_servers(servers)?.service_level(within)
    }

    /// [`min_servers`](MMc::min_servers) for [`Target::ServiceLevel`].
    fn min_servers_for_service_level(
        &self,
        within: f64,
        at_least: f64,
    ) -> Result<u64, ErlangError> {
        self.min_servers(Target::ServiceLevel { within, at_least })
    }

    /// Erlang C, [`Staffed::prob_wait`] at `servers`.
    fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.with_servers(servers)?.prob_wait())
    }

    /// [`Staffed::mean_wait`] at `servers`.
    fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.with_servers(servers)?.mean_wait())
    }

    /// [`Staffed::occupancy`] at `servers`, `a / servers`.
    fn occupancy(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.with_servers(servers)?.occupancy())
    }
}

/// A staffing target in the form the search tests.
enum Test {
    /// `P(Wq > within) ≤ tail`.
    Tail { within: f64, tail: f64 },
    /// `E[Wq] ≤ at_most`.
    MeanWait { at_most: f64 },
}

impl Test {
    fn new(target: Target) -> Result<Self, ErlangError> {
        match target {
            Target::ServiceLevel { within, at_least } => {
                finite(within, "within")?;
                finite(at_least, "at_least")?;
                let within = non_negative(within, "within")?;
                let at_least = self::target(at_least, "at_least")?;
                // Exact for at_least ≥ 0.5 (Sterbenz); the tail keeps full relative accuracy.
                Ok(Test::Tail {
                    within,
                    tail: 1.0 - at_least,
                })
            }
            Target::MeanWait { at_most } => {
                let at_most = non_negative(at_most, "at_most")?;
                if at_most == 0.0 {
                    return Err(ErlangError::OutOfRange {
                        field: "at_most",
                        value: at_most,
                    });
                }
                Ok(Test::MeanWait { at_most })
            }
        }
    }

    fn holds(&self, system: &Staffed) -> bool {
        match *self {
            Test::Tail { within, tail } => system.tail(within) <= tail,
            Test::MeanWait { at_most } => system.mean_wait() <= at_most,
        }
    }
}

impl StaffingOptions {
    fn validate(&self) -> Result<(), ErlangError> {
        finite(self.shrinkage, "shrinkage")?;
        if let Some(occupancy) = self.max_occupancy {
            finite(occupancy, "max_occupancy")?;
            if !(occupancy > 0.0 && occupancy <= 1.0) {
                return Err(ErlangError::OutOfRange {
                    field: "max_occupancy",
                    value: occupancy,
                });
            }
        }
        if !(0.0..1.0).contains(&self.shrinkage) {
            return Err(ErlangError::OutOfRange {
                field: "shrinkage",
                value: self.shrinkage,
            });
        }
        Ok(())
    }

    fn apply(&self, servers: u64, load: f64, cap: u64) -> Result<u64, ErlangError> {
        let mut servers = servers.max(self.min_servers).max(1);
        if let Some(occupancy) = self.max_occupancy {
            servers = servers.max((load / occupancy).ceil() as u64);
        }
        if self.shrinkage > 0.0 {
            // The fewest n with n·(1 − shrinkage) ≥ servers; the division can round an ulp up.
            let available = 1.0 - self.shrinkage;
            let mut staffed = (servers as f64 / available).ceil() as u64;
            if (staffed - 1) as f64 * available >= servers as f64 {
                staffed -= 1;
            }
            servers = staffed;
        }
        if servers > cap {
            return Err(ErlangError::Unreachable { max_servers: cap });
        }
        Ok(servers)
    }
}

/// An [`MMc`] queue with a given, stable number of servers: every quantity from one Erlang B
/// evaluation (that value is [`MMc::erlang_b`]). Created by [`MMc::with_servers`].
///
/// # Example
///
/// ```
/// use admit::erlang::MMc;
///
/// let api = MMc::new(5000.0, 50.0)?.with_servers(115)?; // 5000 req/s, 20 ms each
/// assert!(api.prob_wait() < 0.1);
/// assert!(api.service_level(0.005)? > 0.99);
/// println!("p99 wait: {:.3} ms", api.wait_percentile(0.99)? * 1000.0);
/// # Ok::<(), admit::erlang::ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Staffed {
    queue: MMc,
    servers: u64,
    /// `r = c·μ − λ`, the rate at which a waiting arrival's wait ends.
    spare: f64,
    /// `C`, the probability of waiting.
    wait: f64,
    /// `1 − C`, computed without cancellation.
    no_wait: f64,
}

impl Staffed {
    fn new(queue: MMc, servers: u64, erlang_b: f64, spare: f64) -> Self {
        let capacity = servers as f64 * queue.rates.service;
        let idle = spare / capacity; // s = 1 − ρ
        let rho = queue.load / servers as f64;
        let denominator = idle + rho * erlang_b;
        // Both are within an ulp of [0, 1]; rounding must not push them past 1.
        Staffed {
            queue,
            servers,
            spare,
            wait: (erlang_b / denominator).min(1.0),
            no_wait: (idle * (1.0 - erlang_b) / denominator).min(1.0),
        }
    }

    /// The number of servers.
    #[cfg(feature = "metrics")]
    pub(crate) fn servers(&self) -> u64 {
        self.servers
    }

    /// Erlang C: the probability of waiting at all.
    pub fn prob_wait(&self) -> f64 {
        self.wait
    }

    /// `P(Wq > t)` for a validated `t`.
    fn tail(&self, t: f64) -> f64 {
        self.wait * (-self.spare * t).exp()
    }

    /// `P(Wq ≤ t)`.
    ///
    /// # Errors
    ///
    /// A `t` that is not finite and non-negative.
    pub fn service_level(&self, t: f64) -> Result<f64, ErlangError> {
        let t = non_negative(t, "t")?;
        // (1 − C) − C·expm1(−rt): both terms are non-negative, nothing cancels. The sum can
        // round an ulp past 1.
        Ok((self.no_wait - self.wait * (-self.spare * t).exp_m1()).min(1.0))
    }

    /// `P(Wq > t)`.
    ///
    /// # Errors
    ///
    /// A `t` that is not finite and non-negative.
    pub fn prob_wait_exceeds(&self, t: f64) -> Result<f64, ErlangError> {
        Ok(self.tail(non_negative(t, "t")?))
    }

    /// `E[Wq] = C / r`.
    pub fn mean_wait(&self) -> f64 {
        self.wait / self.spare
    }

    /// `E[Wq | Wq > 0] = 1 / r`: how long those who wait, wait on average.
    pub fn mean_wait_given_wait(&self) -> f64 {
        1.0 / self.spare
    }

    /// `E[Lq] = λ · E[Wq]`.
    pub fn mean_queue_len(&self) -> f64 {
        self.queue.rates.arrival * self.mean_wait()
    }

    /// `a / c`.
    pub fn occupancy(&self) -> f64 {
        self.queue.load / self.servers as f64
    }

    /// The smallest `t` with `P(Wq ≤ t) ≥ q`.
    ///
    /// # Errors
    ///
    /// `q` outside `[0, 1)`.
    pub fn wait_percentile(&self, q: f64) -> Result<f64, ErlangError> {
        let q = target(q, "q")?;
        // Compared through the tails (1 − q is exact for q ≥ 0.5): no wait is needed when the
        // fraction that waits at all is within 1 − q.
        if self.wait <= 1.0 - q {
            return Ok(0.0);
        }
        Ok(((self.wait.ln() - (-q).ln_1p()) / self.spare).max(0.0))
    }
}
