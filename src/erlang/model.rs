//! What a capacity planner asks of a queueing model, whichever it is.

use super::{ErlangA, ErlangError, ImpatientTarget, MMc, Target};

/// A queue with a given arrival and service rate, asked about a number of servers: what
/// [`MMc`] (Erlang C) and [`ErlangA`] share, so that a planner can staff either without
/// knowing which.
///
/// The *service level* is the fraction of all arrivals served after waiting at most `within`:
/// in Erlang C everyone is served, so it is `P(Wq ≤ within)`; in Erlang A an abandonment
/// counts as a failure. Every time is in the unit of the rates.
///
/// Each method is the model's inherent method of the same meaning; the errors are theirs.
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

/// Implements [`QueueModel`] for `$model` with its inherent methods of the same names, and
/// its `min_servers` for the target `$target { within, at_least }`.
macro_rules! queue_model {
    ($model:ty, $($target:ident)::+) => {
        impl QueueModel for $model {
            fn offered_load(&self) -> f64 {
                <$model>::offered_load(self)
            }

            fn service_level(&self, servers: u64, within: f64) -> Result<f64, ErlangError> {
                <$model>::service_level(self, servers, within)
            }

            fn min_servers_for_service_level(
                &self,
                within: f64,
                at_least: f64,
            ) -> Result<u64, ErlangError> {
                self.min_servers($($target)::+ { within, at_least })
            }

            fn prob_wait(&self, servers: u64) -> Result<f64, ErlangError> {
                <$model>::prob_wait(self, servers)
            }

            fn mean_wait(&self, servers: u64) -> Result<f64, ErlangError> {
                <$model>::mean_wait(self, servers)
            }

            fn occupancy(&self, servers: u64) -> Result<f64, ErlangError> {
                <$model>::occupancy(self, servers)
            }
        }
    };
}

queue_model!(MMc, Target::ServiceLevel);
queue_model!(ErlangA, ImpatientTarget::ServedWithin);

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `$queue` answers through the trait as through its inherent methods of the
    /// same names, and its `min_servers` for `$target { within, at_least }`, errors included
    /// (no servers, an unstable queue, a target out of range, work past a budget).
    macro_rules! assert_same {
        ($queue:expr, $($target:ident)::+) => {{
            let queue = $queue;
            let model: &dyn QueueModel = &queue;
            assert_eq!(model.offered_load(), queue.offered_load());
            for t in [0.0, 0.2, 1.5] {
                for c in [0, 1, 8, 10, 11, 14, 40] {
                    assert_eq!(model.service_level(c, t), queue.service_level(c, t), "{c}, {t}");
                    assert_eq!(model.prob_wait(c), queue.prob_wait(c), "{c}");
                    assert_eq!(model.mean_wait(c), queue.mean_wait(c), "{c}");
                    assert_eq!(model.occupancy(c), queue.occupancy(c), "{c}");
                }
                for p in [0.0, 0.5, 0.8, 0.999_999, 1.0] {
                    let target = $($target)::+ { within: t, at_least: p };
                    let found = model.min_servers_for_service_level(t, p);
                    assert_eq!(found, queue.min_servers(target), "{t}, {p}");
                }
            }
        }};
    }

    #[test]
    fn erlang_c_answers_as_its_inherent_methods() {
        assert_same!(MMc::new(10.0, 1.0).unwrap(), Target::ServiceLevel);
    }

    #[test]
    fn erlang_a_answers_as_its_inherent_methods() {
        // Impatient customers, and customers so patient that overload is past the budget.
        for abandon_rate in [0.5, 1e-9] {
            let queue = ErlangA::new(10.0, 1.0, abandon_rate).unwrap();
            assert_same!(queue, ImpatientTarget::ServedWithin);
        }
        let patient = ErlangA::new(10.0, 1.0, 1e-9).unwrap();
        let past_budget = ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1e-9,
        };
        assert_eq!(patient.prob_wait(1), Err(past_budget));
    }
}
