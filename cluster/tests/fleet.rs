//! The fleet with real parts: replica processes in CPU cgroups behind Debian's HAProxy,
//! scraped by Debian's Prometheus, scaled out and in.
//!
//! Needs `haproxy`, `prometheus` and a writable cgroup hierarchy (root); without one a test
//! prints `SKIPPED:` and passes, unless CI's require variables say it must run.

use std::sync::Arc;
use std::time::Duration;

use admit_cluster::fleet::{Fleet, FleetConfig, Phase, ScaleIn};
use admit_testkit::haproxy::{self, HaproxyConfig};
use admit_testkit::prometheus;
use admit_testkit::wait::{bounded, eventually};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const BINARY: &str = env!("CARGO_BIN_EXE_admit-cluster");

/// The parts, or `None` (and a `SKIPPED:` line) where one cannot be had.
async fn parts(test: &str) -> Option<(Arc<haproxy::Haproxy>, Arc<prometheus::Prometheus>)> {
    haproxy::require(test)?;
    prometheus::require(test)?;
    admit_testkit::cgroup::require_cpu(test, 0.5)?;
    let proxy = haproxy::launch(HaproxyConfig {
        check_interval: Duration::from_millis(100),
        ..HaproxyConfig::default()
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    let prometheus = prometheus::start_discovered(Duration::from_millis(200))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    Some((Arc::new(proxy), Arc::new(prometheus)))
}

fn config(scale_in: ScaleIn) -> FleetConfig {
    FleetConfig {
        binary: BINARY.into(),
        replica_args: [
            "--work-mean",
            "2ms",
            "--cold",
            "0s",
            "--iterations-per-ms",
            "100000",
            "--capacity",
            "1000",
            "--drain-delay",
            "500ms",
            "--drain-deadline",
            "5s",
        ]
        .map(str::to_owned)
        .to_vec(),
        cpus: Some(0.5),
        start_delay: Duration::from_millis(100),
        propagation_delay: Duration::from_millis(200),
        grace_period: Duration::from_secs(5),
        scale_in,
    }
}

fn ready(fleet: &Fleet) -> usize {
    fleet
        .pods()
        .iter()
        .filter(|pod| pod.phase == Phase::Ready)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_come_behind_the_proxy_and_leave_without_losing_a_request() {
    let test = "replicas_come_behind_the_proxy_and_leave_without_losing_a_request";
    let Some((proxy, prometheus)) = parts(test).await else {
        return;
    };
    let fleet = Fleet::new(
        config(ScaleIn::Drain),
        Arc::clone(&proxy),
        Arc::clone(&prometheus),
    )
    .await
    .expect("the fleet starts");
    fleet.scale(2);
    assert_eq!(fleet.replicas(), 2);
    eventually(
        "two ready replicas",
        || ready(&fleet) == 2,
        || format!("{:?}", fleet.pods()),
    )
    .await;
    assert_eq!(proxy.servers().await.unwrap().len(), 2);
    assert!(fleet.pods().iter().all(|pod| pod.cpu_usage.is_some()));
    // The cAdvisor stand-in: each running pod's CPU time, scraped as the kubelet's would be.
    prometheus
        .wait_until(
            "both pods' CPU time",
            r#"container_cpu_usage_seconds_total{job="cadvisor",container="replica"}"#,
            prometheus::FIRST_SCRAPE_LIMIT,
            |samples| samples.len() == 2 && samples.iter().all(|sample| sample.value > 0.0),
        )
        .await;

    // Requests keep coming while one replica leaves: none is lost.
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("{}/work", proxy.url());
    let sending = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..150 {
                let request = http::Request::get(url.as_str()).body(Empty::new()).unwrap();
                let status = match client.request(request).await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.into_body().collect().await;
                        status
                    }
                    Err(_) => 0,
                };
                statuses.push(status);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            statuses
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    fleet.scale(1);
    assert_eq!(fleet.replicas(), 1);
    let statuses = bounded("the requests", sending).await.unwrap();
    assert!(
        statuses.iter().all(|&status| status == 200),
        "every request answered 200: {statuses:?}"
    );
    eventually(
        "one replica left",
        || fleet.pods().len() == 1,
        || format!("{:?}", fleet.pods()),
    )
    .await;
    assert_eq!(proxy.servers().await.unwrap().len(), 1);
    assert_eq!(fleet.events().killed_at_grace, 0);
    let departures = fleet.departures();
    assert_eq!(departures.len(), 1, "{departures:?}");
    assert!(departures[0].signalled < departures[0].gone);
    fleet.shutdown(Duration::from_secs(10)).await;
    assert!(fleet.pods().is_empty());
}
