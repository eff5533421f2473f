//! The gRPC contract, with a tonic client standing in for KEDA and a fake Prometheus on
//! loopback: every RPC, both number fields, the memo, and the code of every failure.

mod support;

use std::time::Duration;

use admit_scaler::proto::{GetMetricsRequest, IsActiveResponse, ScaledObjectRef};
use admit_scaler::service::{AllowList, ServiceOptions};
use admit_testkit::wait::bounded;
use tonic::Code;

use support::{FakePrometheus, Reply, Scaler, metadata, metrics_request, object};

/// λ = 120/s, s = 0.25 s: 30 erlangs, 37 servers at T = 0, p = 0.8.
fn thirty_erlangs(prometheus: &FakePrometheus) {
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
}

#[tokio::test]
async fn keda_s_three_calls_per_poll() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let checkout = object("checkout", metadata(&prometheus.url(), &[]));

    let spec = scaler
        .client
        .get_metric_spec(checkout.clone())
        .await
        .unwrap();
    let spec = &spec.get_ref().metric_specs;
    assert_eq!(spec.len(), 1);
    assert_eq!(spec[0].metric_name, "admit-erlang");
    assert_eq!((spec[0].target_size, spec[0].target_size_float), (1, 1.0));
    // GetMetricSpec does no I/O.
    assert_eq!(prometheus.asked("lambda"), 0);

    let values = scaler
        .client
        .get_metrics(metrics_request(checkout.clone()))
        .await
        .unwrap();
    let values = &values.get_ref().metric_values;
    assert_eq!(values.len(), 1);
    assert_eq!(values[0].metric_name, "admit-erlang");
    assert_eq!(
        (values[0].metric_value, values[0].metric_value_float),
        (37, 37.0)
    );

    let active = scaler.client.is_active(checkout.clone()).await.unwrap();
    assert!(active.get_ref().result);

    // KEDA's next calls and the HPA's, within the decision interval: no new queries.
    for _ in 0..3 {
        scaler
            .client
            .get_metric_spec(checkout.clone())
            .await
            .unwrap();
        scaler
            .client
            .get_metrics(metrics_request(checkout.clone()))
            .await
            .unwrap();
        scaler.client.is_active(checkout.clone()).await.unwrap();
    }
    assert_eq!((prometheus.asked("lambda"), prometheus.asked("s")), (1, 1));
    assert_eq!(scaler.service.tracked_objects(), 1);
}

#[tokio::test]
async fn a_named_metric_and_the_cap() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let capped = object(
        "checkout",
        metadata(
            &prometheus.url(),
            &[("metricName", "checkout-wait"), ("maxReplicas", "10")],
        ),
    );
    let spec = scaler.client.get_metric_spec(capped.clone()).await.unwrap();
    assert_eq!(spec.get_ref().metric_specs[0].metric_name, "checkout-wait");
    let values = scaler
        .client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(capped.clone()),
            metric_name: "checkout-wait".to_owned(),
        })
        .await
        .unwrap();
    // The need (37) is above maxReplicas: the cap, not an error.
    assert_eq!(values.get_ref().metric_values[0].metric_value, 10);

    // Four servers per replica: 37 servers in 10 replicas.
    let packed = object(
        "packed",
        metadata(&prometheus.url(), &[("concurrencyPerReplica", "4")]),
    );
    let values = scaler
        .client
        .get_metrics(metrics_request(packed))
        .await
        .unwrap();
    assert_eq!(values.get_ref().metric_values[0].metric_value, 10);

    // A metric name other than the trigger's.
    let error = scaler
        .client
        .get_metrics(metrics_request(capped))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(error.message().contains("checkout-wait"), "{error:?}");
}

#[tokio::test]
async fn idle_is_inactive_at_min_replicas_not_an_error() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("0"));
    // An idle sum/count ratio is 0/0.
    prometheus.set("s", Reply::value("NaN"));
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let idle = object("idle", metadata(&prometheus.url(), &[("minReplicas", "2")]));
    let values = scaler
        .client
        .get_metrics(metrics_request(idle.clone()))
        .await
        .unwrap();
    assert_eq!(values.get_ref().metric_values[0].metric_value, 2);
    assert!(
        !scaler
            .client
            .is_active(idle)
            .await
            .unwrap()
            .get_ref()
            .result
    );

    // Below the activation rate: inactive, but still sized.
    prometheus.set("lambda", Reply::value("0.5"));
    prometheus.set("s", Reply::value("0.25"));
    let quiet = object(
        "quiet",
        metadata(&prometheus.url(), &[("activationArrivalRate", "1")]),
    );
    assert!(
        !scaler
            .client
            .is_active(quiet)
            .await
            .unwrap()
            .get_ref()
            .result
    );
}

/// Each failure of the reference's table, through both GetMetrics and IsActive.
#[tokio::test]
async fn every_failure_has_its_code() {
    let prometheus = FakePrometheus::start().await;
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let error = |kind: &str, text: &str| {
        format!(r#"{{"status":"error","errorType":"{kind}","error":"{text}"}}"#)
    };
    let cases: Vec<(&str, Reply, Reply, Code)> = vec![
        (
            "bad-promql",
            Reply::new(
                400,
                error("bad_data", "1:5: parse error: unexpected right parenthesis"),
            ),
            Reply::value("0.25"),
            Code::InvalidArgument,
        ),
        (
            "execution",
            Reply::new(422, error("execution", "many-to-many matching not allowed")),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "empty",
            Reply::ok(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "two-series",
            Reply::ok(
                r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"pod":"a"},"value":[1,"1"]},{"metric":{"pod":"b"},"value":[1,"2"]}]}}"#,
            ),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "a-string",
            Reply::ok(r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "nan",
            Reply::value("NaN"),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "inf",
            Reply::value("+Inf"),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "negative-rate",
            Reply::value("-3"),
            Reply::value("0.25"),
            Code::FailedPrecondition,
        ),
        (
            "zero-service-time",
            Reply::value("120"),
            Reply::value("0"),
            Code::FailedPrecondition,
        ),
        (
            "busy-without-service-time",
            Reply::value("120"),
            Reply::value("NaN"),
            Code::FailedPrecondition,
        ),
        (
            "prometheus-timeout",
            Reply::new(
                503,
                error("timeout", "query timed out in expression evaluation"),
            ),
            Reply::value("0.25"),
            Code::DeadlineExceeded,
        ),
        (
            "proxy-error",
            Reply::new(502, "<html>Bad Gateway</html>".to_owned()),
            Reply::value("0.25"),
            Code::Unavailable,
        ),
        (
            "not-json",
            Reply::ok("<html>login</html>"),
            Reply::value("0.25"),
            Code::Unavailable,
        ),
        // 10¹³ erlangs: beyond the model.
        (
            "beyond-the-model",
            Reply::value("1e13"),
            Reply::value("1"),
            Code::OutOfRange,
        ),
    ];
    for (name, lambda, s, code) in cases {
        let (lambda_query, s_query) = (format!("lambda-{name}"), format!("s-{name}"));
        prometheus.set(&lambda_query, lambda);
        prometheus.set(&s_query, s);
        let trigger = object(
            name,
            metadata(
                &prometheus.url(),
                &[
                    ("arrivalRateQuery", &lambda_query),
                    ("serviceTimeQuery", &s_query),
                ],
            ),
        );
        let error = scaler
            .client
            .get_metrics(metrics_request(trigger.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.code(), code, "{name}: {error:?}");
        assert!(
            error.message().contains(&format!("shop/{name}")),
            "{name}: {error:?}"
        );
        // IsActive answers from the same decision, error included: no new query.
        let active = scaler.client.is_active(trigger).await.unwrap_err();
        assert_eq!(active.code(), code, "{name}: {active:?}");
        assert_eq!(prometheus.asked(&lambda_query), 1, "{name}");
    }
}

#[tokio::test]
async fn unreachable_prometheus_and_our_timeout() {
    let mut scaler = Scaler::start(ServiceOptions {
        client: admit_scaler::prometheus::ClientOptions {
            timeout: Duration::from_millis(200),
            ..Default::default()
        },
        ..ServiceOptions::default()
    })
    .await;
    // A port nothing listens on: bound, then closed.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let trigger = object("down", metadata(&format!("http://{closed}"), &[]));
    let error = scaler
        .client
        .get_metrics(metrics_request(trigger))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");

    // A server that accepts and never answers: our own timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let _hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let trigger = object("hung", metadata(&format!("http://{silent_addr}"), &[]));
    let error = bounded(
        "a hung Prometheus",
        scaler.client.get_metrics(metrics_request(trigger)),
    )
    .await
    .unwrap_err();
    assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
}

#[tokio::test]
async fn bad_metadata_names_the_key_and_the_raw_value() {
    let prometheus = FakePrometheus::start().await;
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let mut missing = metadata(&prometheus.url(), &[]);
    missing.remove("targetSL");
    let cases = [
        (missing, "targetSL"),
        (
            metadata(&prometheus.url(), &[("targetSl", "0.9")]),
            "targetSl",
        ),
        (
            metadata(&prometheus.url(), &[("waitThresholdSeconds", "50ms")]),
            "\"50ms\"",
        ),
        (
            metadata(&prometheus.url(), &[("targetSL", "1")]),
            "targetSL",
        ),
        (metadata("prometheus:9090", &[]), "prometheus:9090"),
    ];
    for (metadata, needle) in cases {
        let trigger = object("bad", metadata);
        for error in [
            scaler
                .client
                .get_metric_spec(trigger.clone())
                .await
                .unwrap_err(),
            scaler
                .client
                .get_metrics(metrics_request(trigger.clone()))
                .await
                .unwrap_err(),
            scaler.client.is_active(trigger.clone()).await.unwrap_err(),
        ] {
            assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
            assert!(error.message().contains(needle), "{needle}: {error:?}");
        }
    }
    // Without a name or a scaledObjectRef.
    let nameless = ScaledObjectRef {
        name: String::new(),
        ..object("x", metadata(&prometheus.url(), &[]))
    };
    let error = scaler.client.is_active(nameless).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    let error = scaler
        .client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: None,
            metric_name: "admit-erlang".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert_eq!(prometheus.asked("lambda"), 0);
    assert_eq!(scaler.service.tracked_objects(), 0);
}

#[tokio::test]
async fn prometheus_outside_the_allow_list_is_permission_denied() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let allowed: http::Uri = prometheus.url().parse().unwrap();
    let mut scaler = Scaler::start(ServiceOptions {
        allow: AllowList::new([allowed]).unwrap(),
        ..ServiceOptions::default()
    })
    .await;
    let inside = object("inside", metadata(&prometheus.url(), &[]));
    scaler
        .client
        .get_metrics(metrics_request(inside))
        .await
        .unwrap();
    let outside = object("outside", metadata("http://169.254.169.254/latest", &[]));
    for error in [
        scaler
            .client
            .get_metric_spec(outside.clone())
            .await
            .unwrap_err(),
        scaler.client.is_active(outside).await.unwrap_err(),
    ] {
        assert_eq!(error.code(), Code::PermissionDenied, "{error:?}");
        assert!(error.message().contains("169.254.169.254"), "{error:?}");
        // The caller learns no allowed URL: the scaler's log lists them.
        let port = allowed_port(&prometheus);
        assert!(!error.message().contains(&port), "{error:?}");
        assert!(error.message().contains("--allow-prometheus"), "{error:?}");
    }
}

/// The fake Prometheus' port, as its URL shows it.
fn allowed_port(prometheus: &FakePrometheus) -> String {
    let url: http::Uri = prometheus.url().parse().unwrap();
    format!(":{}", url.port_u16().unwrap())
}

async fn next(
    stream: &mut tonic::Streaming<IsActiveResponse>,
) -> Result<Option<IsActiveResponse>, tonic::Status> {
    bounded("the next activity", stream.message()).await
}

#[tokio::test]
async fn stream_is_active_pushes_changes() {
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("0"));
    prometheus.set("s", Reply::value("NaN"));
    let mut scaler = Scaler::start(ServiceOptions {
        decision_interval: Duration::from_millis(20),
        ..ServiceOptions::default()
    })
    .await;
    let trigger = object("pushed", metadata(&prometheus.url(), &[]));
    let mut stream = scaler
        .client
        .stream_is_active(trigger)
        .await
        .unwrap()
        .into_inner();
    assert!(!next(&mut stream).await.unwrap().unwrap().result);
    thirty_erlangs(&prometheus);
    // Unchanged activity is not sent again: the next message is the change.
    assert!(next(&mut stream).await.unwrap().unwrap().result);
    prometheus.set("lambda", Reply::value("0"));
    assert!(!next(&mut stream).await.unwrap().unwrap().result);
    // A failed decision ends the stream with its code (KEDA reconnects).
    prometheus.set("lambda", Reply::value("NaN"));
    let error = next(&mut stream).await.unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
}

#[tokio::test]
async fn shutting_down_ends_open_streams() {
    let prometheus = FakePrometheus::start().await;
    thirty_erlangs(&prometheus);
    let mut scaler = Scaler::start(ServiceOptions::default()).await;
    let trigger = object("pushed", metadata(&prometheus.url(), &[]));
    let mut stream = scaler
        .client
        .stream_is_active(trigger.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(next(&mut stream).await.unwrap().unwrap().result);
    scaler.service.shut_down();
    let error = next(&mut stream).await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    // A stream opened afterwards ends at once.
    let mut late = scaler
        .client
        .stream_is_active(trigger)
        .await
        .unwrap()
        .into_inner();
    let error = next(&mut late).await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
}
