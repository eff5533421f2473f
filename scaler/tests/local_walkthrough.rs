//! The local walkthrough (the guide's `admit::guide::scaler`, "On a laptop") as files:
//! `deploy/local/target.yaml` must pass `check`; it, `deploy/local/prometheus.yml` and
//! `examples/metrics.rs --serve` must agree on the address, the scrape job and the limiter's
//! name; and its queries, asked by `plan` and `replay` of a real Prometheus scraping limiters
//! shaped as the example's, must give λ and s.
//!
//! Without a Prometheus binary the live test prints `SKIPPED:` and returns (it fails instead
//! when `ADMIT_REQUIRE_PROMETHEUS` is set, as `.ci/run` does).

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use admit::metrics::Reporter;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT, JOB};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusBuilder;
use yaml_rust2::{Yaml, YamlLoader};

use support::process::BINARY;
use support::{OpenLoop, serve_with_metrics};

const TARGET: &str = "deploy/local/target.yaml";
const PROMETHEUS_CONFIG: &str = "deploy/local/prometheus.yml";
const EXAMPLE: &str = "examples/metrics.rs";
/// The scrape job of `deploy/local/prometheus.yml`, which the queries select.
const LOCAL_JOB: &str = "admit-example";
/// The limiters' name in the example, which the queries select.
const LIMITER: &str = "api";
/// How long the target's queries may take to answer once Prometheus has scraped.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// A file of the workspace, from its root.
fn path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file)
}

fn read(file: &str) -> String {
    std::fs::read_to_string(path(file)).unwrap_or_else(|error| panic!("{file}: {error}"))
}

fn document(file: &str) -> Yaml {
    let mut documents =
        YamlLoader::load_from_str(&read(file)).unwrap_or_else(|error| panic!("{file}: {error}"));
    assert_eq!(documents.len(), 1, "{file}: one document");
    documents.remove(0)
}

/// The trigger's metadata value of `key`.
fn metadata(target: &Yaml, key: &str) -> String {
    let value = &target["spec"]["triggers"][0]["metadata"][key];
    value
        .as_str()
        .unwrap_or_else(|| panic!("{TARGET}: no string {key}: {value:?}"))
        .to_owned()
}

/// Runs the binary from the workspace's root, with `stdin` as its standard input.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BINARY)
        .args(args)
        .current_dir(path(""))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("admit-scaler starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn check_accepts_the_local_target() {
    // As the walkthrough runs it, from the repository's root.
    let output = run(&["check", "-f", TARGET], "");
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("ScaledObject default/api trigger 0 (external): ok"),
        "{stdout}"
    );
}

/// `serve` as the walkthrough starts it: its allow-list admits the target's Prometheus, and
/// only that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_as_the_walkthrough_starts_it_allows_the_target() {
    const SERVE: &str = "serve --allow-prometheus http://127.0.0.1:9090";
    let guide = read("src/guide/scaler.md");
    assert!(
        guide.contains(&format!("cargo run --release -p admit-scaler -- {SERVE}\n")),
        "the guide starts serve with {SERVE:?}"
    );
    assert!(read(TARGET).contains(&SERVE.replace("serve ", "serve\n        # ")));
    let target = document(TARGET);
    let scaler_metadata = target["spec"]["triggers"][0]["metadata"]
        .as_hash()
        .expect("the trigger's metadata")
        .iter()
        .map(|(key, value)| {
            let text = |yaml: &Yaml| yaml.as_str().expect("strings").to_owned();
            (text(key), text(value))
        })
        .collect::<std::collections::BTreeMap<_, _>>();
    let object = admit_scaler::proto::ScaledObjectRef {
        name: target["metadata"]["name"].as_str().unwrap().to_owned(),
        namespace: target["metadata"]["namespace"].as_str().unwrap().to_owned(),
        scaler_metadata,
    };
    let args: Vec<&str> = SERVE.split_whitespace().skip(1).collect();
    let served = support::process::Served::start(&args);
    let mut keda = bounded(
        "connecting",
        admit_scaler::proto::external_scaler_client::ExternalScalerClient::connect(format!(
            "http://{}",
            served.grpc
        )),
    )
    .await
    .unwrap();
    let spec = bounded("GetMetricSpec", keda.get_metric_spec(object.clone())).await;
    assert_eq!(
        spec.unwrap().get_ref().metric_specs[0].metric_name,
        "admit-erlang"
    );
    let mut elsewhere = object;
    elsewhere.scaler_metadata.insert(
        "prometheusURL".to_owned(),
        "http://127.0.0.1:9091".to_owned(),
    );
    let refused = bounded("GetMetricSpec", keda.get_metric_spec(elsewhere)).await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::PermissionDenied);
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
}

#[test]
fn the_example_prometheus_and_the_target_agree() {
    let config = document(PROMETHEUS_CONFIG);
    let jobs = config["scrape_configs"].as_vec().expect("scrape_configs");
    assert_eq!(jobs.len(), 1, "{PROMETHEUS_CONFIG}: one scrape job");
    let job = &jobs[0];
    assert_eq!(job["job_name"].as_str(), Some(LOCAL_JOB));
    let targets = job["static_configs"][0]["targets"]
        .as_vec()
        .expect("static targets");
    assert_eq!(targets, &[Yaml::String("127.0.0.1:9184".to_owned())]);

    // The example serves there by default, under the limiter's name.
    let example = read(EXAMPLE);
    assert!(
        example.contains(r#"const SERVE_ADDR: &str = "127.0.0.1:9184";"#),
        "{EXAMPLE}: --serve's address"
    );
    assert_eq!(
        example.matches(&format!(".name(\"{LIMITER}\")")).count(),
        2,
        "{EXAMPLE}: the bucket and the shedder are named {LIMITER}"
    );

    // The target asks that Prometheus, for that job and limiter.
    let target = document(TARGET);
    assert_eq!(target["kind"].as_str(), Some("ScaledObject"));
    assert_eq!(metadata(&target, "prometheusURL"), "http://127.0.0.1:9090");
    for key in ["arrivalRateQuery", "serviceTimeQuery"] {
        let query = metadata(&target, key);
        assert!(
            query.contains(&format!("job=\"{LOCAL_JOB}\"")),
            "{key}: {query}"
        );
        assert!(query.contains(LIMITER), "{key}: {query}");
        assert!(!query.contains("namespace"), "{key}: {query}");
    }

    // Prometheus's own check of the configuration, where promtool is installed.
    let promtool = prometheus::binary()
        .map(|binary| binary.with_file_name("promtool"))
        .filter(|promtool| promtool.exists());
    if let Some(promtool) = promtool {
        let output = Command::new(promtool)
            .args(["check", "config", PROMETHEUS_CONFIG])
            .current_dir(path(""))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
    }
}

/// The value on the `plan` line that starts with `label`.
fn planned(stdout: &str, label: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|line| line.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line:\n{stdout}"));
    line[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no number on {line:?}"))
}

// Several threads: the server and its load go on while `plan` runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_replay_read_the_example_s_series() {
    if prometheus::require("plan_and_replay_read_the_example_s_series").is_none() {
        return;
    }
    // The example's limiters: a warm-up bucket outside a shedder, both named `api`.
    let recorder = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let shedder = Arc::new(
        Shedder::builder()
            .name(LIMITER)
            .cpu(ManualCpu::new(300))
            .build()
            .unwrap(),
    );
    let bucket = Arc::new(
        WarmUp::builder(200.0)
            .name(LIMITER)
            .warm_up_period(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let reporter = Reporter::builder()
        .shedder(Arc::clone(&shedder))
        .warm_up(Arc::clone(&bucket))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                "done\n"
            }),
        )
        .layer(ShedLayer::new(shedder).http())
        .layer(WarmUpLayer::new(bucket).http());
    let server = serve_with_metrics(app, reporter, recorder).await;

    // An open-loop 100 requests per second, whatever the answers, from before the first
    // scrape: the series start with the load, and the queries' [30s] windows hold nothing idle.
    let load = OpenLoop::start(server.url(), Duration::from_millis(10));
    let prometheus = prometheus::start(&[server.addr()], Duration::from_millis(200))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await;

    // The target as written, but for the job's name (the test kit's) and Prometheus' address.
    let manifest = read(TARGET);
    assert_eq!(manifest.matches(&format!("job=\"{LOCAL_JOB}\"")).count(), 3);
    let manifest = manifest.replace(&format!("job=\"{LOCAL_JOB}\""), &format!("job=\"{JOB}\""));
    // Both queries answer once two scrapes of the load are stored, which a loaded machine may
    // delay: wait for that, not for a fixed time.
    let target = YamlLoader::load_from_str(&manifest).unwrap().remove(0);
    for key in ["arrivalRateQuery", "serviceTimeQuery"] {
        prometheus
            .wait_until(key, &metadata(&target, key), ANSWER_LIMIT, |samples| {
                matches!(samples, [sample] if sample.value.is_finite() && sample.value > 0.0)
            })
            .await;
    }
    // `replay` evaluates every second from `start`, after both queries first answered, to
    // `end`, which has passed when it runs.
    let unix_now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let start = unix_now() + 1;
    let end = start + 2;
    while unix_now() <= end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (start, end) = (start.to_string(), end.to_string());
    let url = prometheus.url();
    let (plan, replay) = bounded(
        "plan and replay",
        tokio::task::spawn_blocking(move || {
            let base = ["-f", "-", "--prometheus-url", &url];
            let plan = run(&[&["plan"][..], &base].concat(), &manifest);
            let range = ["--start", &start, "--end", &end, "--step", "1s"];
            let replay = run(&[&["replay"][..], &base, &range].concat(), &manifest);
            (plan, replay)
        }),
    )
    .await
    .unwrap();
    load.stop().await;
    prometheus.stop();

    assert!(plan.status.success(), "{}", text(&plan));
    let stdout = String::from_utf8_lossy(&plan.stdout);
    let arrival_rate = planned(&stdout, "λ");
    let service_time = planned(&stdout, "service time");
    // 100/s paced; Prometheus divides by the whole [30s] window, of which only the seconds
    // since the first scrape hold samples, so λ reads low for the test's first half minute.
    assert!(arrival_rate > 0.0 && arrival_rate <= 110.0, "{stdout}");
    // 20 ms of sleep, and the timer's and the scheduler's delays.
    assert!((0.019..=0.1).contains(&service_time), "{stdout}");
    assert!(stdout.contains("recommended"), "{stdout}");

    assert!(replay.status.success(), "{}", text(&replay));
    assert!(
        replay.stderr.is_empty(),
        "no evaluation fails: {}",
        text(&replay)
    );
}
