//! A retry budget: retries as a share of the requests made, with a floor per second.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::tally::Tally;
use super::window::{Ring, Window};
use crate::ConfigError;
use crate::clock::{Clock, MonotonicClock};
use crate::criticality::Criticality;

const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
const DEFAULT_BUCKETS: u32 = 10;
/// The SRE book's: retries under 10 % of a client's requests.
const DEFAULT_RATIO: f64 = 0.1;
const DEFAULT_FLOOR: f64 = 1.0;
/// The most retries per request a ratio may allow: beyond, it is no budget.
const MAX_RATIO: f64 = 1000.0;

/// How many retries a client may make, shared by all its requests: over a sliding window, at
/// most `ratio` times the requests made plus `floor_per_second` times the window's length.
///
/// [`deposit`](Self::deposit) once per request made (its first attempt);
/// [`try_withdraw`](Self::try_withdraw) before each retry, which is allowed only while the
/// window's retries stay within the budget. The floor lets a client that sends little retry
/// its occasional failure; the ratio keeps a busy client's retries from multiplying an
/// overload (retrying every refusal three times offers a 4×-overloaded server 14 attempts per
/// unit of capacity; a budget of 10 % adds at most a tenth).
///
/// # Example
///
/// ```
/// use admit::client::RetryBudget;
///
/// let budget = RetryBudget::builder().ratio(0.1).floor_per_second(0.0).build()?;
/// for _ in 0..100 {
///     budget.deposit();
/// }
/// let retried = (0..100).filter(|_| budget.try_withdraw()).count();
/// assert_eq!(retried, 10);
/// # Ok::<(), admit::ConfigError>(())
/// ```
pub struct RetryBudget<C = MonotonicClock> {
    /// `(requests, retries)` per bucket.
    window: Window,
    ratio: f64,
    /// The floor over the whole window.
    floor: f64,
    name: Option<Cow<'static, str>>,
    clock: C,
    /// Deposits, withdrawals allowed and withdrawals refused, by class.
    requests: Tally,
    spent: Tally,
    denied: Tally,
}

/// What a [`RetryBudget`]'s window holds now.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetryBudgetSnapshot {
    /// Requests made in the window.
    pub requests: u64,
    /// Retries made in the window.
    pub retries: u64,
    /// Retries the budget would still allow now.
    pub available: u64,
}

/// What a [`RetryBudget`] has counted since it was made, by the requests'
/// [`Criticality`]: cumulative, never reset.
///
/// [`deposit`](RetryBudget::deposit) and [`try_withdraw`](RetryBudget::try_withdraw) count as
/// [`Critical`](Criticality::Critical); a `RetryPolicy` counts each request as the class its
/// [`admit-criticality`](crate::criticality::CRITICALITY_HEADER) header claims (`critical`
/// without one).
///
/// ```
/// use admit::client::RetryBudget;
/// use admit::criticality::Criticality::Critical;
///
/// let budget = RetryBudget::builder().ratio(0.0).floor_per_second(0.1).build()?;
/// budget.deposit();
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw());
/// let totals = budget.totals();
/// assert_eq!(totals.requests(Critical), 1);
/// assert_eq!((totals.spent(Critical), totals.denied(Critical)), (1, 1));
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RetryBudgetTotals {
    requests: [u64; Criticality::COUNT],
    spent: [u64; Criticality::COUNT],
    denied: [u64; Criticality::COUNT],
}

impl RetryBudgetTotals {
    /// Requests of `class` deposited: made, retried or not.
    pub fn requests(&self, class: Criticality) -> u64 {
        self.requests[class.index()]
    }

    /// Retries of `class` the budget allowed.
    pub fn spent(&self, class: Criticality) -> u64 {
        self.spent[class.index()]
    }

    /// Retries of `class` the budget refused.
    pub fn denied(&self, class: Criticality) -> u64 {
        self.denied[class.index()]
    }
}

impl RetryBudget<MonotonicClock> {
    /// A builder with the defaults: 10 % of the requests plus 1 retry per second, over 10 s in
    /// 10 buckets.
    pub fn builder() -> RetryBudgetBuilder<MonotonicClock> {
        RetryBudgetBuilder {
            window: DEFAULT_WINDOW,
            buckets: DEFAULT_BUCKETS,
            ratio: DEFAULT_RATIO,
            floor: DEFAULT_FLOOR,
            name: None,
            clock: MonotonicClock::new(),
        }
    }
}

impl<C: Clock> RetryBudget<C> {
    /// Counts a request made.
    pub fn deposit(&self) {
        self.deposit_as(Criticality::Critical);
    }

    /// [`deposit`](Self::deposit) for a request of `class`, which the
    /// [totals](Self::totals) count it as.
    pub(crate) fn deposit_as(&self, class: Criticality) {
        self.lock().add(1, 0);
        self.requests.add(class);
    }

    /// Takes one retry from the budget: `false` (and nothing taken) when the window's retries
    /// have spent it.
    pub fn try_withdraw(&self) -> bool {
        self.try_withdraw_as(Criticality::Critical)
    }

    /// [`try_withdraw`](Self::try_withdraw) for a request of `class`, which the
    /// [totals](Self::totals) count it as.
    pub(crate) fn try_withdraw_as(&self, class: Criticality) -> bool {
        let mut ring = self.lock();
        if self.available(ring.sums()) < 1 {
            drop(ring);
            self.denied.add(class);
            return false;
        }
        ring.add(0, 1);
        drop(ring);
        self.spent.add(class);
        true
    }

    /// The window's counts and the retries still allowed.
    pub fn snapshot(&self) -> RetryBudgetSnapshot {
        let (requests, retries) = self.lock().sums();
        RetryBudgetSnapshot {
            requests,
            retries,
            available: self.available((requests, retries)),
        }
    }

    /// The retries allowed beyond `retries` for `requests`.
    fn available(&self, (requests, retries): (u64, u64)) -> u64 {
        let allowed = (self.ratio * requests as f64 + self.floor).floor();
        // Saturating: `allowed` is finite and at least 0.
        (allowed as u64).saturating_sub(retries)
    }

    /// The name given to the builder, if any: the metrics' `client` label.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// A reading of the budget's clock.
    #[cfg(feature = "retry")]
    pub(super) fn now_nanos(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// The ring, moved to now.
    fn lock(&self) -> crate::sync::MutexGuard<'_, Ring> {
        self.window.at(self.clock.now_nanos())
    }
}

impl<C> RetryBudget<C> {
    /// The requests deposited and the retries allowed and refused since the budget was made,
    /// by class: cumulative, unlike the [window](Self::snapshot). Reads a few atomics; takes no
    /// lock.
    pub fn totals(&self) -> RetryBudgetTotals {
        RetryBudgetTotals {
            requests: self.requests.get(),
            spent: self.spent.get(),
            denied: self.denied.get(),
        }
    }
}

impl<C> fmt::Debug for RetryBudget<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("bucket_nanos", &self.window.bucket_nanos())
            .field("ratio", &self.ratio)
            .field("floor", &self.floor)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RetryBudget`]. Every setting has a default; [`build`](Self::build) checks
/// them.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetryBudgetBuilder<C> {
    window: Duration,
    buckets: u32,
    ratio: f64,
    floor: f64,
    name: Option<Cow<'static, str>>,
    clock: C,
}

impl<C: Clock> RetryBudgetBuilder<C> {
    /// Retries allowed per request made (default 0.1), 0 to 1000.
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }

    /// Retries allowed per second of the window whatever the requests (default 1), 0 or more.
    pub fn floor_per_second(mut self, floor: f64) -> Self {
        self.floor = floor;
        self
    }

    /// The window requests and retries are counted over, in `buckets` steps (default 10 s in
    /// 10): what was counted leaves it between `window − window / buckets` and `window` later.
    pub fn window(mut self, window: Duration, buckets: u32) -> Self {
        self.window = window;
        self.buckets = buckets;
        self
    }

    /// The name that labels the budget in logs and metrics. Default: none.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The clock the window moves with (default [`MonotonicClock`]).
    pub fn clock<C2: Clock>(self, clock: C2) -> RetryBudgetBuilder<C2> {
        RetryBudgetBuilder {
            window: self.window,
            buckets: self.buckets,
            ratio: self.ratio,
            floor: self.floor,
            name: self.name,
            clock,
        }
    }

    /// The budget, its window allocated.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::BudgetOutOfRange`]: the ratio is not within 0 to 1000, or the floor
    ///   is negative or not finite (or so large that a window's floor is not);
    /// - [`ConfigError::EmptyName`]: the name is empty;
    /// - the window's errors, as for [`ThrottleBuilder::build`](super::ThrottleBuilder::build).
    pub fn build(self) -> Result<RetryBudget<C>, ConfigError> {
        crate::error::check_name(self.name.as_deref())?;
        if !(0.0..=MAX_RATIO).contains(&self.ratio) {
            return Err(ConfigError::BudgetOutOfRange {
                setting: "ratio",
                value: self.ratio,
            });
        }
        let floor = self.floor * self.window.as_secs_f64();
        if !(self.floor >= 0.0 && floor.is_finite()) {
            return Err(ConfigError::BudgetOutOfRange {
                setting: "floor_per_second",
                value: self.floor,
            });
        }
        let bucket_nanos = super::builder::bucket_nanos(self.window, self.buckets)?;
        Ok(RetryBudget {
            window: Window::new(self.buckets as usize, bucket_nanos),
            ratio: self.ratio,
            floor,
            name: self.name,
            clock: self.clock,
            requests: Tally::new(),
            spent: Tally::new(),
            denied: Tally::new(),
        })
    }
}
