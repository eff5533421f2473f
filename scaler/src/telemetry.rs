//! The scaler's own metrics, through the [`metrics`] facade: the binary installs
//! `metrics-exporter-prometheus` and serves them on `/metrics`.
//!
//! Per trigger (labels `namespace`, `scaled_object`, `metric`), set at each new decision:
//!
//! | metric | meaning |
//! |---|---|
//! | `admit_scaler_arrival_rate` | λ, requests per second |
//! | `admit_scaler_service_time_seconds` | mean service time (absent while idle without one) |
//! | `admit_scaler_offered_load` | λ·s, erlangs |
//! | `admit_scaler_required_servers` | fewest servers meeting the target |
//! | `admit_scaler_required_servers_strict` | the same for the target made stricter by the tolerance |
//! | `admit_scaler_recommended_replicas` | the value published to KEDA |
//! | `admit_scaler_predicted_service_level` | P(wait ≤ T) at the recommended replicas; 0 when unknown |
//! | `admit_scaler_predicted_service_level_known` | 1, or 0 when the model could not estimate the level within its budget (Erlang A deep in overload) |
//! | `admit_scaler_target_service_level` | `targetSL` |
//! | `admit_scaler_wait_threshold_seconds` | `waitThresholdSeconds` |
//! | `admit_scaler_active` | 1 if λ > `activationArrivalRate` |
//! | `admit_scaler_capped` | 1 if the need exceeds `maxReplicas` |
//! | `admit_scaler_decision_timestamp_seconds` | Unix time of the decision |
//! | `admit_scaler_errors_total{kind}` | failed decisions, by [`DecisionError::kind`](crate::decision::DecisionError::kind) |
//!
//! Scaler-wide: `admit_scaler_refused_total{kind}` (requests refused before a decision:
//! `metadata`, `permission`, `exhausted` for a new trigger or stream beyond a cap, `busy` for
//! no decision slot within `--max-decision-wait`, `request_bytes` past the gRPC request budget,
//! `slow_request` for a request message not whole within its deadline; without the object's
//! labels, which the caller chooses), `admit_scaler_connections{server}` (`grpc` or `http`),
//! `admit_scaler_connections_evicted_total{server}` (idle connections closed to admit new ones),
//! `admit_scaler_connections_refused_total{server,cap}` (new connections refused at the `peer`
//! or `total` cap, every connection there being busy, new or closing),
//! `admit_scaler_open_streams` (`StreamIsActive`),
//! `admit_scaler_prometheus_query_duration_seconds{query}` (histogram;
//! `query` is `arrival_rate` or `service_time`), `admit_scaler_rpc_total{method,code}`,
//! `admit_scaler_rpc_duration_seconds{method}` (histogram), `admit_scaler_tracked_objects`
//! and `admit_scaler_build_info{version}` (always 1).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics::{SharedString, counter, gauge, histogram};

use crate::decision::Decision;
use crate::metadata::{ScalerConfig, TriggerKey};

/// The histogram metrics, for the exporter's bucket settings.
pub const HISTOGRAMS: [&str; 2] = [
    "admit_scaler_prometheus_query_duration_seconds",
    "admit_scaler_rpc_duration_seconds",
];

/// Bucket bounds (seconds) for [`HISTOGRAMS`]: 1 ms to 10 s.
pub const DURATION_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A trigger's labels, sharing the key's text: the recorder keeps one copy of the key per
/// series, and the text is the bulk of it.
fn labels(key: &TriggerKey) -> [(&'static str, SharedString); 3] {
    [
        ("namespace", SharedString::from(Arc::clone(&key.namespace))),
        ("scaled_object", SharedString::from(Arc::clone(&key.name))),
        ("metric", SharedString::from(Arc::clone(&key.metric))),
    ]
}

/// Publishes a new decision for `key`.
pub(crate) fn decision(key: &TriggerKey, config: &ScalerConfig, decision: &Decision) {
    let labels = labels(key);
    gauge!("admit_scaler_arrival_rate", &labels).set(decision.arrival_rate);
    if let Some(seconds) = decision.service_time {
        gauge!("admit_scaler_service_time_seconds", &labels).set(seconds);
    }
    gauge!("admit_scaler_offered_load", &labels).set(decision.offered_load);
    gauge!("admit_scaler_required_servers", &labels).set(decision.required_servers as f64);
    gauge!("admit_scaler_required_servers_strict", &labels)
        .set(decision.required_servers_strict as f64);
    gauge!("admit_scaler_recommended_replicas", &labels).set(decision.replicas as f64);
    gauge!("admit_scaler_predicted_service_level", &labels)
        .set(decision.predicted_service_level.unwrap_or(0.0));
    gauge!("admit_scaler_predicted_service_level_known", &labels).set(f64::from(u8::from(
        decision.predicted_service_level.is_some(),
    )));
    gauge!("admit_scaler_target_service_level", &labels).set(config.target_sl);
    gauge!("admit_scaler_wait_threshold_seconds", &labels).set(config.wait_threshold_seconds);
    gauge!("admit_scaler_active", &labels).set(f64::from(u8::from(decision.active)));
    gauge!("admit_scaler_capped", &labels).set(f64::from(u8::from(decision.capped)));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    gauge!("admit_scaler_decision_timestamp_seconds", &labels).set(now.as_secs_f64());
}

/// Counts a trigger refused before it had a decision (bad metadata, a Prometheus URL outside
/// the allow-list), without the object's labels, which come from the caller.
pub(crate) fn refused(kind: &'static str) {
    counter!("admit_scaler_refused_total", "kind" => kind).increment(1);
}

/// Counts a failed decision.
pub(crate) fn error(key: &TriggerKey, kind: &'static str) {
    let [namespace, name, metric] = labels(key);
    counter!(
        "admit_scaler_errors_total",
        &[
            namespace,
            name,
            metric,
            ("kind", SharedString::const_str(kind))
        ]
    )
    .increment(1);
}

/// Times one Prometheus query (`query` is `arrival_rate` or `service_time`).
pub(crate) fn query(query: &'static str, took: Duration) {
    histogram!("admit_scaler_prometheus_query_duration_seconds", "query" => query)
        .record(took.as_secs_f64());
}

/// Counts and times one RPC.
pub(crate) fn rpc(method: &'static str, code: tonic::Code, took: Duration) {
    counter!("admit_scaler_rpc_total", "method" => method, "code" => code_name(code)).increment(1);
    histogram!("admit_scaler_rpc_duration_seconds", "method" => method).record(took.as_secs_f64());
}

/// The scaler-wide gauges: call periodically, so that an exporter's idle timeout keeps them.
pub(crate) fn scaler(tracked_objects: usize, open_streams: usize) {
    gauge!("admit_scaler_tracked_objects").set(tracked_objects as f64);
    gauge!("admit_scaler_open_streams").set(open_streams as f64);
    gauge!("admit_scaler_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// gRPC's name of a code, as in its specification (`OK`, `INVALID_ARGUMENT`, …).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The connections open on `server` (`grpc` or `http`).
pub(crate) fn connections(server: &'static str, open: usize) {
    gauge!("admit_scaler_connections", "server" => server).set(open as f64);
}

/// Counts a connection told to close to make room for a new one.
pub(crate) fn connection_evicted(server: &'static str) {
    counter!("admit_scaler_connections_evicted_total", "server" => server).increment(1);
}

/// Counts a new connection refused at a cap (`cap`: `peer` or `total`) because no connection
/// could make room.
pub(crate) fn connection_refused(server: &'static str, cap: &'static str) {
    counter!("admit_scaler_connections_refused_total", "server" => server, "cap" => cap)
        .increment(1);
}
