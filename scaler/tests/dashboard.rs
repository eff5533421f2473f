//! The Grafana dashboard, `deploy/grafana/admit.json`, against a real Prometheus (Debian's
//! `prometheus` package): every panel's every query must answer, without an error and with at
//! least one series, from what a real admit service and the real `admit-scaler` binary publish.
//!
//! The service is an axum server behind admit's four layers (a drain outermost, a warm-up
//! bucket, a shedder with a queue gate fed by `X-Request-Start` stamps, a bound innermost),
//! exporting its metrics with `metrics-exporter-prometheus`. It serves a bounded workload:
//! stamped requests one at a time (one with an unreadable stamp), bursts that the bound and the
//! bucket refuse in part, and requests that a hot shedder refuses. The scaler decides for a
//! ScaledObject against the same Prometheus, once with a mistyped arrival-rate query (a failed
//! decision) and once as written in `deploy/README.md`, and refuses a trigger with bad metadata.
//! Prometheus scrapes both every 200 ms with Kubernetes-like target labels (`namespace`, `pod`),
//! so the scaler's own `namespace` label is stored as `exported_namespace`, as a ServiceMonitor
//! without `honorLabels` stores it. Then each query runs as an instant query, with Grafana's
//! variables replaced by [`variable_values`].
//!
//! Without a Prometheus binary the live test prints `SKIPPED:` and returns (it fails instead
//! when `ADMIT_REQUIRE_PROMETHEUS` is set, as `.ci/run` does); the dashboard's shape is
//! checked either way.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use admit::bound::{Bound, BoundLayer};
use admit::drain::{Drain, DrainLayer};
use admit::metrics::Reporter;
use admit::middleware::{CriticalityHeader, RequestStart};
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::signal::queue::QueueGate;
use admit::signal::queue::header::HeaderConfig;
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT, JOB, Prometheus};
use admit_testkit::wait::bounded;
use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use support::process::Served;
use support::{metadata, metrics_request, object, serve_with_metrics};

const DASHBOARD: &str = include_str!("../../deploy/grafana/admit.json");

/// How often Prometheus scrapes the service and the scaler.
const SCRAPE: Duration = Duration::from_millis(200);
/// What `$__rate_interval` (and `$__interval`) become: a window over the whole workload, with
/// many scrapes in it.
const RATE_INTERVAL: &str = "30s";
/// The name of every limiter of the service, and of its ScaledObject.
const NAME: &str = "checkout";
/// Each request's work.
const WORK: Duration = Duration::from_millis(30);
/// How many times a burst is sent at most before the test gives up on the refusals it wants.
const ROUNDS: usize = 10;
/// How long the workload may take to make a hot shedder refuse a request.
const SHED_LIMIT: Duration = Duration::from_secs(20);
/// How long Prometheus may take to show a value the test waits for.
const SCRAPED_LIMIT: Duration = Duration::from_secs(20);

/// The service's target labels, as Kubernetes service discovery sets them.
const SERVICE_LABELS: [(&str, &str); 2] = [("namespace", "shop"), ("pod", "checkout-0")];
/// The scaler's target labels: its `namespace` clashes with the one its series carry.
const SCALER_LABELS: [(&str, &str); 2] = [("namespace", "admit-system"), ("pod", "admit-scaler-0")];

/// The trigger of `deploy/README.md`, over a 30 s window.
const LAMBDA: &str =
    r#"sum(rate(admit_offered_requests_total{namespace="shop", limiter=~"checkout|"}[30s]))"#;
const S: &str = r#"sum(rate(admit_shed_service_seconds_total{namespace="shop", limiter="checkout"}[30s])) / sum(rate(admit_shed_requests_total{namespace="shop", limiter="checkout", outcome!="dropped"}[30s]))"#;
/// The same λ with a typo in the metric's name: it selects nothing, and the decision fails.
const LAMBDA_TYPO: &str =
    r#"sum(rate(admit_offered_request_total{namespace="shop", limiter=~"checkout|"}[30s]))"#;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

// ---------------------------------------------------------------------------------------------
// The dashboard's panels and variables.

/// One query of one panel.
#[derive(Debug)]
struct PanelQuery {
    panel: String,
    ref_id: String,
    expr: String,
}

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD).expect("deploy/grafana/admit.json is JSON")
}

/// Every panel's queries, the panels of rows included (a collapsed row holds its own).
///
/// # Errors
///
/// A dashboard without panels, a panel without a title, or a panel without a query or with an
/// empty one.
fn panel_queries(dashboard: &Value) -> Result<Vec<PanelQuery>, String> {
    let panels = dashboard["panels"]
        .as_array()
        .filter(|panels| !panels.is_empty())
        .ok_or("the dashboard has no panels")?;
    let mut queries = Vec::new();
    let panels = collect(panels, &mut queries)?;
    if panels == 0 {
        return Err("the dashboard has rows but no panels".to_owned());
    }
    Ok(queries)
}

/// Adds the queries of `panels` and of their rows' panels to `queries`; returns how many
/// panels other than rows it saw.
fn collect(panels: &[Value], queries: &mut Vec<PanelQuery>) -> Result<usize, String> {
    let mut seen = 0;
    for panel in panels {
        if panel["type"] == "row" {
            if let Some(nested) = panel["panels"].as_array() {
                seen += collect(nested, queries)?;
            }
            continue;
        }
        seen += 1;
        let title = panel["title"].as_str().unwrap_or_default();
        if title.trim().is_empty() {
            return Err(format!("panel id {} has no title", panel["id"]));
        }
        let targets = panel["targets"]
            .as_array()
            .filter(|targets| !targets.is_empty())
            .ok_or_else(|| format!("panel {title:?} has no query"))?;
        for target in targets {
            let ref_id = target["refId"].as_str().unwrap_or_default();
            let expr = target["expr"].as_str().map(str::trim).unwrap_or_default();
            if expr.is_empty() {
                return Err(format!("panel {title:?}, query {ref_id:?}: no `expr`"));
            }
            queries.push(PanelQuery {
                panel: title.to_owned(),
                ref_id: ref_id.to_owned(),
                expr: expr.to_owned(),
            });
        }
    }
    Ok(seen)
}

/// Every panel, rows and the panels of rows included.
fn all_panels(panels: &[Value]) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in panels {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(all_panels(nested));
        }
    }
    all
}

/// `expr` with each `$name`, `${name}` and `${name:format}` replaced by its value in `values`;
/// a `$` followed by no name is kept.
///
/// # Errors
///
/// A variable without a value, or an unclosed `${`.
fn substitute(expr: &str, values: &[(&str, String)]) -> Result<String, String> {
    let mut substituted = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        substituted.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .ok_or_else(|| format!("an unclosed `${{` in {expr}"))?;
            let name = braced[..end].split(':').next().unwrap_or_default();
            (name, &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name.is_empty() {
            substituted.push('$');
            rest = after;
            continue;
        }
        let (_, value) = values
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| format!("`${name}` has no value in {expr}"))?;
        substituted.push_str(value);
        rest = tail;
    }
    substituted.push_str(rest);
    Ok(substituted)
}

/// What the test puts for Grafana's built-in variables and for each of the dashboard's own:
/// one concrete choice where the workload has one (the job, the limiter, the ScaledObject), so
/// that a query filtering on a misspelt label finds nothing; the instance is "All", which
/// Grafana writes as the variable's `allValue`.
fn variable_values() -> Vec<(&'static str, String)> {
    vec![
        ("__rate_interval", RATE_INTERVAL.to_owned()),
        ("__interval", RATE_INTERVAL.to_owned()),
        ("datasource", "prometheus".to_owned()),
        ("job", JOB.to_owned()),
        ("instance", ".*".to_owned()),
        ("limiter", NAME.to_owned()),
        ("scaler_job", JOB.to_owned()),
        ("scaled_object", NAME.to_owned()),
    ]
}

/// The dashboard's `query` variables: name, and the `(selector, label)` of their
/// `label_values(selector, label)`.
fn label_value_variables(dashboard: &Value) -> Result<Vec<(String, String, String)>, String> {
    let variables = dashboard["templating"]["list"]
        .as_array()
        .ok_or("the dashboard has no variables")?;
    let mut found = Vec::new();
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        let name = variable["name"].as_str().unwrap_or_default().to_owned();
        let definition = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str())
            .unwrap_or_default();
        let (selector, label) = definition
            .trim()
            .strip_prefix("label_values(")
            .and_then(|inner| inner.strip_suffix(')'))
            .and_then(|inner| inner.rsplit_once(','))
            .ok_or_else(|| format!("variable {name}: not `label_values(selector, label)`"))?;
        found.push((name, selector.trim().to_owned(), label.trim().to_owned()));
    }
    Ok(found)
}

// ---------------------------------------------------------------------------------------------
// The dashboard's shape, without Prometheus.

#[test]
fn the_dashboard_is_well_formed() {
    let dashboard = dashboard();
    let queries = panel_queries(&dashboard).unwrap_or_else(|error| panic!("{error}"));
    assert!(queries.len() >= 30, "{} queries", queries.len());
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 38),
        "{}",
        dashboard["schemaVersion"]
    );
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a `datasource` variable of type prometheus"
    );
    // Every variable has a value in the live test, and every query's variables are known.
    let values = variable_values();
    for variable in variables {
        let name = variable["name"].as_str().unwrap();
        assert!(
            values.iter().any(|(known, _)| *known == name),
            "variable {name} has no value in the test"
        );
    }
    for query in &queries {
        substitute(&query.expr, &values)
            .unwrap_or_else(|error| panic!("panel {:?}: {error}", query.panel));
        assert!(!query.expr.contains("[["), "{}: `[[var]]`", query.panel);
    }
    label_value_variables(&dashboard).unwrap_or_else(|error| panic!("{error}"));

    let panels = all_panels(dashboard["panels"].as_array().unwrap());
    let mut ids = BTreeSet::new();
    let source = json!({"type": "prometheus", "uid": "${datasource}"});
    for panel in &panels {
        let title = panel["title"].as_str().unwrap_or_default();
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: id taken"
        );
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(w >= 1 && x + w <= 24, "{title}: {grid}");
        assert!(
            grid["h"].as_u64().is_some() && grid["y"].as_u64().is_some(),
            "{title}"
        );
        match panel["type"].as_str() {
            Some("row") => continue,
            Some("timeseries" | "stat") => {}
            other => panic!("{title}: panel type {other:?}"),
        }
        assert_eq!(panel["datasource"], source, "{title}");
        let mut refs = BTreeSet::new();
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"], source, "{title}");
            assert!(refs.insert(target["refId"].as_str().unwrap()), "{title}");
        }
    }
}

#[test]
fn a_dashboard_without_panels_or_queries_is_refused() {
    let refused = |dashboard: Value, why: &str| {
        let error = panel_queries(&dashboard).expect_err(why);
        assert!(error.contains(why), "{error}");
    };
    refused(json!({}), "no panels");
    refused(json!({"panels": []}), "no panels");
    refused(
        json!({"panels": [{"type": "row", "title": "r", "panels": []}]}),
        "no panels",
    );
    refused(
        json!({"panels": [{"type": "timeseries", "title": "Lonely"}]}),
        "\"Lonely\" has no query",
    );
    refused(
        json!({"panels": [{"type": "stat", "title": "Blank", "targets": []}]}),
        "\"Blank\" has no query",
    );
    refused(
        json!({"panels": [{"type": "row", "title": "r", "collapsed": true, "panels": [
            {"type": "timeseries", "title": "Nested", "targets": [{"refId": "A", "expr": " "}]}
        ]}]}),
        "\"Nested\", query \"A\": no `expr`",
    );
    let nested = json!({"panels": [
        {"type": "row", "title": "r", "panels": []},
        {"type": "stat", "title": "Top", "targets": [{"refId": "A", "expr": "up"}]},
        {"type": "row", "title": "s", "collapsed": true, "panels": [
            {"type": "timeseries", "title": "Inside", "targets": [{"refId": "B", "expr": "up"}]}
        ]}
    ]});
    let queries = panel_queries(&nested).unwrap();
    let titles: Vec<&str> = queries.iter().map(|q| q.panel.as_str()).collect();
    assert_eq!(titles, ["Top", "Inside"]);
}

#[test]
fn variables_are_substituted_in_every_form() {
    let values = [("a", "1".to_owned()), ("ab", "2".to_owned())];
    assert_eq!(
        substitute(r#"x{l=~"$a", m="${ab}", n="${a:regex}"}[$ab] $"#, &values).unwrap(),
        r#"x{l=~"1", m="2", n="1"}[2] $"#
    );
    assert!(substitute("$b", &values).unwrap_err().contains("`$b`"));
    assert!(substitute("${a", &values).is_err());
}

// ---------------------------------------------------------------------------------------------
// The service: admit's four layers and their metrics.

/// The limiters of the service, all named [`NAME`].
struct Service {
    cpu: ManualCpu,
    shedder: Arc<Shedder>,
    bucket: Arc<WarmUp>,
    bound: Arc<Bound>,
    drain: Drain,
}

impl Service {
    fn new() -> Self {
        let cpu = ManualCpu::new(200);
        Service {
            shedder: Arc::new(
                Shedder::builder()
                    .name(NAME)
                    .cpu(cpu.clone())
                    .queue_gate(QueueGate::default())
                    .build()
                    .unwrap(),
            ),
            // Cold: about 33 per second, with a second's worth at once.
            bucket: Arc::new(
                WarmUp::builder(100.0)
                    .name(NAME)
                    .warm_up_period(Duration::from_secs(2))
                    .build()
                    .unwrap(),
            ),
            // Two in service, two waiting: a burst of more is refused in part (`full`).
            bound: Arc::new(
                Bound::builder()
                    .name(NAME)
                    .floor(2)
                    .ceiling(2)
                    .queue_capacity(2)
                    .wait_limits(Duration::from_millis(500), Duration::from_secs(1))
                    .build()
                    .unwrap(),
            ),
            drain: Drain::builder().build().unwrap(),
            cpu,
        }
    }

    /// Must be built after the recorder is installed.
    fn reporter(&self) -> Reporter {
        Reporter::builder()
            .drain(self.drain.clone())
            .warm_up(Arc::clone(&self.bucket))
            .shedder(Arc::clone(&self.shedder))
            .bound(Arc::clone(&self.bound))
            .build()
            .unwrap()
    }

    /// `/work` behind the drain (outermost), the bucket, the shedder and the bound.
    fn router(&self) -> Router {
        let start = RequestStart::new(HeaderConfig::default()).unwrap();
        Router::new()
            .route(
                "/work",
                get(|| async {
                    tokio::time::sleep(WORK).await;
                    "done"
                }),
            )
            .layer(
                BoundLayer::new(Arc::clone(&self.bound))
                    .http()
                    .inspect(CriticalityHeader::new()),
            )
            .layer(
                ShedLayer::new(Arc::clone(&self.shedder))
                    .http()
                    .inspect((start, CriticalityHeader::new())),
            )
            .layer(WarmUpLayer::new(Arc::clone(&self.bucket)).http())
            .layer(DrainLayer::new(self.drain.clone()))
    }

    fn bound_full(&self) -> u64 {
        self.bound.snapshot().classes.iter().map(|c| c.full).sum()
    }
}

/// A request-start stamp of now, in microseconds since the epoch, as Apache writes it.
fn stamp() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    format!("t={}", now.as_micros())
}

/// GET `url` with `headers`: the answer's status, once its body has ended.
async fn send(client: HttpClient, url: String, headers: Vec<(&'static str, String)>) -> StatusCode {
    let mut request = http::Request::get(&url);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = bounded(&url, client.request(request.body(Empty::new()).unwrap()))
        .await
        .unwrap_or_else(|error| panic!("GET {url}: {error}"));
    let status = response.status();
    bounded(&url, response.into_body().collect())
        .await
        .unwrap_or_else(|error| panic!("GET {url}: the body: {error}"));
    status
}

/// `count` GETs of `url` at once, without headers.
async fn burst(client: &HttpClient, url: &str, count: usize) -> Vec<StatusCode> {
    let mut requests = JoinSet::new();
    for _ in 0..count {
        requests.spawn(send(client.clone(), url.to_owned(), Vec::new()));
    }
    requests.join_all().await
}

/// The workload: every series the dashboard shows gets values, and each layer refuses some
/// requests. Returns the statuses of every request sent.
async fn workload(service: &Service, client: &HttpClient, url: &str) -> Vec<StatusCode> {
    let mut statuses = Vec::new();
    // Stamped requests one at a time: the first finds the service idle, and the shedder learns
    // the clocks' offset from it; every fourth is sheddable. Then an unreadable stamp.
    for i in 0..20 {
        let mut headers = vec![("x-request-start", stamp())];
        if i % 4 == 3 {
            headers.push(("admit-criticality", "sheddable".to_owned()));
        }
        statuses.push(send(client.clone(), url.to_owned(), headers).await);
    }
    let garbled = vec![("x-request-start", "t=soon".to_owned())];
    statuses.push(send(client.clone(), url.to_owned(), garbled).await);
    let snapshot = service.shedder.snapshot();
    assert!(snapshot.clock_offset_nanos.is_some(), "{snapshot:?}");
    assert_eq!(
        snapshot.header_errors.iter().sum::<u64>(),
        1,
        "{snapshot:?}"
    );

    // Bursts: the bound's queue fills, and the bucket runs out of its burst.
    for _ in 0..ROUNDS {
        statuses.extend(burst(client, url, 12).await);
        if service.bound_full() > 0 {
            break;
        }
    }
    assert!(service.bound_full() > 0, "{:?}", service.bound.snapshot());
    for _ in 0..ROUNDS {
        statuses.extend(burst(client, url, 60).await);
        if service.bucket.totals().refused > 0 {
            break;
        }
    }
    assert!(
        service.bucket.totals().refused > 0,
        "{:?}",
        service.bucket.totals()
    );

    // Overload: 20 permits held (5 passed at once), the CPU at 100 %, then requests one at a
    // time until the shedder refuses one (the bucket in front may refuse some first).
    let mut held: Vec<_> = (0..20)
        .map(|_| service.shedder.allow_owned().unwrap())
        .collect();
    for permit in held.drain(..5) {
        permit.pass();
    }
    service.cpu.set(1000);
    let shed = async {
        while service.shedder.snapshot().dropped == 0 {
            statuses.push(send(client.clone(), url.to_owned(), Vec::new()).await);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(SHED_LIMIT, shed)
        .await
        .unwrap_or_else(|_| panic!("no request shed: {:?}", service.shedder.snapshot()));
    for permit in held {
        permit.fail();
    }
    service.cpu.set(300);
    statuses
}

// ---------------------------------------------------------------------------------------------
// The live test.

/// Waits until `promql` has at least one series, every value accepted by `accept`.
async fn wait_for(prometheus: &Prometheus, what: &str, promql: &str, accept: impl Fn(f64) -> bool) {
    prometheus
        .wait_until(what, promql, SCRAPED_LIMIT, |samples| {
            !samples.is_empty() && samples.iter().all(|sample| accept(sample.value))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_answers_from_real_admit_and_scaler_metrics() {
    let dashboard = dashboard();
    let queries = panel_queries(&dashboard).unwrap_or_else(|error| panic!("{error}"));
    if prometheus::require("every_panel_answers_from_real_admit_and_scaler_metrics").is_none() {
        return;
    }
    let started = std::time::Instant::now();
    let recorder = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let service = Service::new();
    let server = serve_with_metrics(service.router(), service.reporter(), recorder).await;
    let prometheus = prometheus::start_discovered(SCRAPE)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let scaler = Scaler(Some(Served::start(&[
        "--decision-interval",
        "1s",
        "--allow-prometheus",
        &prometheus.url(),
    ])));
    prometheus
        .set_targets([
            (server.addr(), &SERVICE_LABELS[..]),
            (scaler.served().http, &SCALER_LABELS[..]),
        ])
        .expect("the targets file");
    prometheus
        .wait_until(
            "both targets scraped",
            &format!(r#"up{{job="{JOB}"}}"#),
            FIRST_SCRAPE_LIMIT,
            |samples| samples.len() == 2 && samples.iter().all(|sample| sample.value == 1.0),
        )
        .await;

    // KEDA's calls: a trigger refused for its metadata, then a decision that fails on the
    // mistyped query.
    let mut keda = bounded(
        "connecting to the scaler",
        ExternalScalerClient::connect(format!("http://{}", scaler.served().grpc)),
    )
    .await
    .unwrap();
    let refused = bounded(
        "GetMetricSpec",
        keda.get_metric_spec(object(NAME, metadata("not a url", &[]))),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let trigger = |lambda: &str| {
        object(
            NAME,
            metadata(
                &prometheus.url(),
                &[
                    ("arrivalRateQuery", lambda),
                    ("serviceTimeQuery", S),
                    ("waitThresholdSeconds", "0.05"),
                    ("targetSL", "0.9"),
                ],
            ),
        )
    };
    let failed = bounded(
        "GetMetrics",
        keda.get_metrics(metrics_request(trigger(LAMBDA_TYPO))),
    )
    .await
    .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::FailedPrecondition, "{failed:?}");

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let statuses = workload(&service, &client, &format!("{}/work", server.url())).await;
    let refusals = statuses.iter().filter(|s| !s.is_success()).count();
    assert!(refusals > 0, "{statuses:?}");
    // Every request of the workload scraped: the drain, outermost, counted each.
    let offered = service.drain.snapshot().offered;
    assert_eq!(offered, statuses.len() as u64);
    wait_for(
        &prometheus,
        "the workload scraped",
        r#"sum(admit_offered_requests_total{namespace="shop"})"#,
        |value| value == offered as f64,
    )
    .await;

    // The decision, as KEDA polls for it.
    let decided = bounded(
        "GetMetrics",
        keda.get_metrics(metrics_request(trigger(LAMBDA))),
    )
    .await
    .unwrap_or_else(|status| panic!("no decision: {status:?}"));
    let replicas = decided.get_ref().metric_values[0].metric_value;
    let active = bounded("IsActive", keda.is_active(trigger(LAMBDA)))
        .await
        .unwrap()
        .into_inner()
        .result;
    // The replica is leaving.
    service.drain.start();
    wait_for(
        &prometheus,
        "the drain scraped",
        "admit_draining",
        |value| value == 1.0,
    )
    .await;
    wait_for(
        &prometheus,
        "the decision scraped",
        &format!(r#"admit_scaler_recommended_replicas{{scaled_object="{NAME}"}}"#),
        |value| value == replicas as f64,
    )
    .await;
    // `rate()` needs two samples of a series: the scaler's counters and histograms appear at
    // their first event, and IsActive's came last.
    wait_for(
        &prometheus,
        "the last RPC scraped twice",
        r#"count_over_time(admit_scaler_rpc_total{method="IsActive"}[1m])"#,
        |count| count >= 2.0,
    )
    .await;

    let values = variable_values();
    let mut failures = Vec::new();
    let mut zero = Vec::new();
    let mut table = String::new();
    for query in &queries {
        let promql = match substitute(&query.expr, &values) {
            Ok(promql) => promql,
            Err(error) => {
                failures.push(format!(
                    "panel {:?} ({}): {error}",
                    query.panel, query.ref_id
                ));
                continue;
            }
        };
        match prometheus.query(&promql).await {
            Err(error) => failures.push(format!(
                "panel {:?} ({}): `{promql}`: {error}",
                query.panel, query.ref_id
            )),
            Ok(samples) if samples.is_empty() => failures.push(format!(
                "panel {:?} ({}): `{promql}`: no series",
                query.panel, query.ref_id
            )),
            Ok(samples) => {
                let values: Vec<String> =
                    samples.iter().map(|s| format!("{:.4}", s.value)).collect();
                if samples.iter().all(|s| s.value == 0.0 || s.value.is_nan()) {
                    zero.push(format!("{} ({})", query.panel, query.ref_id));
                }
                table.push_str(&format!(
                    "{} ({}): {} series: {}\n",
                    query.panel,
                    query.ref_id,
                    samples.len(),
                    values.join(" ")
                ));
            }
        }
    }
    // The variables' drop-downs: their selectors find series with the label.
    for (name, selector, label) in label_value_variables(&dashboard).unwrap() {
        let selector = match substitute(&selector, &values) {
            Ok(selector) => selector,
            Err(error) => {
                failures.push(format!("variable {name}: {error}"));
                continue;
            }
        };
        match prometheus.query(&selector).await {
            Ok(samples) if samples.iter().any(|s| s.labels.contains_key(&label)) => {}
            answer => failures.push(format!(
                "variable {name}: `{selector}` has no series with `{label}`: {answer:?}"
            )),
        }
    }
    println!("{table}");
    println!(
        "{} queries of {} panels; {} read only 0 or NaN: {zero:?}; the scaler recommends \
         {replicas} (active: {active}); {} requests, {refusals} refused; {:.1} s",
        queries.len(),
        queries
            .iter()
            .map(|q| &q.panel)
            .collect::<BTreeSet<_>>()
            .len(),
        zero.len(),
        statuses.len(),
        started.elapsed().as_secs_f64()
    );
    let report = (!failures.is_empty()).then(|| {
        format!(
            "{} of {} dashboard queries failed:\n{}\nthe end of Prometheus' log:\n{}",
            failures.len(),
            queries.len(),
            failures.join("\n"),
            prometheus.log_tail()
        )
    });

    assert!(prometheus.stop().success());
    let (status, log) = scaler.terminate();
    assert!(status.success(), "{status:?}: {log:?}");
    server.shutdown().await;
    if let Some(report) = report {
        panic!("{report}");
    }
}

/// The scaler's process, killed by its id if the test fails before it stops it.
struct Scaler(Option<Served>);

impl Scaler {
    fn served(&self) -> &Served {
        self.0.as_ref().expect("the scaler runs")
    }

    /// SIGTERM, then the exit status and the log.
    fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        self.0.take().expect("the scaler runs").terminate()
    }
}

impl Drop for Scaler {
    fn drop(&mut self) {
        if let Some(mut served) = self.0.take() {
            let _ = served.child.kill();
            let _ = served.child.wait();
        }
    }
}
