//! The reporter through a real Prometheus recorder (`metrics-exporter-prometheus`), rendered to
//! the text format: every series, its type and its value after a known workload on manual
//! time and a manual CPU; the typed errors for unnamed and duplicate limiters.

#![cfg(feature = "metrics")]

#[path = "support/rig.rs"]
mod rig;

use std::sync::Arc;
use std::time::Duration;

use admit::clock::ManualClock;
use admit::erlang::{MMc, Target};
use admit::metrics::{MetricsError, PlanMetrics, Reporter, names};
use admit::shed::Shedder;
use admit::signal::Arrival;
use admit::warmup::WarmUp;
use admit::warmup::sentinel::SentinelWarmUp;
use admit_testkit::scrape::Scrape;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use rig::Rig;

/// What `recorder` renders now, parsed.
fn rendered(recorder: &PrometheusRecorder) -> Scrape {
    Scrape::parse(&recorder.handle().render())
}

#[test]
fn a_known_workload_renders_exactly() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let rig = Rig::named("api");
    let bucket = Arc::new(
        WarmUp::builder(10.0)
            .name("api")
            .burst(Duration::ZERO)
            .clock(rig.clock.clone())
            .build()
            .unwrap(),
    );
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .shedder(Arc::clone(&rig.shedder))
            .warm_up(Arc::clone(&bucket))
            .build()
            .unwrap()
    });
    // The CPU load is unknown: its series is absent, not 0.
    rig.cpu.set_unknown();
    reporter.report();
    let scrape = rendered(&recorder);
    assert_eq!(
        scrape.get(r#"admit_shed_cpu_load_ratio{limiter="api"}"#),
        None
    );
    assert_eq!(
        scrape.value(r#"admit_shed_requests_total{limiter="api",outcome="passed"}"#),
        0.0
    );

    // Six requests pass after 30 ms each, two fail after 10 ms; one stays in flight.
    rig.cpu.set(500);
    for (count, took, passes) in [(6, 30, true), (2, 10, false)] {
        for _ in 0..count {
            let permit = rig.shedder.allow().unwrap();
            rig.clock.advance(Duration::from_millis(took));
            if passes { permit.pass() } else { permit.fail() }
        }
    }
    let open = rig.shedder.allow_owned().unwrap();
    // Then an overload: 5 more pass at once (0 ms), 15 stay in flight, 7 are dropped.
    let held = rig.force_overload();
    let dropped = (0..7).filter(|_| rig.shedder.allow().is_err()).count();
    assert_eq!(dropped, 7);
    // The warm-up bucket, cold at 10 / 3 per second and spacing exactly: one admitted, then
    // two refused.
    assert!(bucket.try_acquire().is_ok());
    assert!(bucket.try_acquire().is_err());
    assert!(bucket.try_acquire().is_err());

    // The CPU series is registered when the load is first known, with the recorder in force
    // then: this one's.
    metrics::with_local_recorder(&recorder, || reporter.report());
    let scrape = rendered(&recorder);
    let api = |name: &str| format!(r#"{name}{{limiter="api"}}"#);
    let outcome = |outcome: &str| {
        format!(r#"admit_shed_requests_total{{limiter="api",outcome="{outcome}"}}"#)
    };
    assert_eq!(scrape.value(&outcome("passed")), 11.0);
    assert_eq!(scrape.value(&outcome("failed")), 2.0);
    assert_eq!(scrape.value(&outcome("dropped")), 7.0);
    let reason =
        |reason: &str| format!(r#"admit_shed_dropped_total{{limiter="api",reason="{reason}"}}"#);
    assert_eq!(scrape.value(&reason("cpu")), 7.0);
    assert_eq!(scrape.value(&reason("queue-delay")), 0.0);
    let service = scrape.value(&api(names::SHED_SERVICE_SECONDS));
    assert!((service - 0.2).abs() < 1e-9, "{service}");
    assert_eq!(scrape.value(&api(names::SHED_IN_FLIGHT)), 16.0);
    assert_eq!(scrape.value(&api(names::SHED_CPU)), 1.0);
    assert_eq!(scrape.value(&api(names::SHED_CPU_THRESHOLD)), 0.9);
    assert_eq!(scrape.value(&api(names::SHED_SHEDDING)), 1.0);
    let snapshot = rig.shedder.snapshot();
    assert_eq!(
        scrape.value(&api(names::SHED_MAX_FLIGHT)),
        snapshot.max_flight
    );
    assert_eq!(scrape.value(&api(names::SHED_HEADROOM)), 0.1);
    // Every request is critical here: all admitted and refused ones are the class's, and
    // the class is the cut while hot.
    let class = |class: &str, outcome: &str| {
        format!(
            r#"admit_shed_class_requests_total{{limiter="api",class="{class}",outcome="{outcome}"}}"#
        )
    };
    assert_eq!(
        scrape.value(&class("critical", "admitted")),
        11.0 + 2.0 + 16.0
    );
    assert_eq!(scrape.value(&class("critical", "refused")), 7.0);
    assert_eq!(scrape.value(&class("sheddable", "refused")), 0.0);
    let cut = |class: &str| format!(r#"admit_shed_cut{{limiter="api",class="{class}"}}"#);
    assert_eq!(scrape.value(&cut("critical")), 1.0);
    assert_eq!(scrape.value(&cut("sheddable")), 0.0);

    let decisions = |outcome: &str| {
        format!(r#"admit_warmup_requests_total{{limiter="api",outcome="{outcome}"}}"#)
    };
    assert_eq!(scrape.value(&decisions("admitted")), 1.0);
    assert_eq!(scrape.value(&decisions("refused")), 2.0);
    let warm = bucket.snapshot();
    assert_eq!(scrape.value(&api(names::WARMUP_LIMIT)), warm.qps_limit);
    assert_eq!(scrape.value(&api(names::WARMUP_FULL_RATE)), 10.0);
    assert_eq!(scrape.value(&api(names::WARMUP_STORED)), warm.stored_tokens);
    assert_eq!(scrape.value(&api(names::WARMUP_PROGRESS)), warm.progress());
    // Both limiters of one name publish their own offered series; direct calls count none
    // (`tests/layer_offered.rs` counts requests through the layers).
    for kind in ["shed", "warmup"] {
        let offered = format!(r#"admit_offered_requests_total{{limiter="api",kind="{kind}"}}"#);
        assert_eq!(scrape.value(&offered), 0.0, "{offered}");
    }

    // The CPU load becomes unknown again: NaN, not the stale reading.
    rig.cpu.set_unknown();
    reporter.report();
    assert!(rendered(&recorder).value(&api(names::SHED_CPU)).is_nan());

    // Counters are counters, gauges gauges; only counters (and the service time, a gauge
    // because the facade's counters hold integers) end in `_total`.
    for (name, kind) in &scrape.types {
        let counters = [
            names::OFFERED_REQUESTS,
            names::SHED_REQUESTS,
            names::SHED_DROPPED,
            names::SHED_CLASS_REQUESTS,
            names::WARMUP_REQUESTS,
        ];
        let expected = if counters.contains(&name.as_str()) {
            "counter"
        } else {
            "gauge"
        };
        assert_eq!(kind, expected, "{name}");
        assert_eq!(
            name.ends_with("_total"),
            kind == "counter" || name == names::SHED_SERVICE_SECONDS,
            "{name}"
        );
        assert!(name.starts_with("admit_"), "{name}");
    }
    assert_eq!(scrape.types.len(), 17, "{:?}", scrape.types.keys());
    drop((open, held));
}

#[test]
fn a_plan_renders_its_answer() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let plan = metrics::with_local_recorder(&recorder, || PlanMetrics::new("orders").unwrap());
    let queue = MMc::new(1200.0, 12.5).unwrap();
    let target = Target::ServiceLevel {
        within: 0.05,
        at_least: 0.95,
    };
    let servers = queue.min_servers(target).unwrap();
    let staffed = queue.with_servers(servers).unwrap();
    let orders = |name: &str| format!(r#"{name}{{planner="orders"}}"#);
    // Nothing until the first plan; a mean-wait target publishes no service level.
    assert_eq!(rendered(&recorder).values.len(), 0);
    metrics::with_local_recorder(&recorder, || {
        plan.record(&staffed, Target::MeanWait { at_most: 0.01 });
    });
    assert_eq!(
        rendered(&recorder).get(&orders(names::PLAN_SERVICE_LEVEL)),
        None
    );
    metrics::with_local_recorder(&recorder, || {
        plan.record(&staffed, target);
        plan.record_replicas(13);
    });
    let scrape = rendered(&recorder);
    assert_eq!(scrape.value(&orders(names::PLAN_SERVERS)), servers as f64);
    assert_eq!(scrape.value(&orders(names::PLAN_REPLICAS)), 13.0);
    let level = scrape.value(&orders(names::PLAN_SERVICE_LEVEL));
    assert!((0.95..=1.0).contains(&level), "{level}");
    assert_eq!(
        scrape.value(&orders(names::PLAN_MEAN_WAIT)),
        staffed.mean_wait()
    );
    assert_eq!(
        scrape.value(&orders(names::PLAN_OCCUPANCY)),
        staffed.occupancy()
    );
    assert_eq!(
        PlanMetrics::new("").unwrap_err(),
        MetricsError::Unnamed { kind: "planner" }
    );
}

#[test]
fn unnamed_and_duplicate_limiters_are_typed_errors() {
    let unnamed = Arc::new(Shedder::builder().build().unwrap());
    assert_eq!(
        Reporter::builder().shedder(unnamed).build().unwrap_err(),
        MetricsError::Unnamed { kind: "shedder" }
    );
    let sentinel = Arc::new(SentinelWarmUp::builder(10.0).build().unwrap());
    assert_eq!(
        Reporter::builder()
            .sentinel_warm_up(sentinel)
            .build()
            .unwrap_err(),
        MetricsError::Unnamed {
            kind: "warm-up bucket"
        }
    );
    // A smooth bucket and a Sentinel bucket publish the same series: one name each.
    let clock = ManualClock::new();
    let smooth = Arc::new(
        WarmUp::builder(10.0)
            .name("edge")
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let exact = Arc::new(
        SentinelWarmUp::builder(10.0)
            .name("edge")
            .clock(clock)
            .build()
            .unwrap(),
    );
    let error = Reporter::builder()
        .warm_up(smooth)
        .sentinel_warm_up(exact)
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        MetricsError::DuplicateName {
            family: "admit_warmup",
            name: "edge".to_owned()
        }
    );
    assert!(error.to_string().contains("\"edge\""), "{error}");
    // A shedder and a bucket may share a name: their series differ.
    let shedder = Arc::new(Shedder::builder().name("edge").build().unwrap());
    let bucket = Arc::new(WarmUp::builder(10.0).name("edge").build().unwrap());
    let shared = Reporter::builder().shedder(shedder).warm_up(bucket).build();
    assert!(shared.is_ok(), "{shared:?}");
}

/// `Reporter::run` publishes at once and then every period, on tokio's (here paused) timer.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn run_reports_every_period() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let rig = Rig::named("timed");
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .shedder(Arc::clone(&rig.shedder))
            .build()
            .unwrap()
    });
    let passed = r#"admit_shed_requests_total{limiter="timed",outcome="passed"}"#;
    rig.shedder.allow().unwrap().pass();
    let running = tokio::spawn(reporter.run(Duration::from_secs(1)));
    tokio::task::yield_now().await;
    assert_eq!(rendered(&recorder).value(passed), 1.0);

    rig.shedder.allow().unwrap().pass();
    tokio::time::advance(Duration::from_millis(999)).await;
    tokio::task::yield_now().await;
    assert_eq!(rendered(&recorder).value(passed), 1.0, "not yet a period");
    tokio::time::advance(Duration::from_millis(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(rendered(&recorder).value(passed), 2.0);
    running.abort();
}

/// A shedder with a queue gate and a runtime lag probe also publishes the waits by source as
/// a Prometheus histogram, whether the gate is hot, and the probe's drop share.
#[test]
fn queue_signals_render_as_a_histogram() {
    use admit::signal::queue::{LagProbe, QueueGate, QueueStamp};

    let recorder = PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let probe = LagProbe::default();
    let shedder = Arc::new(
        Shedder::builder()
            .name("q")
            .clock(clock.clone())
            .cpu(admit::signal::cpu::ManualCpu::new(0))
            .queue_gate(QueueGate::default())
            .runtime_probe(probe.clone())
            .build()
            .unwrap(),
    );
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder()
            .shedder(Arc::clone(&shedder))
            .build()
            .unwrap()
    });
    // 100–200 ms: waits of 3 ms and 30 ms; 200–300 ms: the gate is hot, a 40 ms wait is late.
    let at = |ms: u64| clock.set(Duration::from_millis(ms));
    // No stamped request yet: no offset.
    metrics::with_local_recorder(&recorder, || reporter.report());
    let offset = format!(r#"{}{{limiter="q"}}"#, names::QUEUE_CLOCK_OFFSET);
    assert_eq!(rendered(&recorder).get(&offset), None);
    // A stamped request finds the service idle: its stamp is 3 ms old, the clocks' offset.
    at(50);
    shedder
        .allow_with(Arrival::new().with_stamp_age(Ok(3_000_000)))
        .unwrap()
        .pass();
    at(150);
    shedder
        .allow_with(Arrival::new().with_wait(Duration::from_millis(30)))
        .unwrap()
        .pass();
    shedder
        .allow_with(Arrival::new().with_wait(Duration::from_millis(30)))
        .unwrap()
        .pass();
    at(250);
    let late = shedder
        .allow_with(Arrival::new().with_wait(Duration::from_millis(40)))
        .unwrap_err();
    assert_eq!(late.reason(), admit::signal::Cause::QueueDelay);
    // A pool job that waited 2 ms, and a probe tick 7 ms late.
    let stamp = QueueStamp::at(248 * 1_000_000);
    stamp
        .started(shedder.queue_gate().unwrap(), 250 * 1_000_000)
        .unwrap();
    probe.tick(243 * 1_000_000, 250 * 1_000_000);
    metrics::with_local_recorder(&recorder, || reporter.report());

    let scrape = rendered(&recorder);
    let bucket = |source: &str, le: &str| {
        scrape.value(&format!(
            r#"admit_queue_wait_seconds_bucket{{limiter="q",source="{source}",le="{le}"}}"#
        ))
    };
    assert_eq!(
        bucket("request", "0.001"),
        1.0,
        "the idle request waited nothing"
    );
    assert_eq!(bucket("request", "0.025"), 1.0);
    assert_eq!(bucket("request", "0.05"), 4.0);
    assert_eq!(bucket("request", "+Inf"), 4.0);
    assert_eq!(bucket("pool", "0.0025"), 1.0);
    assert_eq!(bucket("probe", "0.01"), 1.0);
    assert_eq!(bucket("probe", "0.005"), 0.0);
    let series = |name: &str, source: &str| {
        scrape.value(&format!(r#"{name}{{limiter="q",source="{source}"}}"#))
    };
    assert_eq!(series(names::QUEUE_WAIT_COUNT, "request"), 4.0);
    let sum = series(names::QUEUE_WAIT_SUM, "request");
    assert!((sum - 0.1).abs() < 1e-9, "{sum}");
    let q = |name: &str| format!(r#"{name}{{limiter="q"}}"#);
    assert_eq!(scrape.value(&q(names::QUEUE_HOT)), 1.0);
    assert_eq!(scrape.value(&q(names::RUNTIME_LAG_DROP)), 0.05);
    assert_eq!(
        scrape.value(r#"admit_shed_dropped_total{limiter="q",reason="queue-delay"}"#),
        1.0
    );
    assert_eq!(scrape.types[names::QUEUE_WAIT_BUCKET], "counter");
    assert_eq!(scrape.value(&q(names::QUEUE_CLOCK_OFFSET)), 0.003);
    assert_eq!(scrape.types[names::QUEUE_CLOCK_OFFSET], "gauge");
    // Every header error has its series, all 0 here.
    for error in admit::signal::queue::header::HeaderError::ALL {
        let series = format!(
            r#"{}{{limiter="q",error="{}"}}"#,
            names::QUEUE_HEADER_ERRORS,
            error.as_str()
        );
        assert_eq!(scrape.value(&series), 0.0, "{series}");
    }
}

/// A drain publishes its counts, unlabelled, and `admit_draining` from its announcement on;
/// a reporter takes one drain.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_drain_renders_its_counts_and_phase() {
    use admit::drain::Drain;

    let recorder = PrometheusBuilder::new().build_recorder();
    let drain = Drain::builder()
        .propagation_delay(Duration::from_secs(5))
        .deadline(Duration::from_secs(25))
        .build()
        .unwrap();
    let reporter = metrics::with_local_recorder(&recorder, || {
        Reporter::builder().drain(drain.clone()).build().unwrap()
    });
    let series = [
        names::DRAIN_IN_FLIGHT,
        names::DRAIN_CONNECTIONS,
        names::DRAIN_SESSIONS,
        names::DRAINING,
    ];
    let values = |scrape: &Scrape| series.map(|name| scrape.value(name));

    reporter.report();
    assert_eq!(values(&rendered(&recorder)), [0.0; 4]);

    // Two requests, three connections, one session.
    let requests = [drain.admit().unwrap(), drain.admit().unwrap()];
    let connections = [drain.connection(), drain.connection(), drain.connection()];
    let session = drain.session();
    reporter.report();
    assert_eq!(values(&rendered(&recorder)), [2.0, 3.0, 1.0, 0.0]);

    // Announced: draining, still serving.
    drain.start();
    let third = drain.admit().unwrap();
    reporter.report();
    assert_eq!(values(&rendered(&recorder)), [3.0, 3.0, 1.0, 1.0]);

    // Drained, connections still open: still 1.
    drop((requests, third, session));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(drain.phase(), admit::drain::Phase::Drained);
    reporter.report();
    assert_eq!(values(&rendered(&recorder)), [0.0, 3.0, 0.0, 1.0]);
    drop(connections);
    reporter.report();
    assert_eq!(values(&rendered(&recorder)), [0.0, 0.0, 0.0, 1.0]);

    // Gauges, described, none ending in `_total`.
    let scrape = rendered(&recorder);
    for name in series {
        assert_eq!(scrape.types[name], "gauge", "{name}");
        assert!(!name.ends_with("_total"), "{name}");
    }
    // And the offered requests, a counter labelled with the drain's kind alone: the requests
    // above were admitted directly, not through the layer.
    assert_eq!(scrape.types[names::OFFERED_REQUESTS], "counter");
    assert_eq!(
        scrape.value(r#"admit_offered_requests_total{kind="drain"}"#),
        0.0
    );
    assert_eq!(scrape.types.len(), 5, "{:?}", scrape.types.keys());
    // A request through the layer that the drain refuses does not count: another replica
    // counts it when it is retried there.
    #[cfg(feature = "http")]
    {
        use tower::{Layer, ServiceExt, service_fn};

        let service = admit::drain::DrainLayer::new(drain.clone()).layer(service_fn(
            |_: http::Request<()>| {
                std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(
                    String::new(),
                )))
            },
        ));
        let response = service.oneshot(http::Request::new(())).await.unwrap();
        assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        reporter.report();
        assert_eq!(
            rendered(&recorder).value(r#"admit_offered_requests_total{kind="drain"}"#),
            0.0
        );
    }
    let text = recorder.handle().render();
    assert!(
        text.contains("# HELP admit_active_sessions Open long-lived sessions"),
        "{text}"
    );

    // One drain per reporter: a second would publish the same series.
    let twice = Reporter::builder()
        .drain(drain.clone())
        .drain(drain)
        .build()
        .unwrap_err();
    assert_eq!(
        twice,
        MetricsError::DuplicateName {
            family: "admit_drain",
            name: String::new()
        }
    );
}
