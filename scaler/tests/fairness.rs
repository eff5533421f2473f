//! One namespace's slow triggers do not starve another's, on the real binary with its default
//! limits: a fake Prometheus answers the slow namespace's queries after 6 s.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use admit_scaler::proto::ScaledObjectRef;
use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::wait::{bounded, eventually};
use tokio::time::Instant;
use tonic::transport::Channel;

use support::process::Served;
use support::{FakePrometheus, Reply, metadata, metrics_request};

/// How long the slow namespace's queries take to answer.
const SLOW: Duration = Duration::from_secs(6);
/// The slow namespace's triggers.
const SLOW_TRIGGERS: usize = 64;

fn trigger(
    namespace: &str,
    name: &str,
    prometheus: &str,
    lambda: &str,
    s: &str,
) -> ScaledObjectRef {
    ScaledObjectRef {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        scaler_metadata: metadata(
            prometheus,
            &[("arrivalRateQuery", lambda), ("serviceTimeQuery", s)],
        ),
    }
}

// Several threads: the slow calls go on while the test makes the other namespace's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_namespace_does_not_delay_another_s_get_metrics() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set("slow_lambda", Reply::value("120").after(SLOW));
    prometheus.set("slow_s", Reply::value("0.25").after(SLOW));
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let url = prometheus.url();
    let served = Served::start(&["--allow-prometheus", &url]);
    let channel = bounded(
        "connecting",
        Channel::from_shared(format!("http://{}", served.grpc))
            .unwrap()
            .connect(),
    )
    .await
    .unwrap();

    // KEDA polls the slow namespace's 64 ScaledObjects at once.
    let started = Instant::now();
    let slow_done = Arc::new(AtomicUsize::new(0));
    let mut slow = tokio::task::JoinSet::new();
    for i in 0..SLOW_TRIGGERS {
        let mut client = ExternalScalerClient::new(channel.clone());
        let object = trigger(
            "tenant-a",
            &format!("slow-{i}"),
            &url,
            "slow_lambda",
            "slow_s",
        );
        let done = Arc::clone(&slow_done);
        slow.spawn(async move {
            let answer = client.get_metrics(metrics_request(object)).await;
            done.fetch_add(1, Ordering::SeqCst);
            answer.map(drop).map_err(|status| status.code())
        });
    }
    // Its decisions hold their share of the slots, their queries unanswered.
    eventually(
        "the slow namespace's queries reach Prometheus",
        || prometheus.asked("slow_lambda") >= 4,
        || format!("{} asked", prometheus.asked("slow_lambda")),
    )
    .await;

    // Another namespace's poll meanwhile.
    let asked = Instant::now();
    let mut client = ExternalScalerClient::new(channel.clone());
    let object = trigger("tenant-b", "checkout", &url, "lambda", "s");
    let answer = bounded(
        "tenant-b's GetMetrics",
        client.get_metrics(metrics_request(object)),
    )
    .await
    .expect("tenant-b's decision");
    let took = asked.elapsed();
    let finished_slow = slow_done.load(Ordering::SeqCst);
    let since_start = started.elapsed();
    println!(
        "tenant-b's GetMetrics answered in {took:?}, {since_start:?} after tenant-a's 64 calls \
         began, with {finished_slow} of them finished (their queries take {SLOW:?}, and time \
         out at the 5 s --query-timeout)"
    );
    assert_eq!(answer.get_ref().metric_values[0].metric_value, 37);
    // No slow call had finished: tenant-b did not wait for one to give up its slot.
    assert_eq!(finished_slow, 0);

    // The slow namespace's calls end on their own (their queries time out at 5 s, later
    // ones wait for a slot within --max-decision-wait): none is left hanging.
    let codes = tokio::time::timeout(Duration::from_secs(60), slow.join_all())
        .await
        .expect("tenant-a's calls end");
    assert_eq!(codes.len(), SLOW_TRIGGERS);
    let deadline = codes
        .iter()
        .filter(|code| **code == Err(tonic::Code::DeadlineExceeded))
        .count();
    let busy = codes
        .iter()
        .filter(|code| **code == Err(tonic::Code::ResourceExhausted))
        .count();
    println!("tenant-a: {deadline} DEADLINE_EXCEEDED, {busy} RESOURCE_EXHAUSTED");
    assert_eq!(deadline + busy, SLOW_TRIGGERS, "{codes:?}");
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}
