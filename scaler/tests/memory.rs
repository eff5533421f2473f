//! The scaler's memory on the real binary, inside a memory cgroup at the Deployment's limit
//! (`deploy/scaler.yaml`): many ScaledObjects, the longest valid triggers decided and scraped,
//! and a soak of KEDA-like polling.
//!
//! Needs root and a writable cgroup v2 or v1 `memory` hierarchy (this project's CI machines have
//! one); elsewhere each test prints why it skips (see `admit_testkit::cgroup`).

mod support;

use std::time::Duration;

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::cgroup;
use tonic::Code;
use tonic::transport::Channel;

use admit_scaler::metadata::{MAX_QUERY_BYTES, MAX_VALUE_BYTES};
use admit_scaler::proto::ScaledObjectRef;
use support::memory::{
    connect, deployment_limit, each, mib, never_reads, peak_resident, resident, serve_in,
};
use support::process::{Served, get};
use support::{FakePrometheus, Reply, metadata, metrics_request, object};
use tokio::net::TcpStream;

// Several threads: the clients' calls go on while the test reads the process's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scaled_objects_stay_within_the_limit() {
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("ten_thousand_scaled_objects", limit) else {
        return;
    };
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let url = prometheus.url();
    let served = serve_in(
        &cgroup,
        &[
            "--max-triggers",
            "2000",
            "--max-triggers-per-namespace",
            "2000",
            "--allow-prometheus",
            &url,
        ],
    );
    let channel = connect(&served).await;

    // 10 000 names of 188 characters: the first 2000 are tracked, the rest refused.
    let (ok, refused) = each(&channel, 10_000, 64, move |mut client, i| {
        let trigger = object(&format!("{i:0>63}.{i:0>63}.{i:0>60}"), metadata(&url, &[]));
        async move {
            match client.get_metrics(metrics_request(trigger)).await {
                Ok(_) => Ok(()),
                Err(status) if status.code() == Code::ResourceExhausted => Err(status),
                Err(status) => panic!("{status:?}"),
            }
        }
    })
    .await;
    assert_eq!((ok, refused), (2000, 8000));
    let (status, metrics) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let peak = cgroup.peak_bytes().expect("the cgroup's peak");
    println!(
        "10 000 ScaledObjects (2000 tracked): peak {:.1} MiB of {:.0} MiB ({:?}), resident {:.1} \
         MiB, /metrics {:.2} MiB",
        mib(peak),
        mib(limit),
        cgroup.version(),
        mib(resident(&served)),
        mib(metrics.len() as u64)
    );
    assert!(peak < limit * 3 / 4, "peak {peak} bytes of {limit}");
    assert_eq!(cgroup.limit_hits(), 0);
    assert!(metrics.contains("admit_scaler_tracked_objects 2000"));
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}

/// `text`, then a PromQL comment naming `i`, padded to exactly `len` bytes.
fn padded(text: &str, i: usize, len: usize) -> String {
    let mut padded = format!("{text}{i}-");
    assert!(padded.len() <= len);
    padded.extend(std::iter::repeat_n('x', len - padded.len()));
    padded
}

/// Trigger `i` at its longest: the longest namespace, name and metric name, both queries and
/// the URL at their limits (under `prometheus`, a path its fake answers), and every optional
/// key, each a different string from every other trigger's.
fn longest_trigger(prometheus: &str, i: usize) -> ScaledObjectRef {
    let url = padded(&format!("{prometheus}/"), i, MAX_VALUE_BYTES);
    let (lambda, s) = (
        padded("lambda # ", i, MAX_QUERY_BYTES),
        padded("s # ", i, MAX_QUERY_BYTES),
    );
    let metric = format!("m{i:0>47}");
    let metadata = admit_testkit::keda::metadata(
        &[
            (
                "scalerAddress",
                "admit-scaler.admit-system.svc.cluster.local:6000",
            ),
            ("enableTLS", "false"),
            ("unsafeSsl", "false"),
            ("prometheusURL", &url),
            ("arrivalRateQuery", &lambda),
            ("serviceTimeQuery", &s),
            ("waitThresholdSeconds", "0.05"),
            ("targetSL", "0.8"),
            ("concurrencyPerReplica", "1"),
            ("minReplicas", "1"),
            ("maxReplicas", "2147483647"),
            ("scaleDownHoldSeconds", "3600"),
            ("minScaleUpStep", "1"),
            ("maxScaleUpStep", "18446744073709551615"),
            ("maxScaleDownStep", "18446744073709551615"),
            ("slTolerance", "0.1"),
            ("activationArrivalRate", "0"),
            ("patienceSeconds", "60"),
            ("balancing", "pooled"),
            ("metricName", &metric),
        ],
        &[],
    );
    ScaledObjectRef {
        name: format!("{i:0>63}.{i:0>63}.{i:0>63}.{i:0>61}"),
        namespace: format!("n{i:0>62}"),
        scaler_metadata: metadata,
    }
}

/// `GET /metrics` twice at once: the longer page's size.
async fn two_scrapes(served: &Served) -> usize {
    let (first, second) = tokio::join!(get(served.http, "/metrics"), get(served.http, "/metrics"));
    for (status, _) in [&first, &second] {
        assert!(status.contains(" 200 "), "{status}");
    }
    first.1.len().max(second.1.len())
}

/// Two pages in memory at once, the most the scaler keeps: a client that never reads holds
/// the page rendered now, and once that page is no longer fresh (1 s), a scrape renders
/// another. The reader is returned, holding its page.
async fn two_pages(served: &Served) -> TcpStream {
    let (status, _) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let holding = never_reads(served.http).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, _) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    holding
}

/// 1900 triggers at their longest, decided with λ from `lambda`, then scraped once, twice at
/// once (the two share a page), and with two pages in memory (a reader holding an old one):
/// the resident set stays under 96 MiB throughout.
async fn longest_triggers(test: &str, lambda: Reply, code: tonic::Code) {
    const TRIGGERS: usize = 1900;
    const BOUND: u64 = 96 << 20;
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require(test, limit) else {
        return;
    };
    let prometheus = FakePrometheus::start().await;
    prometheus.set_prefixed("lambda # ", lambda);
    prometheus.set_prefixed("s # ", Reply::value("0.25"));
    let url = prometheus.url();
    let served = serve_in(&cgroup, &["--allow-prometheus", &url]);
    let channel = connect(&served).await;

    let (ok, failed) = each(&channel, TRIGGERS, 64, move |mut client, i| {
        let trigger = longest_trigger(&url, i);
        let metric_name = trigger.scaler_metadata["metricName"].clone();
        async move {
            let request = admit_scaler::proto::GetMetricsRequest {
                scaled_object_ref: Some(trigger),
                metric_name,
            };
            match client.get_metrics(request).await {
                Ok(_) if code == tonic::Code::Ok => Ok(()),
                Err(status) if status.code() == code => Err(status),
                answer => panic!("{answer:?}"),
            }
        }
    })
    .await;
    let decided = if code == tonic::Code::Ok { ok } else { failed };
    assert_eq!(decided, TRIGGERS);
    let before = resident(&served);
    let (status, page) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let scraped = peak_resident(&served);
    let page_twice = two_scrapes(&served).await;
    let scraped_twice = peak_resident(&served);
    let holding = two_pages(&served).await;
    let two_held = peak_resident(&served);
    drop(holding);
    println!(
        "{TRIGGERS} longest valid triggers ({code:?}): resident {:.1} MiB before any scrape; \
         peak {:.1} MiB after a scrape of {:.2} MiB; peak {:.1} MiB after two concurrent \
         scrapes of {:.2} MiB; peak {:.1} MiB with two pages held; cgroup peak {:.1} MiB of \
         {:.0} MiB ({:?})",
        mib(before),
        mib(scraped),
        mib(page.len() as u64),
        mib(scraped_twice),
        mib(page_twice as u64),
        mib(two_held),
        mib(cgroup.peak_bytes().unwrap_or(0)),
        mib(limit),
        cgroup.version(),
    );
    assert!(
        two_held < BOUND,
        "peak resident {two_held} bytes with two scrapes, over {BOUND}"
    );
    assert_eq!(cgroup.limit_hits(), 0);
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}

// Several threads: the clients' calls go on while the test reads the process's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_valid_triggers_stay_under_96_mib_with_a_scrape() {
    longest_triggers(
        "longest_valid_triggers",
        Reply::value("120"),
        tonic::Code::Ok,
    )
    .await;
}

/// The same triggers, each decision failed: its memo keeps the error, which names the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_failing_triggers_stay_under_96_mib_with_a_scrape() {
    let failing = Reply::new(
        422,
        r#"{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}"#,
    );
    longest_triggers(
        "longest_failing_triggers",
        failing,
        tonic::Code::FailedPrecondition,
    )
    .await;
}

/// One KEDA poll of ScaledObject `i`: its spec, its metric, its activity.
async fn poll(
    mut client: ExternalScalerClient<Channel>,
    url: String,
    i: usize,
) -> Result<(), tonic::Status> {
    let trigger = object(&format!("checkout-{i}"), metadata(&url, &[]));
    client.get_metric_spec(trigger.clone()).await?;
    client.get_metrics(metrics_request(trigger.clone())).await?;
    client.is_active(trigger).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_of_keda_polling_keeps_memory_and_metrics_flat() {
    const OBJECTS: usize = 1000;
    const ROUNDS: usize = 12;
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("keda_polling_soak", limit) else {
        return;
    };
    let prometheus = FakePrometheus::start().await;
    let served = serve_in(
        &cgroup,
        &[
            "--decision-interval",
            "1s",
            "--allow-prometheus",
            &prometheus.url(),
        ],
    );
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let channel = connect(&served).await;

    let mut samples = Vec::new();
    for round in 0..ROUNDS {
        let url = prometheus.url();
        let (ok, failed) = each(&channel, OBJECTS, 32, move |client, i| {
            poll(client, url.clone(), i)
        })
        .await;
        assert_eq!((ok, failed), (OBJECTS, 0), "round {round}");
        let (_, metrics) = get(served.http, "/metrics").await;
        samples.push((resident(&served), metrics.len()));
        // The next round's decisions are new ones: the interval has passed.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let asked = prometheus.asked("lambda");
    for (round, (rss, metrics)) in samples.iter().enumerate() {
        println!(
            "round {round:>2}: resident {:.1} MiB, /metrics {:.1} KiB",
            mib(*rss),
            *metrics as f64 / 1024.0
        );
    }
    println!(
        "{OBJECTS} ScaledObjects × {ROUNDS} polls: {asked} decisions, peak {:.1} MiB ({:?})",
        mib(cgroup.peak_bytes().unwrap_or(0)),
        cgroup.version()
    );
    // Every poll after the first decided afresh (one decision per object and round).
    assert!(asked >= OBJECTS * (ROUNDS - 1), "{asked}");
    // After the warm-up rounds, neither the resident set nor /metrics grows. The resident set
    // moves by a few MiB without a leak: it steps up when the allocator opens another arena for
    // a thread (in round 1, or as late as rounds 6 and 8 on a busy 2-core machine), and it
    // saw-tooths by 1-3 MiB as the allocator trims. So it passes if either holds: the last
    // round is within the first half's peak plus 10 % and 2 MiB (late arena steps fail this),
    // or the median of the second half's round-to-round steps is at most 512 KiB (a saw-tooth
    // fails this). A leak of a kilobyte per decision adds 1 MiB to every round and fails both
    // (6 MiB over rounds 6 to 11, a median step of 1 MiB).
    let warm_rss = samples[..ROUNDS / 2]
        .iter()
        .map(|&(rss, _)| rss)
        .max()
        .unwrap_or(0);
    let mut steps: Vec<i64> = samples[ROUNDS / 2..]
        .windows(2)
        .map(|pair| pair[1].0 as i64 - pair[0].0 as i64)
        .collect();
    steps.sort_unstable();
    let median_step = steps[steps.len() / 2];
    let (_, warm_metrics) = samples[2];
    let (last_rss, last_metrics) = samples[ROUNDS - 1];
    assert!(
        last_rss <= warm_rss + warm_rss / 10 + (2 << 20) || median_step <= 512 << 10,
        "resident {warm_rss} (the first rounds' peak) → {last_rss} bytes, a median step of \
         {median_step} bytes a round: {samples:?}"
    );
    assert!(
        last_metrics <= warm_metrics + warm_metrics / 20,
        "/metrics {warm_metrics} → {last_metrics} bytes"
    );
    assert_eq!(cgroup.limit_hits(), 0);
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}
