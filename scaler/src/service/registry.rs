//! Per-trigger state: one [`Evaluator`] per (namespace, ScaledObject, metric, configuration),
//! its last decision memoised for the decision interval, at most one decision running at a time
//! per trigger and a bounded number across all of them, a bounded number of triggers tracked,
//! and a trigger forgotten once it goes unused for the state TTL.
//!
//! Each configuration of a trigger has its own state: when KEDA's operator and its metrics
//! server call with different versions of an edited ScaledObject, each keeps its memo and its
//! planner's hold, and the one no longer sent is forgotten after the TTL.
//!
//! A decision runs in a task of its own, not in the RPC that asked for it: a caller that gives
//! up (a cancelled RPC, a closed connection) leaves it running, and the next caller for the
//! same trigger waits for that decision instead of starting a second one.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hashlink::LinkedHashMap;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use crate::decision::{Decision, DecisionError, Evaluator, Measured};
use crate::metadata::{ScalerConfig, TriggerKey};
use crate::prometheus::QueryError;

/// A decision as the registry hands it out: shared by every call within the interval.
pub(crate) type Outcome = Result<Decision, DecisionError<QueryError>>;

/// What a finished decision is reported to, once, whoever asked for it: the service's metrics
/// and logs.
pub(crate) type Publish = fn(&TriggerKey, &ScalerConfig, &Outcome);

/// How long state lives and how much of it there may be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// A decision younger than this is reused.
    pub(crate) decision_interval: Duration,
    /// A trigger unused for longer is forgotten.
    pub(crate) state_ttl: Duration,
    /// The most triggers tracked at once.
    pub(crate) max_triggers: usize,
    /// The most decisions running at once, across all triggers.
    pub(crate) max_concurrent_decisions: usize,
}

/// Why no decision could be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The trigger is new and [`Limits::max_triggers`] are tracked.
    Full {
        /// The limit.
        max_triggers: usize,
    },
    /// The decision's task ended without an answer: a bug, logged where it happened.
    Lost,
}

/// The state of every trigger the scaler has seen recently.
#[derive(Debug)]
pub(crate) struct Registry {
    limits: Limits,
    /// The time base of the planners' clocks.
    epoch: Instant,
    /// Permits for decisions in flight.
    decisions: Arc<Semaphore>,
    publish: Publish,
    /// Least recently used first.
    tracked: Mutex<LinkedHashMap<StateKey, Tracked>>,
}

/// A trigger under one configuration (by its fingerprint).
#[derive(Debug, PartialEq, Eq, Hash)]
struct StateKey {
    trigger: TriggerKey,
    fingerprint: u64,
}

#[derive(Debug)]
struct Tracked {
    last_used: Instant,
    entry: Arc<Entry>,
}

#[derive(Debug)]
struct Entry {
    key: TriggerKey,
    config: ScalerConfig,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The last decision and when it was made.
    memo: Option<(Instant, Outcome)>,
    /// The decision in flight: its answer arrives here.
    running: Option<watch::Receiver<Option<Outcome>>>,
    /// `None` while a decision holds it.
    evaluator: Option<Evaluator>,
}

impl Registry {
    pub(crate) fn new(limits: Limits, publish: Publish) -> Self {
        Registry {
            limits,
            epoch: Instant::now(),
            decisions: Arc::new(Semaphore::new(limits.max_concurrent_decisions.max(1))),
            publish,
            tracked: Mutex::new(LinkedHashMap::new()),
        }
    }

    /// The decision for `key` under `config`: the memoised one if younger than the decision
    /// interval, else the one running, else a new one from what `measure` returns, made in a
    /// task of its own (so that it completes, and is memoised, even if this caller goes away).
    ///
    /// # Errors
    ///
    /// [`Refused::Full`] for a new trigger beyond the limit; [`Refused::Lost`] if the decision
    /// panicked.
    pub(crate) async fn decide<F, Fut>(
        &self,
        key: TriggerKey,
        config: &ScalerConfig,
        measure: F,
    ) -> Result<Outcome, Refused>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Measured<QueryError>> + Send + 'static,
    {
        let entry = self.entry(key, config)?;
        let mut answer = {
            let mut state = lock(&entry.state);
            if let Some((at, outcome)) = &state.memo
                && at.elapsed() < self.limits.decision_interval
            {
                return Ok(outcome.clone());
            }
            match &state.running {
                Some(running) => running.clone(),
                None => {
                    let (sender, receiver) = watch::channel(None);
                    state.running = Some(receiver.clone());
                    tokio::spawn(self.run(Arc::clone(&entry), sender, measure));
                    receiver
                }
            }
        };
        let decided = answer.wait_for(Option::is_some).await;
        match decided.as_deref() {
            Ok(Some(outcome)) => Ok(outcome.clone()),
            _ => Err(Refused::Lost),
        }
    }

    /// One decision for `entry`, under a permit: the queries, then the model on a blocking
    /// thread (Erlang A at large loads takes milliseconds).
    fn run<F, Fut>(
        &self,
        entry: Arc<Entry>,
        answer: watch::Sender<Option<Outcome>>,
        measure: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Measured<QueryError>> + Send + 'static,
    {
        let decisions = Arc::clone(&self.decisions);
        let (epoch, publish) = (self.epoch, self.publish);
        async move {
            // Clears `running` however the task ends, so that a panic does not wedge the
            // trigger: its callers see the sender dropped, and the next one starts afresh.
            let running = Running(&entry);
            let Ok(_permit) = decisions.acquire().await else {
                unreachable!("the semaphore is never closed");
            };
            let measured = measure().await;
            let mut evaluator = lock(&entry.state)
                .evaluator
                .take()
                .unwrap_or_else(|| Evaluator::new(entry.config.clone()));
            let now = Instant::now();
            let since_epoch = now.duration_since(epoch);
            let decided = tokio::task::spawn_blocking(move || {
                let outcome = evaluator.decide(since_epoch, measured);
                (evaluator, outcome)
            })
            .await;
            let (evaluator, outcome) = match decided {
                Ok(decided) => decided,
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(error) => panic!("the decision task did not run: {error}"),
            };
            publish(&entry.key, &entry.config, &outcome);
            {
                let mut state = lock(&entry.state);
                state.evaluator = Some(evaluator);
                state.memo = Some((now, outcome.clone()));
            }
            drop(running);
            answer.send_replace(Some(outcome));
        }
    }

    /// The entry for `key` under `config`, new if there was none, marked used now; forgets the
    /// least recently used triggers past the state TTL on the way.
    fn entry(&self, trigger: TriggerKey, config: &ScalerConfig) -> Result<Arc<Entry>, Refused> {
        let now = Instant::now();
        let key = StateKey {
            trigger,
            fingerprint: config.fingerprint(),
        };
        let mut tracked = lock(&self.tracked);
        if let Some(found) = tracked.to_back(&key) {
            // A fingerprint collision is another configuration: it starts afresh.
            if found.entry.config == *config {
                found.last_used = now;
                return Ok(Arc::clone(&found.entry));
            }
            tracked.remove(&key);
        }
        self.forget_expired(&mut tracked, now);
        if tracked.len() >= self.limits.max_triggers {
            return Err(Refused::Full {
                max_triggers: self.limits.max_triggers,
            });
        }
        let entry = Arc::new(Entry {
            key: key.trigger.clone(),
            config: config.clone(),
            state: Mutex::new(State {
                memo: None,
                running: None,
                evaluator: Some(Evaluator::new(config.clone())),
            }),
        });
        tracked.insert(
            key,
            Tracked {
                last_used: now,
                entry: Arc::clone(&entry),
            },
        );
        Ok(entry)
    }

    /// Forgets the triggers unused for the state TTL; returns how many remain.
    pub(crate) fn sweep(&self) -> usize {
        let mut tracked = lock(&self.tracked);
        self.forget_expired(&mut tracked, Instant::now());
        // Give back the table of a crowd that has gone.
        if tracked.capacity() > 64 && tracked.len() < tracked.capacity() / 4 {
            tracked.shrink_to_fit();
        }
        tracked.len()
    }

    /// How many triggers the registry holds.
    pub(crate) fn len(&self) -> usize {
        lock(&self.tracked).len()
    }

    /// Drops the least recently used triggers while they are past the state TTL: each one
    /// looked at is dropped but the last, so no call walks the live triggers.
    fn forget_expired(&self, tracked: &mut LinkedHashMap<StateKey, Tracked>, now: Instant) {
        while let Some((_, oldest)) = tracked.front()
            && now.duration_since(oldest.last_used) > self.limits.state_ttl
        {
            tracked.pop_front();
        }
    }
}

/// Marks a decision as no longer running when dropped.
struct Running<'a>(&'a Entry);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).running = None;
    }
}

/// The guard, whether or not another thread panicked holding the lock: every critical
/// section here leaves the data consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
