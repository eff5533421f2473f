//! The `admit-scaler` binary as a process: `serve` with gRPC health, TLS, `/metrics`,
//! `/healthz`, `/readyz` and a stop on SIGTERM; the flags' errors; `check` on manifests.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::wait::bounded;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use support::process::{BINARY, Served, get};
use support::{FakePrometheus, Reply, metadata, metrics_request, object};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("admit-scaler-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// Several threads: the clients' connections must answer the server's GOAWAY while the test
// thread waits for the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_keda_health_and_metrics_and_stops_on_sigterm() {
    // A decision: 120/s of 0.25 s each is 30 erlangs, 37 servers at T = 0, p = 0.8.
    let prometheus = FakePrometheus::start().await;
    prometheus.set("lambda", Reply::value("120"));
    prometheus.set("s", Reply::value("0.25"));
    let served = Served::start(&[
        "--decision-interval",
        "1s",
        "--allow-prometheus",
        &prometheus.url(),
    ]);
    let url = format!("http://{}", served.grpc);

    let channel = Channel::from_shared(url.clone()).unwrap();
    let mut health = HealthClient::new(bounded("connect", channel.connect()).await.unwrap());
    for service in ["", "externalscaler.ExternalScaler"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap();
        assert_eq!(
            status.get_ref().status,
            ServingStatus::Serving as i32,
            "{service:?}"
        );
    }
    // Watch is a stream any caller could hold open: refused, as the protocol allows.
    let watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(watch.code(), tonic::Code::Unimplemented, "{watch:?}");

    let mut keda = bounded("connect", ExternalScalerClient::connect(url))
        .await
        .unwrap();
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    keda.get_metric_spec(trigger.clone()).await.unwrap();
    let values = keda.get_metrics(metrics_request(trigger)).await.unwrap();
    assert_eq!(values.get_ref().metric_values[0].metric_value, 37);
    let refused = keda
        .get_metric_spec(object("checkout", metadata("not a url", &[])))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    let (status, metrics) = get(served.http, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    for line in [
        r#"admit_scaler_rpc_total{method="GetMetricSpec",code="OK"} 1"#,
        r#"admit_scaler_rpc_total{method="GetMetricSpec",code="INVALID_ARGUMENT"} 1"#,
        // Refused before a decision: without the caller-chosen labels.
        r#"admit_scaler_refused_total{kind="metadata"} 1"#,
        r#"admit_scaler_build_info{version="#,
        "admit_scaler_rpc_duration_seconds_bucket{",
        r#"admit_scaler_rpc_total{method="GetMetrics",code="OK"} 1"#,
        // The decision, labelled by trigger.
        r#"admit_scaler_recommended_replicas{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 37"#,
        r#"admit_scaler_required_servers{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 37"#,
        r#"admit_scaler_offered_load{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 30"#,
        r#"admit_scaler_arrival_rate{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 120"#,
        r#"admit_scaler_active{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 1"#,
        r#"admit_scaler_capped{namespace="shop",scaled_object="checkout",metric="admit-erlang"} 0"#,
        r#"admit_scaler_prometheus_query_duration_seconds_count{query="arrival_rate"} 1"#,
        r#"admit_scaler_tracked_objects 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(get(served.http, "/healthz").await.0.contains(" 200 "));
    assert!(get(served.http, "/readyz").await.0.contains(" 200 "));

    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
    assert!(log.iter().any(|line| line.contains("SIGTERM")), "{log:?}");
    assert!(log.iter().any(|line| line.contains("stopped")), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_tls() {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = temp_dir("tls");
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, key.cert.pem()).unwrap();
    std::fs::write(&key_path, key.signing_key.serialize_pem()).unwrap();
    let served = Served::start(&[
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
        "--allow-prometheus",
        "http://127.0.0.1:9",
    ]);
    let port = served.grpc.port();

    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(key.cert.pem()))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://localhost:{port}"))
        .unwrap()
        .tls_config(tls)
        .unwrap();
    let channel = bounded("a TLS connection", channel.connect())
        .await
        .unwrap();
    let mut keda = ExternalScalerClient::new(channel);
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    keda.get_metric_spec(trigger.clone()).await.unwrap();

    // Plain text to a TLS port fails.
    let mut plain = bounded(
        "a plain connection",
        ExternalScalerClient::connect(format!("http://127.0.0.1:{port}")),
    )
    .await
    .unwrap();
    assert!(
        bounded("plain text", plain.get_metric_spec(trigger))
            .await
            .is_err()
    );

    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_process_while_a_decision_waits() {
    let prometheus = FakePrometheus::start().await;
    let served = Served::start(&[
        "--query-timeout",
        "5m",
        "--request-timeout",
        "10m",
        "--shutdown-grace",
        "5s",
        "--allow-prometheus",
        &prometheus.url(),
    ]);
    prometheus.set(
        "lambda",
        Reply::value("120").after(Duration::from_secs(3600)),
    );
    prometheus.set("s", Reply::value("0.25"));
    let mut keda = bounded(
        "connect",
        ExternalScalerClient::connect(format!("http://{}", served.grpc)),
    )
    .await
    .unwrap();
    let trigger = object("checkout", metadata(&prometheus.url(), &[]));
    let waiting = tokio::spawn(async move { keda.get_metrics(metrics_request(trigger)).await });
    admit_testkit::wait::eventually(
        "the query is asked",
        || prometheus.asked("lambda") == 1,
        || "not asked".to_owned(),
    )
    .await;
    let (status, log) = tokio::task::spawn_blocking(move || served.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}: {log:?}");
    let answer = bounded("the answer", waiting).await.unwrap();
    assert_eq!(
        answer.unwrap_err().code(),
        tonic::Code::Unavailable,
        "the RPC ends as the scaler stops"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_keeps_serving_through_the_delay_and_a_second_signal_ends_it() {
    // Far longer than the test's bounds: if the process stops, the second signal did it.
    // Its trigger's decisions fail to connect (port 9): the URL needs only be allowed.
    let served = Served::start(&[
        "--shutdown-delay",
        "10m",
        "--allow-prometheus",
        "http://127.0.0.1:9",
    ]);
    let url = format!("http://{}", served.grpc);
    let mut keda = bounded("connect", ExternalScalerClient::connect(url.clone()))
        .await
        .unwrap();
    let trigger = object("checkout", metadata("http://127.0.0.1:9", &[]));
    keda.get_metric_spec(trigger.clone()).await.unwrap();

    served.sigterm();
    let http = served.http;
    let started = std::time::Instant::now();
    bounded("/readyz fails", async {
        while !get(http, "/readyz").await.0.contains(" 503 ") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    println!("/readyz failed {:?} after SIGTERM", started.elapsed());
    let channel = bounded(
        "connect",
        Channel::from_shared(url.clone()).unwrap().connect(),
    )
    .await
    .unwrap();
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(status.get_ref().status, ServingStatus::NotServing as i32);
    // Not ready, and still serving: on KEDA's connection, and on a new one.
    keda.get_metric_spec(trigger.clone()).await.unwrap();
    ExternalScalerClient::new(channel)
        .get_metric_spec(trigger)
        .await
        .unwrap();
    assert!(get(http, "/healthz").await.0.contains(" 200 "));

    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
    assert!(
        log.iter().any(|line| line.contains("SIGTERM: not ready")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|line| line.contains("SIGTERM: stopping now")),
        "{log:?}"
    );
}

/// The flags `deploy/scaler.yaml` gives `serve`, but for the listen addresses.
fn deployment_args() -> Vec<String> {
    let manifest = include_str!("../../deploy/scaler.yaml");
    let args = manifest
        .split("args:\n")
        .nth(1)
        .expect("the Deployment's args");
    args.lines()
        .map_while(|line| {
            let line = line.trim();
            (line.starts_with('-') || line.starts_with('#')).then_some(line)
        })
        .filter_map(|line| line.strip_prefix("- "))
        .filter(|arg| !arg.contains("-listen="))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_s_flags_are_the_binary_s() {
    let args = deployment_args();
    assert!(args.len() >= 8, "{args:?}");
    assert!(
        args.iter().any(|arg| arg.starts_with("--max-triggers=")),
        "{args:?}"
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, log) = Served::start(&args).terminate();
    assert!(status.success(), "{args:?}: {status:?}: {log:?}");
}

/// Runs the binary to completion: exit code, stdout, stderr.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(BINARY).args(args).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_are_refused_before_serving() {
    let (code, _, stderr) = run(&["serve", "--decision-interval", "10"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no unit"), "{stderr}");
    let (code, _, stderr) = run(&["serve", "--tls-cert", "x.pem"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-key"), "{stderr}");
    let (code, _, stderr) = run(&[
        "serve",
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        "--tls-cert",
        "/nonexistent/tls.crt",
        "--tls-key",
        "/nonexistent/tls.key",
        "--allow-any-prometheus",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("/nonexistent/tls.crt"), "{stderr}");
    let (code, _, stderr) = run(&["serve", "--grpc-listen", "localhost"]);
    assert_eq!(code, Some(2), "{stderr}");
    // A CA file without a certificate.
    let empty = temp_dir("ca").join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let (code, _, stderr) = run(&[
        "serve",
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        "--prometheus-ca-file",
        empty.to_str().unwrap(),
        "--allow-any-prometheus",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no PEM certificate"), "{stderr}");
    std::fs::remove_dir_all(empty.parent().unwrap()).unwrap();
    // Settings that cannot work are refused before anything starts.
    for (args, needle) in [
        (
            &["--allow-prometheus", "prometheus.monitoring:9090"][..],
            "--allow-prometheus",
        ),
        (
            &["--allow-prometheus", "http://p:9090/a/..%2fb"][..],
            "--allow-prometheus",
        ),
        (
            &["--allow-prometheus", "http://p:9090/a/%252e%252e/b"][..],
            "--allow-prometheus",
        ),
        // Any URL only when asked for: any caller could make the scaler query anywhere.
        (&[][..], "--allow-prometheus is required"),
        (
            &[
                "--allow-any-prometheus",
                "--allow-prometheus",
                "http://p:9090",
            ][..],
            "--allow-any-prometheus",
        ),
        (&["--decision-interval", "0s"][..], "--decision-interval"),
        (&["--query-timeout", "0s"][..], "--query-timeout"),
        (&["--state-ttl", "15s"][..], "--state-ttl"),
    ] {
        let (code, _, stderr) = run(&[&["serve"][..], args].concat());
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

const MANIFEST: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: checkout
  namespace: shop
spec:
  scaleTargetRef:
    name: checkout
  triggers:
    - type: cpu
      metadata:
        value: "60"
    - type: external
      metadata:
        scalerAddress: admit-scaler.admit-system:6000
        prometheusURL: http://prometheus.monitoring:9090
        arrivalRateQuery: sum(rate(admit_shed_requests_total{limiter="checkout"}[1m]))
        serviceTimeQuery: sum(rate(admit_shed_service_seconds_total{limiter="checkout"}[1m])) / sum(rate(admit_shed_requests_total{limiter="checkout",outcome!="dropped"}[1m]))
        waitThresholdSeconds: "0.05"
        targetSLFromEnv: TARGET_SL
"#;

#[test]
fn check_validates_a_manifest_without_io() {
    let dir = temp_dir("check");
    let path = dir.join("scaledobject.yaml");
    let without_address = dir.join("no-address.yaml");
    std::fs::write(&path, MANIFEST).unwrap();
    let path = path.to_str().unwrap();

    let (code, stdout, stderr) = run(&["check", "-f", path, "--env", "TARGET_SL=0.95"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("shop/checkout trigger 1 (external): ok"),
        "{stdout}"
    );

    // Unset, KEDA drops the key: then targetSL is missing.
    let (code, stdout, _) = run(&["check", "-f", path]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("TARGET_SL"), "{stdout}");
    assert!(stdout.contains("targetSL"), "{stdout}");

    // A bad value is named with its key and raw value.
    let (code, stdout, _) = run(&["check", "-f", path, "--env", "TARGET_SL=95%"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("targetSLFromEnv") && stdout.contains("95%"),
        "{stdout}"
    );

    // --metadata, as KEDA would send it.
    let (code, stdout, _) = run(&["check", "--metadata", "targetSL=0.9"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("prometheusURL"), "{stdout}");

    // Settings every decision would then refuse, or that the HPA does not allow: refused.
    let valid = [
        "prometheusURL=http://prometheus:9090",
        "arrivalRateQuery=lambda",
        "serviceTimeQuery=s",
        "waitThresholdSeconds=0",
        "targetSL=0.8",
    ];
    for (extra, needle) in [
        (
            "slTolerance=1e16",
            "`slTolerance` and `targetSL` conflict: slTolerance \"1e16\"",
        ),
        (
            "scaleDownHoldSeconds=1e18",
            "`scaleDownHoldSeconds`: invalid value \"1e18\"",
        ),
        ("scaleDownHoldSeconds=3601", "from 0 to 3600"),
    ] {
        let mut args = vec!["check"];
        for metadata in valid.iter().chain([&extra]) {
            args.extend(["--metadata", metadata]);
        }
        let (code, stdout, _) = run(&args);
        assert_eq!(code, Some(1), "{extra}: {stdout}");
        assert!(stdout.contains(needle), "{extra}: {stdout}");
    }

    // KEDA needs scalerAddress, though the scaler never reads it.
    std::fs::write(
        &without_address,
        MANIFEST.replace("scalerAddress", "# scalerAddress"),
    )
    .unwrap();
    let (code, stdout, _) = run(&[
        "check",
        "-f",
        without_address.to_str().unwrap(),
        "--env",
        "TARGET_SL=0.95",
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("scalerAddress is missing"), "{stdout}");

    let (code, _, stderr) = run(&["check", "-f", "/nonexistent.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");

    // The same ScaledObject in two files: one key, named twice.
    let (code, stdout, _) = run(&["check", "-f", path, "-f", path, "--env", "TARGET_SL=0.95"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("shop/checkout metric \"admit-erlang\" is named by 2 triggers"),
        "{stdout}"
    );

    // A manifest's names are printed as excerpts: a newline cannot forge an "ok" line, nor a
    // right-to-left override reverse what follows it.
    let forged = dir.join("forged.yaml");
    let hostile = MANIFEST
        .replace(
            "  name: checkout\n  namespace: shop\nspec:",
            "  name: \"x\\ntrigger 0 (external): ok\\u202e\"\n  namespace: \"sh\\u2066op\"\nspec:",
        )
        .replace(
            "targetSLFromEnv: TARGET_SL",
            "targetSLFromEnv: \"T\\u202eSL\"",
        );
    std::fs::write(&forged, hostile).unwrap();
    let (code, stdout, _) = run(&[
        "check",
        "-f",
        forged.to_str().unwrap(),
        "-f",
        forged.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(r"sh\u{2066}op/x\ntrigger 0 (external): ok\u{202e} trigger 1"),
        "{stdout}"
    );
    assert!(stdout.contains(r"T\u{202e}SL"), "{stdout}");
    assert!(
        !stdout.contains(['\u{202e}', '\u{2066}'])
            && stdout.lines().all(|line| !line.starts_with("trigger")),
        "{stdout}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_number_on_the_command_line_has_a_range() {
    for args in [
        &["serve", "--decision-interval", "584942417355d"][..],
        &["serve", "--decision-interval", "99999999999999999999h"],
        // Within what a `Duration` holds, but twice it is not (the old check panicked).
        &["serve", "--decision-interval", "5000000000000000h"],
        &["serve", "--state-ttl", "1000000d"],
        &["serve", "--shutdown-grace", "1h"],
        &["serve", "--query-timeout", "10m"],
        &["serve", "--max-triggers", "0"],
        &["serve", "--max-triggers", "18446744073709551616"],
        &["serve", "--max-concurrent-decisions", "100000"],
        &["serve", "--max-concurrent-decisions-per-namespace", "0"],
        &["serve", "--max-concurrent-decisions-per-namespace", "257"],
        &["serve", "--max-triggers-per-namespace", "0"],
        &["serve", "--max-triggers-per-namespace", "100001"],
        &["serve", "--max-triggers-per-object", "0"],
        &["serve", "--max-decision-wait", "0s"],
        &["serve", "--max-decision-wait", "11m"],
        &["serve", "--request-timeout", "0s"],
        &["serve", "--tls-reload-interval", "0s"],
        &["serve", "--max-grpc-connections", "0"],
        &["serve", "--max-grpc-connections-per-peer", "0"],
        &["serve", "--max-http-connections-per-peer", "0"],
        &["serve", "--max-http-connections-per-peer", "65"],
        &["serve", "--grpc-idle-timeout", "0s"],
        &["serve", "--grpc-handshake-timeout", "1h"],
        &["serve", "--grpc-max-request-bytes-in-flight", "1000"],
        &["serve", "--grpc-max-request-bytes-in-flight", "2000000000"],
        &["serve", "--grpc-request-body-timeout", "0s"],
        &["serve", "--http-request-timeout", "0s"],
        &["serve", "--http-max-scrapes", "0"],
        &["serve", "--http-max-scrapes", "33"],
        &["serve", "--shutdown-delay", "1h"],
        &["plan", "--metadata", "a=b", "--rows", "1000000000"],
        &[
            "replay",
            "--metadata",
            "a=b",
            "--start",
            "0",
            "--end",
            "1",
            "--step",
            "0s",
        ],
    ] {
        let (code, _, stderr) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // Settings that only fail together.
    let (code, _, stderr) = run(&[
        "serve",
        "--query-timeout",
        "20s",
        "--request-timeout",
        "30s",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--request-timeout"), "{stderr}");
    // A decision that waited its longest for a slot must still answer within the RPC's time.
    let (code, _, stderr) = run(&[
        "serve",
        "--max-decision-wait",
        "25s",
        "--allow-any-prometheus",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--max-decision-wait"), "{stderr}");
    // Queries beyond the client's slots would wait in arrival order, whatever the namespace.
    let (code, _, stderr) = run(&[
        "serve",
        "--max-concurrent-decisions",
        "16",
        "--allow-any-prometheus",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--prometheus-max-in-flight"), "{stderr}");
    // A peer's share of the connections is at most all of them.
    let (code, _, stderr) = run(&[
        "serve",
        "--max-grpc-connections",
        "4",
        "--max-grpc-connections-per-peer",
        "8",
        "--allow-any-prometheus",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--max-grpc-connections-per-peer 8 is above --max-grpc-connections"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["serve", "--prometheus-bearer-token-file", "/etc/hostname"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("needs --allow-prometheus"), "{stderr}");
    let (code, _, stderr) = run(&[
        "plan",
        "--metadata",
        "prometheusURL=http://evil.example:9090",
        "--metadata",
        "arrivalRateQuery=x",
        "--metadata",
        "serviceTimeQuery=y",
        "--metadata",
        "waitThresholdSeconds=0",
        "--metadata",
        "targetSL=0.9",
        "--allow-prometheus",
        "http://prometheus.monitoring:9090",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("outside --allow-prometheus"), "{stderr}");
}
