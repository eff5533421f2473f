//! The comparison: per run, SLO attainment, goodput, latency, refusals, cost, time to
//! capacity, what scale-in lost, and sessions; as a table, as JSON, and as a chart (one panel
//! per run).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use admit_loadgen::Trace;
use plotters::prelude::*;

use crate::fleet::ScaleIn;
use crate::frontier::Frontier;
use crate::policy::Kind;
use crate::run::one::{PolicyRun, Second, lost};
use crate::run::setup::{Balance, Setup};

/// One run's figures.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    /// The policy at its setting.
    pub policy: String,
    /// What it scales on, for the frontier's lines.
    pub kind: Kind,
    /// How replicas left.
    pub scale_in: ScaleIn,
    /// Requests sent.
    pub offered: u64,
    /// Share of requests answered 200 within the SLO.
    pub slo_attainment: f64,
    /// Requests answered 200 per second.
    pub goodput: f64,
    /// Latency of 200 answers, ms.
    pub p50_ms: Option<f64>,
    /// Latency of 200 answers, ms.
    pub p99_ms: Option<f64>,
    /// Share of requests refused by admit (503/429).
    pub refused_share: f64,
    /// Requests timed out.
    pub timed_out: u64,
    /// Pods times seconds: what the run cost.
    pub replica_seconds: f64,
    /// From the step's start until the replicas it needs were ready, s (none: never).
    pub time_to_capacity_s: Option<f64>,
    /// Requests lost (no answer, a broken connection, the proxy's own 5xx) in the seconds that
    /// could meet a pod's departure (from a deadline before its signal until it was gone).
    pub lost_on_scale_in: u64,
    /// Requests lost in the whole run.
    pub lost: u64,
    /// Sessions ended without a notice.
    pub sessions_cut: u64,
    /// Sessions told to reconnect.
    pub sessions_told: u64,
    /// The longest reconnection, ms.
    pub longest_reconnect_ms: u64,
    /// Syncs whose metric could not be read.
    pub missed_syncs: u32,
    /// Syncs that changed the replica count.
    pub replica_changes: u32,
    /// The machine's idle share during the run.
    pub idle_share: Option<f64>,
}

/// Every run and the settings.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The time-compression factor.
    pub compression: f64,
    /// The SLO, ms.
    pub slo_ms: f64,
    /// Each replica's CPU quota (none: no cgroups, less realistic).
    pub cpus: Option<f64>,
    /// How the proxy balanced.
    pub balance: Balance,
    /// Whether each replica bounded its work in service (`--replica-bound`).
    pub replica_bound: bool,
    /// A replica's capacity once warm, requests per second.
    pub replica_capacity: f64,
    /// The replicas the trace's peak needs at 70 % utilisation.
    pub needed_at_peak: u32,
    /// When the first step starts, s.
    pub step_at_s: f64,
    /// The summaries.
    pub summaries: Vec<Summary>,
    /// The drain runs' points of SLO attainment against replica-seconds.
    pub frontier: Frontier,
    /// The runs, second by second.
    pub runs: Vec<PolicyRun>,
}

impl Report {
    /// The report of `runs` (each with the machine's idle share during it).
    pub fn new(
        setup: &Setup,
        trace: &Trace,
        slo: Duration,
        runs: Vec<(PolicyRun, Option<f64>)>,
    ) -> Self {
        let needed = setup.fixed_replicas(trace);
        let step_at = trace
            .segment_start(1)
            .map_or(0.0, |start| start.as_secs_f64());
        let slo_us = slo.as_micros() as u64;
        let summaries: Vec<Summary> = runs
            .iter()
            .map(|(run, idle)| summarise(run, *idle, slo_us, needed, step_at))
            .collect();
        Report {
            compression: setup.compression,
            slo_ms: slo.as_secs_f64() * 1e3,
            cpus: setup.cpus,
            balance: setup.balance,
            replica_bound: setup.bound,
            replica_capacity: setup.replica_capacity(),
            needed_at_peak: needed,
            step_at_s: step_at,
            frontier: Frontier::new(&summaries),
            summaries,
            runs: runs.into_iter().map(|(run, _)| run).collect(),
        }
    }

    /// The summary table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{:<18} {:<8} {:>7} {:>8} {:>7} {:>7} {:>8} {:>8} {:>9} {:>10} {:>7} {:>7} {:>6}",
            "policy",
            "scale-in",
            "SLO %",
            "goodput",
            "p50 ms",
            "p99 ms",
            "refused",
            "replica·s",
            "capacity",
            "lost (in)",
            "cut",
            "changes",
            "idle"
        );
        for s in &self.summaries {
            let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
            let _ = writeln!(
                out,
                "{:<18} {:<8} {:>7.2} {:>8.1} {:>7} {:>7} {:>7.2}% {:>8.0} {:>9} {:>10} {:>7} {:>7} {:>6}",
                s.policy,
                format!("{:?}", s.scale_in).to_lowercase(),
                s.slo_attainment * 100.0,
                s.goodput,
                ms(s.p50_ms),
                ms(s.p99_ms),
                s.refused_share * 100.0,
                s.replica_seconds,
                s.time_to_capacity_s
                    .map_or_else(|| "never".to_owned(), |t| format!("{t:.1} s")),
                format!("{} ({})", s.lost, s.lost_on_scale_in),
                s.sessions_cut,
                s.replica_changes,
                s.idle_share
                    .map_or_else(|| "-".to_owned(), |idle| format!("{:.0}%", idle * 100.0)),
            );
        }
        let busy: Vec<&str> = self
            .summaries
            .iter()
            .filter(|s| s.idle_share.is_some_and(|idle| idle < IDLE_WARNING))
            .map(|s| s.policy.as_str())
            .collect();
        if !busy.is_empty() {
            let _ = writeln!(
                out,
                "\nWARNING: the machine was busy (idle below {:.0} %) during {}: the numbers \
                 may not hold.",
                IDLE_WARNING * 100.0,
                busy.join(", ")
            );
        }
        if self.cpus.is_none() {
            let _ = writeln!(
                out,
                "\nRun with --no-quota: replicas shared the machine's CPUs freely, unlike pods \
                 with CPU limits; less realistic."
            );
        }
        out
    }
}

/// Below this idle share the machine was too busy for the numbers to hold.
const IDLE_WARNING: f64 = 0.1;

fn summarise(
    run: &PolicyRun,
    idle: Option<f64>,
    slo_us: u64,
    needed: u32,
    step_at: f64,
) -> Summary {
    let total = &run.total;
    let offered = total.offered.max(1) as f64;
    let within = total.latency_us.count_between(0, slo_us);
    let seconds = run.seconds.len().max(1) as f64;
    let quantile = |q: f64| total.latency_quantile(q).map(|d| d.as_secs_f64() * 1e3);
    let time_to_capacity = run
        .seconds
        .iter()
        .find(|second| second.t as f64 >= step_at && second.ready >= needed)
        .map(|second| second.t as f64 + 1.0 - step_at);
    let lost_on_scale_in = run
        .seconds
        .iter()
        .filter(|second| second.scaling_in)
        .map(|second| lost(&second.tally))
        .sum();
    Summary {
        policy: run.name.clone(),
        kind: run.policy.kind,
        scale_in: run.scale_in,
        offered: total.offered,
        slo_attainment: within as f64 / offered,
        goodput: total.ok as f64 / seconds,
        p50_ms: quantile(0.5),
        p99_ms: quantile(0.99),
        refused_share: total.refused as f64 / offered,
        timed_out: total.timed_out,
        replica_seconds: run
            .seconds
            .iter()
            .map(|second| f64::from(second.replicas + second.terminating))
            .sum(),
        time_to_capacity_s: time_to_capacity,
        lost_on_scale_in,
        lost: lost(total),
        sessions_cut: run.sessions.cut,
        sessions_told: run.sessions.told_to_reconnect,
        longest_reconnect_ms: run.sessions.longest_reconnect_ms,
        missed_syncs: run.missed_syncs.0,
        replica_changes: run
            .syncs
            .iter()
            .filter(|sync| sync.desired != sync.current)
            .count() as u32,
        idle_share: idle,
    }
}

/// Draws one panel per run: ready replicas and the offered and refused load (in replicas'
/// worth of capacity) on the left axis, the p99 latency on the right.
///
/// # Errors
///
/// The file cannot be written.
pub fn chart(report: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    const PANEL: u32 = 260;
    let height = PANEL * report.runs.len().max(1) as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((report.runs.len().max(1), 1));
    let capacity = report.replica_capacity;
    for (run, panel) in report.runs.iter().zip(panels) {
        let seconds = run.seconds.len().max(1) as f64;
        let top = run
            .seconds
            .iter()
            .map(|s| (s.offered_rate / capacity).max(f64::from(s.ready)))
            .fold(1.0, f64::max)
            * 1.15;
        let p99_top = run
            .seconds
            .iter()
            .filter_map(p99_ms)
            .fold(report.slo_ms * 2.0, f64::max);
        let title = format!(
            "{} (scale-in: {})",
            run.name,
            format!("{:?}", run.scale_in).to_lowercase()
        );
        let mut chart = ChartBuilder::on(&panel)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(48)
            .right_y_label_area_size(48)
            .build_cartesian_2d(0.0..seconds, 0.0..top)?
            .set_secondary_coord(0.0..seconds, 0.0..p99_top);
        chart
            .configure_mesh()
            .x_desc("s")
            .y_desc("replicas")
            .light_line_style(WHITE)
            .draw()?;
        chart.configure_secondary_axes().y_desc("p99 ms").draw()?;
        let line = |f: &dyn Fn(&Second) -> f64| -> Vec<(f64, f64)> {
            run.seconds.iter().map(|s| (s.t as f64, f(s))).collect()
        };
        chart
            .draw_series(LineSeries::new(
                line(&|s| s.offered_rate / capacity),
                BLACK.mix(0.4).stroke_width(2),
            ))?
            .label("offered (replicas' worth)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
        chart
            .draw_series(LineSeries::new(
                line(&|s| f64::from(s.ready)),
                BLUE.stroke_width(2),
            ))?
            .label("ready replicas")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
        chart
            .draw_series(LineSeries::new(
                line(&|s| s.tally.refused as f64 / capacity),
                RED.stroke_width(1),
            ))?
            .label("refused (replicas' worth)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
        chart
            .draw_secondary_series(LineSeries::new(
                run.seconds
                    .iter()
                    .filter_map(|s| Some((s.t as f64, p99_ms(s)?))),
                GREEN.mix(0.8).stroke_width(1),
            ))?
            .label("p99 ms (right)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], GREEN));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn p99_ms(second: &Second) -> Option<f64> {
    second.tally.p99().map(|p| p.as_secs_f64() * 1e3)
}
