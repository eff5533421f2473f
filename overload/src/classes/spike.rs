//! The spike: at 0.8 × capacity, the sheddable class alone jumps to many times its rate and
//! back, while the critical class keeps its rate.

use std::time::Duration;

use admit::criticality::Criticality;
use admit_loadgen::Trace;

use super::ClassesArgs;
use super::mix::{self, ClassFigures};
use crate::BoxError;
use crate::server::ServeArgs;

/// The load before and after the spike, as a multiple of the capacity.
pub(crate) const BASE: f64 = 0.8;
/// Seconds before, during and after the spike.
pub(crate) const BEFORE: u64 = 5;
pub(crate) const DURING: u64 = 6;
pub(crate) const AFTER: u64 = 5;
/// How long a spike run takes, s, with a second to start its server.
pub(crate) const SECONDS: u64 = BEFORE + DURING + AFTER + 1;

/// What the spike did to each class, and the shedder's cut.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Spike {
    /// How many times its rate the sheddable class jumped to.
    pub(crate) factor: f64,
    /// The offered load at the spike's height, as a multiple of the capacity.
    pub(crate) peak_load: f64,
    /// Each class over the whole run, and during the spike.
    pub(crate) critical: ClassFigures,
    pub(crate) critical_during: ClassFigures,
    pub(crate) sheddable_during: ClassFigures,
    /// From the spike's start until the cut holds the value it ends the spike with, s.
    pub(crate) cut_settle_up_s: Option<f64>,
    /// From the spike's end until the cut holds the value it ends the run with, s.
    pub(crate) cut_settle_down_s: Option<f64>,
    /// The cut over time: `(s from the spike's start, 0 for none or 1 + the class's index)`.
    pub(crate) cut: Vec<(f64, f64)>,
    /// OK answers per second of each class over the capacity: `(s from the spike's start,
    /// goodput)`.
    pub(crate) critical_goodput: Vec<(f64, f64)>,
    pub(crate) sheddable_goodput: Vec<(f64, f64)>,
}

/// Runs the spike against a fresh server.
pub(crate) async fn run(
    server: &ServeArgs,
    pinned: bool,
    capacity: f64,
    args: &ClassesArgs,
) -> Result<Spike, BoxError> {
    let seconds = |s: u64| Duration::from_secs(s);
    let critical = args.critical * capacity;
    let sheddable = (BASE - args.critical).max(0.0) * capacity;
    let traces = [
        Some(Trace::constant(critical, seconds(BEFORE + DURING + AFTER))?),
        Some(
            Trace::builder()
                .constant(sheddable, seconds(BEFORE))
                .constant(args.spike * sheddable, seconds(DURING))
                .constant(sheddable, seconds(AFTER))
                .build()?,
        ),
    ];
    let offered = mix::offer(server, pinned, traces, args.run.deadline()).await?;
    let during = BEFORE as usize..(BEFORE + DURING) as usize;
    let (start, end) = (BEFORE as f64, (BEFORE + DURING) as f64);
    let per_second = |report: &admit_loadgen::Report| -> Vec<(f64, f64)> {
        report
            .seconds
            .iter()
            .enumerate()
            .map(|(second, tally)| (second as f64 + 0.5 - start, tally.ok as f64 / capacity))
            .collect()
    };
    Ok(Spike {
        factor: args.spike,
        peak_load: (critical + args.spike * sheddable) / capacity,
        critical: ClassFigures::of(&offered.critical.total, (BEFORE + DURING + AFTER) as f64),
        critical_during: ClassFigures::of(&offered.critical.span(during.clone()), DURING as f64),
        sheddable_during: ClassFigures::of(&offered.sheddable.span(during), DURING as f64),
        cut_settle_up_s: settle(&offered.cuts, start, end),
        cut_settle_down_s: settle(&offered.cuts, end, f64::INFINITY),
        cut: offered
            .cuts
            .iter()
            .map(|&(at, cut)| (at - start, cut.map_or(0.0, |c| 1.0 + c.index() as f64)))
            .collect(),
        critical_goodput: per_second(&offered.critical),
        sheddable_goodput: per_second(&offered.sheddable),
    })
}

/// From `from` until the cut, read at the times of `cuts`, holds its last value before
/// `until` to the end, s: the time of the first reading that holds it; none without a reading
/// in the span.
fn settle(cuts: &[(f64, Option<Criticality>)], from: f64, until: f64) -> Option<f64> {
    let span: Vec<_> = cuts
        .iter()
        .filter(|&&(at, _)| at >= from && at < until)
        .collect();
    let &&(_, last) = span.last()?;
    let held = span
        .iter()
        .rposition(|&&(_, cut)| cut != last)
        .map_or(0, |changed| changed + 1);
    Some(span[held].0 - from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_settles_when_it_last_reaches_its_final_value() {
        let sheddable = Some(Criticality::Sheddable);
        let cuts = [
            (0.0, None),
            (1.0, None),
            (1.1, sheddable),
            (1.2, None),
            (1.3, sheddable),
            (1.4, sheddable),
            (2.0, None),
            (2.5, None),
        ];
        assert_eq!(settle(&cuts, 1.0, 2.0), Some(1.3 - 1.0));
        // Held from the first reading.
        assert_eq!(settle(&cuts, 2.0, f64::INFINITY), Some(0.0));
        assert_eq!(settle(&cuts, 1.25, 2.0), Some(1.3 - 1.25));
        assert_eq!(settle(&cuts, 3.0, 4.0), None);
    }
}
