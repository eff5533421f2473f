//! What one `admit-scaler` evaluation costs beyond its two Prometheus queries: parsing the
//! trigger's metadata (every RPC does), reading a query's answer, and a decision (Erlang C or
//! A for the target and for the stricter one, the planner, and the service level at its
//! replicas). `scaler/bounded` has the decisions at the edges of the work budget: the largest
//! load, the most expensive Erlang A decision accepted, and refusals.
//!
//! ```text
//! cargo bench -p admit-benches --bench scaler
//! ```

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use admit_scaler::decision::{self, Evaluator};
use admit_scaler::metadata::ScalerConfig;
use admit_scaler::prometheus::{QueryError, parse_response};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};

/// What the scaler's queries give a decision.
type Measured = decision::Measured<QueryError>;

/// A trigger as the reference deployment writes it: T = 50 ms, p = 0.95, 16 per replica.
fn metadata(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    admit_testkit::keda::metadata(
        &[
            ("scalerAddress", "admit-scaler.admit-system.svc:6000"),
            (
                "prometheusURL",
                "http://prometheus-operated.monitoring.svc:9090",
            ),
            (
                "arrivalRateQuery",
                r#"sum(rate(admit_shed_requests_total{namespace="shop",limiter="checkout"}[1m]))"#,
            ),
            (
                "serviceTimeQuery",
                r#"sum(rate(admit_shed_service_seconds_total{namespace="shop",limiter="checkout"}[1m])) / sum(rate(admit_shed_requests_total{namespace="shop",limiter="checkout",outcome!="dropped"}[1m]))"#,
            ),
            ("waitThresholdSeconds", "0.05"),
            ("targetSL", "0.95"),
            ("concurrencyPerReplica", "16"),
            ("scaleDownHoldSeconds", "120"),
            ("maxReplicas", "50000"),
        ],
        extra,
    )
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("scaler/parse");
    let map = metadata(&[]);
    group.bench_function("metadata", |b| {
        b.iter(|| black_box(ScalerConfig::from_metadata(black_box(&map)).unwrap()))
    });
    let body = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.123,"1234.5678901234"]}]}}"#;
    group.bench_function("prometheus answer", |b| {
        b.iter(|| black_box(parse_response(200, black_box(body)).unwrap()))
    });
    group.finish();
}

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("scaler/decide");
    let service_time = 0.1;
    for (model, extra) in [
        ("Erlang C", &[][..]),
        ("Erlang A", &[("patienceSeconds", "2")][..]),
    ] {
        let config = ScalerConfig::from_metadata(&metadata(extra)).unwrap();
        for load in [30.0, 1e3, 1e5] {
            let mut evaluator = Evaluator::new(config.clone());
            let mut now = Duration::ZERO;
            group.bench_with_input(BenchmarkId::new(model, load), &load, |b, &load| {
                b.iter(|| {
                    now += Duration::from_secs(10);
                    let measured = Measured {
                        arrival_rate: Ok(black_box(load / service_time)),
                        service_time: Ok(black_box(service_time)),
                    };
                    black_box(evaluator.decide(now, measured).unwrap())
                })
            });
        }
    }
    group.finish();
}

/// One decision after another at `arrival_rate` (s = 0.1 s), 10 s apart, with `extra` keys.
fn decisions(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    extra: &[(&str, &str)],
    arrival_rate: f64,
) {
    let config = ScalerConfig::from_metadata(&metadata(extra)).unwrap();
    let mut evaluator = Evaluator::new(config);
    let mut now = Duration::ZERO;
    let mut decide = move || {
        now += Duration::from_secs(10);
        let measured = Measured {
            arrival_rate: Ok(black_box(arrival_rate)),
            service_time: Ok(black_box(0.1)),
        };
        evaluator.decide(now, measured)
    };
    // Each row either decides or is refused, always the same way.
    let first = decide();
    group.bench_function(name, |b| {
        b.iter(|| {
            let decision = decide();
            assert_eq!(decision.is_ok(), first.is_ok(), "{name}: {decision:?}");
            black_box(decision)
        })
    });
}

fn bounded(c: &mut Criterion) {
    let mut group = c.benchmark_group("scaler/bounded");
    group.sample_size(10);
    // Kubernetes' most replicas, every one held, 16 servers each: 3.4·10^10 servers.
    let held = [("minReplicas", "2147483647"), ("maxReplicas", "2147483647")];
    // The largest load the scaler takes, 10^10 erlangs: two searches of about 11√a Erlang B
    // steps, and the service level at the held servers, about 48√a.
    decisions(
        &mut group,
        "Erlang C, 1e10 erlangs, replicas held",
        &held,
        1e11,
    );
    // The issue's queue: 10^4 erlangs, patience 100 s, 80 % within 50 ms, or waiting at all.
    for (name, within) in [
        ("Erlang A, issue (patience 100 s, p 0.8, T 50 ms)", "0.05"),
        ("Erlang A, issue (patience 100 s, p 0.8, T 0)", "0"),
    ] {
        let extra = [
            ("patienceSeconds", "100"),
            ("targetSL", "0.8"),
            ("waitThresholdSeconds", within),
        ];
        decisions(&mut group, name, &extra, 1e5);
    }
    // The most work among the accepted decisions of a scan of loads, patience, T and p: 10^9
    // erlangs, patience 17.8 ms (a sixth of a service), 99 % not waiting: 1.5·10^7 series
    // terms and 10^6 Erlang B steps over both searches, and the held servers' service level.
    let worst = [
        ("patienceSeconds", "0.01778"),
        ("targetSL", "0.99"),
        ("waitThresholdSeconds", "0"),
        ("minReplicas", "2147483647"),
        ("maxReplicas", "2147483647"),
    ];
    decisions(
        &mut group,
        "Erlang A, worst accepted (1e9 erlangs)",
        &worst,
        1e10,
    );
    // Refused: patience 10^15 s at 10^5 erlangs (each count near the load needs ~10^9
    // terms), and a load beyond the scaler's.
    let patient = [("patienceSeconds", "1e15")];
    decisions(
        &mut group,
        "Erlang A, refused (patience 1e15 s, 1e5 erlangs)",
        &patient,
        1e6,
    );
    decisions(&mut group, "Erlang C, refused (2e10 erlangs)", &[], 2e11);
    group.finish();
}

criterion_group!(benches, parse, decide, bounded);
criterion_main!(benches);
