//! What hostile clients of the scaler's network edges can make it hold, on the real binary in
//! a cgroup at the Deployment's limit (`deploy/scaler.yaml`): partial gRPC messages on one
//! connection and a thousand idle connections while KEDA is served, and `/metrics` readers
//! that never read while the probes are answered.
//!
//! Needs root and a writable cgroup v2 or v1 `memory` hierarchy; elsewhere each test prints why
//! it skips (see `admit_testkit::cgroup`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::service::max_request_bytes;
use admit_testkit::cgroup;
use admit_testkit::wait::bounded;
use tokio::net::TcpStream;

use support::memory::{
    connect, deployment_limit, each, mib, never_reads, peak_resident, resident, serve_in,
};
use support::process::get;
use support::{FakePrometheus, PartialMessages, Reply, metadata, metrics_request, object};

/// The resident set the gRPC attacks must stay under.
const GRPC_ATTACK_LIMIT: u64 = 64 << 20;

/// KEDA's polls, one after the other until `stop`: each a spec and a metric. Returns the
/// number answered and the slowest.
async fn poll_until(
    mut keda: ExternalScalerClient<tonic::transport::Channel>,
    prometheus: String,
    stop: Arc<AtomicBool>,
) -> (usize, Duration) {
    let trigger = object("checkout", metadata(&prometheus, &[]));
    let (mut answered, mut slowest) = (0, Duration::ZERO);
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        bounded("KEDA's spec", keda.get_metric_spec(trigger.clone()))
            .await
            .unwrap();
        let values = bounded(
            "KEDA's metric",
            keda.get_metrics(metrics_request(trigger.clone())),
        )
        .await
        .unwrap();
        assert_eq!(values.get_ref().metric_values[0].metric_value, 37);
        slowest = slowest.max(started.elapsed());
        answered += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (answered, slowest)
}

// Several threads: KEDA's calls go on while the attackers' and the test's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_messages_and_idle_connections_leave_keda_served_within_64_mib() {
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("grpc_edges_memory", limit) else {
        return;
    };
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let served = serve_in(
        &cgroup,
        &[
            "--decision-interval",
            "1s",
            "--allow-prometheus",
            &prometheus.url(),
        ],
    );
    let keda = ExternalScalerClient::new(connect(&served).await);
    let stop = Arc::new(AtomicBool::new(false));
    let polls = tokio::spawn(poll_until(keda, prometheus.url(), Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = resident(&served);

    // The attack: 2000 streams on one connection announcing 65 536 bytes and sending
    // all but the last few; then the same at the largest message the scaler decodes.
    let announced = u32::try_from(max_request_bytes()).unwrap();
    let oversized = PartialMessages::open(served.grpc, 2000, 65_536, 65_533).await;
    let largest = PartialMessages::open(served.grpc, 2000, announced, announced as usize - 3).await;
    // A thousand TCP connections that never send a byte.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(
            bounded("an idle connection", TcpStream::connect(served.grpc))
                .await
                .unwrap(),
        );
    }
    let mut highest = 0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        highest = highest.max(resident(&served));
    }
    let during = (oversized.answers(), largest.answers());
    drop((oversized, largest, idle));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = resident(&served);
    stop.store(true, Ordering::SeqCst);
    let (answered, slowest) = bounded("KEDA's polls", polls).await.unwrap();
    // VmHWM is updated lazily: the highest sample may be above it.
    let peak = peak_resident(&served).max(highest);
    println!(
        "2000 partial 64 KiB messages, 2000 partial {announced}-byte ones and 1000 idle \
         connections: resident {:.1} MiB before, {:.1} MiB at most (sampled), {:.1} MiB peak, \
         {:.1} MiB after; KEDA's polls: {answered} answered, slowest {slowest:?}; the \
         attack's answers after 5 s: {during:?}",
        mib(before),
        mib(highest),
        mib(peak),
        mib(after)
    );
    assert!(peak < GRPC_ATTACK_LIMIT, "peak {peak} bytes");
    assert_eq!(cgroup.limit_hits(), 0);
    assert!(answered >= 10, "{answered} polls");
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}

/// What the budget charges a request besides its headers and message
/// (`transport::budget::REQUEST_COST`).
const CHARGED_PER_REQUEST: u64 = 20 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_transit_holds_less_than_it_is_charged() {
    let largest = u32::try_from(max_request_bytes()).unwrap();
    for announced in [4000, largest] {
        // A budget and a deadline that refuse nothing here.
        // Its partial messages make no decision: any Prometheus URL would do.
        let served = support::process::Served::start(&[
            "--allow-any-prometheus",
            "--grpc-max-request-bytes-in-flight",
            "1073741824",
            "--grpc-request-body-timeout",
            "10m",
        ]);
        let warm = PartialMessages::open(served.grpc, 100, announced, announced as usize - 3).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = resident(&served);
        let streams =
            PartialMessages::open(served.grpc, 2000, announced, announced as usize - 3).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let each = resident(&served).saturating_sub(before) / 2000;
        let charged = CHARGED_PER_REQUEST + 5 + u64::from(announced);
        println!(
            "a request in transit with a {announced}-byte message: {each} bytes resident, \
             {charged} charged (besides headers)"
        );
        assert!(streams.answers().is_empty(), "{:?}", streams.answers());
        assert!(each <= charged, "{each} bytes");
        drop((warm, streams));
        let (status, log) = served.terminate();
        assert!(status.success(), "{status:?}: {log:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_readers_that_never_read_leave_healthz_answering() {
    const TRIGGERS: usize = 1900;
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("http_edges_memory", limit) else {
        return;
    };
    // The readers' answers may take a minute, far beyond the test's bounds: a probe answered
    // within them did not wait for a reader to give up its slot.
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let url = prometheus.url();
    let served = serve_in(
        &cgroup,
        &["--http-request-timeout", "60s", "--allow-prometheus", &url],
    );
    let channel = connect(&served).await;
    // Triggers with the longest names, for the longest page.
    let (ok, failed) = each(&channel, TRIGGERS, 64, move |mut client, i| {
        let label = format!("{i:0>63}");
        let name = [label.as_str(); 4].join(".")[..253].to_owned();
        let mut trigger = object(&name, metadata(&url, &[("metricName", &"m".repeat(48))]));
        trigger.namespace = format!("{i:n>63}");
        let mut request = metrics_request(trigger);
        request.metric_name = "m".repeat(48);
        async move { client.get_metrics(request).await.map(drop) }
    })
    .await;
    assert_eq!((ok, failed), (TRIGGERS, 0));
    let (status, page) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let before = resident(&served);

    let mut readers = Vec::new();
    for _ in 0..64 {
        readers.push(never_reads(served.http).await);
    }
    // Give the scaler time to start every answer it will.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (scrape, _) = get(served.http, "/metrics").await;
    let started = Instant::now();
    let (healthz, _) = get(served.http, "/healthz").await;
    let took = started.elapsed();
    let (readyz, _) = get(served.http, "/readyz").await;
    let peak = peak_resident(&served);
    println!(
        "{TRIGGERS} triggers, a {:.1} MiB page, 64 readers that never read: /healthz in \
         {took:?}, a new scrape got {scrape:?}; resident {:.1} MiB before, {:.1} MiB peak of \
         {:.0} MiB",
        mib(page.len() as u64),
        mib(before),
        mib(peak),
        mib(limit)
    );
    // Every scrape slot is held by a reader: the probes did not need one.
    assert!(scrape.contains(" 503 "), "{scrape}");
    assert!(healthz.contains(" 200 "), "{healthz}");
    assert!(readyz.contains(" 200 "), "{readyz}");
    assert!(page.len() > 8 << 20, "{} bytes", page.len());
    assert!(peak < limit, "peak {peak} bytes of {limit}");
    assert_eq!(cgroup.limit_hits(), 0);
    drop(readers);
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}
