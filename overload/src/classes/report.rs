//! The criticality run's results: lines while it runs, the table, `classes.json` and the chart.

use std::fmt::Write as _;
use std::path::Path;

use super::ClassesArgs;
use super::mix::{ClassFigures, ClassPoint};
use super::spike::{self, Spike};
use crate::chart::{self, Axis, Panel, Series};
use crate::policy::Policy;
use crate::server::Style;
use crate::{BoxError, flag_value};

/// Everything the run measured, as `classes.json` holds it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Report {
    /// The critical requests' rate at every load, as a multiple of the capacity.
    pub(crate) critical_load: f64,
    pub(crate) work_ms: f64,
    pub(crate) deadline_ms: f64,
    pub(crate) warm_seconds: u64,
    pub(crate) measured_seconds: u64,
    /// One set of runs per style of work.
    pub(crate) styles: Vec<Classes>,
}

/// The runs of one style of work.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Classes {
    pub(crate) style: Style,
    pub(crate) capacity: f64,
    /// The critical class alone at its rate.
    pub(crate) uncontended: ClassPoint,
    pub(crate) runs: Vec<PolicyRuns>,
}

/// One policy's points, in the order of the loads, and its spike.
#[derive(Debug, serde::Serialize)]
pub(crate) struct PolicyRuns {
    pub(crate) policy: Policy,
    pub(crate) label: String,
    pub(crate) points: Vec<ClassPoint>,
    pub(crate) spike: Option<Spike>,
}

impl PolicyRuns {
    pub(crate) fn new(policy: Policy) -> PolicyRuns {
        PolicyRuns {
            policy,
            label: policy.label(),
            points: Vec::new(),
            spike: None,
        }
    }
}

/// `value` with `decimals` decimals, or `-` without one.
fn fixed(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// A share as a percentage with two decimals, or `-` without one.
fn percent(share: Option<f64>) -> String {
    fixed(share.map(|share| share * 100.0), 2)
}

/// The critical answers over what the server could serve of them (all of them, or its
/// capacity if they alone exceed it); none if none was offered.
fn of_servable(critical: &ClassFigures, capacity: f64) -> Option<f64> {
    let servable = critical.offered_per_s.min(capacity);
    let available = critical.availability?;
    Some((available * critical.offered_per_s / servable).min(1.0))
}

/// A point as a line while the run goes.
pub(crate) fn line(label: &str, point: &ClassPoint) -> String {
    format!(
        "{label:<20} {:>5}x  critical {:>6} % available, p99 {:>6} ms  sheddable {:>6} %  \
         goodput {:>5.1} %  cut none/sheddable/critical {:.0}/{:.0}/{:.0} % of the time",
        point.load,
        percent(point.critical.availability),
        fixed(point.critical.p99_ms, 1),
        percent(point.sheddable.availability),
        point.goodput * 100.0,
        point.cut_time[0] * 100.0,
        point.cut_time[1] * 100.0,
        point.cut_time[3] * 100.0,
    )
}

/// A spike as a line while the run goes.
pub(crate) fn spike_line(label: &str, spike: &Spike) -> String {
    format!(
        "{label:<20} spike {:.0}x  critical {:>6} % available ({} % during), sheddable {} % \
         during; the cut settles in {} s up, {} s down",
        spike.factor,
        percent(spike.critical.availability),
        percent(spike.critical_during.availability),
        percent(spike.sheddable_during.availability),
        fixed(spike.cut_settle_up_s, 2),
        fixed(spike.cut_settle_down_s, 2),
    )
}

impl Report {
    pub(crate) fn new(args: &ClassesArgs) -> Report {
        Report {
            critical_load: args.critical,
            work_ms: args.run.work_ms,
            deadline_ms: args.run.deadline_ms,
            warm_seconds: args.run.warm_seconds,
            measured_seconds: args.run.measured_seconds,
            styles: Vec::new(),
        }
    }

    /// Writes `classes.json` and a chart per style into `dir`, and says where.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), BoxError> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join("classes.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)?)?;
        println!("\nResults: {}", json.display());
        for classes in &self.styles {
            let svg = dir.join(format!("classes-{}.svg", flag_value(classes.style)));
            classes.chart(&svg)?;
            println!("Chart: {}", svg.display());
        }
        Ok(())
    }
}

impl Classes {
    pub(crate) fn new(style: Style, capacity: f64, uncontended: ClassPoint) -> Classes {
        Classes {
            style,
            capacity,
            uncontended,
            runs: Vec::new(),
        }
    }

    /// The results as two Markdown tables: the loads, then the spikes.
    pub(crate) fn table(&self) -> String {
        let mut out = format!(
            "Work {}, capacity {:.0}/s. Uncontended critical p99: {} ms.\n\n",
            flag_value(self.style),
            self.capacity,
            fixed(self.uncontended.critical.p99_ms, 1),
        );
        out.push_str(
            "| policy | load | critical available, % | of what fits, % | critical p99, ms | \
             sheddable available, % | goodput, % of capacity |\n|---|---|---|---|---|---|---|\n",
        );
        for runs in &self.runs {
            for point in &runs.points {
                let _ = writeln!(
                    out,
                    "| {} | {}× | {} | {} | {} | {} | {:.1} |",
                    runs.label,
                    point.load,
                    percent(point.critical.availability),
                    percent(of_servable(&point.critical, self.capacity)),
                    fixed(point.critical.p99_ms, 1),
                    percent(point.sheddable.availability),
                    point.goodput * 100.0
                );
            }
        }
        out.push_str(
            "\n| policy | spike | critical available, % (during) | sheddable available during, \
             % | cut settles, s (up / down) |\n|---|---|---|---|---|\n",
        );
        for runs in &self.runs {
            if let Some(spike) = &runs.spike {
                let _ = writeln!(
                    out,
                    "| {} | {:.0}× sheddable ({:.1}× capacity) | {} ({}) | {} | {} / {} |",
                    runs.label,
                    spike.factor,
                    spike.peak_load,
                    percent(spike.critical.availability),
                    percent(spike.critical_during.availability),
                    percent(spike.sheddable_during.availability),
                    fixed(spike.cut_settle_up_s, 2),
                    fixed(spike.cut_settle_down_s, 2),
                );
            }
        }
        out
    }

    /// Each class's availability against the load, and the spike over time.
    fn chart(&self, path: &Path) -> Result<(), BoxError> {
        let mut availability = Vec::new();
        for runs in &self.runs {
            for (class, figures) in [
                (
                    "critical",
                    &(|p: &ClassPoint| p.critical.availability) as &dyn Fn(_) -> Option<f64>,
                ),
                ("sheddable", &|p: &ClassPoint| p.sheddable.availability),
            ] {
                availability.push(Series {
                    name: format!("{}: {class}", runs.label),
                    points: runs
                        .points
                        .iter()
                        .filter_map(|p| Some((p.load, figures(p)?)))
                        .collect(),
                });
            }
        }
        let mut panels = vec![Panel {
            title: format!(
                "availability by class, work {}, capacity {:.0}/s",
                flag_value(self.style),
                self.capacity
            ),
            x: Axis::log("offered load, × capacity"),
            y: Axis::linear("answered OK, share"),
            series: availability,
        }];
        for runs in &self.runs {
            let Some(spike) = &runs.spike else { continue };
            panels.push(Panel {
                title: format!(
                    "{}: sheddable ×{:.0} from {} s to {} s",
                    runs.label,
                    spike.factor,
                    0,
                    spike::DURING
                ),
                x: Axis::linear("s from the spike's start"),
                y: Axis::linear("goodput × capacity; cut (0 none, 1 sheddable … 3 critical)"),
                series: vec![
                    Series {
                        name: "critical goodput".to_owned(),
                        points: spike.critical_goodput.clone(),
                    },
                    Series {
                        name: "sheddable goodput".to_owned(),
                        points: spike.sheddable_goodput.clone(),
                    },
                    Series {
                        name: "cut".to_owned(),
                        points: spike.cut.clone(),
                    },
                ],
            });
        }
        chart::draw(path, &panels)
    }
}
