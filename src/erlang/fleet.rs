//! A fleet of replicas behind a load balancer: the queue as the balancer makes it.

use super::mmc::{non_negative, target};
use super::round_robin::ErlangArrivals;
use super::{ErlangError, MMc, QueueModel, Staffed, Target};

/// How a load balancer spreads requests over a fleet's replicas, which decides where they
/// queue.
///
/// For the same load and replicas the waits rank `Pooled` < `LeastRequest` < `RoundRobin` <
/// `Random`: for 99 % of requests within ten mean service times at 64 erlangs, single-server
/// replicas number 65 pooled, 87 round-robin and 119 random.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Balancing {
    /// One queue for every server: a request waits only while all servers of the fleet are
    /// busy, and takes the first that frees (a balancer that queues, or a shared work queue).
    /// Erlang C, exact.
    Pooled,
    /// Each replica in turn (HAProxy's and nginx's default, Envoy's `ROUND_ROBIN`, IPVS `rr`):
    /// each replica receives every `n`-th request and queues on its own. The GI/M/k queue
    /// with Erlang-`n` interarrival times, exact (Takács).
    RoundRobin,
    /// A replica drawn at random (kube-proxy's iptables mode): each replica is an M/M/k queue
    /// fed `λ/n`. Exact.
    Random,
    /// The replica with the fewest requests in flight (HAProxy's `leastconn`, Envoy's
    /// `LEAST_REQUEST`, Istio's default): a request waits only while every server is busy,
    /// then behind its own replica's queue. An approximation: the probability of waiting is
    /// Erlang C's, and the waiting work spread evenly over the replicas makes the wait of those
    /// who wait exponential of rate `kμ(1 − ρⁿ)`. Exact for one replica; against a simulation
    /// of the balancer it overstates the waits, never understates them.
    LeastRequest,
}

/// A fleet of replicas of `per_replica` servers each behind a [`Balancing`] policy, fed Poisson
/// arrivals at `arrival_rate` with exponential service at `service_rate` per server.
///
/// As a [`QueueModel`], `servers` count in whole replicas: a count that is not a multiple of
/// `per_replica` is rounded up to one (`c` servers are `⌈c / per_replica⌉` replicas), and
/// [`min_servers_for_service_level`](QueueModel::min_servers_for_service_level) answers a
/// multiple of it. [`Balancing::Pooled`] is [`MMc`] at those servers.
///
/// # Example
///
/// ```
/// use admit::erlang::{Balancing, ErlangError, Fleet, MMc, QueueModel};
///
/// // 64 erlangs of single-server replicas; 99 % of requests wait at most 5 service times.
/// let replicas = |balancing| -> Result<u64, ErlangError> {
///     Fleet::new(64.0, 1.0, 1, balancing)?.min_servers_for_service_level(5.0, 0.99)
/// };
/// let pooled = replicas(Balancing::Pooled)?;
/// assert_eq!(pooled, MMc::new(64.0, 1.0)?.min_servers_for_service_level(5.0, 0.99)?);
/// assert!(pooled < replicas(Balancing::LeastRequest)?);
/// assert!(replicas(Balancing::LeastRequest)? < replicas(Balancing::RoundRobin)?);
/// assert!(replicas(Balancing::RoundRobin)? < replicas(Balancing::Random)?);
///
/// // Replicas of 4 servers: 17 replicas are 68 servers.
/// let fleet = Fleet::new(64.0, 1.0, 4, Balancing::RoundRobin)?;
/// assert_eq!(fleet.service_level(65, 1.0), fleet.service_level(68, 1.0));
/// # Ok::<(), ErlangError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fleet {
    pooled: MMc,
    arrival: f64,
    service: f64,
    per_replica: u64,
    balancing: Balancing,
}

/// The queue at a number of replicas: a probability of waiting and, for those who wait, an
/// exponential wait of `rate`.
enum State {
    Erlang(Staffed),
    Split { wait: f64, rate: f64 },
}

impl State {
    fn service_level(&self, t: f64) -> Result<f64, ErlangError> {
        match self {
            State::Erlang(staffed) => staffed.service_level(t),
            State::Split { wait, rate } => {
                let t = non_negative(t, "within")?;
                Ok(((1.0 - wait) - wait * (-rate * t).exp_m1()).min(1.0))
            }
        }
    }

    /// `P(W > t)`, what a search compares with `1 − at_least`.
    fn tail(&self, t: f64) -> Result<f64, ErlangError> {
        match self {
            State::Erlang(staffed) => staffed.prob_wait_exceeds(t),
            State::Split { wait, rate } => Ok(wait * (-rate * non_negative(t, "within")?).exp()),
        }
    }

    fn prob_wait(&self) -> f64 {
        match self {
            State::Erlang(staffed) => staffed.prob_wait(),
            State::Split { wait, .. } => *wait,
        }
    }

    fn mean_wait(&self) -> f64 {
        match self {
            State::Erlang(staffed) => staffed.mean_wait(),
            State::Split { wait, rate } => wait / rate,
        }
    }
}

/// The most replicas a search tries: server counts stay exact in `f64`.
const MAX_SERVERS: u64 = 1 << 53;

impl Fleet {
    /// The most servers per replica [`Balancing::RoundRobin`] takes: each evaluation sums one
    /// term per server.
    pub const MAX_ROUND_ROBIN_PER_REPLICA: u64 = 10_000;

    /// A fleet of replicas of `per_replica` servers behind `balancing`, offered
    /// `arrival_rate` λ ≥ 0 with service at `service_rate` μ > 0 per server.
    ///
    /// # Errors
    ///
    /// As [`MMc::new`]; [`OutOfRange`](ErlangError::OutOfRange) for `per_replica` of 0, or
    /// above [`MAX_ROUND_ROBIN_PER_REPLICA`](Self::MAX_ROUND_ROBIN_PER_REPLICA) with
    /// [`Balancing::RoundRobin`].
    pub fn new(
        arrival_rate: f64,
        service_rate: f64,
        per_replica: u64,
        balancing: Balancing,
    ) -> Result<Self, ErlangError> {
        let pooled = MMc::new(arrival_rate, service_rate)?;
        let most = match balancing {
            Balancing::RoundRobin => Self::MAX_ROUND_ROBIN_PER_REPLICA,
            _ => MAX_SERVERS,
        };
        if !(1..=most).contains(&per_replica) {
            return Err(ErlangError::OutOfRange {
                field: "per_replica",
                value: per_replica as f64,
            });
        }
        Ok(Fleet {
            pooled,
            arrival: arrival_rate + 0.0,
            service: service_rate,
            per_replica,
            balancing,
        })
    }

    /// The queue at `replicas` replicas (at least 1).
    fn at(&self, replicas: u64) -> Result<State, ErlangError> {
        let k = self.per_replica;
        let servers = replicas.saturating_mul(k).min(MAX_SERVERS);
        let n = replicas as f64;
        let capacity = k as f64 * self.service;
        self.stable(servers)?;
        Ok(match self.balancing {
            Balancing::Pooled => State::Erlang(self.pooled.with_servers(servers)?),
            Balancing::Random => {
                State::Erlang(MMc::new(self.arrival / n, self.service)?.with_servers(k)?)
            }
            _ if self.arrival == 0.0 => State::Split {
                wait: 0.0,
                rate: capacity,
            },
            Balancing::RoundRobin => {
                let arrivals = ErlangArrivals {
                    replicas: n,
                    arrival: self.arrival,
                };
                let u = arrivals.one_minus_root(capacity);
                let wait =
                    arrivals
                        .prob_wait(k, self.service, u)
                        .ok_or(ErlangError::OutOfRange {
                            field: "per_replica",
                            value: k as f64,
                        })?;
                State::Split {
                    wait,
                    rate: capacity * u,
                }
            }
            Balancing::LeastRequest => {
                let pooled = self.pooled.with_servers(servers)?;
                State::Split {
                    wait: pooled.prob_wait(),
                    // 1 − ρⁿ without cancellation.
                    rate: capacity * -(n * pooled.occupancy().ln()).exp_m1(),
                }
            }
        })
    }

    /// Erlang C's stability test at `servers`, `c·μ − λ > 0` with one rounding, without its
    /// Erlang B.
    fn stable(&self, servers: u64) -> Result<(), ErlangError> {
        if (servers as f64).mul_add(self.service, -self.arrival) <= 0.0 {
            return Err(ErlangError::Unstable {
                rho: self.pooled.offered_load() / servers as f64,
            });
        }
        Ok(())
    }

    /// The replicas that hold `servers`, at least one.
    fn replicas(&self, servers: u64) -> Result<u64, ErlangError> {
        if servers == 0 {
            return Err(ErlangError::ZeroServers);
        }
        Ok(servers.div_ceil(self.per_replica))
    }

    /// Whether `replicas` meet a tail of at most `tail` at `within`; an unstable count does not.
    fn meets(&self, replicas: u64, within: f64, tail: f64) -> Result<bool, ErlangError> {
        match self.at(replicas) {
            Ok(state) => Ok(state.tail(within)? <= tail),
            Err(ErlangError::Unstable { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// Each query evaluates the fleet at `⌈servers / per_replica⌉` replicas, so its errors are
/// [`ZeroServers`](ErlangError::ZeroServers), or [`Unstable`](ErlangError::Unstable) if
/// `λ ≥ replicas · per_replica · μ`.
impl QueueModel for Fleet {
    fn offered_load(&self) -> f64 {
        self.pooled.offered_load()
    }

    fn service_level(&self, servers: u64, within: f64) -> Result<f64, ErlangError> {
        self.at(self.replicas(servers)?)?.service_level(within)
    }

    /// The fewest whole replicas, in servers. Pooled, it is Erlang C's answer rounded up to
    /// whole replicas; otherwise a galloping search up from the pooled answer (a lower bound
    /// for every policy) and a bisection: `O(log n)` evaluations. A
    /// [`RoundRobin`](Balancing::RoundRobin) evaluation sums `per_replica` terms.
    fn min_servers_for_service_level(
        &self,
        within: f64,
        at_least: f64,
    ) -> Result<u64, ErlangError> {
        let pooled = self
            .pooled
            .min_servers(Target::ServiceLevel { within, at_least })?;
        let k = self.per_replica;
        let mut low = pooled.div_ceil(k);
        if self.balancing == Balancing::Pooled || self.arrival == 0.0 {
            return Ok(low * k);
        }
        // Validated by the pooled search above.
        let tail = 1.0 - target(at_least, "at_least")?;
        let most = MAX_SERVERS / k;
        if self.meets(low, within, tail)? {
            return Ok(low * k);
        }
        let mut step = 1u64;
        let mut high = low;
        loop {
            if high == most {
                return Err(ErlangError::Unreachable {
                    max_servers: most.saturating_mul(k),
                });
            }
            high = low.saturating_add(step).min(most);
            if self.meets(high, within, tail)? {
                break;
            }
            low = high;
            step = step.saturating_mul(2);
        }
        // `low` fails, `high` meets.
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if self.meets(middle, within, tail)? {
                high = middle;
            } else {
                low = middle;
            }
        }
        Ok(high * k)
    }

    fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.at(self.replicas(servers)?)?.prob_wait())
    }

    fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError> {
        Ok(self.at(self.replicas(servers)?)?.mean_wait())
    }

    /// `a / (replicas · per_replica)`.
    fn occupancy(&self, servers: u64) -> Result<f64, ErlangError> {
        let servers = self
            .replicas(servers)?
            .saturating_mul(self.per_replica)
            .min(MAX_SERVERS);
        self.stable(servers)?;
        Ok(self.pooled.offered_load() / servers as f64)
    }
}
