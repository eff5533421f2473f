//! The simulation beside a real run: per policy, SLO attainment within 2 points and
//! replica-seconds within 5 %.

use std::fmt::Write as _;

use crate::report::Report;

/// SLO attainment may differ by this many points.
pub(crate) const SLO_POINTS: f64 = 2.0;
/// Replica-seconds may differ by this share of the real run's.
pub(crate) const REPLICA_SECONDS_SHARE: f64 = 0.05;

/// One policy in both.
#[derive(Debug)]
struct Pair {
    policy: String,
    real: (f64, f64),
    simulated: (f64, f64),
}

impl Pair {
    fn slo_gap(&self) -> f64 {
        (self.simulated.0 - self.real.0) * 100.0
    }

    fn cost_gap(&self) -> f64 {
        (self.simulated.1 - self.real.1) / self.real.1
    }

    fn within(&self) -> bool {
        self.slo_gap().abs() <= SLO_POINTS && self.cost_gap().abs() <= REPLICA_SECONDS_SHARE
    }
}

/// Every drain run of the real report that the simulation ran too.
#[derive(Debug)]
pub(crate) struct Calibration {
    pairs: Vec<Pair>,
}

impl Calibration {
    /// Pairs `real` (a real run's report as JSON) with `simulated` by policy.
    ///
    /// # Errors
    ///
    /// The real report has no summaries, or none the simulation ran.
    pub(crate) fn new(real: &serde_json::Value, simulated: &Report) -> Result<Self, String> {
        let summaries = real
            .get("summaries")
            .and_then(serde_json::Value::as_array)
            .ok_or("the real report has no summaries: is it `admit-cluster run --json`'s?")?;
        let mut pairs = Vec::new();
        for summary in summaries {
            let field = |name: &str| summary.get(name);
            if field("scale_in").and_then(serde_json::Value::as_str) != Some("drain") {
                continue;
            }
            let (Some(policy), Some(slo), Some(cost)) = (
                field("policy").and_then(serde_json::Value::as_str),
                field("slo_attainment").and_then(serde_json::Value::as_f64),
                field("replica_seconds").and_then(serde_json::Value::as_f64),
            ) else {
                continue;
            };
            if let Some(sim) = simulated.summaries.iter().find(|s| s.policy == policy) {
                pairs.push(Pair {
                    policy: policy.to_owned(),
                    real: (slo, cost),
                    simulated: (sim.slo_attainment, sim.replica_seconds),
                });
            }
        }
        if pairs.is_empty() {
            return Err(
                "no policy of the real report was simulated: pass the same --policies".into(),
            );
        }
        Ok(Calibration { pairs })
    }

    /// Whether every pair is within the bounds.
    pub(crate) fn within(&self) -> bool {
        self.pairs.iter().all(Pair::within)
    }

    /// The pairs as a table.
    pub(crate) fn table(&self) -> String {
        let mut out = format!(
            "\ncalibration (within {SLO_POINTS} points of SLO attainment and {} % of replica-seconds)\n\
             {:<24} {:>8} {:>8} {:>7} {:>10} {:>10} {:>7}  \n",
            REPLICA_SECONDS_SHARE * 100.0,
            "policy",
            "real SLO",
            "sim SLO",
            "points",
            "real rep·s",
            "sim rep·s",
            "gap"
        );
        for pair in &self.pairs {
            let _ = writeln!(
                out,
                "{:<24} {:>7.2}% {:>7.2}% {:>+7.2} {:>10.0} {:>10.0} {:>+6.1}%  {}",
                pair.policy,
                pair.real.0 * 100.0,
                pair.simulated.0 * 100.0,
                pair.slo_gap(),
                pair.real.1,
                pair.simulated.1,
                pair.cost_gap() * 100.0,
                if pair.within() { "within" } else { "OUTSIDE" }
            );
        }
        out
    }
}
