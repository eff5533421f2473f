//! `serve`'s HTTP side: the Prometheus recorder and the routes for Prometheus and the probes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use admit_scaler::telemetry;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

use crate::cli::BoxError;

/// The Prometheus recorder for the scaler's metrics: duration histograms with buckets, and a
/// trigger's series dropped once it has not changed for the state TTL.
pub(super) fn install_recorder(state_ttl: Duration) -> Result<PrometheusHandle, BoxError> {
    let mut builder = PrometheusBuilder::new().idle_timeout(MetricKindMask::ALL, Some(state_ttl));
    for name in telemetry::HISTOGRAMS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_owned()), &telemetry::DURATION_BUCKETS)?;
    }
    Ok(builder.install_recorder()?)
}

/// `GET /metrics` (the recorder's text), `/healthz`, and `/readyz` (503 once `ready` is false).
pub(super) fn http_router(metrics: PrometheusHandle, ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(metrics): State<PrometheusHandle>| async move { metrics.render() }),
        )
        .with_state(metrics)
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "stopping\n")
                    }
                }
            }),
        )
}
