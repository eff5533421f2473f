//! End to end with the real Prometheus over backfilled data at fixed timestamps: the planner's
//! answers at fixed `time=`s are exactly the reference's replicas.
//!
//! A checkout service takes 120 requests/s for an hour, then 400/s, each served in 0.25 s:
//! 30 erlangs, then 100. At T = 0, p = 0.8 the first needs 37 servers; at p = 0.99 the second
//! needs 125 (the reference's M/M/c vectors).

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use admit::erlang::{MMc, Target};
use admit_scaler::metadata::ScalerConfig;
use admit_scaler::prometheus::{ClientOptions, PrometheusClient};
use admit_scaler::tools::offline;
use admit_testkit::prometheus;

const START: u64 = 1_700_000_000;
const STEP_UP: u64 = START + 3600;
const END: u64 = START + 7200;
const SERVICE_TIME: f64 = 0.25;

const LAMBDA: &str = "rate(checkout_requests_total[5m])";
const S: &str = "rate(checkout_busy_seconds_total[5m]) / rate(checkout_requests_total[5m])";

/// The two counters sampled every 15 s: requests (120/s, then 400/s) and busy seconds
/// (λ · 0.25 per second).
fn openmetrics() -> String {
    let mut requests = String::from("# TYPE checkout_requests counter\n");
    let mut busy = String::from("# TYPE checkout_busy_seconds counter\n");
    let (mut count, mut seconds) = (0.0_f64, 0.0_f64);
    let mut t = START;
    while t <= END {
        writeln!(requests, "checkout_requests_total {count} {t}").unwrap();
        writeln!(busy, "checkout_busy_seconds_total {seconds} {t}").unwrap();
        let rate = if t < STEP_UP { 120.0 } else { 400.0 };
        count += rate * 15.0;
        seconds += rate * 15.0 * SERVICE_TIME;
        t += 15;
    }
    format!("{requests}{busy}# EOF\n")
}

fn config(url: &str, target_sl: &str) -> ScalerConfig {
    let metadata = admit_testkit::keda::metadata(
        &[
            ("prometheusURL", url),
            ("arrivalRateQuery", LAMBDA),
            ("serviceTimeQuery", S),
            ("waitThresholdSeconds", "0"),
            ("targetSL", target_sl),
            // The reference vectors are Erlang C's.
            ("balancing", "pooled"),
        ],
        &[],
    );
    ScalerConfig::from_metadata(&metadata).expect("valid metadata")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfilled_steps_give_the_reference_replicas() {
    if prometheus::require("backfilled_steps_give_the_reference_replicas").is_none() {
        return;
    }
    let server = prometheus::start_backfilled(&openmetrics())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let url = server.url();
    let base: http::Uri = url.parse().unwrap();
    let client = PrometheusClient::new(ClientOptions::default());

    // 30 erlangs at p = 0.8: 37.
    let before = (STEP_UP - 60) as f64;
    let plan = offline::plan(&client, &base, &config(&url, "0.8"), Some(before), 2)
        .await
        .expect("a plan at 30 erlangs");
    assert!((plan.decision.arrival_rate - 120.0).abs() < 1e-9, "{plan}");
    assert!((plan.decision.offered_load - 30.0).abs() < 1e-9, "{plan}");
    assert_eq!(plan.decision.replicas, 37, "{plan}");
    assert!((plan.decision.predicted_service_level.unwrap() - 0.844735360103).abs() < 1e-9);
    // The table: 35..=39, the answer the first row at or above 0.8.
    let levels: Vec<_> = plan
        .rows
        .iter()
        .map(|row| (row.replicas, row.service_level))
        .collect();
    assert_eq!(levels.len(), 5);
    assert!(
        levels[1].1.unwrap() < 0.8 && levels[2].1.unwrap() >= 0.8,
        "{plan}"
    );

    // 100 erlangs at p = 0.99: 125.
    let after = END as f64;
    let plan = offline::plan(&client, &base, &config(&url, "0.99"), Some(after), 2)
        .await
        .expect("a plan at 100 erlangs");
    assert_eq!(plan.decision.replicas, 125, "{plan}");
    assert!((plan.decision.predicted_service_level.unwrap() - 0.990131166398).abs() < 1e-9);

    // A replay across the step, minute by minute, at p = 0.8: 37 until the 5-minute rate
    // window reaches the step, then rising to the 400/s answer, never below 37.
    let p8 = config(&url, "0.8");
    let steps = offline::replay(
        &client,
        &base,
        &p8,
        (STEP_UP - 600) as f64,
        (STEP_UP + 600) as f64,
        Duration::from_secs(60),
    )
    .await
    .expect("a replay");
    assert_eq!(steps.len(), 21);
    let replicas: Vec<u64> = steps
        .iter()
        .map(|step| step.outcome.as_ref().expect("every step decides").replicas)
        .collect();
    let at_400 = MMc::new(400.0, 1.0 / SERVICE_TIME)
        .unwrap()
        .min_servers(Target::ServiceLevel {
            within: 0.0,
            at_least: 0.8,
        })
        .unwrap();
    assert!(replicas[..=10].iter().all(|&n| n == 37), "{replicas:?}");
    assert_eq!(*replicas.last().unwrap(), at_400, "{replicas:?}");
    assert!(
        replicas.windows(2).all(|pair| pair[0] <= pair[1]),
        "{replicas:?}"
    );
    let table = offline::replay_table(&p8, &steps);
    assert_eq!(table.lines().count(), 22, "{table}");
    let svg = offline::replay_chart(&p8, &steps).render_svg();
    assert!(svg.starts_with("<svg") && !svg.contains("NaN"), "{svg}");

    // The binary's `plan`, as an operator runs it.
    let output = Command::new(env!("CARGO_BIN_EXE_admit-scaler"))
        .args(["plan", "--time", &before.to_string()])
        .args(["--metadata", &format!("prometheusURL={url}")])
        .args(["--metadata", &format!("arrivalRateQuery={LAMBDA}")])
        .args(["--metadata", &format!("serviceTimeQuery={S}")])
        .args([
            "--metadata",
            "waitThresholdSeconds=0",
            "--metadata",
            "targetSL=0.8",
            "--metadata",
            "balancing=pooled",
        ])
        .output()
        .expect("admit-scaler runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("recommended  37 replicas"), "{stdout}");
    assert!(stdout.contains("2023-11-14T23:12:20Z"), "{stdout}");

    // Before any data: an empty answer, FAILED_PRECONDITION's kind.
    let error = offline::plan(&client, &base, &p8, Some((START - 3600) as f64), 2)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "empty", "{error}");

    let status = server.stop();
    assert!(status.success(), "{status:?}");
}
