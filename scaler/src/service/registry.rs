//! Per-trigger state: one replica planner per (namespace, ScaledObject, metric, configuration),
//! its last decision memoised for the decision interval, at most one decision running at a time
//! per trigger, decision slots shared between namespaces ([`Slots`]), bounded numbers of
//! triggers tracked in all, per namespace and per ScaledObject, and a trigger forgotten once it
//! goes unused for the state TTL.
//!
//! Each configuration of a trigger has its own state: when KEDA's operator and its metrics
//! server call with different versions of an edited ScaledObject, each keeps its memo and its
//! planner's hold. The one no longer sent is forgotten once a newer configuration of the
//! trigger arrives and it has gone unused for two decision intervals, or after the TTL,
//! whichever comes first, so that it does not hold a place under the caps. An entry keeps its
//! configuration's identity (a keyed 128-bit digest), not its text: a decision runs with the
//! caller's configuration, and only a memoised error keeps the query it names.
//!
//! A decision runs in a task of its own, not in the RPC that asked for it: a caller that gives
//! up (a cancelled RPC, a closed connection) leaves it running, and the next caller for the
//! same trigger waits for that decision instead of starting a second one. A decision waits for
//! a slot at most [`Limits::max_decision_wait`]; past it, it is not made ([`Refused::Busy`]),
//! and the next caller starts a new one.
//!
//! A decision whose query timed out is reused longer each time it happens again in a row: for
//! the decision interval, then twice, four times, at most [`MAX_BACKOFF`] times it. Slow
//! queries then hold decision slots less often; any other outcome resets it.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use admit::erlang::ReplicaPlanner;
use hashlink::LinkedHashMap;
use tokio::sync::watch;
use tokio::time::Instant;

use super::slots::Slots;
use crate::decision::{self, Decision, DecisionError, Measured};
use crate::metadata::{ScalerConfig, TriggerKey};
use crate::prometheus::{QueryError, QueryErrorKind};

/// A decision as the registry hands it out: shared by every call while it is memoised.
pub(crate) type Outcome = Result<Decision, DecisionError<QueryError>>;

/// What a finished decision is reported to, once, whoever asked for it: the service's metrics
/// and logs. The duration is how long it will be reused.
pub(crate) type Publish = fn(&TriggerKey, &ScalerConfig, &Outcome, Duration);

/// The longest a timed-out decision is reused, in decision intervals.
pub(crate) const MAX_BACKOFF: u32 = 8;

/// How long state lives and how much of it there may be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// A decision younger than this is reused.
    pub(crate) decision_interval: Duration,
    /// A trigger unused for longer is forgotten.
    pub(crate) state_ttl: Duration,
    /// The most triggers tracked at once.
    pub(crate) max_triggers: usize,
    /// The most triggers tracked at once in one namespace.
    pub(crate) max_triggers_per_namespace: usize,
    /// The most triggers tracked at once for one ScaledObject.
    pub(crate) max_triggers_per_object: usize,
    /// The most decisions running at once, across all triggers.
    pub(crate) max_concurrent_decisions: usize,
    /// The most decisions running at once for the triggers of one namespace.
    pub(crate) max_concurrent_decisions_per_namespace: usize,
    /// The longest a decision waits for a slot.
    pub(crate) max_decision_wait: Duration,
}

/// Why no decision could be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The trigger is new and one of the caps on tracked triggers is reached.
    Full(Cap),
    /// No decision slot came free within [`Limits::max_decision_wait`]: the decision was not
    /// made.
    Busy,
    /// The decision's task ended without an answer: a bug, logged where it happened.
    Lost,
}

/// A cap on the triggers tracked, and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    /// [`Limits::max_triggers`].
    Scaler(usize),
    /// [`Limits::max_triggers_per_namespace`].
    Namespace(usize),
    /// [`Limits::max_triggers_per_object`].
    Object(usize),
}

/// What a decision's callers are sent.
type Answer = Result<Outcome, Refused>;

/// The state of every trigger the scaler has seen recently.
#[derive(Debug)]
pub(crate) struct Registry {
    limits: Limits,
    /// The time base of the planners' clocks.
    epoch: Instant,
    slots: Arc<Slots>,
    publish: Publish,
    /// The key of the configurations' digests, random for each registry.
    digest_key: RandomState,
    tracked: Mutex<Tracked>,
}

/// A trigger under one configuration (by its [digest](Registry::digest)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct StateKey {
    trigger: TriggerKey,
    digest: [u64; 2],
}

/// The entries, and how many each namespace and ScaledObject has.
#[derive(Debug, Default)]
struct Tracked {
    /// Least recently used first.
    entries: LinkedHashMap<StateKey, Used>,
    per_namespace: HashMap<Arc<str>, usize>,
    per_object: HashMap<(Arc<str>, Arc<str>), usize>,
}

#[derive(Debug)]
struct Used {
    last_used: Instant,
    entry: Arc<Entry>,
}

#[derive(Debug)]
struct Entry {
    key: TriggerKey,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The last decision and until when it is reused.
    memo: Option<(Instant, Outcome)>,
    /// The decision in flight: its answer arrives here.
    running: Option<watch::Receiver<Option<Answer>>>,
    /// Made at the first decision; taken while a decision runs.
    planner: Option<ReplicaPlanner>,
    /// Decisions in a row whose query timed out.
    timeouts: u32,
}

impl Registry {
    pub(crate) fn new(limits: Limits, publish: Publish) -> Self {
        Registry {
            limits,
            epoch: Instant::now(),
            slots: Slots::new(
                limits.max_concurrent_decisions,
                limits.max_concurrent_decisions_per_namespace,
            ),
            publish,
            digest_key: RandomState::new(),
            tracked: Mutex::new(Tracked::default()),
        }
    }

    /// A 128-bit digest of `config` (SipHash under a key no caller knows, of the config after
    /// two different tags): two configurations with one digest are the same one, whoever chose
    /// them.
    fn digest(&self, config: &ScalerConfig) -> [u64; 2] {
        [0u8, 1].map(|tag| self.digest_key.hash_one((tag, config)))
    }

    /// The decision for `key` under `config`: the memoised one if still fresh, else the one
    /// running, else a new one from what `measure` returns, made in a task of its own (so that
    /// it completes, and is memoised, even if this caller goes away).
    ///
    /// # Errors
    ///
    /// [`Refused::Full`] for a new trigger beyond a cap; [`Refused::Busy`] if the decision found
    /// no slot in time; [`Refused::Lost`] if it panicked.
    pub(crate) async fn decide<F, Fut>(
        &self,
        key: TriggerKey,
        config: &Arc<ScalerConfig>,
        measure: F,
    ) -> Result<Outcome, Refused>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Measured<QueryError>> + Send + 'static,
    {
        let entry = self.entry(key, config)?;
        let mut answer = {
            let mut state = lock(&entry.state);
            if let Some((until, outcome)) = &state.memo
                && Instant::now() < *until
            {
                return Ok(outcome.clone());
            }
            match &state.running {
                Some(running) => running.clone(),
                None => {
                    let (sender, receiver) = watch::channel(None);
                    state.running = Some(receiver.clone());
                    let config = Arc::clone(config);
                    tokio::spawn(self.run(Arc::clone(&entry), config, sender, measure));
                    receiver
                }
            }
        };
        let decided = answer.wait_for(Option::is_some).await;
        match decided.as_deref() {
            Ok(Some(answer)) => answer.clone(),
            _ => Err(Refused::Lost),
        }
    }

    /// One decision for `entry`, under a slot: the queries, then the model on a blocking
    /// thread (Erlang A at large loads takes milliseconds).
    fn run<F, Fut>(
        &self,
        entry: Arc<Entry>,
        config: Arc<ScalerConfig>,
        answer: watch::Sender<Option<Answer>>,
        measure: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Measured<QueryError>> + Send + 'static,
    {
        let slots = Arc::clone(&self.slots);
        let (epoch, publish, limits) = (self.epoch, self.publish, self.limits);
        async move {
            // Clears `running` however the task ends, so that a panic does not wedge the
            // trigger: its callers see the sender dropped, and the next one starts afresh.
            let running = Running(&entry);
            let namespace = &entry.key.namespace;
            let Some(_slot) = slots.acquire(namespace, limits.max_decision_wait).await else {
                drop(running);
                answer.send_replace(Some(Err(Refused::Busy)));
                return;
            };
            let measured = measure().await;
            let mut planner = lock(&entry.state).planner.take();
            let now = Instant::now();
            let since_epoch = now.duration_since(epoch);
            let deciding = Arc::clone(&config);
            let decided = tokio::task::spawn_blocking(move || {
                let outcome = decision::decide(&deciding, &mut planner, since_epoch, measured);
                (planner, outcome)
            })
            .await;
            let (planner, outcome) = match decided {
                Ok(decided) => decided,
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(error) => panic!("the decision task did not run: {error}"),
            };
            let reused = {
                let mut state = lock(&entry.state);
                state.planner = planner;
                state.timeouts = if timed_out(&outcome) {
                    state.timeouts.saturating_add(1)
                } else {
                    0
                };
                let reused = reuse(limits.decision_interval, state.timeouts);
                state.memo = Some((now + reused, outcome.clone()));
                reused
            };
            publish(&entry.key, &config, &outcome, reused);
            drop(running);
            answer.send_replace(Some(Ok(outcome)));
        }
    }

    /// The entry for `key` under `config`, new if there was none, marked used now; forgets the
    /// least recently used triggers past the state TTL on the way.
    fn entry(
        &self,
        trigger: TriggerKey,
        config: &Arc<ScalerConfig>,
    ) -> Result<Arc<Entry>, Refused> {
        let now = Instant::now();
        let key = StateKey {
            trigger,
            digest: self.digest(config),
        };
        let mut tracked = lock(&self.tracked);
        if let Some(found) = tracked.entries.to_back(&key) {
            found.last_used = now;
            return Ok(Arc::clone(&found.entry));
        }
        self.forget_expired(&mut tracked, now);
        self.forget_replaced(&mut tracked, &key.trigger, now);
        let limits = &self.limits;
        let trigger = &key.trigger;
        let object = (Arc::clone(&trigger.namespace), Arc::clone(&trigger.name));
        if tracked.entries.len() >= limits.max_triggers {
            return Err(Refused::Full(Cap::Scaler(limits.max_triggers)));
        }
        let in_namespace = tracked.per_namespace.get(&trigger.namespace);
        if in_namespace.is_some_and(|&count| count >= limits.max_triggers_per_namespace) {
            return Err(Refused::Full(Cap::Namespace(
                limits.max_triggers_per_namespace,
            )));
        }
        if tracked
            .per_object
            .get(&object)
            .is_some_and(|&count| count >= limits.max_triggers_per_object)
        {
            return Err(Refused::Full(Cap::Object(limits.max_triggers_per_object)));
        }
        let entry = Arc::new(Entry {
            key: key.trigger.clone(),
            state: Mutex::new(State {
                memo: None,
                running: None,
                planner: None,
                timeouts: 0,
            }),
        });
        *tracked
            .per_namespace
            .entry(Arc::clone(&trigger.namespace))
            .or_default() += 1;
        *tracked.per_object.entry(object).or_default() += 1;
        tracked.entries.insert(
            key,
            Used {
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
        tracked.shrink();
        tracked.entries.len()
    }

    /// Its limits.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How many triggers the registry holds.
    pub(crate) fn len(&self) -> usize {
        lock(&self.tracked).entries.len()
    }

    /// Drops the other configurations of `trigger` (a new one is coming) that no caller has
    /// asked about for two decision intervals: an edited ScaledObject's old configuration,
    /// which KEDA no longer sends, so that it does not hold a place under the caps until the
    /// state TTL. A configuration still in use (KEDA's operator and metrics server may send
    /// two versions for a while) stays.
    fn forget_replaced(&self, tracked: &mut Tracked, trigger: &TriggerKey, now: Instant) {
        let unused_for = self.limits.decision_interval.saturating_mul(2);
        let replaced: Vec<StateKey> = tracked
            .entries
            .iter()
            .filter(|(key, used)| {
                key.trigger == *trigger && now.duration_since(used.last_used) >= unused_for
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in replaced {
            tracked.entries.remove(&key);
            tracked.uncount(&key.trigger);
        }
    }

    /// Drops the least recently used triggers while they are past the state TTL: each one
    /// looked at is dropped but the last, so no call walks the live triggers.
    fn forget_expired(&self, tracked: &mut Tracked, now: Instant) {
        while let Some((_, oldest)) = tracked.entries.front()
            && now.duration_since(oldest.last_used) > self.limits.state_ttl
        {
            let Some((key, _)) = tracked.entries.pop_front() else {
                break;
            };
            tracked.uncount(&key.trigger);
        }
    }
}

impl Tracked {
    /// Counts one trigger fewer for its namespace and ScaledObject.
    fn uncount(&mut self, trigger: &TriggerKey) {
        fn decrement<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
            if let Some(count) = counts.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(key);
                }
            }
        }
        decrement(&mut self.per_namespace, &trigger.namespace);
        let object = (Arc::clone(&trigger.namespace), Arc::clone(&trigger.name));
        decrement(&mut self.per_object, &object);
    }

    /// Gives back the tables of a crowd that has gone.
    fn shrink(&mut self) {
        let sparse = |len: usize, capacity: usize| capacity > 64 && len < capacity / 4;
        if sparse(self.entries.len(), self.entries.capacity()) {
            self.entries.shrink_to_fit();
        }
        if sparse(self.per_namespace.len(), self.per_namespace.capacity()) {
            self.per_namespace.shrink_to_fit();
        }
        if sparse(self.per_object.len(), self.per_object.capacity()) {
            self.per_object.shrink_to_fit();
        }
    }
}

/// Whether a decision failed because a query timed out (Prometheus' timeout or ours).
fn timed_out(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Err(DecisionError::Query(QueryError {
            kind: QueryErrorKind::Timeout { .. },
            ..
        }))
    )
}

/// How long a decision is reused after `timeouts` timed-out decisions in a row: the interval,
/// doubled for each timeout after the first, at most [`MAX_BACKOFF`] intervals.
fn reuse(interval: Duration, timeouts: u32) -> Duration {
    let factor = 1u32
        .checked_shl(timeouts.saturating_sub(1))
        .map_or(MAX_BACKOFF, |factor| factor.min(MAX_BACKOFF));
    interval.saturating_mul(factor)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_out_decisions_are_reused_longer_up_to_a_bound() {
        let interval = Duration::from_secs(10);
        let reused: Vec<u64> = (0..7)
            .map(|timeouts| reuse(interval, timeouts).as_secs())
            .collect();
        assert_eq!(reused, [10, 10, 20, 40, 80, 80, 80]);
        assert_eq!(reuse(interval, u32::MAX), interval * MAX_BACKOFF);
    }
}
