//! The frontier: each policy's settings as points of SLO attainment against replica-seconds,
//! which points dominate which, and a chart with a line per policy.
//!
//! A point dominates another when it keeps at least as much within the SLO with at most as
//! many replica-seconds, and is better in one of the two. Only drain runs count: a scale-in
//! variant is the same setting run another way.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use crate::fleet::ScaleIn;
use crate::policy::Kind;
use crate::report::Summary;

/// One setting's outcome.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Point {
    /// The policy at its setting.
    pub policy: String,
    /// What it scales on.
    pub kind: Kind,
    /// The share of requests answered within the SLO, 0 to 1.
    pub slo_attainment: f64,
    /// Replicas (terminating ones included) summed over the seconds of the run.
    pub replica_seconds: f64,
    /// The points it dominates, by policy name.
    pub dominates: Vec<String>,
    /// The points that dominate it.
    pub dominated_by: Vec<String>,
}

/// Every drain run's point.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Frontier {
    /// In the runs' order.
    pub points: Vec<Point>,
}

/// Whether `a` dominates `b`.
fn dominates(a: &Point, b: &Point) -> bool {
    a.slo_attainment >= b.slo_attainment
        && a.replica_seconds <= b.replica_seconds
        && (a.slo_attainment > b.slo_attainment || a.replica_seconds < b.replica_seconds)
}

impl Frontier {
    /// The frontier of the drain runs among `summaries`.
    pub fn new(summaries: &[Summary]) -> Self {
        let mut points: Vec<Point> = summaries
            .iter()
            .filter(|summary| summary.scale_in == ScaleIn::Drain)
            .map(|summary| Point {
                policy: summary.policy.clone(),
                kind: summary.kind,
                slo_attainment: summary.slo_attainment,
                replica_seconds: summary.replica_seconds,
                dominates: Vec::new(),
                dominated_by: Vec::new(),
            })
            .collect();
        for i in 0..points.len() {
            for j in 0..points.len() {
                if dominates(&points[i], &points[j]) {
                    let (winner, loser) = (points[i].policy.clone(), points[j].policy.clone());
                    points[i].dominates.push(loser);
                    points[j].dominated_by.push(winner);
                }
            }
        }
        Frontier { points }
    }

    /// Every point, whether it is on the frontier (dominated by none), and what it dominates.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{:<24} {:>7} {:>9} {:>8}  dominates",
            "policy", "SLO %", "replica·s", "frontier"
        );
        for point in &self.points {
            let _ = writeln!(
                out,
                "{:<24} {:>7.2} {:>9.0} {:>8}  {}",
                point.policy,
                point.slo_attainment * 100.0,
                point.replica_seconds,
                if point.dominated_by.is_empty() {
                    "yes"
                } else {
                    ""
                },
                point.dominates.join(", ")
            );
        }
        out
    }

    /// SLO attainment (%) against replica-seconds, a line per policy through its settings in
    /// order of replica-seconds, the frontier's points ringed.
    ///
    /// # Errors
    ///
    /// Drawing or writing the SVG failed.
    pub fn chart(&self, path: &Path) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let (low, high) = self
            .points
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(low, high), point| {
                (
                    low.min(point.replica_seconds),
                    high.max(point.replica_seconds),
                )
            });
        let (low, high) = if low <= high { (low, high) } else { (0.0, 1.0) };
        let margin = ((high - low) * 0.05).max(1.0);
        let floor = self
            .points
            .iter()
            .map(|point| point.slo_attainment * 100.0)
            .fold(100.0f64, f64::min);
        let floor = (floor - 2.0).clamp(0.0, 98.0).floor();
        let mut chart = ChartBuilder::on(&root)
            .caption("SLO attainment against replica-seconds", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d((low - margin)..(high + margin), floor..100.5)?;
        chart
            .configure_mesh()
            .x_desc("replica-seconds")
            .y_desc("requests within the SLO, %")
            .draw()?;
        for (index, kind) in Kind::ALL.into_iter().enumerate() {
            let mut line: Vec<(f64, f64)> = self
                .points
                .iter()
                .filter(|point| point.kind == kind)
                .map(|point| (point.replica_seconds, point.slo_attainment * 100.0))
                .collect();
            if line.is_empty() {
                continue;
            }
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = Palette99::pick(index).to_rgba();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(kind.name())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart.draw_series(line.iter().map(|&at| Circle::new(at, 4, color.filled())))?;
        }
        let front = self
            .points
            .iter()
            .filter(|point| point.dominated_by.is_empty())
            .map(|point| {
                Circle::new(
                    (point.replica_seconds, point.slo_attainment * 100.0),
                    8,
                    BLACK,
                )
            });
        chart.draw_series(front)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(policy: &str, slo: f64, replica_seconds: f64) -> Point {
        Point {
            policy: policy.to_owned(),
            kind: Kind::Cpu,
            slo_attainment: slo,
            replica_seconds,
            dominates: Vec::new(),
            dominated_by: Vec::new(),
        }
    }

    #[test]
    fn dominance_needs_one_strict_gain() {
        let a = point("a", 0.95, 1000.0);
        assert!(dominates(&a, &point("b", 0.94, 1000.0)));
        assert!(dominates(&a, &point("c", 0.95, 1001.0)));
        assert!(!dominates(&a, &point("d", 0.95, 1000.0)));
        assert!(!dominates(&a, &point("e", 0.96, 1100.0)));
        assert!(!dominates(&a, &point("f", 0.90, 900.0)));
    }
}
