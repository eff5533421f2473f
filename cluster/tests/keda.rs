//! The KEDA stand-in against the real scaler service, in process: one poll's three calls and
//! the numbers it hands the HPA.

use std::collections::BTreeMap;

use admit_cluster::keda::{ExternalTrigger, Reading};
use admit_scaler::service::{ScalerService, ServiceOptions};
use axum::Router;
use axum::routing::post;

/// A Prometheus that answers every instant query with `value`.
async fn prometheus(value: &'static str) -> admit_testkit::TestServer {
    let body = format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1700000000,"{value}"]}}]}}}}"#
    );
    let router = Router::new().route("/api/v1/query", post(move || async move { body }));
    admit_testkit::axum::serve_router(router).await
}

#[tokio::test]
async fn a_poll_reads_the_scalers_replicas_as_an_average_value() {
    // One answer serves both queries: λ = 0.5/s, s = 0.5 s.
    let prometheus = prometheus("0.5").await;
    let service = ScalerService::new(ServiceOptions::default());
    let (addr, incoming) = admit_testkit::tonic::listen().await;
    let serve = tonic::transport::Server::builder()
        .add_service(service.into_server())
        .serve_with_incoming(incoming);
    let _server = admit_testkit::tonic::spawn_server(addr, serve);
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let metadata: BTreeMap<String, String> = [
        ("scalerAddress", "127.0.0.1:1"),
        ("prometheusURL", prometheus.url().as_str()),
        ("arrivalRateQuery", "lambda"),
        ("serviceTimeQuery", "s"),
        ("waitThresholdSeconds", "0"),
        ("targetSL", "0.8"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    let mut trigger = ExternalTrigger::new(channel, "shop", "checkout", metadata);
    // 0.25 erlangs: one server leaves P(no wait) = 0.75 < 0.8, two meet it; the scaler
    // publishes 2 replicas against a target of 1.
    let reading = trigger.poll().await.unwrap();
    assert_eq!(
        reading,
        Reading {
            usage_milli: 2000,
            target_milli: 1000,
            active: true,
        }
    );
}
