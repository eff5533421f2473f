//! What a capacity planner asks of a queueing model, whichever it is.

use super::ErlangError;

/// A queue with a given arrival and service rate, asked about a number of servers: what
/// [`MMc`](super::MMc) (Erlang C), [`ErlangA`](super::ErlangA) and [`Fleet`](super::Fleet)
/// share, so that a planner can staff any of them without knowing which.
///
/// The *service level* is the fraction of all arrivals served after waiting at most `within`:
/// in Erlang C everyone is served, so it is `P(Wq ≤ within)`; in Erlang A an abandonment
/// counts as a failure. Every time is in the unit of the rates.
///
/// [`MMc`](super::MMc) answers each query through [`with_servers`](super::MMc::with_servers),
/// whose [`Staffed`](super::Staffed) has the further Erlang C quantities; Erlang A's
/// abandonment is [`ErlangA`](super::ErlangA)'s own.
///
/// # Example
///
/// ```
/// use admit::erlang::{ErlangA, ErlangError, MMc, QueueModel};
///
/// /// The fewest servers for which 80 % of arrivals wait at most 0.2 time units, and the
/// /// service level there.
/// fn staff(queue: &dyn QueueModel) -> Result<(u64, f64), ErlangError> {
///     let servers = queue.min_servers_for_service_level(0.2, 0.8)?;
///     Ok((servers, queue.service_level(servers, 0.2)?))
/// }
///
/// // 10 erlangs; in Erlang A customers give up after 2 service times on average.
/// let patient = MMc::new(10.0, 1.0)?;
/// let impatient = ErlangA::new(10.0, 1.0, 0.5)?;
/// let (c, level) = staff(&patient)?;
/// assert_eq!(c, 13);
/// assert!(level >= 0.8);
/// let (a, level) = staff(&impatient)?;
/// // Here fewer servers meet it: those who leave shorten the others' waits, though each
/// // counts as a failure.
/// assert!(a <= c && level >= 0.8);
/// # Ok::<(), ErlangError>(())
/// ```
pub trait QueueModel {
    /// The offered load `a = λ/μ`, in erlangs.
    fn offered_load(&self) -> f64;

    /// The service level at `servers`: the fraction of arrivals served after waiting at most
    /// `within`.
    ///
    /// # Errors
    ///
    /// [`ZeroServers`](ErlangError::ZeroServers), a `within` that is not finite and
    /// non-negative, [`Unstable`](ErlangError::Unstable) where the queue never empties
    /// (Erlang C at or below the load), or [`OutOfRange`](ErlangError::OutOfRange) past
    /// Erlang A's work budget.
    fn service_level(&self, servers: u64, within: f64) -> Result<f64, ErlangError>;

    /// The fewest servers whose [service level](Self::service_level) for `within` is at least
    /// `at_least` (in `[0, 1)`).
    ///
    /// # Errors
    ///
    /// The model's `min_servers` errors: a target out of range, no answer within its search
    /// range, or work past Erlang A's budget.
    fn min_servers_for_service_level(&self, within: f64, at_least: f64)
    -> Result<u64, ErlangError>;

    /// `P(W > 0)`: the probability that an arrival finds every server busy and waits.
    ///
    /// # Errors
    ///
    /// As [`service_level`](Self::service_level).
    fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError>;

    /// The mean time in queue over all arrivals (served or, in Erlang A, abandoning).
    ///
    /// # Errors
    ///
    /// As [`service_level`](Self::service_level).
    fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError>;

    /// The fraction of time each server is busy.
    ///
    /// # Errors
    ///
    /// As [`service_level`](Self::service_level).
    fn occupancy(&self, servers: u64) -> Result<f64, ErlangError>;
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::super::{ErlangA, ImpatientTarget, MMc, Target};
    use super::*;

    /// Erlang C through the trait is the staffed system's answer, errors included (no
    /// servers, an unstable queue, a target out of range).
    #[test]
    fn erlang_c_answers_as_the_staffed_system() {
        let queue = MMc::new(10.0, 1.0).unwrap();
        let model: &dyn QueueModel = &queue;
        assert_eq!(model.offered_load(), 10.0);
        for c in [0, 1, 8, 10, 11, 14, 40] {
            let staffed = queue.with_servers(c);
            for t in [0.0, 0.2, 1.5, -1.0] {
                let level = staffed.and_then(|s| s.service_level(t));
                assert_eq!(model.service_level(c, t), level, "{c}, {t}");
            }
            assert_eq!(model.prob_wait(c), staffed.map(|s| s.prob_wait()), "{c}");
            assert_eq!(model.mean_wait(c), staffed.map(|s| s.mean_wait()), "{c}");
            assert_eq!(model.occupancy(c), staffed.map(|s| s.occupancy()), "{c}");
        }
        assert_eq!(model.prob_wait(10), Err(ErlangError::Unstable { rho: 1.0 }));
        assert_eq!(model.prob_wait(0), Err(ErlangError::ZeroServers));
        for t in [0.0, 0.2, 1.5] {
            for p in [0.0, 0.5, 0.8, 0.999_999, 1.0] {
                let target = Target::ServiceLevel {
                    within: t,
                    at_least: p,
                };
                let found = model.min_servers_for_service_level(t, p);
                assert_eq!(found, queue.min_servers(target), "{t}, {p}");
            }
        }
    }

    /// Erlang A's trait search is its `min_servers` for the service level, errors included
    /// (a target out of range, work past a budget), and its waits follow from abandonment.
    #[test]
    fn erlang_a_staffs_its_service_level_through_the_trait() {
        // Impatient customers, and customers so patient that overload is past the budget.
        for abandon_rate in [0.5, 1e-9] {
            let queue = ErlangA::new(10.0, 1.0, abandon_rate).unwrap();
            let model: &dyn QueueModel = &queue;
            assert_eq!(model.offered_load(), 10.0);
            for t in [0.0, 0.2, 1.5] {
                for p in [0.0, 0.5, 0.8, 0.999_999, 1.0] {
                    let target = ImpatientTarget::ServedWithin {
                        within: t,
                        at_least: p,
                    };
                    let found = model.min_servers_for_service_level(t, p);
                    assert_eq!(found, queue.min_servers(target), "{abandon_rate}: {t}, {p}");
                }
            }
            for c in [8, 10, 11, 14, 40] {
                let Ok(abandon) = queue.prob_abandon(c) else {
                    continue;
                };
                let wait = model.mean_wait(c).unwrap();
                assert_eq!(wait, abandon / abandon_rate, "{c}");
                assert_eq!(queue.mean_queue_len(c), Ok(10.0 * wait), "{c}");
                let busy = (10.0 * (1.0 - abandon) / c as f64).min(1.0);
                assert_eq!(model.occupancy(c), Ok(busy), "{c}");
            }
            assert_eq!(model.prob_wait(0), Err(ErlangError::ZeroServers));
        }
        let patient = ErlangA::new(10.0, 1.0, 1e-9).unwrap();
        let past_budget = ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1e-9,
        };
        assert_eq!(patient.prob_wait(1), Err(past_budget));
        assert_eq!(patient.service_level(1, 0.2), Err(past_budget));
    }
}
