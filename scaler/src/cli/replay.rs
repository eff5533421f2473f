//! `admit-scaler replay`: the recommendations over a past time range.

use std::fs;
use std::process::ExitCode;

use admit_scaler::offline::{self, parse_time};

use super::ReplayArgs;
use super::plan::{prepare, runtime, usage};

pub(super) fn main(args: ReplayArgs) -> ExitCode {
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
