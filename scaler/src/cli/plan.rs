//! `admit-scaler plan`: one evaluation against Prometheus, printed with the table around it.

use std::process::ExitCode;

use admit_scaler::metadata::ScalerConfig;
use admit_scaler::offline::{self, parse_time};
use admit_scaler::prometheus::PrometheusClient;
use http::Uri;

use super::{OneTriggerArgs, PlanArgs, input, serve};

pub(super) fn main(args: PlanArgs) -> ExitCode {
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
                admit_scaler::telemetry::code_name(error.code()),
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
    let allow = serve::allow_list(&args.prometheus)?;
    if !allow.permits(&base) {
        return Err(format!(
            "Prometheus URL \"{}\" is outside --allow-prometheus ({allow})",
            admit_scaler::excerpt::excerpt(&base.to_string())
        ));
    }
    let options = serve::client_options(&args.prometheus).map_err(|error| error.to_string())?;
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
