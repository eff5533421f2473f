//! Both queries of one decision, concurrently and timed: where Prometheus meets the decision,
//! whose failed measurements are Prometheus' [`QueryError`]s.

use std::sync::Arc;

use http::Uri;
use tokio::time::Instant;

use crate::decision::{Measured, MeasurementError};
use crate::excerpt::excerpt;
use crate::metadata::ScalerConfig;
use crate::prometheus::{PrometheusClient, QueryError, QueryErrorKind};
use crate::telemetry;

/// λ and the service time from `base` (the trigger's Prometheus, unless overridden), queried
/// concurrently, evaluated now or at `time` (Unix seconds).
pub(crate) async fn measure(
    client: &PrometheusClient,
    base: &Uri,
    config: &ScalerConfig,
    time: Option<f64>,
) -> Measured<QueryError> {
    let (arrival_rate, service_time) = tokio::join!(
        one(
            client,
            base,
            time,
            "arrival_rate",
            &config.arrival_rate_query
        ),
        one(
            client,
            base,
            time,
            "service_time",
            &config.service_time_query
        ),
    );
    Measured {
        arrival_rate,
        service_time,
    }
}

async fn one(
    client: &PrometheusClient,
    base: &Uri,
    time: Option<f64>,
    label: &'static str,
    query: &Arc<str>,
) -> Result<f64, QueryError> {
    let start = Instant::now();
    let answer = client.query(base, query, time).await;
    telemetry::query(label, start.elapsed());
    let answer = answer?;
    // At most `MAX_NOTES` warnings and as many infos, each already an excerpt (`Answer`).
    let notes = answer.warnings.iter().chain(&answer.infos);
    let query = excerpt(query);
    for note in notes {
        tracing::warn!(target: "admit_scaler", query, "Prometheus: {note}");
    }
    if answer.omitted_notes > 0 {
        let omitted = answer.omitted_notes;
        tracing::warn!(
            target: "admit_scaler",
            query,
            "Prometheus: {omitted} more warnings or infos, not logged"
        );
    }
    Ok(answer.sample.value)
}

impl MeasurementError for QueryError {
    /// No series yet, or the 0/0 of a ratio over a window without requests.
    fn is_idle(&self) -> bool {
        matches!(
            self.kind,
            QueryErrorKind::Empty | QueryErrorKind::NotFinite { .. }
        )
    }

    fn kind(&self) -> &'static str {
        self.kind.as_str()
    }
}
