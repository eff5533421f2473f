//! The registry's memo, single flight, limits, resets and eviction, on tokio's paused clock.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::registry::{Cap, Limits, Outcome, Refused, Registry};
use crate::metadata::{ScalerConfig, TriggerKey};
use crate::prometheus::QueryError;

/// What the tests' measurements give.
type Measured = crate::decision::Measured<QueryError>;

const INTERVAL: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(600);
/// The longest wait for a decision slot.
const WAIT: Duration = Duration::from_secs(10);

thread_local! {
    /// Decisions published on this thread (the tests' runtimes have one thread).
    static PUBLISHED: Cell<u32> = const { Cell::new(0) };
}

fn count(_: &TriggerKey, _: &ScalerConfig, _: &Outcome, _: Duration) {
    PUBLISHED.set(PUBLISHED.get() + 1);
}

fn limits() -> Limits {
    Limits {
        decision_interval: INTERVAL,
        state_ttl: TTL,
        max_triggers: 100,
        max_triggers_per_namespace: 100,
        max_triggers_per_object: 100,
        max_concurrent_decisions: 8,
        max_concurrent_decisions_per_namespace: 8,
        max_decision_wait: WAIT,
    }
}

fn registry() -> Registry {
    Registry::new(limits(), count)
}

/// A registry with the test's limits but `max_triggers` and `max_concurrent_decisions`.
fn registry_with(max_triggers: usize, max_concurrent_decisions: usize) -> Registry {
    Registry::new(
        Limits {
            max_triggers,
            max_concurrent_decisions,
            ..limits()
        },
        count,
    )
}

fn config(extra: &[(&str, &str)]) -> Arc<ScalerConfig> {
    let metadata = admit_testkit::keda::metadata(
        &[
            ("prometheusURL", "http://prometheus:9090"),
            ("arrivalRateQuery", "lambda"),
            ("serviceTimeQuery", "s"),
            ("waitThresholdSeconds", "0"),
            ("targetSL", "0.8"),
            // The seed's Erlang C vectors.
            ("balancing", "pooled"),
        ],
        extra,
    );
    Arc::new(ScalerConfig::from_metadata(&metadata).expect("valid metadata"))
}

fn key(name: &str) -> TriggerKey {
    TriggerKey::new("shop", name, "admit-erlang")
}

/// λ at s = 0.25 s: at T = 0, p = 0.8, 120/s needs 37 servers and 400/s needs 111.
fn load(arrival_rate: f64) -> Measured {
    Measured {
        arrival_rate: Ok(arrival_rate),
        service_time: Ok(0.25),
    }
}

/// Counts the measurements made.
#[derive(Clone, Default)]
struct Queried(Arc<AtomicU32>);

impl Queried {
    fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// A measurement of λ = `arrival_rate`, counted.
    fn load(
        &self,
        arrival_rate: f64,
    ) -> impl FnOnce() -> std::future::Ready<Measured> + Send + 'static {
        let counter = Arc::clone(&self.0);
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::ready(load(arrival_rate))
        }
    }
}

/// Decides for `key` with λ = `arrival_rate`: the replicas.
async fn decide(
    registry: &Registry,
    key: TriggerKey,
    config: &Arc<ScalerConfig>,
    arrival_rate: f64,
    queried: &Queried,
) -> u64 {
    registry
        .decide(key, config, queried.load(arrival_rate))
        .await
        .expect("a trigger's state")
        .expect("a decision")
        .replicas
}

#[tokio::test(start_paused = true)]
async fn a_decision_is_reused_within_the_interval() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried).await,
        37
    );
    tokio::time::advance(INTERVAL - Duration::from_millis(1)).await;
    // A changed load is not seen while the memo holds.
    assert_eq!(
        decide(&registry, key("a"), &config, 400.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    let replicas = decide(&registry, key("a"), &config, 400.0, &queried).await;
    assert!(replicas > 37, "{replicas}");
    assert_eq!(queried.get(), 2);
    assert_eq!(PUBLISHED.get(), 2, "each decision is published once");
}

#[tokio::test(start_paused = true)]
async fn failures_are_reused_too() {
    let registry = registry();
    let config = config(&[]);
    let calls = Arc::new(AtomicU32::new(0));
    for _ in 0..3 {
        let calls = Arc::clone(&calls);
        let outcome = registry
            .decide(key("a"), &config, move || {
                calls.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Measured {
                    arrival_rate: Ok(-1.0),
                    service_time: Ok(0.25),
                })
            })
            .await
            .unwrap();
        assert!(outcome.is_err());
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "IsActive after a failed GetMetrics must not query again"
    );
}

#[tokio::test(start_paused = true)]
async fn keys_do_not_share_state() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried).await,
        37
    );
    assert_eq!(
        decide(&registry, key("b"), &config, 400.0, &queried).await,
        111
    );
    let mut other_metric = key("a");
    other_metric.metric = "second".into();
    decide(&registry, other_metric, &config, 400.0, &queried).await;
    assert_eq!(queried.get(), 3);
    assert_eq!(registry.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn each_configuration_keeps_its_own_hold_and_memo() {
    let registry = registry();
    let held = config(&[("scaleDownHoldSeconds", "600")]);
    let queried = Queried::default();
    assert_eq!(
        decide(&registry, key("a"), &held, 400.0, &queried).await,
        111
    );
    tokio::time::advance(INTERVAL).await;
    // The hold keeps 111 under the same configuration...
    assert_eq!(
        decide(&registry, key("a"), &held, 120.0, &queried).await,
        111
    );
    // ...a changed one (a new planner) answers at once, even within the interval...
    let changed = config(&[("scaleDownHoldSeconds", "601")]);
    assert_eq!(
        decide(&registry, key("a"), &changed, 120.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 3);
    // ...and calls that alternate between the two (KEDA's operator and its metrics server
    // during an edit) neither reset the first one's hold nor re-query within the interval.
    for _ in 0..3 {
        assert_eq!(
            decide(&registry, key("a"), &held, 120.0, &queried).await,
            111
        );
        assert_eq!(
            decide(&registry, key("a"), &changed, 120.0, &queried).await,
            37
        );
    }
    assert_eq!(queried.get(), 3);
    tokio::time::advance(INTERVAL).await;
    assert_eq!(
        decide(&registry, key("a"), &held, 120.0, &queried).await,
        111
    );
    assert_eq!(
        decide(&registry, key("a"), &changed, 120.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 5);
    assert_eq!(registry.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn unused_triggers_are_forgotten_after_the_ttl() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    decide(&registry, key("a"), &config, 120.0, &queried).await;
    tokio::time::advance(TTL / 2).await;
    decide(&registry, key("b"), &config, 120.0, &queried).await;
    tokio::time::advance(TTL / 2).await;
    // Exactly the TTL old: kept.
    assert_eq!(registry.sweep(), 2);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(registry.sweep(), 1);
    // Use keeps a trigger: "b" is used again just before its TTL runs out.
    tokio::time::advance(TTL / 2 - Duration::from_millis(2)).await;
    decide(&registry, key("b"), &config, 120.0, &queried).await;
    tokio::time::advance(TTL).await;
    assert_eq!(registry.sweep(), 1);
    // A forgotten trigger comes back with a new planner, and queries again.
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 4);
}

#[tokio::test(start_paused = true)]
async fn new_triggers_beyond_the_limit_are_refused_until_one_expires() {
    let registry = registry_with(2, limits().max_concurrent_decisions);
    let config = config(&[]);
    let queried = Queried::default();
    decide(&registry, key("a"), &config, 120.0, &queried).await;
    tokio::time::advance(TTL / 2).await;
    decide(&registry, key("b"), &config, 120.0, &queried).await;
    let refused = registry
        .decide(key("c"), &config, queried.load(120.0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::Full(Cap::Scaler(2)));
    assert_eq!(queried.get(), 2, "a refused trigger queries nothing");
    // Known triggers are still served.
    tokio::time::advance(INTERVAL).await;
    decide(&registry, key("b"), &config, 120.0, &queried).await;
    // Once "a" is past its TTL, "c" takes its place without waiting for a sweep.
    tokio::time::advance(TTL / 2).await;
    decide(&registry, key("c"), &config, 120.0, &queried).await;
    assert_eq!(registry.len(), 2);
}

/// A measurement that waits for `release` before it answers, counted.
fn held(
    queried: &Queried,
    release: &Arc<Notify>,
    arrival_rate: f64,
) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Measured> + Send>> + Send + 'static {
    let (counter, release) = (Arc::clone(&queried.0), Arc::clone(release));
    move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            release.notified().await;
            load(arrival_rate)
        })
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_calls_for_one_trigger_query_once() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    let release = Arc::new(Notify::new());
    let first = registry.decide(key("a"), &config, held(&queried, &release, 120.0));
    let second = registry.decide(key("a"), &config, held(&queried, &release, 400.0));
    let releasing = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        release.notify_one();
    };
    let (first, second, ()) = tokio::join!(first, second, releasing);
    assert_eq!(queried.get(), 1);
    assert_eq!(first, second);
    assert_eq!(first.unwrap().unwrap().replicas, 37);
}

/// Asks for a decision for "a" at 120/s whose queries wait for `release`, and gives up after
/// 1 s, as a cancelled RPC does: the decision goes on.
async fn give_up(
    registry: &Registry,
    config: &Arc<ScalerConfig>,
    queried: &Queried,
    release: &Arc<Notify>,
) {
    let gave_up = tokio::time::timeout(
        Duration::from_secs(1),
        registry.decide(key("a"), config, held(queried, release, 120.0)),
    )
    .await;
    assert!(gave_up.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_gives_up_leaves_its_decision_to_the_next() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    let release = Arc::new(Notify::new());
    give_up(&registry, &config, &queried, &release).await;
    // The next caller waits for that decision rather than starting another.
    let next = registry.decide(key("a"), &config, held(&queried, &release, 400.0));
    let releasing = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        release.notify_one();
    };
    let (next, ()) = tokio::join!(next, releasing);
    assert_eq!(queried.get(), 1);
    assert_eq!(next.unwrap().unwrap().replicas, 37);
    assert_eq!(PUBLISHED.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_decision_finishes_and_is_memoised_with_no_caller_left() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    let release = Arc::new(Notify::new());
    give_up(&registry, &config, &queried, &release).await;
    release.notify_one();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(PUBLISHED.get(), 1, "the abandoned decision completed");
    // Within the interval of that decision: its memo, no new query.
    assert_eq!(
        decide(&registry, key("a"), &config, 400.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn decisions_across_triggers_take_turns_beyond_the_limit() {
    let registry = registry_with(limits().max_triggers, 1);
    let config = config(&[]);
    let queried = Queried::default();
    let release = Arc::new(Notify::new());
    let first = registry.decide(key("a"), &config, held(&queried, &release, 120.0));
    let second = registry.decide(key("b"), &config, held(&queried, &release, 120.0));
    let checking = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Only the first decision has started its queries.
        assert_eq!(queried.get(), 1);
        release.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(queried.get(), 2);
        release.notify_one();
    };
    let (first, second, ()) = tokio::join!(first, second, checking);
    assert!(first.unwrap().is_ok() && second.unwrap().is_ok());
}

fn key_in(namespace: &str, name: &str) -> TriggerKey {
    TriggerKey::new(namespace, name, "admit-erlang")
}

/// A registry with the test's limits but `change`d.
fn registry_where(change: impl FnOnce(&mut Limits)) -> Registry {
    let mut limits = limits();
    change(&mut limits);
    Registry::new(limits, count)
}

#[tokio::test(start_paused = true)]
async fn one_namespace_s_hanging_decisions_leave_slots_to_another() {
    let registry = registry_where(|limits| {
        limits.max_concurrent_decisions = 4;
        limits.max_concurrent_decisions_per_namespace = 2;
    });
    let config = config(&[]);
    let queried = Queried::default();
    let never = Arc::new(Notify::new());
    // Eight decisions of `slow` whose queries never answer: two hold its share, six wait.
    let registry = Arc::new(registry);
    for i in 0..8 {
        let (registry, config) = (Arc::clone(&registry), Arc::clone(&config));
        let measure = held(&queried, &never, 120.0);
        tokio::spawn(async move {
            let _ = registry
                .decide(key_in("slow", &format!("s{i}")), &config, measure)
                .await;
        });
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(queried.get(), 2, "the slow namespace holds its share only");
    let start = tokio::time::Instant::now();
    let replicas = decide(&registry, key_in("other", "a"), &config, 120.0, &queried).await;
    assert_eq!((replicas, start.elapsed()), (37, Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn a_decision_without_a_slot_in_time_is_refused_not_made_and_not_memoised() {
    let registry = registry_with(limits().max_triggers, 1);
    let config = config(&[]);
    let queried = Queried::default();
    let release = Arc::new(Notify::new());
    let holding = registry.decide(key("a"), &config, held(&queried, &release, 120.0));
    let waiting = async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let start = tokio::time::Instant::now();
        let refused = registry
            .decide(key("b"), &config, queried.load(120.0))
            .await
            .unwrap_err();
        assert_eq!((refused, start.elapsed()), (Refused::Busy, WAIT));
        assert_eq!(queried.get(), 1, "b never queried");
        release.notify_one();
    };
    let (held, ()) = tokio::join!(holding, waiting);
    assert!(held.unwrap().is_ok());
    // The next call for b decides: nothing was memoised.
    assert_eq!(
        decide(&registry, key("b"), &config, 120.0, &queried).await,
        37
    );
    assert_eq!(queried.get(), 2);
}

/// A measurement whose λ query timed out, counted.
fn timing_out(queried: &Queried) -> impl FnOnce() -> std::future::Ready<Measured> + Send + 'static {
    let counter = Arc::clone(&queried.0);
    move || {
        counter.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Measured {
            arrival_rate: Err(QueryError {
                query: "lambda".into(),
                kind: crate::prometheus::QueryErrorKind::Timeout {
                    message: "no answer within 5s".into(),
                },
            }),
            service_time: Ok(0.25),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn timed_out_decisions_are_reused_longer_until_another_outcome() {
    let registry = registry();
    let config = config(&[]);
    let queried = Queried::default();
    // The n-th timeout in a row is reused for 1, 2, 4, 8, 8 intervals: a new query only then.
    let mut queries_at = Vec::new();
    let start = tokio::time::Instant::now();
    while queries_at.len() < 6 {
        let before = queried.get();
        let outcome = registry
            .decide(key("a"), &config, timing_out(&queried))
            .await
            .unwrap();
        assert!(outcome.is_err());
        if queried.get() > before {
            queries_at.push(start.elapsed().as_secs() / INTERVAL.as_secs());
        }
        tokio::time::advance(INTERVAL).await;
    }
    assert_eq!(queries_at, [0, 1, 3, 7, 15, 23]);
    // A success resets it: the next timeout is reused for one interval.
    tokio::time::advance(INTERVAL * 8).await;
    decide(&registry, key("a"), &config, 120.0, &queried).await;
    tokio::time::advance(INTERVAL).await;
    let before = queried.get();
    for _ in 0..2 {
        let _ = registry
            .decide(key("a"), &config, timing_out(&queried))
            .await;
        tokio::time::advance(INTERVAL).await;
    }
    assert_eq!(queried.get(), before + 2);
}

#[tokio::test(start_paused = true)]
async fn triggers_are_capped_per_namespace_and_per_object() {
    let registry = registry_where(|limits| {
        limits.max_triggers_per_namespace = 3;
        limits.max_triggers_per_object = 2;
    });
    let config = config(&[]);
    let queried = Queried::default();
    let metric = |name: &str, metric: &str| TriggerKey::new("shop", name, metric);
    decide(&registry, metric("a", "one"), &config, 120.0, &queried).await;
    decide(&registry, metric("a", "two"), &config, 120.0, &queried).await;
    // A third trigger of object `a` (or a second configuration of one) is refused...
    let refused = registry
        .decide(metric("a", "three"), &config, queried.load(120.0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::Full(Cap::Object(2)));
    let other_config = self::config(&[("slTolerance", "0.2")]);
    let refused = registry
        .decide(metric("a", "one"), &other_config, queried.load(120.0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::Full(Cap::Object(2)));
    // ...another object of the namespace is not, up to the namespace's cap...
    decide(&registry, metric("b", "one"), &config, 120.0, &queried).await;
    let refused = registry
        .decide(metric("c", "one"), &config, queried.load(120.0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::Full(Cap::Namespace(3)));
    // ...and another namespace is not at all.
    decide(&registry, key_in("other", "c"), &config, 120.0, &queried).await;
    assert_eq!(queried.get(), 4, "a refused trigger queries nothing");
    // Forgotten triggers free their places.
    tokio::time::advance(TTL + Duration::from_millis(1)).await;
    decide(&registry, metric("c", "one"), &config, 120.0, &queried).await;
    decide(&registry, metric("a", "three"), &config, 120.0, &queried).await;
    assert_eq!(registry.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_edited_trigger_gives_its_old_configuration_s_place_back() {
    let registry = registry_where(|limits| {
        limits.max_triggers_per_namespace = 1;
    });
    let queried = Queried::default();
    let old = config(&[]);
    let edited = config(&[("slTolerance", "0.2")]);
    decide(&registry, key("a"), &old, 120.0, &queried).await;
    // At once, the edit is a second configuration in use (KEDA's operator and metrics server
    // may send both for a while): the namespace's cap refuses it.
    let refused = registry
        .decide(key("a"), &edited, queried.load(120.0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::Full(Cap::Namespace(1)));
    // Two decision intervals later, nobody has asked about the old one: the edit takes its
    // place, long before the state TTL.
    tokio::time::advance(INTERVAL * 2).await;
    decide(&registry, key("a"), &edited, 120.0, &queried).await;
    assert_eq!(registry.len(), 1);
}

#[test]
fn the_largest_valid_request_sizes_the_limit() {
    use super::{largest_request, max_request_bytes, names};
    use prost::Message;
    let request = largest_request();
    let object = request.scaled_object_ref.as_ref().unwrap();
    names::object_name(&object.name).unwrap();
    names::namespace(&object.namespace).unwrap();
    assert_eq!(object.name.len(), names::SUBDOMAIN_MAX);
    assert_eq!(object.namespace.len(), names::LABEL_MAX);
    ScalerConfig::from_metadata(&object.scaler_metadata).unwrap();
    assert_eq!(request.encoded_len(), max_request_bytes());
    println!("the largest valid request: {} bytes", max_request_bytes());
    assert_eq!(max_request_bytes(), 34_812, "the guide quotes it");
}
