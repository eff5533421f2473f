//! Recommendations over a past time range, as `admit-scaler replay` prints and draws them.

use std::fmt::{self, Write as _};
use std::time::Duration;

use http::Uri;

use crate::decision::{Decision, DecisionError, Evaluator};
use crate::metadata::ScalerConfig;
use crate::prometheus::{PrometheusClient, QueryError};
use crate::tools::chart::{Chart, Series, Style, format_utc_range};

use super::time::format_time;

/// The most evaluations one replay makes (a week at one minute is 10080).
pub const MAX_STEPS: u64 = 100_000;

/// One evaluation of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayStep {
    /// Unix seconds.
    pub time: f64,
    /// What the scaler would have answered.
    pub outcome: Result<Decision, DecisionError<QueryError>>,
}

/// A time range a replay cannot walk.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RangeError {
    /// The end is before the start.
    Reversed {
        /// Unix seconds.
        start: f64,
        /// Unix seconds.
        end: f64,
    },
    /// The step is zero.
    ZeroStep,
    /// More than [`MAX_STEPS`] evaluations.
    TooManySteps {
        /// How many the range and step give.
        steps: f64,
    },
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeError::Reversed { start, end } => write!(
                f,
                "the end {} is before the start {}",
                format_time(*end),
                format_time(*start)
            ),
            RangeError::ZeroStep => f.write_str("the step must be longer than 0"),
            RangeError::TooManySteps { steps } => write!(
                f,
                "{steps} evaluations: at most {MAX_STEPS}; use a longer step or a shorter range"
            ),
        }
    }
}

impl std::error::Error for RangeError {}

/// Evaluates every `step` from `start` to `end` (Unix seconds, both included when on a step),
/// with one evaluator, so hysteresis plays out as it would have live: the planner's clock is
/// the data's time.
///
/// # Errors
///
/// A [`RangeError`]; failed evaluations are steps with an error, not a failure of the replay.
pub async fn replay(
    client: &PrometheusClient,
    base: &Uri,
    config: &ScalerConfig,
    start: f64,
    end: f64,
    step: Duration,
) -> Result<Vec<ReplayStep>, RangeError> {
    if end < start {
        return Err(RangeError::Reversed { start, end });
    }
    if step.is_zero() {
        return Err(RangeError::ZeroStep);
    }
    let steps = ((end - start) / step.as_secs_f64()).floor() + 1.0;
    if steps.is_nan() || steps > MAX_STEPS as f64 {
        return Err(RangeError::TooManySteps { steps });
    }
    let mut evaluator = Evaluator::new(config.clone());
    let mut out = Vec::with_capacity(steps as usize);
    for i in 0..steps as u32 {
        let since_start = step * i;
        let time = start + since_start.as_secs_f64();
        let measured = crate::measure::measure(client, base, config, Some(time)).await;
        out.push(ReplayStep {
            time,
            outcome: evaluator.decide(since_start, measured),
        });
    }
    Ok(out)
}

/// A table, one line per step: time, λ, service time, offered load, required servers, the
/// recommended replicas and the predicted service level, or the error.
pub fn replay_table(config: &ScalerConfig, steps: &[ReplayStep]) -> String {
    let mut out = format!(
        "{:<20} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9} {:>10}\n",
        "time (UTC)", "λ /s", "service s", "load erl", "servers", "needed", "replicas", "P(wait≤T)"
    );
    let per_replica = config.concurrency_per_replica;
    for step in steps {
        let time = format_time(step.time);
        let _ = match &step.outcome {
            Ok(decision) => writeln!(
                out,
                "{time:<20} {:>12.4} {:>12} {:>12.4} {:>9} {:>9} {:>9} {:>10}{}",
                decision.arrival_rate,
                decision
                    .service_time
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.6}")),
                decision.offered_load,
                decision.required_servers,
                decision.required_servers.div_ceil(per_replica),
                decision.replicas,
                decision
                    .predicted_service_level
                    .map_or_else(|| "unknown".to_owned(), |level| format!("{level:.6}")),
                if decision.capped { "  capped" } else { "" }
            ),
            Err(error) => writeln!(
                out,
                "{time:<20} error {}: {error}",
                crate::telemetry::code_name(crate::service::code(error))
            ),
        };
    }
    out
}

/// A chart of a replay: the recommended replicas (a step line, gaps where an evaluation
/// failed) and the replicas the target needed at each step without hysteresis (dashed).
pub fn replay_chart(config: &ScalerConfig, steps: &[ReplayStep]) -> Chart {
    let per_replica = config.concurrency_per_replica;
    let series = |name: &str, style, y: &dyn Fn(&Decision) -> f64| Series {
        name: name.to_owned(),
        style,
        points: steps
            .iter()
            .map(|step| (step.time, step.outcome.as_ref().ok().map(y)))
            .collect(),
    };
    let (first, last) = match (steps.first(), steps.last()) {
        (Some(first), Some(last)) => (first.time, last.time),
        _ => (0.0, 0.0),
    };
    Chart {
        title: format!(
            "{}: P(wait ≤ {} s) ≥ {}, {}",
            config.metric_name,
            config.wait_threshold_seconds,
            config.target_sl,
            format_utc_range(first as i64, last as i64)
        ),
        x_label: "time (UTC)".to_owned(),
        y_label: "replicas".to_owned(),
        series: vec![
            series("recommended replicas", Style::Step, &|decision| {
                decision.replicas as f64
            }),
            series(
                "needed now (no hysteresis)",
                Style::DashedStep,
                &|decision| decision.required_servers.div_ceil(per_replica) as f64,
            ),
        ],
    }
}
