//! The registry's memo, resets and eviction, on tokio's paused clock.

use std::cell::Cell;
use std::time::Duration;

use super::registry::{Lifetimes, Registry, TriggerKey};
use crate::decision::Measured;
use crate::metadata::ScalerConfig;

const INTERVAL: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(600);

fn registry() -> Registry {
    Registry::new(Lifetimes {
        decision_interval: INTERVAL,
        state_ttl: TTL,
    })
}

fn config(extra: &[(&str, &str)]) -> ScalerConfig {
    let metadata = admit_testkit::keda::metadata(
        &[
            ("prometheusURL", "http://prometheus:9090"),
            ("arrivalRateQuery", "lambda"),
            ("serviceTimeQuery", "s"),
            ("waitThresholdSeconds", "0"),
            ("targetSL", "0.8"),
        ],
        extra,
    );
    ScalerConfig::from_metadata(&metadata).expect("valid metadata")
}

fn key(name: &str) -> TriggerKey {
    TriggerKey {
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        metric: "admit-erlang".to_owned(),
    }
}

/// λ at s = 0.25 s: at T = 0, p = 0.8, 120/s needs 37 servers and 400/s needs 111.
fn load(arrival_rate: f64) -> Measured {
    Measured {
        arrival_rate: Ok(arrival_rate),
        service_time: Ok(0.25),
    }
}

/// Decides for `key` with λ = `arrival_rate`, counting the queries in `queried`.
async fn decide(
    registry: &Registry,
    key: TriggerKey,
    config: &ScalerConfig,
    arrival_rate: f64,
    queried: &Cell<u32>,
) -> (u64, bool) {
    let answer = registry
        .decide(key, config, || async {
            queried.set(queried.get() + 1);
            load(arrival_rate)
        })
        .await;
    (answer.outcome.expect("a decision").replicas, answer.fresh)
}

#[tokio::test(start_paused = true)]
async fn a_decision_is_reused_within_the_interval() {
    let registry = registry();
    let config = config(&[]);
    let queried = Cell::new(0);
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried).await,
        (37, true)
    );
    tokio::time::advance(INTERVAL - Duration::from_millis(1)).await;
    // A changed load is not seen while the memo holds.
    assert_eq!(
        decide(&registry, key("a"), &config, 400.0, &queried).await,
        (37, false)
    );
    assert_eq!(queried.get(), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    let (replicas, fresh) = decide(&registry, key("a"), &config, 400.0, &queried).await;
    assert!(fresh);
    assert!(replicas > 37, "{replicas}");
    assert_eq!(queried.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn failures_are_reused_too() {
    let registry = registry();
    let config = config(&[]);
    let mut calls = 0;
    for _ in 0..3 {
        let answer = registry
            .decide(key("a"), &config, || {
                calls += 1;
                async {
                    Measured {
                        arrival_rate: Ok(-1.0),
                        service_time: Ok(0.25),
                    }
                }
            })
            .await;
        assert!(answer.outcome.is_err());
    }
    assert_eq!(
        calls, 1,
        "IsActive after a failed GetMetrics must not query again"
    );
}

#[tokio::test(start_paused = true)]
async fn keys_do_not_share_state() {
    let registry = registry();
    let config = config(&[]);
    let queried = Cell::new(0);
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried)
            .await
            .0,
        37
    );
    assert_eq!(
        decide(&registry, key("b"), &config, 400.0, &queried).await,
        (111, true)
    );
    let mut other_metric = key("a");
    other_metric.metric = "second".to_owned();
    assert!(
        decide(&registry, other_metric, &config, 400.0, &queried)
            .await
            .1
    );
    assert_eq!(queried.get(), 3);
    assert_eq!(registry.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_changed_configuration_starts_afresh() {
    let registry = registry();
    let held = config(&[("scaleDownHoldSeconds", "600")]);
    let queried = Cell::new(0);
    assert_eq!(
        decide(&registry, key("a"), &held, 400.0, &queried).await.0,
        111
    );
    tokio::time::advance(INTERVAL).await;
    // The hold keeps 111 under the same configuration...
    assert_eq!(
        decide(&registry, key("a"), &held, 120.0, &queried).await.0,
        111
    );
    // ...and a changed one (a new planner) answers at once, even within the interval.
    let changed = config(&[("scaleDownHoldSeconds", "601")]);
    assert_eq!(
        decide(&registry, key("a"), &changed, 120.0, &queried).await,
        (37, true)
    );
    assert_eq!(registry.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn unused_triggers_are_forgotten_after_the_ttl() {
    let registry = registry();
    let config = config(&[]);
    let queried = Cell::new(0);
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
    // A forgotten trigger comes back with a new planner.
    assert_eq!(
        decide(&registry, key("a"), &config, 120.0, &queried).await,
        (37, true)
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_calls_for_one_trigger_query_once() {
    let registry = registry();
    let config = config(&[]);
    let queried = Cell::new(0);
    let slow = |arrival_rate| {
        let registry = &registry;
        let config = &config;
        let queried = &queried;
        async move {
            registry
                .decide(key("a"), config, || async move {
                    queried.set(queried.get() + 1);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    load(arrival_rate)
                })
                .await
        }
    };
    let (first, second) = tokio::join!(slow(120.0), slow(400.0));
    assert_eq!(queried.get(), 1);
    assert!(first.fresh && !second.fresh);
    assert_eq!(first.outcome, second.outcome);
}
