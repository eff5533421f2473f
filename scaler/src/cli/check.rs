//! `admit-scaler check`: every external trigger's metadata, validated as the scaler would.

use std::process::ExitCode;

use admit_scaler::metadata::ScalerConfig;

use super::{CheckArgs, input};

pub(super) fn main(args: CheckArgs) -> ExitCode {
    let triggers = match input::triggers(&args.trigger) {
        Ok(triggers) => triggers,
        Err(error) => {
            eprintln!("admit-scaler check: {error}");
            return ExitCode::from(2);
        }
    };
    let mut valid = true;
    for trigger in &triggers {
        for (key, variable) in &trigger.unresolved {
            println!(
                "{}: {key} reads the environment variable {variable}, which --env does not set: \
                 KEDA drops the key when the variable is unset or empty",
                trigger.label
            );
        }
        // The scaler never reads it, but KEDA refuses an external trigger without it.
        if trigger.from_manifest && !trigger.metadata.contains_key("scalerAddress") {
            valid = false;
            println!(
                "{}: scalerAddress is missing: KEDA needs it to reach the scaler, e.g. \
                 admit-scaler.admit-system.svc:6000",
                trigger.label
            );
        }
        match ScalerConfig::from_metadata(&trigger.metadata) {
            Ok(config) => println!(
                "{}: ok: metric {:?}, P(wait ≤ {} s) ≥ {}, {} per replica, replicas {}..={}",
                trigger.label,
                config.metric_name,
                config.wait_threshold_seconds,
                config.target_sl,
                config.concurrency_per_replica,
                config.min_replicas,
                config.max_replicas
            ),
            Err(error) => {
                valid = false;
                println!("{}: invalid", trigger.label);
                for problem in error.problems() {
                    println!("  {problem}");
                }
            }
        }
    }
    if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
