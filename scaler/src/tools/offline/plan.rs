//! One evaluation, as `admit-scaler plan` prints it.

use std::fmt::{self, Write as _};
use std::time::Duration;

use admit::erlang::Balancing;
use http::Uri;

use crate::decision::{Decision, DecisionError, Evaluator, Row};
use crate::metadata::ScalerConfig;
use crate::prometheus::{PrometheusClient, QueryError};

use super::time::format_time;

/// One evaluation: the decision of a fresh scaler and the queue around it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The configuration evaluated.
    pub config: ScalerConfig,
    /// Where the data came from.
    pub prometheus_url: Uri,
    /// The evaluation time (Unix seconds), or `None` for Prometheus' now.
    pub time: Option<f64>,
    /// What a scaler with no history would publish.
    pub decision: Decision,
    /// Whole replicas around the answer.
    pub rows: Vec<Row>,
}

/// Queries λ and the service time at `time` (or now) from `base`, and decides as a scaler
/// seeing this trigger for the first time would; `span` rows on each side of the answer.
///
/// # Errors
///
/// The [`DecisionError`] the scaler would answer KEDA with.
pub async fn plan(
    client: &PrometheusClient,
    base: &Uri,
    config: &ScalerConfig,
    time: Option<f64>,
    span: u64,
) -> Result<Plan, DecisionError<QueryError>> {
    let measured = crate::measure::measure(client, base, config, time).await;
    let decision = Evaluator::new(config.clone()).decide(Duration::ZERO, measured)?;
    let rows = decision.table(config, span)?;
    Ok(Plan {
        config: config.clone(),
        prometheus_url: base.clone(),
        time,
        decision,
        rows,
    })
}

impl fmt::Display for Plan {
    /// The inputs, the table around the answer (marked `←`), and the answer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.config;
        let decision = &self.decision;
        let at = self.time.map_or_else(|| "now".to_owned(), format_time);
        writeln!(f, "Prometheus   {} at {at}", self.prometheus_url)?;
        writeln!(
            f,
            "λ            {} /s   ← {}",
            decision.arrival_rate,
            config.arrival_rate_query.trim()
        )?;
        let service_time = decision
            .service_time
            .map_or_else(|| "none (idle)".to_owned(), |s| format!("{s} s"));
        writeln!(
            f,
            "service time {service_time}   ← {}",
            config.service_time_query.trim()
        )?;
        writeln!(f, "offered load {:.6} erlangs", decision.offered_load)?;
        let model = match (config.patience, config.balancing) {
            (Some(patience), _) => {
                format!(
                    "pooled, Erlang A, mean patience {} s",
                    patience.as_secs_f64()
                )
            }
            (None, Balancing::Pooled) => "pooled, Erlang C (M/M/c)".to_owned(),
            (None, Balancing::Random) => "random, M/M/k per replica".to_owned(),
            (None, Balancing::LeastRequest) => "least-request (approximate)".to_owned(),
            (None, _) => "round-robin, E_n/M/k per replica".to_owned(),
        };
        writeln!(
            f,
            "target       P(wait ≤ {} s) ≥ {}, {model}, {} per replica, replicas {}..={}",
            config.wait_threshold_seconds,
            config.target_sl,
            config.concurrency_per_replica,
            config.min_replicas,
            config.max_replicas
        )?;
        if !self.rows.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "{:>10} {:>8} {:>12} {:>10} {:>12} {:>10}",
                "replicas", "servers", "P(wait≤T)", "P(wait)", "mean wait s", "occupancy"
            )?;
            let needed = decision
                .required_servers
                .div_ceil(config.concurrency_per_replica);
            for row in &self.rows {
                let mut line = format!(
                    "{:>10} {:>8} {:>12} {:>10} {:>12} {:>10}",
                    row.replicas,
                    row.servers,
                    optional(row.service_level, 6),
                    optional(row.prob_wait, 6),
                    optional(row.mean_wait, 6),
                    optional(row.occupancy, 4)
                );
                if row.replicas == needed {
                    line.push_str("  ← the fewest that meet the target");
                }
                writeln!(f, "{line}")?;
            }
        }
        writeln!(f)?;
        let mut answer = format!(
            "recommended  {} replicas, predicted P(wait ≤ T) = {}",
            decision.replicas,
            predicted(decision.predicted_service_level)
        );
        if decision.capped {
            let _ = write!(answer, " (capped at maxReplicas {})", config.max_replicas);
        }
        writeln!(f, "{answer}")?;
        write!(
            f,
            "active       {} (λ {} activationArrivalRate {})",
            decision.active,
            if decision.active { ">" } else { "≤" },
            config.activation_arrival_rate
        )
    }
}

/// A predicted service level, or why there is none.
fn predicted(level: Option<f64>) -> String {
    level.map_or_else(
        || "unknown (beyond the model's budget)".to_owned(),
        |level| format!("{level:.6}"),
    )
}

fn optional(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "unstable".to_owned(), |v| format!("{v:.digits$}"))
}
