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
use admit_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use admit_scaler::service::max_request_bytes;
use admit_testkit::cgroup;
use admit_testkit::wait::bounded;
use prost::Message;

use support::memory::{
    connect, deployment_limit, each, mib, never_reads_from, peak_resident, resident, serve_in,
    settled_resident,
};
use support::process::{Served, get};
use support::{
    FakePrometheus, RawCalls, Reply, connect_from, grpc_body, loopback, metadata, metrics_request,
    object,
};

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
    let before = settled_resident(&served).await;

    // The issue's attack, from addresses other than KEDA's: 2000 streams on one connection
    // announcing 65 536 bytes and sending all but the last few; then the same at the largest
    // message the scaler decodes.
    let announced = u32::try_from(max_request_bytes()).unwrap();
    let oversized = RawCalls::partial(served.grpc, loopback(2), 2000, 65_536, 65_533).await;
    let largest = RawCalls::partial(
        served.grpc,
        loopback(3),
        2000,
        announced,
        announced as usize - 3,
    )
    .await;
    // A thousand TCP connections that never send a byte.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(connect_from(loopback(4), served.grpc).await);
    }
    let mut highest = 0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        highest = highest.max(resident(&served));
    }
    let during = (oversized.answers(), largest.answers());
    drop((oversized, largest, idle));
    let after = settled_resident(&served).await;
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
/// (`transport::budget::REQUEST_COST`)...
const CHARGED_PER_REQUEST: u64 = 16 << 10;

/// ...and how many times it charges its message's length (`transport::budget::MESSAGE_COPIES`).
const MESSAGE_COPIES: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_transit_holds_less_than_it_is_charged() {
    let largest = u32::try_from(max_request_bytes()).unwrap();
    for announced in [4000, largest] {
        // A budget and a deadline that refuse nothing here.
        // Its partial messages make no decision: any Prometheus URL would do.
        let served = Served::start(&[
            "--allow-any-prometheus",
            "--grpc-max-request-bytes-in-flight",
            "1073741824",
            "--grpc-request-body-timeout",
            "10m",
        ]);
        let warm = RawCalls::partial(
            served.grpc,
            loopback(1),
            100,
            announced,
            announced as usize - 3,
        )
        .await;
        let before = settled_resident(&served).await;
        let streams = RawCalls::partial(
            served.grpc,
            loopback(2),
            2000,
            announced,
            announced as usize - 3,
        )
        .await;
        let each = settled_resident(&served).await.saturating_sub(before) / 2000;
        let charged = CHARGED_PER_REQUEST + 5 + MESSAGE_COPIES * u64::from(announced);
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

    // From four addresses (sixteen connections each, the most one may keep), none KEDA's or
    // the kubelet's.
    let mut readers = Vec::new();
    for i in 0..64 {
        readers.push(never_reads_from(loopback(2 + i / 16), served.http).await);
    }
    // Each gets the start of its answer: a page, or a 503 for want of a scrape slot.
    for reader in &readers {
        let mut first = [0];
        bounded("an answer's first byte", reader.peek(&mut first))
            .await
            .unwrap();
    }
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

/// KEDA's call for trigger `i` as `deploy/example-target.yaml` writes it (ScaledObject
/// `shop/checkout-<i>`): a `GetMetrics` of KEDA's usual size.
fn usual_call(prometheus: &str, i: usize) -> GetMetricsRequest {
    let limiter = format!("checkout-{i}");
    let lambda = format!(
        r#"sum(irate(admit_offered_requests_total{{namespace="shop", limiter=~"{limiter}|"}}[1m]) and admit_offered_requests_total{{namespace="shop", limiter=~"{limiter}|"}})"#
    );
    let s = format!(
        r#"sum(rate(admit_shed_service_seconds_total{{namespace="shop", limiter="{limiter}"}}[1m])) / sum(rate(admit_shed_requests_total{{namespace="shop", limiter="{limiter}", outcome!="dropped"}}[1m]))"#
    );
    let metadata = admit_testkit::keda::metadata(
        &[
            ("scalerAddress", "admit-scaler.admit-system.svc:6000"),
            ("prometheusURL", prometheus),
            ("arrivalRateQuery", &lambda),
            ("serviceTimeQuery", &s),
            ("waitThresholdSeconds", "0.05"),
            ("targetSL", "0.95"),
            ("concurrencyPerReplica", "16"),
            ("scaleDownHoldSeconds", "120"),
            ("minReplicas", "1"),
            ("maxReplicas", "50"),
        ],
        &[],
    );
    metrics_request(ScaledObjectRef {
        name: limiter,
        namespace: "shop".to_owned(),
        scaler_metadata: metadata,
    })
}

/// The largest valid call for trigger `i` (the longest names and every key at its longest, as
/// `grpc_edges.rs` builds it), under `prometheus` (whose path its fake answers).
fn largest_call(prometheus: &str, i: usize) -> GetMetricsRequest {
    let mut metadata = admit_scaler::metadata::longest_metadata();
    let url = metadata.get_mut("prometheusURLFromEnv").unwrap();
    let padding = url.len() - prometheus.len() - 1;
    *url = format!("{prometheus}/{}", "p".repeat(padding));
    let metric_name = metadata["metricNameFromEnv"].clone();
    let label = format!("{i:o>63}");
    let name = [label.as_str(); 4].join(".")[..253].to_owned();
    let request = GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name,
            namespace: "n".repeat(63),
            scaler_metadata: metadata,
        }),
        metric_name,
    };
    assert_eq!(request.encoded_len(), max_request_bytes());
    request
}

/// `call(prometheus, i)` for each of `triggers`, at once over one connection from `from`,
/// left waiting.
async fn waiting_calls(
    served: &Served,
    from: std::net::IpAddr,
    call: impl Fn(usize) -> GetMetricsRequest,
    triggers: usize,
) -> RawCalls {
    let bodies = (0..triggers).map(|i| grpc_body(&call(i)));
    RawCalls::open(
        served.grpc,
        from,
        "/externalscaler.ExternalScaler/GetMetrics",
        bodies,
        true,
    )
    .await
}

/// KEDA waiting on a slow Prometheus: `triggers` triggers of `call`'s (their queries start
/// with `queries`) decided once; then Prometheus takes an hour, and KEDA's operator calls each
/// (each call starts its trigger's decision, which waits for a slot), then its metrics server
/// (each call joins the decision running), each over its own connection.
struct KedaWaiting {
    served: Served,
    url: String,
    _prometheus: FakePrometheus,
    /// The resident set with the triggers decided, with a call each waiting, with two.
    resident: [u64; 3],
    /// The operator's calls, and the metrics server's.
    calls: [RawCalls; 2],
}

impl KedaWaiting {
    /// The scene, with the scaler started by `serve` with the flags it is given.
    async fn start(
        serve: impl FnOnce(&[&str]) -> Served,
        call: fn(&str, usize) -> GetMetricsRequest,
        queries: &[&str],
        triggers: usize,
    ) -> Self {
        let prometheus = FakePrometheus::start().await;
        for query in queries {
            prometheus.set_prefixed(query, Reply::value("0.25"));
        }
        let url = prometheus.url();
        let count = triggers.to_string();
        // Waits longer than the test.
        let served = serve(&[
            "--allow-prometheus",
            &url,
            "--max-triggers",
            &count,
            "--max-triggers-per-namespace",
            &count,
            "--decision-interval",
            "1s",
            "--max-decision-wait",
            "5m",
            "--query-timeout",
            "2m",
            "--request-timeout",
            "10m",
        ]);
        let keda = connect(&served).await;
        let (ok, failed) = each(&keda, triggers, 64, {
            let url = url.clone();
            move |mut client, i| {
                let request = call(&url, i);
                async move { client.get_metrics(request).await.map(drop) }
            }
        })
        .await;
        assert_eq!((ok, failed), (triggers, 0));
        for query in queries {
            prometheus.set_prefixed(query, Reply::value("0.25").after(Duration::from_secs(3600)));
        }
        // The memos expire after the decision interval.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let decided = settled_resident(&served).await;
        let operator = waiting_calls(&served, loopback(2), |i| call(&url, i), triggers).await;
        let one_each = settled_resident(&served).await;
        let metrics_server = waiting_calls(&served, loopback(3), |i| call(&url, i), triggers).await;
        let two_each = settled_resident(&served).await;
        println!(
            "resident {:.1} MiB with {triggers} triggers decided, {:.1} MiB with a call each \
             waiting, {:.1} MiB with two",
            mib(decided),
            mib(one_each),
            mib(two_each)
        );
        KedaWaiting {
            served,
            url,
            _prometheus: prometheus,
            resident: [decided, one_each, two_each],
            calls: [operator, metrics_server],
        }
    }

    /// How many calls got each code so far (the others still wait).
    fn answers(&self) -> std::collections::HashMap<tonic::Code, usize> {
        let mut answers = self.calls[0].answers();
        for (code, count) in self.calls[1].answers() {
            *answers.entry(code).or_default() += count;
        }
        answers
    }

    fn stop(self) {
        let (status, log) = self.served.terminate();
        assert!(status.success(), "{status:?}: {log:?}");
    }
}

/// KEDA's operator and its metrics server each with a call per trigger waiting for a slow
/// Prometheus (up to 2 × `--max-triggers` calls): what one such call holds, at KEDA's usual
/// size and at the largest valid one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_holds_less_than_it_is_charged() {
    let usual = ["sum(irate(", "sum(rate("];
    for (what, call, queries, triggers) in [
        (
            "usual",
            usual_call as fn(&str, usize) -> GetMetricsRequest,
            &usual[..],
            2000,
        ),
        ("largest", largest_call, &["x"][..], 1000),
    ] {
        // A budget that refuses nothing here.
        let serve = |args: &[&str]| {
            let mut args = args.to_vec();
            args.extend(["--grpc-max-request-bytes-in-flight", "1073741824"]);
            Served::start(&args)
        };
        let scene = KedaWaiting::start(serve, call, queries, triggers).await;
        assert_eq!(scene.answers(), Default::default(), "every call waits");
        let [decided, one_each, two_each] = scene.resident;
        let per_call = |after: u64, before: u64| after.saturating_sub(before) / triggers as u64;
        let (starting, joining) = (per_call(one_each, decided), per_call(two_each, one_each));
        let message = call(&scene.url, 0).encoded_len() as u64;
        scene.stop();
        let charged = CHARGED_PER_REQUEST + 5 + MESSAGE_COPIES * message;
        println!(
            "a waiting GetMetrics of KEDA's {what} size ({message} bytes): {starting} bytes \
             resident when it starts its trigger's decision, {joining} when it joins one; \
             {charged} charged besides headers"
        );
        assert!(starting <= charged, "{starting} bytes");
        assert!(joining <= charged, "{joining} bytes");
    }
}

/// The Deployment's scaler with `--max-triggers` triggers of KEDA's usual size, each with a
/// call from KEDA's operator and one from its metrics server waiting on a slow Prometheus, and
/// scraped: the default budget refuses none of them, and the process stays under seven
/// eighths of its memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_waiting_on_every_trigger_fits_the_budget_and_the_limit() {
    const TRIGGERS: usize = admit_scaler::service::DEFAULT_MAX_TRIGGERS;
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("keda_waiting", limit) else {
        return;
    };
    let queries = ["sum(irate(", "sum(rate("];
    let scene = KedaWaiting::start(
        |args| serve_in(&cgroup, args),
        usual_call,
        &queries,
        TRIGGERS,
    )
    .await;
    let (status, page) = get(scene.served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let answers = scene.answers();
    let peak = peak_resident(&scene.served).max(scene.resident[2]);
    let cgroup_peak = cgroup.peak_bytes().unwrap_or(0);
    println!(
        "{TRIGGERS} triggers of KEDA's usual size, {} calls waiting and a scrape of {:.1} MiB, \
         the default budget: resident {:.1} MiB at the peak, cgroup peak {:.1} MiB of {:.0} MiB; \
         calls answered: {answers:?}",
        2 * TRIGGERS,
        mib(page.len() as u64),
        mib(peak),
        mib(cgroup_peak),
        mib(limit)
    );
    assert_eq!(
        answers,
        Default::default(),
        "every call waits, none refused"
    );
    assert!(peak < limit * 7 / 8, "peak {peak} bytes of {limit}");
    assert_eq!(cgroup.limit_hits(), 0);
    scene.stop();
}

/// The worst valid case for the budget: 1900 triggers at their longest, two calls each waiting
/// (those past the default budget refused), and two pages of `/metrics` in memory: the process
/// stays under seven eighths of the Deployment's limit. The waiting calls hold about 50 MiB of
/// the default budget's 70.3 MiB, the triggers 33 MiB, and the two 10.4 MiB pages with their
/// rendering about 40 MiB: the reason the limit is 192 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_triggers_with_the_budget_full_stay_under_the_limit() {
    const TRIGGERS: usize = 1900;
    let limit = deployment_limit();
    let Some(cgroup) = cgroup::require("budget_full_longest", limit) else {
        return;
    };
    let scene = KedaWaiting::start(
        |args| serve_in(&cgroup, args),
        largest_call,
        &["x"],
        TRIGGERS,
    )
    .await;
    // Two pages: one held by a reader that never reads, and a newer one rendered a second
    // later.
    let (status, page) = get(scene.served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let holding = never_reads_from(loopback(4), scene.served.http).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = get(scene.served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    let answers = scene.answers();
    let peak = peak_resident(&scene.served).max(scene.resident[2]);
    let cgroup_peak = cgroup.peak_bytes().unwrap_or(0);
    println!(
        "{TRIGGERS} triggers at their longest, {} calls of the largest size ({answers:?} \
         answered, the rest waiting), two pages of {:.1} MiB: resident {:.1} MiB at the peak, \
         cgroup peak {:.1} MiB of {:.0} MiB",
        2 * TRIGGERS,
        mib(page.len() as u64),
        mib(peak),
        mib(cgroup_peak),
        mib(limit)
    );
    assert!(answers.get(&tonic::Code::ResourceExhausted) > Some(&0));
    assert!(peak < limit * 7 / 8, "peak {peak} bytes of {limit}");
    assert_eq!(cgroup.limit_hits(), 0);
    drop(holding);
    scene.stop();
}
