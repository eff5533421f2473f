//! A client's metrics: its throttles, one or a map of them per destination, and its retry
//! budget.

use std::collections::HashMap;
use std::fmt::{self, Display};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{Counter, Gauge, SharedString};

use super::names::{self, CLASS, CLIENT, DESTINATION, OUTCOME};
use super::{MetricsError, Source};
use crate::Shared;
use crate::client::{RetryBudget, Throttle, ThrottleTotals, Throttles};
use crate::clock::Clock;
use crate::criticality::Criticality;

/// The family of the throttles' series: a single throttle and a map clash on a shared name.
const THROTTLE_FAMILY: &str = "admit_client";

/// One destination's series.
struct DestinationSeries {
    attempts: [Counter; Criticality::COUNT],
    throttled: [Counter; Criticality::COUNT],
    probability: Gauge,
}

impl DestinationSeries {
    /// Registers the series labelled `client` and `destination`.
    fn new(client: &SharedString, destination: SharedString) -> Self {
        let counter = |metric: &'static str, class: Criticality| {
            metrics::counter!(metric, CLIENT => client.clone(),
                DESTINATION => destination.clone(), CLASS => class.as_str())
        };
        DestinationSeries {
            attempts: Criticality::ALL.map(|class| counter(names::CLIENT_ATTEMPTS, class)),
            throttled: Criticality::ALL.map(|class| counter(names::CLIENT_THROTTLED, class)),
            probability: metrics::gauge!(names::CLIENT_THROTTLE_PROBABILITY,
                CLIENT => client.clone(), DESTINATION => destination.clone()),
        }
    }

    /// Sets the counters to `totals`.
    fn absolute(&self, totals: &ThrottleTotals) {
        self.apply(totals, Counter::absolute);
    }

    /// Adds `delta` to the counters.
    fn increment(&self, delta: &ThrottleTotals) {
        self.apply(delta, Counter::increment);
    }

    /// Applies `update` to each counter with its count in `totals`.
    fn apply(&self, totals: &ThrottleTotals, update: impl Fn(&Counter, u64)) {
        for (index, class) in Criticality::ALL.into_iter().enumerate() {
            update(&self.attempts[index], totals.attempts(class));
            update(&self.throttled[index], totals.throttled(class));
        }
    }
}

/// Publishes a [`Throttle`]'s [totals](Throttle::totals) and refusal probability (see
/// [`ReporterBuilder::throttle`](super::ReporterBuilder::throttle)), labelled
/// `client` and `destination` with the throttle's name.
pub(crate) struct ThrottleMetrics<C: Clock + 'static> {
    throttle: Shared<Throttle<C>>,
    series: DestinationSeries,
}

impl<C: Clock + 'static> ThrottleMetrics<C> {
    /// Registers the throttle's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the throttle has no name.
    pub(crate) fn new(throttle: impl Into<Shared<Throttle<C>>>) -> Result<Self, MetricsError> {
        let throttle = throttle.into();
        let name: SharedString = throttle
            .name()
            .ok_or(MetricsError::Unnamed { kind: "throttle" })?
            .to_owned()
            .into();
        super::describe::client();
        Ok(ThrottleMetrics {
            series: DestinationSeries::new(&name, name.clone()),
            throttle,
        })
    }
}

impl<C: Clock + 'static> Source for ThrottleMetrics<C> {
    fn family(&self) -> &'static str {
        THROTTLE_FAMILY
    }

    fn name(&self) -> &str {
        self.throttle.name().unwrap_or_default()
    }

    fn report(&self) {
        self.series.absolute(&self.throttle.totals());
        self.series
            .probability
            .set(self.throttle.snapshot().probability);
    }
}

impl<C: Clock + 'static> fmt::Debug for ThrottleMetrics<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleMetrics")
            .field("client", &self.throttle.name())
            .finish_non_exhaustive()
    }
}

/// Which series a destination's counts go to.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// Its own, at this index.
    Own(usize),
    /// [`names::OTHER_DESTINATION`]'s.
    Other,
}

/// A throttle the last report read, and what of its totals is published.
struct Seen<C> {
    /// Held so that a new throttle of the same destination is never taken for this one.
    throttle: Arc<Throttle<C>>,
    published: ThrottleTotals,
    slot: Slot,
    /// The report that last found it in the map.
    round: u64,
}

/// What a map's reports remember.
struct State<K, C> {
    /// The throttles the map held at the last report, by destination: at most its capacity.
    seen: HashMap<K, Seen<C>>,
    /// The destinations with series of their own, at most [`names::MAX_DESTINATIONS`].
    own: HashMap<K, usize>,
    /// Their series, by the index in `own`.
    series: Vec<DestinationSeries>,
    /// Registered with the first destination beyond the labelled ones.
    other: Option<DestinationSeries>,
    /// The map's entries, copied out; kept for its allocation.
    entries: Vec<(K, Arc<Throttle<C>>)>,
    round: u64,
}

/// The series of `slot`, from a [`State`]'s `series` and `other`.
fn series_of<'a>(
    series: &'a [DestinationSeries],
    other: &'a Option<DestinationSeries>,
    slot: Slot,
) -> Option<&'a DestinationSeries> {
    match slot {
        Slot::Own(index) => series.get(index),
        Slot::Other => other.as_ref(),
    }
}

/// Publishes the throttles of a [`Throttles`] map, one destination label per key's `Display`,
/// the first [`names::MAX_DESTINATIONS`] destinations seen only (see
/// [`ReporterBuilder::throttles`](super::ReporterBuilder::throttles)).
///
/// A throttle's totals restart when its destination leaves the map and returns, so the counters
/// are published by adding what each throttle counted since the last report: the previous
/// throttle is held until the report that finds it gone, which adds the rest of its counts.
pub(crate) struct ThrottlesMetrics<K: 'static, C: Clock + 'static> {
    throttles: Shared<Throttles<K, C>>,
    client: SharedString,
    state: Mutex<State<K, C>>,
}

impl<K, C> ThrottlesMetrics<K, C>
where
    K: Hash + Eq + Clone + Display + Send + Sync + 'static,
    C: Clock + Clone + 'static,
{
    /// Describes the series; each destination's are registered when a report first sees it.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the map has no name.
    pub(crate) fn new(throttles: impl Into<Shared<Throttles<K, C>>>) -> Result<Self, MetricsError> {
        let throttles = throttles.into();
        let client: SharedString = throttles
            .name()
            .ok_or(MetricsError::Unnamed {
                kind: "map of throttles",
            })?
            .to_owned()
            .into();
        super::describe::client();
        Ok(ThrottlesMetrics {
            throttles,
            client,
            state: Mutex::new(State {
                seen: HashMap::new(),
                own: HashMap::new(),
                series: Vec::new(),
                other: None,
                entries: Vec::new(),
                round: 0,
            }),
        })
    }

    /// Reads every throttle of the map and publishes what each counted since the last report.
    fn publish(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        let mut entries = std::mem::take(&mut state.entries);
        self.throttles.entries(&mut entries);
        state.round += 1;
        let round = state.round;
        // The highest probability among the destinations without their own series.
        let mut other_probability = 0.0_f64;
        for (destination, throttle) in entries.drain(..) {
            let totals = throttle.totals();
            let probability = throttle.snapshot().probability;
            let slot = match state.seen.get_mut(&destination) {
                Some(seen) => {
                    if !Arc::ptr_eq(&seen.throttle, &throttle) {
                        // Left and came back: the rest of the old throttle's counts, then the
                        // new one's from 0.
                        let rest = seen.throttle.totals().since(&seen.published);
                        seen.throttle = throttle;
                        seen.published = ThrottleTotals::default();
                        if let Some(series) = series_of(&state.series, &state.other, seen.slot) {
                            series.increment(&rest);
                        }
                    }
                    let delta = totals.since(&seen.published);
                    seen.published = totals;
                    seen.round = round;
                    let slot = seen.slot;
                    if let Some(series) = series_of(&state.series, &state.other, slot) {
                        series.increment(&delta);
                    }
                    slot
                }
                None => {
                    let slot = self.slot(state, &destination);
                    if let Some(series) = series_of(&state.series, &state.other, slot) {
                        series.increment(&totals);
                    }
                    state.seen.insert(
                        destination,
                        Seen {
                            throttle,
                            published: totals,
                            slot,
                            round,
                        },
                    );
                    slot
                }
            };
            match slot {
                Slot::Own(index) => {
                    if let Some(series) = state.series.get(index) {
                        series.probability.set(probability);
                    }
                }
                Slot::Other => other_probability = other_probability.max(probability),
            }
        }
        state.entries = entries;
        // The destinations that left the map: the rest of their counts, and no refusals (a
        // returning destination starts with an empty window).
        let (series, other) = (&state.series, &state.other);
        state.seen.retain(|_, seen| {
            if seen.round == round {
                return true;
            }
            let rest = seen.throttle.totals().since(&seen.published);
            if let Some(series) = series_of(series, other, seen.slot) {
                series.increment(&rest);
                if let Slot::Own(_) = seen.slot {
                    series.probability.set(0.0);
                }
            }
            false
        });
        if let Some(other) = &state.other {
            other.probability.set(other_probability);
        }
    }

    /// The series `destination` counts in: its own, registered now if it is among the first
    /// [`names::MAX_DESTINATIONS`], else the others'.
    fn slot(&self, state: &mut State<K, C>, destination: &K) -> Slot {
        if let Some(&index) = state.own.get(destination) {
            return Slot::Own(index);
        }
        if state.own.len() < names::MAX_DESTINATIONS {
            let index = state.series.len();
            state.series.push(DestinationSeries::new(
                &self.client,
                destination.to_string().into(),
            ));
            state.own.insert(destination.clone(), index);
            return Slot::Own(index);
        }
        if state.other.is_none() {
            state.other = Some(DestinationSeries::new(
                &self.client,
                SharedString::const_str(names::OTHER_DESTINATION),
            ));
        }
        Slot::Other
    }
}

impl<K, C> Source for ThrottlesMetrics<K, C>
where
    K: Hash + Eq + Clone + Display + Send + Sync + 'static,
    C: Clock + Clone + 'static,
{
    fn family(&self) -> &'static str {
        THROTTLE_FAMILY
    }

    fn name(&self) -> &str {
        &self.client
    }

    fn report(&self) {
        self.publish();
    }
}

impl<K: 'static, C: Clock + 'static> fmt::Debug for ThrottlesMetrics<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottlesMetrics")
            .field("client", &self.throttles.name())
            .finish_non_exhaustive()
    }
}

/// Publishes a [`RetryBudget`]'s [totals](RetryBudget::totals) (see
/// [`ReporterBuilder::retry_budget`](super::ReporterBuilder::retry_budget)), labelled
/// `client="<the budget's name>"`.
pub(crate) struct RetryBudgetMetrics<C: Clock + 'static> {
    budget: Shared<RetryBudget<C>>,
    requests: [Counter; Criticality::COUNT],
    spent: [Counter; Criticality::COUNT],
    denied: [Counter; Criticality::COUNT],
}

impl<C: Clock + 'static> RetryBudgetMetrics<C> {
    /// Registers the budget's series with the installed recorder.
    ///
    /// # Errors
    ///
    /// [`MetricsError::Unnamed`] if the budget has no name.
    pub(crate) fn new(budget: impl Into<Shared<RetryBudget<C>>>) -> Result<Self, MetricsError> {
        let budget = budget.into();
        let name: SharedString = budget
            .name()
            .ok_or(MetricsError::Unnamed {
                kind: "retry budget",
            })?
            .to_owned()
            .into();
        super::describe::client_retries();
        let retries = |outcome: &'static str| {
            Criticality::ALL.map(|class| {
                metrics::counter!(names::CLIENT_RETRIES, CLIENT => name.clone(),
                    CLASS => class.as_str(), OUTCOME => outcome)
            })
        };
        Ok(RetryBudgetMetrics {
            requests: Criticality::ALL.map(|class| {
                metrics::counter!(names::CLIENT_RETRY_REQUESTS, CLIENT => name.clone(),
                    CLASS => class.as_str())
            }),
            spent: retries("spent"),
            denied: retries("denied"),
            budget,
        })
    }
}

impl<C: Clock + 'static> Source for RetryBudgetMetrics<C> {
    fn family(&self) -> &'static str {
        "admit_client_retry"
    }

    fn name(&self) -> &str {
        self.budget.name().unwrap_or_default()
    }

    fn report(&self) {
        let totals = self.budget.totals();
        for (index, class) in Criticality::ALL.into_iter().enumerate() {
            self.requests[index].absolute(totals.requests(class));
            self.spent[index].absolute(totals.spent(class));
            self.denied[index].absolute(totals.denied(class));
        }
    }
}

impl<C: Clock + 'static> fmt::Debug for RetryBudgetMetrics<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudgetMetrics")
            .field("client", &self.budget.name())
            .finish_non_exhaustive()
    }
}
