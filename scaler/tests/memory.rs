//! The scaler's memory on the real binary, inside a memory cgroup at the Deployment's limit
//! (`deploy/scaler.yaml`): many ScaledObjects, and a soak of KEDA-like polling.
//!
//! Needs root and a writable cgroup v2 or v1 `memory` hierarchy (this project's CI machines have
//! one); elsewhere each test prints why it skips (see `admit_testkit::cgroup`).

mod support;

use std::time::Duration;

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::cgroup;
use tonic::Code;
use tonic::transport::Channel;

use support::memory::{connect, deployment_limit, each, mib, resident, serve_in};
use support::process::get;
use support::{FakePrometheus, Reply, metadata, metrics_request, object};

// Several threads: the clients' calls go on while the test reads the process's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scaled_objects_stay_within_the_limit() {
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("ten_thousand_scaled_objects", limit) else {
        return;
    };
    let served = serve_in(&cgroup, &["--max-triggers", "2000"]);
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let url = prometheus.url();
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
    let served = serve_in(&cgroup, &["--decision-interval", "1s"]);
    let prometheus = FakePrometheus::start().await;
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
    // After the warm-up rounds, neither the resident set nor /metrics grows.
    let (warm_rss, warm_metrics) = samples[2];
    let (last_rss, last_metrics) = samples[ROUNDS - 1];
    assert!(
        last_rss <= warm_rss + warm_rss / 5 + (2 << 20),
        "resident {warm_rss} → {last_rss} bytes"
    );
    assert!(
        last_metrics <= warm_metrics + warm_metrics / 20,
        "/metrics {warm_metrics} → {last_metrics} bytes"
    );
    assert_eq!(cgroup.limit_hits(), 0);
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}
