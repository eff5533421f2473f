//! Client retries: how many, how long to wait before each, and the budget that caps them.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::outcome::Outcome;

/// How a client tries a request again after a refusal, a timeout or a transport failure
/// (not after another status, which it takes as an answer).
///
/// ```
/// use std::time::Duration;
/// use admit_loadgen::{Backoff, Budget, Retry};
///
/// // Three retries, 10 ms to 1 s of exponential backoff with full jitter, and linkerd's
/// // budget: retries at most 20 % of requests over 10 s, plus 10 per second.
/// let retry = Retry::new(3)
///     .backoff(Backoff::exponential(Duration::from_millis(10), Duration::from_secs(1))?)
///     .budget(Budget::new(0.2, 10.0, Duration::from_secs(10))?);
/// assert_eq!(retry.max_retries(), 3);
/// # Ok::<(), admit_loadgen::RetryError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Retry {
    max_retries: u32,
    backoff: Backoff,
    budget: Option<Budget>,
}

impl Retry {
    /// At most `max_retries` retries after the first attempt, each at once, without a budget.
    pub fn new(max_retries: u32) -> Retry {
        Retry {
            max_retries,
            backoff: Backoff::Immediate,
            budget: None,
        }
    }

    /// How long to wait before each retry (default [`Backoff::Immediate`]).
    pub fn backoff(mut self, backoff: Backoff) -> Retry {
        self.backoff = backoff;
        self
    }

    /// A budget that retries must also fit in (default none).
    pub fn budget(mut self, budget: Budget) -> Retry {
        self.budget = Some(budget);
        self
    }

    /// The most retries after a request's first attempt.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Whether a request whose attempt `attempt` (0 for the first) ended with `outcome` may
    /// be tried again, budget aside.
    pub(crate) fn wants(&self, attempt: u32, outcome: &Outcome) -> bool {
        attempt < self.max_retries
            && matches!(
                outcome,
                Outcome::Refused(_) | Outcome::TimedOut | Outcome::Lost(_)
            )
    }

    /// The wait before retry `retry` (1 for the first) of the request with index `index`.
    pub(crate) fn wait(&self, index: u64, retry: u32) -> Duration {
        self.backoff.wait(index, retry)
    }

    /// The budget's running state, if there is a budget.
    pub(crate) fn budget_state(&self) -> Option<BudgetState> {
        self.budget.map(BudgetState::new)
    }
}

/// How long a client waits before a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// Not at all: the retry is sent as soon as the attempt before it ends.
    Immediate,
    /// Exponential with full jitter: before retry `k`, a wait drawn uniformly from
    /// `[0, min(max, base · 2^(k−1)))`. The draw is a hash of the request's index and `k`, so
    /// a run is repeatable.
    Exponential {
        /// The ceiling of the first retry's wait.
        base: Duration,
        /// The ceiling of any wait.
        max: Duration,
    },
}

impl Backoff {
    /// [`Backoff::Exponential`] from `base` up to `max`.
    ///
    /// # Errors
    ///
    /// [`RetryError::Backoff`] unless `0 < base ≤ max`.
    pub fn exponential(base: Duration, max: Duration) -> Result<Backoff, RetryError> {
        if base.is_zero() || base > max {
            return Err(RetryError::Backoff { base, max });
        }
        Ok(Backoff::Exponential { base, max })
    }

    fn wait(&self, index: u64, retry: u32) -> Duration {
        match *self {
            Backoff::Immediate => Duration::ZERO,
            Backoff::Exponential { base, max } => {
                let doublings = retry.saturating_sub(1).min(31);
                let ceiling = base
                    .checked_mul(1 << doublings)
                    .map_or(max, |ceiling| ceiling.min(max));
                ceiling.mul_f64(unit(index, retry))
            }
        }
    }
}

/// A uniform draw in `[0, 1)` from `index` and `retry` (SplitMix64's finaliser).
fn unit(index: u64, retry: u32) -> f64 {
    let mut z = index
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(u64::from(retry).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // The top 53 bits, as a fraction.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A retry budget, as linkerd's and Finagle's: over the last `window`, retries may number at
/// most `ratio` × first attempts + `min_per_second` × the window's seconds. A retry the budget
/// has no room for is not sent, and the request ends with its last attempt's outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    ratio: f64,
    min_per_second: f64,
    window: Duration,
}

impl Budget {
    /// The longest window: an hour (the state keeps a count per second of it).
    pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

    /// A budget of `ratio` retries per first attempt plus `min_per_second` retries per second,
    /// over the last `window` in whole seconds, a fraction dropped (linkerd's defaults: 0.2,
    /// 10 and 10 s).
    ///
    /// # Errors
    ///
    /// [`RetryError::Budget`] if `ratio` or `min_per_second` is negative or not finite, or
    /// `window` is under a second or over [`MAX_WINDOW`](Self::MAX_WINDOW).
    pub fn new(ratio: f64, min_per_second: f64, window: Duration) -> Result<Budget, RetryError> {
        let rate_ok = |x: f64| x.is_finite() && x >= 0.0;
        if !rate_ok(ratio)
            || !rate_ok(min_per_second)
            || window < Duration::from_secs(1)
            || window > Budget::MAX_WINDOW
        {
            return Err(RetryError::Budget {
                ratio,
                min_per_second,
                window,
            });
        }
        Ok(Budget {
            ratio,
            min_per_second,
            window,
        })
    }
}

/// A budget's counts of first attempts and retries, one pair per second of its window, and
/// their sums.
#[derive(Clone, Debug)]
pub(crate) struct BudgetState {
    budget: Budget,
    /// `(second, first attempts, retries)`, oldest first, seconds within the window.
    seconds: VecDeque<(u64, u64, u64)>,
    /// The sums of `seconds`' first attempts and retries.
    firsts: u64,
    retries: u64,
}

impl BudgetState {
    fn new(budget: Budget) -> BudgetState {
        BudgetState {
            budget,
            seconds: VecDeque::new(),
            firsts: 0,
            retries: 0,
        }
    }

    /// The counts of the second `now` falls in, after forgetting the seconds the window has
    /// left behind.
    fn current(&mut self, now: Duration) -> &mut (u64, u64, u64) {
        let second = now.as_secs();
        let span = self.budget.window.as_secs();
        while let Some(&(oldest, firsts, retries)) = self.seconds.front() {
            if oldest + span > second {
                break;
            }
            self.firsts -= firsts;
            self.retries -= retries;
            self.seconds.pop_front();
        }
        if self
            .seconds
            .back()
            .is_none_or(|&(newest, ..)| newest < second)
        {
            self.seconds.push_back((second, 0, 0));
        }
        self.seconds.back_mut().expect("pushed above")
    }

    /// Counts a first attempt sent at `now` (from the start of the run).
    pub(crate) fn deposit(&mut self, now: Duration) {
        self.current(now).1 += 1;
        self.firsts += 1;
    }

    /// Counts a retry at `now` if the budget has room for it, and says whether it had.
    pub(crate) fn withdraw(&mut self, now: Duration) -> bool {
        self.current(now);
        let allowed = self.budget.ratio * self.firsts as f64
            + self.budget.min_per_second * self.budget.window.as_secs() as f64;
        if (self.retries + 1) as f64 > allowed {
            return false;
        }
        self.seconds
            .back_mut()
            .expect("`current` keeps `now`'s second")
            .2 += 1;
        self.retries += 1;
        true
    }
}

/// Settings of a [`Retry`] that cannot work.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RetryError {
    /// [`Backoff::exponential`] needs `0 < base ≤ max`.
    Backoff {
        /// The first wait's ceiling given.
        base: Duration,
        /// The ceiling given.
        max: Duration,
    },
    /// [`Budget::new`] needs finite, non-negative rates and a window of 1 s to an hour.
    Budget {
        /// The ratio given.
        ratio: f64,
        /// The floor given.
        min_per_second: f64,
        /// The window given.
        window: Duration,
    },
}

impl fmt::Display for RetryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryError::Backoff { base, max } => write!(
                f,
                "backoff from {base:?} up to {max:?}: the first wait must be more than zero and \
                 at most the ceiling"
            ),
            RetryError::Budget {
                ratio,
                min_per_second,
                window,
            } => write!(
                f,
                "retry budget of {ratio} per request plus {min_per_second}/s over {window:?}: \
                 the rates must be finite and non-negative, the window from 1 s to an hour"
            ),
        }
    }
}

impl std::error::Error for RetryError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Lost, Refusal};

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn retries_refusals_timeouts_and_transport_failures_only() {
        let retry = Retry::new(2);
        let refused = Outcome::Refused(Refusal {
            status: http::StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
            reason: None,
        });
        for outcome in [refused, Outcome::TimedOut, Outcome::Lost(Lost::Reset)] {
            assert!(retry.wants(0, &outcome));
            assert!(retry.wants(1, &outcome));
            assert!(!retry.wants(2, &outcome), "a third retry of {outcome:?}");
        }
        for outcome in [
            Outcome::Ok,
            Outcome::Status(http::StatusCode::INTERNAL_SERVER_ERROR),
            Outcome::Dropped,
        ] {
            assert!(!retry.wants(0, &outcome), "{outcome:?} retried");
        }
        assert!(!Retry::new(0).wants(0, &Outcome::TimedOut));
    }

    #[test]
    fn exponential_backoff_stays_under_its_doubling_ceiling() {
        let backoff =
            Backoff::exponential(Duration::from_millis(10), Duration::from_millis(50)).unwrap();
        for index in 0..1000 {
            for (retry, ceiling) in [(1, 10), (2, 20), (3, 40), (4, 50), (40, 50)] {
                let wait = backoff.wait(index, retry);
                assert!(
                    wait < Duration::from_millis(ceiling),
                    "{wait:?} for retry {retry}"
                );
            }
        }
        assert_eq!(Backoff::Immediate.wait(7, 3), Duration::ZERO);
        // Repeatable, and spread: the mean of many draws is near half the ceiling.
        assert_eq!(backoff.wait(7, 1), backoff.wait(7, 1));
        let mean = (0..10_000)
            .map(|index| backoff.wait(index, 1).as_secs_f64())
            .sum::<f64>()
            / 10_000.0;
        assert!((mean - 0.005).abs() < 0.000_2, "mean wait {mean}");
    }

    #[test]
    fn bad_settings_are_refused() {
        let ms = Duration::from_millis;
        assert!(Backoff::exponential(ms(0), ms(10)).is_err());
        assert!(Backoff::exponential(ms(20), ms(10)).is_err());
        assert!(Backoff::exponential(ms(10), ms(10)).is_ok());
        for (ratio, floor, window) in [
            (-0.1, 10.0, s(10)),
            (f64::NAN, 10.0, s(10)),
            (0.2, f64::INFINITY, s(10)),
            (0.2, 10.0, ms(999)),
            (0.2, 10.0, s(3601)),
        ] {
            let error = Budget::new(ratio, floor, window).unwrap_err();
            assert!(error.to_string().contains("retry budget"), "{error}");
        }
    }

    #[test]
    fn the_budget_allows_its_ratio_of_recent_requests_plus_its_floor() {
        // 20 % of requests, plus 1 per second over 2 s: a floor of 2 retries.
        let mut state = BudgetState::new(Budget::new(0.2, 1.0, s(2)).unwrap());
        for _ in 0..10 {
            state.deposit(s(0));
        }
        // 0.2 × 10 + 2 = 4 retries.
        let allowed = (0..10).filter(|_| state.withdraw(s(1))).count();
        assert_eq!(allowed, 4);
        // At 2 s the first second leaves the window: its 10 requests no longer count, the
        // 4 retries of second 1 still do, against a floor of 2.
        assert!(!state.withdraw(s(2)));
        // At 3 s both have left.
        assert!(state.withdraw(s(3)));
        assert!(state.withdraw(s(3)));
        assert!(!state.withdraw(s(3)));
    }

    #[test]
    fn without_a_floor_or_requests_nothing_is_retried() {
        let mut state = BudgetState::new(Budget::new(0.5, 0.0, s(10)).unwrap());
        assert!(!state.withdraw(s(0)));
        state.deposit(s(0));
        state.deposit(s(0));
        assert!(state.withdraw(s(0)));
        assert!(!state.withdraw(s(0)));
    }

    #[test]
    fn the_state_keeps_one_count_per_second_of_its_window() {
        let mut state = BudgetState::new(Budget::new(0.2, 10.0, s(10)).unwrap());
        for second in 0..1000 {
            state.deposit(s(second));
            state.withdraw(s(second));
        }
        assert_eq!(state.seconds.len(), 10);
        // The sums are the window's: one first attempt and one retry in each second.
        assert_eq!((state.firsts, state.retries), (10, 10));
    }
}
