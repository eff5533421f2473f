//! The kubelet's cAdvisor endpoint, stood in for: each running pod's CPU time as
//! `container_cpu_usage_seconds_total{pod, container}`, read from its cgroup (or its process
//! without one) at every scrape.

use std::fmt::Write as _;
use std::sync::Weak;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use super::Shared;

/// Where the metrics are, as on a kubelet.
pub(super) const PATH: &str = "/metrics/cadvisor";

/// Serves [`PATH`] on `listener` for as long as the fleet lives.
pub(super) async fn serve(listener: TcpListener, fleet: Weak<Shared>) {
    let app = Router::new().route(PATH, get(scrape)).with_state(fleet);
    if let Err(error) = axum::serve(listener, app).await {
        eprintln!("fleet: the cAdvisor stand-in stopped: {error}");
    }
}

async fn scrape(State(fleet): State<Weak<Shared>>) -> Response {
    let Some(fleet) = fleet.upgrade() else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let pods: Vec<(String, Option<super::CpuMeter>)> = fleet
        .state()
        .pods
        .values()
        .map(|pod| (pod.name.clone(), pod.usage.clone()))
        .collect();
    let mut text = String::from(
        "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.\n\
         # TYPE container_cpu_usage_seconds_total counter\n",
    );
    for (pod, meter) in pods {
        if let Some(usage) = meter.as_ref().and_then(super::CpuMeter::usage) {
            let _ = writeln!(
                text,
                "container_cpu_usage_seconds_total{{container=\"replica\",pod=\"{pod}\"}} {}",
                usage.as_secs_f64()
            );
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
