//! What one `admit-scaler` evaluation costs beyond its two Prometheus queries: parsing the
//! trigger's metadata (every RPC does), reading a query's answer, and a decision (Erlang C or
//! A for the target and for the stricter one, and the planner).
//!
//! ```text
//! cargo bench -p admit-benches --bench scaler
//! ```

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use admit_scaler::decision::{Evaluator, Measured};
use admit_scaler::metadata::ScalerConfig;
use admit_scaler::prometheus::parse_response;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

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

criterion_group!(benches, parse, decide);
criterion_main!(benches);
