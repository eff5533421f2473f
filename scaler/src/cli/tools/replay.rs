//! `admit-scaler replay`: the recommendations over a past time range.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use admit_scaler::tools::offline::{self, parse_time};
use clap::Args;

use super::plan::{OneTriggerArgs, prepare, runtime, usage};
use crate::cli::duration;

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    one: OneTriggerArgs,
    /// The first evaluation (Unix seconds or RFC 3339).
    #[arg(long, value_name = "TIME")]
    start: String,
    /// The last evaluation is at or before this time.
    #[arg(long, value_name = "TIME")]
    end: String,
    /// Time between evaluations.
    #[arg(long, default_value = "1m", value_parser = duration::between("1s", "7d"), value_name = "DURATION")]
    step: Duration,
    /// Also write an SVG chart of the recommendations to this file.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
}

pub(crate) fn main(args: ReplayArgs) -> ExitCode {
    let range = parse_time(&args.start)
        .map_err(|error| format!("--start: {error}"))
        .and_then(|start| {
            Ok((
                start,
                parse_time(&args.end).map_err(|error| format!("--end: {error}"))?,
            ))
        });
    let (start, end) = match range {
        Ok(range) => range,
        Err(error) => return usage("replay", &error),
    };
    let (config, base, client) = match prepare(&args.one) {
        Ok(prepared) => prepared,
        Err(error) => return usage("replay", &error),
    };
    let steps = match runtime().block_on(offline::replay(
        &client, &base, &config, start, end, args.step,
    )) {
        Ok(steps) => steps,
        Err(error) => return usage("replay", &error.to_string()),
    };
    print!("{}", offline::replay_table(&config, &steps));
    if let Some(path) = &args.svg {
        let svg = offline::replay_chart(&config, &steps).render_svg();
        if let Err(error) = fs::write(path, svg) {
            eprintln!("admit-scaler replay: --svg {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if steps.iter().any(|step| step.outcome.is_err()) {
        eprintln!(
            "admit-scaler replay: {} of {} evaluations failed (see the table)",
            steps.iter().filter(|step| step.outcome.is_err()).count(),
            steps.len()
        );
    }
    ExitCode::SUCCESS
}
