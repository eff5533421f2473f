//! The protocol's results: lines while it runs, tables, `protocol.json` and the charts.

use std::fmt::Write as _;
use std::path::Path;

use super::ProtocolArgs;
use super::clients::RETRIES;
use super::point::Point;
use super::transient::{STEP_FROM, STEP_TO, STORM_BASE, Step, Storm};
use crate::chart::{self, Axis, Panel, Series};
use crate::policy::Policy;
use crate::server::Style;
use crate::{BoxError, flag_value};
use admit_testkit::work::Distribution;

/// Everything the protocol measured, as `protocol.json` holds it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Protocol {
    pub(crate) work_ms: f64,
    pub(crate) deadline_ms: f64,
    pub(crate) warm_seconds: u64,
    pub(crate) measured_seconds: u64,
    pub(crate) sweep_load: f64,
    /// One set of curves per distribution and style.
    pub(crate) curves: Vec<Curves>,
    /// The step and the storm, for the first distribution and style.
    pub(crate) transients: Option<Transients>,
}

/// The curves of one distribution and style.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Curves {
    pub(crate) distribution: Distribution,
    pub(crate) style: Style,
    /// Requests per second the unprotected server completes, saturated.
    pub(crate) capacity: f64,
    /// Tower's pair at each k of the sweep.
    pub(crate) sweep: Vec<(usize, Point)>,
    pub(crate) curves: Vec<Curve>,
}

/// One policy's points, in the order of the offered loads.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Curve {
    pub(crate) policy: Policy,
    pub(crate) label: String,
    pub(crate) points: Vec<Point>,
}

/// The step and the storm of every policy.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Transients {
    pub(crate) distribution: Distribution,
    pub(crate) style: Style,
    pub(crate) capacity: f64,
    pub(crate) step_from: f64,
    pub(crate) step_to: f64,
    pub(crate) storm_base: f64,
    pub(crate) storm_retries: u32,
    pub(crate) runs: Vec<Transient>,
}

/// Goodput over time: `(s, goodput over the capacity)`.
type Goodput = Vec<(f64, f64)>;

/// One policy's step and storms (one per peak and client style).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Transient {
    pub(crate) policy: Policy,
    pub(crate) label: String,
    pub(crate) step: Option<Step>,
    pub(crate) storms: Vec<Storm>,
}

impl Protocol {
    pub(crate) fn new(args: &ProtocolArgs) -> Protocol {
        Protocol {
            work_ms: args.run.work_ms,
            deadline_ms: args.run.deadline_ms,
            warm_seconds: args.run.warm_seconds,
            measured_seconds: args.run.measured_seconds,
            sweep_load: args.sweep_load,
            curves: Vec::new(),
            transients: None,
        }
    }

    /// Writes `protocol.json` and the charts into `dir`, and says where.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), BoxError> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join("protocol.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)?)?;
        println!("\nResults: {}", json.display());
        for curves in &self.curves {
            let path = dir.join(format!(
                "curves-{}-{}.svg",
                flag_value(curves.distribution),
                flag_value(curves.style)
            ));
            curves.chart(&path)?;
            println!("Chart: {}", path.display());
        }
        if let Some(transients) = &self.transients {
            let path = dir.join("transients.svg");
            transients.chart(&path)?;
            println!("Chart: {}", path.display());
        }
        Ok(())
    }
}

impl Curves {
    pub(crate) fn new(distribution: Distribution, style: Style, capacity: f64) -> Curves {
        Curves {
            distribution,
            style,
            capacity,
            sweep: Vec::new(),
            curves: Vec::new(),
        }
    }

    /// The k of the sweep with the best goodput, the lowest p99 among those within 1 % of it.
    pub(crate) fn best_k(&self) -> Option<usize> {
        let best = self
            .sweep
            .iter()
            .map(|(_, p)| p.goodput)
            .fold(f64::MIN, f64::max);
        self.sweep
            .iter()
            .filter(|(_, p)| p.goodput >= best - 0.01)
            .min_by(|(_, a), (_, b)| {
                let p99 = |p: &Point| p.p99_ms.unwrap_or(f64::MAX);
                p99(a).total_cmp(&p99(b))
            })
            .map(|&(k, _)| k)
    }

    /// Goodput (% of capacity) and p99 (ms) per policy and offered load.
    pub(crate) fn table(&self, loads: &[f64]) -> String {
        let mut out = String::new();
        for (title, value) in [
            (
                "goodput, % of capacity",
                &(|p: &Point| format!("{:.1}", p.goodput * 100.0)) as &dyn Fn(&Point) -> String,
            ),
            ("p99 of admitted requests, ms", &|p: &Point| ms(p.p99_ms)),
        ] {
            let _ = write!(out, "\n{title:<30}");
            for load in loads {
                let _ = write!(out, " {:>7}", format!("{load}x"));
            }
            for curve in &self.curves {
                let _ = write!(out, "\n{:<30}", curve.label);
                for point in &curve.points {
                    let _ = write!(out, " {:>7}", value(point));
                }
            }
            out.push('\n');
        }
        out
    }

    /// Goodput and p99 against offered load, one line per policy.
    fn chart(&self, path: &Path) -> Result<(), BoxError> {
        let series = |value: &dyn Fn(&Point) -> Option<f64>| -> Vec<Series> {
            self.curves
                .iter()
                .map(|curve| Series {
                    name: curve.label.clone(),
                    points: curve
                        .points
                        .iter()
                        .filter_map(|p| Some((p.load, value(p)?)))
                        .collect(),
                })
                .collect()
        };
        let setting = format!(
            "{} service times, work {}, capacity {:.0}/s",
            flag_value(self.distribution),
            self.style.describe(),
            self.capacity
        );
        let offered = Axis::log("offered load, × capacity");
        chart::draw(
            path,
            &[
                Panel {
                    title: format!("goodput: {setting}"),
                    x: offered.clone(),
                    y: Axis::linear("goodput, × capacity"),
                    series: series(&|p| Some(p.goodput)),
                },
                Panel {
                    title: "p99 latency of admitted requests".to_owned(),
                    x: offered,
                    y: Axis::log("ms"),
                    series: series(&|p| p.p99_ms),
                },
            ],
        )
    }
}

impl Curve {
    pub(crate) fn new(policy: Policy) -> Curve {
        Curve {
            policy,
            label: policy.label(),
            points: Vec::new(),
        }
    }
}

impl Transients {
    pub(crate) fn new(distribution: Distribution, style: Style, capacity: f64) -> Transients {
        Transients {
            distribution,
            style,
            capacity,
            step_from: STEP_FROM,
            step_to: STEP_TO,
            storm_base: STORM_BASE,
            storm_retries: RETRIES,
            runs: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, policy: Policy, step: Option<Step>, storms: Vec<Storm>) {
        self.runs.push(Transient {
            policy,
            label: policy.label(),
            step,
            storms,
        });
    }

    /// The step's goodput per 100 ms and the storm's per 500 ms, one line per policy.
    fn chart(&self, path: &Path) -> Result<(), BoxError> {
        let mut panels = Vec::new();
        let series = |pick: &dyn Fn(&Transient) -> Option<&Goodput>| -> Vec<Series> {
            self.runs
                .iter()
                .filter_map(|run| {
                    Some(Series {
                        name: run.label.clone(),
                        points: pick(run)?.clone(),
                    })
                })
                .collect()
        };
        let step = series(&|run| run.step.as_ref().map(|s| &s.goodput));
        if !step.is_empty() {
            panels.push(Panel {
                title: format!("step from {STEP_FROM}x to {STEP_TO}x capacity: goodput per 100 ms"),
                x: Axis::linear("s from the step"),
                y: Axis::linear("goodput, × capacity"),
                series: step,
            });
        }
        let mut peaks: Vec<f64> = self
            .runs
            .iter()
            .flat_map(|run| run.storms.iter().map(|storm| storm.peak))
            .collect();
        peaks.sort_by(f64::total_cmp);
        peaks.dedup();
        for peak in peaks {
            let storms = self.runs.iter().flat_map(|run| {
                run.storms
                    .iter()
                    .filter(move |storm| storm.peak == peak)
                    .map(move |storm| Series {
                        name: format!("{}, {} clients", run.label, storm.clients),
                        points: storm.goodput.clone(),
                    })
            });
            panels.push(Panel {
                title: format!(
                    "retry storm (up to {RETRIES} retries): {STORM_BASE}x, {peak}x for 10 s, \
                     {STORM_BASE}x; goodput per 500 ms"
                ),
                x: Axis::linear("s from the overload's end"),
                y: Axis::linear("goodput, × capacity"),
                series: storms.collect(),
            });
        }
        chart::draw(path, &panels)
    }
}

/// A value in ms with one decimal, or `-` without one.
fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// A point as one line: `what policy @load: goodput, latencies, refusals, timeouts`.
pub(crate) fn line(what: &str, policy: Policy, p: &Point) -> String {
    format!(
        "{what} {:<20} {:>5}x: goodput {:>5.1} %, p50 {:>6} p99 {:>6} p99.9 {:>6} ms, refused \
         {:>5.1} % (p50 {} ms), timed out {:>5.1} %",
        policy.label(),
        p.load,
        p.goodput * 100.0,
        ms(p.p50_ms),
        ms(p.p99_ms),
        ms(p.p999_ms),
        p.refused * 100.0,
        ms(p.refusal_p50_ms),
        p.timed_out * 100.0,
    )
}

/// A policy's step as one line.
pub(crate) fn step_line(policy: Policy, step: &Step) -> String {
    format!(
        "{:<20} step: goodput settles in {} (band ±{:.0} %) at {:.1} %, p99 in {}",
        policy.label(),
        seconds(step.settle_s),
        step.band * 100.0,
        step.settled_goodput * 100.0,
        seconds(step.latency_settle_s)
    )
}

/// A policy's storm as one line.
pub(crate) fn storm_line(policy: Policy, storm: &Storm) -> String {
    format!(
        "{:<20} storm {:>4}x, {:<10} clients: {:.2} attempts per request and goodput {:.1} % \
         during it; ≥ 95 % in {}, ≥ 95 % of the {:.1} % before in {}, {:.1} % 10 s after; \
         refused locally {} during, {} after (the last {} after the end)",
        policy.label(),
        storm.peak,
        storm.clients.to_string(),
        storm.attempts_per_request,
        storm.goodput_during * 100.0,
        seconds(storm.recovery_s),
        storm.goodput_before * 100.0,
        seconds(storm.recovery_to_before_s),
        storm.goodput_after_10s * 100.0,
        storm.local_refusals.0,
        storm.local_refusals.1,
        seconds(storm.last_local_refusal_s),
    )
}

/// Seconds with two decimals, or `never`.
fn seconds(value: Option<f64>) -> String {
    value.map_or_else(|| "never".to_owned(), |v| format!("{v:.2} s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(goodput: f64, p99_ms: Option<f64>) -> Point {
        Point {
            load: 4.0,
            offered_per_s: 400.0,
            goodput,
            p50_ms: None,
            p99_ms,
            p999_ms: None,
            refused: 0.0,
            refusal_reasons: Default::default(),
            refusal_p50_ms: None,
            refusal_p99_ms: None,
            timed_out: 0.0,
        }
    }

    #[test]
    fn the_best_k_has_the_lowest_p99_among_the_best_goodputs() {
        let mut curves = Curves::new(Distribution::Exponential, Style::Blocking, 100.0);
        assert_eq!(curves.best_k(), None, "no sweep");
        curves.sweep = vec![
            (1, point(0.60, Some(5.0))),
            (8, point(0.975, Some(60.0))),
            (16, point(0.982, Some(120.0))),
            (128, point(0.99, None)),
        ];
        // 0.99 is best; 0.982 is within 1 % of it and 0.975 is not; no answer ranks last.
        assert_eq!(curves.best_k(), Some(16));
        curves.sweep[3].1.p99_ms = Some(400.0);
        assert_eq!(curves.best_k(), Some(16));
    }

    #[test]
    fn the_table_has_a_column_per_load_and_a_row_per_policy() {
        let mut curves = Curves::new(Distribution::Bimodal, Style::Inline, 100.0);
        let mut curve = Curve::new(Policy::Admit);
        curve.points = vec![point(0.5, Some(3.0)), point(0.97, None)];
        curves.curves.push(curve);
        let table = curves.table(&[0.5, 4.0]);
        assert!(table.contains("0.5x") && table.contains("4x"), "{table}");
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("admit")).collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(rows[0].ends_with("50.0    97.0"), "{table}");
        assert!(rows[1].ends_with("3.0       -"), "{table}");
    }
}
