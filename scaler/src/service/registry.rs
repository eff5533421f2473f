//! Per-trigger state: one [`Evaluator`] per (namespace, ScaledObject, metric), its last
//! decision memoised for the decision interval, reset when the trigger's configuration changes
//! and dropped once the trigger goes unused for the state TTL.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::decision::{Decision, DecisionError, Evaluator, Measured};
use crate::metadata::ScalerConfig;

/// Which trigger a piece of state belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TriggerKey {
    /// The ScaledObject's namespace.
    pub namespace: String,
    /// The ScaledObject's name.
    pub name: String,
    /// The trigger's `metricName`.
    pub metric: String,
}

/// A decision as the registry hands it out: shared by every call within the interval.
pub(crate) type Outcome = Result<Decision, DecisionError>;

/// How long state lives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lifetimes {
    /// A decision younger than this is reused.
    pub(crate) decision_interval: Duration,
    /// A trigger unused for longer is forgotten.
    pub(crate) state_ttl: Duration,
}

/// The state of every trigger the scaler has seen recently.
#[derive(Debug)]
pub(crate) struct Registry {
    lifetimes: Lifetimes,
    /// The time base of the planners' clocks.
    epoch: Instant,
    entries: Mutex<HashMap<TriggerKey, Arc<Entry>>>,
}

#[derive(Debug)]
struct Entry {
    fingerprint: u64,
    last_used: Mutex<Instant>,
    /// Held across the queries, so that concurrent calls for one trigger query once.
    slot: tokio::sync::Mutex<Slot>,
}

#[derive(Debug)]
struct Slot {
    /// Shared with the blocking task that decides, so that a call abandoned mid-decision (its
    /// client gone) leaves the planner in place.
    evaluator: Arc<Mutex<Evaluator>>,
    last: Option<(Instant, Outcome)>,
}

/// A decision and whether this call made it (rather than reusing a memoised one).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) outcome: Outcome,
    pub(crate) fresh: bool,
}

impl Registry {
    pub(crate) fn new(lifetimes: Lifetimes) -> Self {
        Registry {
            lifetimes,
            epoch: Instant::now(),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The decision for `key`: the memoised one if younger than the decision interval and made
    /// under the same configuration, else a new one from what `measure` returns.
    pub(crate) async fn decide<F, Fut>(
        &self,
        key: TriggerKey,
        config: &ScalerConfig,
        measure: F,
    ) -> Answer
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Measured>,
    {
        let entry = self.entry(key, config);
        let mut slot = entry.slot.lock().await;
        if let Some((at, outcome)) = &slot.last
            && at.elapsed() < self.lifetimes.decision_interval
        {
            return Answer {
                outcome: outcome.clone(),
                fresh: false,
            };
        }
        let measured = measure().await;
        let now = Instant::now();
        let since_epoch = now.duration_since(self.epoch);
        // Off the runtime's workers: Erlang A at large loads takes milliseconds to seconds.
        let evaluator = Arc::clone(&slot.evaluator);
        let decided =
            tokio::task::spawn_blocking(move || lock(&evaluator).decide(since_epoch, measured))
                .await;
        let outcome = match decided {
            Ok(outcome) => outcome,
            // A panic (a bug) goes on here.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => panic!("the decision task did not run: {error}"),
        };
        slot.last = Some((now, outcome.clone()));
        *lock(&entry.last_used) = now;
        Answer {
            outcome,
            fresh: true,
        }
    }

    /// The entry for `key`, new if there was none or its configuration changed; forgets
    /// triggers unused for the state TTL on the way.
    fn entry(&self, key: TriggerKey, config: &ScalerConfig) -> Arc<Entry> {
        let now = Instant::now();
        let fingerprint = config.fingerprint();
        let mut entries = lock(&self.entries);
        self.sweep_locked(&mut entries, now);
        let entry = entries
            .entry(key)
            .and_modify(|entry| {
                if entry.fingerprint != fingerprint {
                    *entry = Arc::new(Entry::new(config, fingerprint, now));
                }
            })
            .or_insert_with(|| Arc::new(Entry::new(config, fingerprint, now)));
        *lock(&entry.last_used) = now;
        Arc::clone(entry)
    }

    /// Forgets the triggers unused for the state TTL; returns how many remain.
    pub(crate) fn sweep(&self) -> usize {
        let mut entries = lock(&self.entries);
        self.sweep_locked(&mut entries, Instant::now());
        entries.len()
    }

    /// How many triggers the registry holds.
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    fn sweep_locked(&self, entries: &mut HashMap<TriggerKey, Arc<Entry>>, now: Instant) {
        let ttl = self.lifetimes.state_ttl;
        entries.retain(|_, entry| now.duration_since(*lock(&entry.last_used)) <= ttl);
    }
}

impl Entry {
    fn new(config: &ScalerConfig, fingerprint: u64, now: Instant) -> Self {
        Entry {
            fingerprint,
            last_used: Mutex::new(now),
            slot: tokio::sync::Mutex::new(Slot {
                evaluator: Arc::new(Mutex::new(Evaluator::new(config.clone()))),
                last: None,
            }),
        }
    }
}

/// The guard, whether or not another thread panicked holding the lock: every critical
/// section here leaves the data consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
