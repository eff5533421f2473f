//! The client's series through a real Prometheus recorder, rendered to the text format: a
//! throttle's and a retry budget's totals by class, a map's destinations capped at 64 with the
//! rest in `other`, counters that never go back when a destination leaves its map and returns,
//! and the class the layer and the retry policy read from each request's header.

#![cfg(feature = "metrics")]

use std::sync::Arc;

use admit::client::{RetryBudget, Throttle, Throttles};
use admit::clock::ManualClock;
use admit::criticality::Criticality;
use admit::metrics::{MetricsError, Reporter, names};
use admit_testkit::scrape::Scrape;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

/// What `recorder` renders now, parsed.
fn rendered(recorder: &PrometheusRecorder) -> Scrape {
    Scrape::parse(&recorder.handle().render())
}

/// The destinations of the series of `metric` labelled `client`.
fn destinations(scrape: &Scrape, metric: &str, client: &str) -> Vec<String> {
    let prefix = format!(r#"{metric}{{client="{client}",destination=""#);
    scrape
        .values
        .keys()
        .filter_map(|series| series.strip_prefix(&prefix))
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_owned()))
        .collect()
}

fn attempts(client: &str, destination: &str, class: &str) -> String {
    format!(
        r#"admit_client_attempts_total{{client="{client}",destination="{destination}",class="{class}"}}"#
    )
}

fn throttled(client: &str, destination: &str, class: &str) -> String {
    format!(
        r#"admit_client_throttled_total{{client="{client}",destination="{destination}",class="{class}"}}"#
    )
}

fn probability(client: &str, destination: &str) -> String {
    format!(
        r#"admit_client_throttle_probability_ratio{{client="{client}",destination="{destination}"}}"#
    )
}

fn throttles(name: &str, capacity: usize) -> Arc<Throttles<String, ManualClock>> {
    Arc::new(
        Throttle::builder()
            .name(name.to_owned())
            .clock(ManualClock::new())
            .per_destination(capacity)
            .unwrap(),
    )
}

/// `n` attempts through `throttle`, each answered as accepted.
fn attempt(throttle: &Throttle<ManualClock>, n: usize) {
    for _ in 0..n {
        if throttle.try_send().is_ok() {
            throttle.accepted();
        }
    }
}

#[test]
fn a_throttle_and_a_retry_budget_render_exactly() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let throttle = Arc::new(
        Throttle::builder()
            .name("checkout")
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let budget = Arc::new(
        RetryBudget::builder()
            .name("checkout")
            .ratio(0.0)
            .floor_per_second(0.1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .throttle(Arc::clone(&throttle))
            .retry_budget(Arc::clone(&budget))
            .build()
            .unwrap()
    });
    reporter.report();
    let scrape = rendered(&recorder);
    for class in Criticality::ALL.map(|class| class.as_str()) {
        assert_eq!(scrape.value(&attempts("checkout", "checkout", class)), 0.0);
        assert_eq!(scrape.value(&throttled("checkout", "checkout", class)), 0.0);
    }
    assert_eq!(scrape.value(&probability("checkout", "checkout")), 0.0);

    // Ten accepted, then an overload: the backend refuses 100, and 200 more attempts are
    // mostly refused here.
    attempt(&throttle, 10);
    for _ in 0..100 {
        throttle.refused();
    }
    let refused_here = (0..200).filter(|_| throttle.try_send().is_err()).count();
    assert!(refused_here > 100, "{refused_here}");
    // One request, one retry allowed by the floor (1 per 10 s), one denied.
    budget.deposit();
    assert!(budget.try_withdraw());
    assert!(!budget.try_withdraw());

    reporter.report();
    let scrape = rendered(&recorder);
    assert_eq!(
        scrape.value(&attempts("checkout", "checkout", "critical")),
        210.0
    );
    assert_eq!(
        scrape.value(&throttled("checkout", "checkout", "critical")),
        refused_here as f64
    );
    assert_eq!(
        scrape.value(&attempts("checkout", "checkout", "sheddable")),
        0.0
    );
    assert_eq!(
        scrape.value(&probability("checkout", "checkout")),
        throttle.snapshot().probability
    );
    let retries = |class: &str, outcome: &str| {
        format!(
            r#"admit_client_retries_total{{client="checkout",class="{class}",outcome="{outcome}"}}"#
        )
    };
    assert_eq!(scrape.value(&retries("critical", "spent")), 1.0);
    assert_eq!(scrape.value(&retries("critical", "denied")), 1.0);
    assert_eq!(scrape.value(&retries("sheddable", "spent")), 0.0);
    assert_eq!(
        scrape.value(r#"admit_client_retry_requests_total{client="checkout",class="critical"}"#),
        1.0
    );

    // Counters are counters, the probability a gauge.
    for (name, kind) in &scrape.types {
        let expected = if name == names::CLIENT_THROTTLE_PROBABILITY {
            "gauge"
        } else {
            "counter"
        };
        assert_eq!(kind, expected, "{name}");
        assert_eq!(name.ends_with("_total"), kind == "counter", "{name}");
    }
    assert_eq!(scrape.types.len(), 5, "{:?}", scrape.types);
}

#[test]
fn unnamed_and_duplicate_sources_are_typed_errors() {
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        let unnamed = Reporter::builder()
            .throttle(Arc::new(Throttle::builder().build().unwrap()))
            .build();
        assert_eq!(
            unnamed.unwrap_err(),
            MetricsError::Unnamed { kind: "throttle" }
        );
        let map = Arc::new(Throttle::builder().per_destination::<String>(4).unwrap());
        assert_eq!(
            Reporter::builder().throttles(map).build().unwrap_err(),
            MetricsError::Unnamed {
                kind: "map of throttles"
            }
        );
        let budget = Arc::new(RetryBudget::builder().build().unwrap());
        assert_eq!(
            Reporter::builder()
                .retry_budget(budget)
                .build()
                .unwrap_err(),
            MetricsError::Unnamed {
                kind: "retry budget"
            }
        );
        // A throttle and a map of one name would share series; a budget of that name does not.
        let throttle = Arc::new(Throttle::builder().name("api").build().unwrap());
        let duplicate = Reporter::builder()
            .throttle(throttle)
            .throttles(throttles("api", 4))
            .build();
        assert!(matches!(
            duplicate,
            Err(MetricsError::DuplicateName {
                family: "admit_client",
                ..
            })
        ));
        let budget = Arc::new(RetryBudget::builder().name("api").build().unwrap());
        assert!(
            Reporter::builder()
                .throttles(throttles("api", 4))
                .retry_budget(budget)
                .build()
                .is_ok()
        );
    });
}

#[test]
fn a_map_labels_its_first_64_destinations_and_sums_the_rest_into_other() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let map = throttles("api", 1_000);
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .throttles(Arc::clone(&map))
            .build()
            .unwrap()
    });
    // Destination `d{i}` makes `i + 1` attempts.
    let name = |i: usize| format!("d{i:03}");
    for i in 0..64 {
        attempt(&map.get(&name(i)), i + 1);
    }
    metrics::with_local_recorder(&recorder, || reporter.report());
    let scrape = rendered(&recorder);
    assert_eq!(
        destinations(&scrape, names::CLIENT_ATTEMPTS, "api").len(),
        64 * 4
    );
    assert_eq!(scrape.get(&attempts("api", "other", "critical")), None);

    // 36 more: none gets a label of its own.
    for i in 64..100 {
        attempt(&map.get(&name(i)), i + 1);
    }
    // One of the first 64 counts more; it keeps its label.
    attempt(&map.get(&name(0)), 9);
    metrics::with_local_recorder(&recorder, || reporter.report());
    let scrape = rendered(&recorder);
    let mut labelled = destinations(&scrape, names::CLIENT_ATTEMPTS, "api");
    labelled.dedup();
    assert_eq!(labelled.len(), 65, "{labelled:?}");
    assert!(labelled.contains(&"other".to_owned()));
    for i in 1..64 {
        assert_eq!(
            scrape.value(&attempts("api", &name(i), "critical")),
            (i + 1) as f64
        );
    }
    assert_eq!(scrape.value(&attempts("api", &name(0), "critical")), 10.0);
    let others: usize = (64..100).map(|i| i + 1).sum();
    assert_eq!(
        scrape.value(&attempts("api", "other", "critical")),
        others as f64
    );
    assert_eq!(scrape.value(&throttled("api", "other", "critical")), 0.0);
    assert_eq!(scrape.value(&probability("api", "other")), 0.0);

    // One of the others is overloaded: `other`'s probability is the highest of theirs.
    let hot = map.get(&name(99));
    for _ in 0..1_000 {
        hot.refused();
    }
    metrics::with_local_recorder(&recorder, || reporter.report());
    let scrape = rendered(&recorder);
    assert_eq!(
        scrape.value(&probability("api", "other")),
        hot.snapshot().probability
    );
    assert!(hot.snapshot().probability > 0.5);
    assert_eq!(scrape.value(&probability("api", &name(1))), 0.0);
}

#[test]
fn counters_never_go_back_when_a_destination_leaves_and_returns() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let map = throttles("api", 2);
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .throttles(Arc::clone(&map))
            .build()
            .unwrap()
    });
    let key = |name: &str| name.to_owned();
    let inventory = || attempts("api", "inventory", "critical");

    attempt(&map.get(&key("inventory")), 5);
    metrics::with_local_recorder(&recorder, || reporter.report());
    assert_eq!(rendered(&recorder).value(&inventory()), 5.0);

    // It counts 3 more, leaves the map (two newer destinations), and returns with a new
    // throttle counting 1, all before the next report: 5 + 3 + 1.
    let old = map.get(&key("inventory"));
    attempt(&old, 3);
    let _ = map.get(&key("pricing"));
    let _ = map.get(&key("search"));
    let new = map.get(&key("inventory"));
    assert!(!Arc::ptr_eq(&old, &new));
    attempt(&new, 1);
    assert_eq!(new.totals().attempts(Criticality::Critical), 1);
    drop(old);
    metrics::with_local_recorder(&recorder, || reporter.report());
    assert_eq!(rendered(&recorder).value(&inventory()), 9.0);

    // It leaves again, overloaded; the report that finds it gone adds the rest of its counts
    // and sets its probability to 0.
    for _ in 0..100 {
        new.refused();
    }
    let refused_here = (0..50).filter(|_| new.try_send().is_err()).count();
    assert!(refused_here > 0, "{refused_here}");
    let _ = map.get(&key("pricing"));
    let _ = map.get(&key("search"));
    assert_eq!(map.len(), 2);
    metrics::with_local_recorder(&recorder, || reporter.report());
    let scrape = rendered(&recorder);
    assert_eq!(scrape.value(&inventory()), 59.0);
    assert_eq!(
        scrape.value(&throttled("api", "inventory", "critical")),
        refused_here as f64
    );
    assert_eq!(scrape.value(&probability("api", "inventory")), 0.0);

    // Back once more, with a fresh throttle: the counter only grows.
    attempt(&map.get(&key("inventory")), 2);
    metrics::with_local_recorder(&recorder, || reporter.report());
    assert_eq!(rendered(&recorder).value(&inventory()), 61.0);
    // Reports without new counts change nothing.
    metrics::with_local_recorder(&recorder, || reporter.report());
    assert_eq!(rendered(&recorder).value(&inventory()), 61.0);
}

#[test]
#[cfg(feature = "http")]
fn the_layer_counts_each_request_as_its_header_claims() {
    use admit::client::ThrottleLayer;
    use admit_testkit::poll::call_now;
    use tower::{Layer, service_fn};

    let throttle = Arc::new(
        Throttle::builder()
            .name("api")
            .clock(ManualClock::new())
            .build()
            .unwrap(),
    );
    let backend = service_fn(|_: http::Request<()>| {
        std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(())))
    });
    let mut client = ThrottleLayer::new(Arc::clone(&throttle)).layer(backend);
    for class in [
        Some("sheddable"),
        Some("sheddable"),
        Some("critical_plus"),
        // The last element counts, as a server reads it.
        Some("critical_plus, sheddable_plus"),
        Some("urgent"),
        None,
    ] {
        let mut request = http::Request::builder();
        if let Some(class) = class {
            request = request.header(admit::criticality::CRITICALITY_HEADER, class);
        }
        call_now(&mut client, request.body(()).unwrap()).unwrap();
    }
    let totals = throttle.totals();
    let counts = Criticality::ALL.map(|class| totals.attempts(class));
    // Sheddable, sheddable_plus, critical (invalid and absent), critical_plus.
    assert_eq!(counts, [2, 1, 2, 1]);
}

#[test]
#[cfg(feature = "retry")]
fn the_retry_policy_counts_each_request_as_its_header_claims() {
    use admit::client::RetryPolicy;
    use tower::retry::RetryLayer;
    use tower::{Layer, ServiceExt, service_fn};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    // One retry for the whole window.
    let budget = Arc::new(
        RetryBudget::builder()
            .name("api")
            .ratio(0.0)
            .floor_per_second(0.1)
            .build()
            .unwrap(),
    );
    let refusing = service_fn(|_: http::Request<()>| async {
        Ok::<_, tower::BoxError>(
            http::Response::builder()
                .status(503)
                .header("admit-refusal", "rate-limit")
                .body(())
                .unwrap(),
        )
    });
    let policy = RetryPolicy::builder(Arc::clone(&budget)).build().unwrap();
    runtime.block_on(async {
        for class in ["sheddable", "critical_plus"] {
            let request = http::Request::builder()
                .header(admit::criticality::CRITICALITY_HEADER, class)
                .body(())
                .unwrap();
            let client = RetryLayer::new(policy.clone()).layer(refusing);
            let _ = client.oneshot(request).await;
        }
    });
    let totals = budget.totals();
    use Criticality::{Critical, CriticalPlus, Sheddable};
    assert_eq!(
        (totals.requests(Sheddable), totals.requests(CriticalPlus)),
        (1, 1)
    );
    // The sheddable request spent the one retry, then was denied its second; the critical_plus
    // one was denied at once.
    assert_eq!((totals.spent(Sheddable), totals.denied(Sheddable)), (1, 1));
    assert_eq!(
        (totals.spent(CriticalPlus), totals.denied(CriticalPlus)),
        (0, 1)
    );
    assert_eq!(totals.requests(Critical), 0);
}
