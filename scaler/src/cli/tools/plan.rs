//! `admit-scaler plan`: one evaluation against Prometheus, printed with the table around it.

use std::process::ExitCode;

use admit_scaler::metadata::ScalerConfig;
use admit_scaler::prometheus::PrometheusClient;
use admit_scaler::tools::offline::{self, parse_time};
use clap::Args;
use http::Uri;

use super::input::{self, TriggerArgs};
use crate::cli::prometheus::{self, PrometheusArgs};

/// Chooses one trigger of a manifest.
#[derive(Debug, Args)]
pub(super) struct OneTriggerArgs {
    #[command(flatten)]
    trigger: TriggerArgs,
    /// Which external trigger of the file, as `NAME` (the ScaledObject) or `NAME/INDEX` (its
    /// index in `spec.triggers`); needed when the file has more than one.
    #[arg(long, value_name = "NAME[/INDEX]")]
    select: Option<String>,
    /// Query this Prometheus instead of the trigger's `prometheusURL` (e.g. a port-forward).
    #[arg(long, value_name = "URL")]
    prometheus_url: Option<Uri>,
    #[command(flatten)]
    prometheus: PrometheusArgs,
}

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    one: OneTriggerArgs,
    /// Evaluate at this time (Unix seconds or RFC 3339, e.g. 2026-11-23T10:00:00Z) instead of
    /// now.
    #[arg(long, value_name = "TIME")]
    time: Option<String>,
    /// Rows of the table on each side of the answer.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=100))]
    rows: u64,
}

pub(crate) fn main(args: PlanArgs) -> ExitCode {
    let time = match args.time.as_deref().map(parse_time).transpose() {
        Ok(time) => time,
        Err(error) => return usage("plan", &format!("--time: {error}")),
    };
    let (config, base, client) = match prepare(&args.one) {
        Ok(prepared) => prepared,
        Err(error) => return usage("plan", &error),
    };
    let result = runtime().block_on(offline::plan(&client, &base, &config, time, args.rows));
    match result {
        Ok(plan) => {
            println!("{plan}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!(
                "admit-scaler plan: {} ({}): {error}",
                admit_scaler::telemetry::code_name(admit_scaler::service::code(&error)),
                error.kind()
            );
            ExitCode::FAILURE
        }
    }
}

/// The chosen trigger's configuration, the Prometheus to ask and a client.
pub(super) fn prepare(
    args: &OneTriggerArgs,
) -> Result<(ScalerConfig, Uri, PrometheusClient), String> {
    let source = input::one(&args.trigger, args.select.as_deref())?;
    let config = ScalerConfig::from_metadata(&source.metadata)
        .map_err(|error| format!("{}: invalid metadata:\n{error}", source.label))?;
    let base = args
        .prometheus_url
        .clone()
        .unwrap_or_else(|| config.prometheus_url.clone());
    // The same rule as `serve`: a URL outside the allow-list is never queried.
    let allow = prometheus::allow_list(&args.prometheus)?;
    if !allow.permits(&base) {
        return Err(format!(
            "Prometheus URL \"{}\" is outside --allow-prometheus ({allow})",
            admit_scaler::excerpt::excerpt(&base.to_string())
        ));
    }
    let options =
        prometheus::client_options(&args.prometheus).map_err(|error| error.to_string())?;
    Ok((config, base, PrometheusClient::new(options)))
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds")
}

pub(super) fn usage(command: &str, error: &str) -> ExitCode {
    eprintln!("admit-scaler {command}: {error}");
    ExitCode::from(2)
}
