//! `admit-scaler check`: every external trigger's metadata, validated as the scaler would.

use std::collections::BTreeMap;
use std::process::ExitCode;

use admit_scaler::excerpt::excerpt;
use admit_scaler::metadata::{DEFAULT_METRIC_NAME, ScalerConfig};
use clap::Args;

use super::input::{self, TriggerArgs};

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    trigger: TriggerArgs,
}

pub(crate) fn main(args: CheckArgs) -> ExitCode {
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
                "{}: {} reads the environment variable {}, which --env does not set: KEDA \
                 drops the key when the variable is unset or empty",
                trigger.label,
                excerpt(key),
                excerpt(variable)
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
    valid &= no_shared_keys(&triggers);
    if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Reports triggers that share a namespace, ScaledObject name and metric name: the same object
/// applied twice (the last one wins), or two triggers of one object that KEDA refuses. `true`
/// if there are none.
fn no_shared_keys(triggers: &[input::Source]) -> bool {
    let mut by_key: BTreeMap<(&str, &str, &str), Vec<&str>> = BTreeMap::new();
    for trigger in triggers.iter().filter(|trigger| trigger.from_manifest) {
        let metric = ["metricName", "metricNameFromEnv"]
            .iter()
            .find_map(|key| trigger.metadata.get(*key))
            .map_or(DEFAULT_METRIC_NAME, String::as_str);
        let namespace = trigger.namespace.as_deref().unwrap_or("<namespace>");
        by_key
            .entry((namespace, &trigger.name, metric))
            .or_default()
            .push(&trigger.label);
    }
    let mut unique = true;
    for ((namespace, name, metric), labels) in by_key {
        if labels.len() > 1 {
            unique = false;
            println!(
                "{}/{} metric \"{}\" is named by {} triggers: {}; \
                 the last one applied replaces the others, and KEDA refuses one ScaledObject \
                 with two metrics of one name",
                excerpt(namespace),
                excerpt(name),
                excerpt(metric),
                labels.len(),
                labels.join(", ")
            );
        }
    }
    unique
}
