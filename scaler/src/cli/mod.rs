//! The command line: `serve` here, the operator's `check`, `plan` and `replay` in [`tools`].

mod duration;
mod prometheus;
mod serve;
mod tools;

use std::error::Error;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use self::serve::ServeArgs;
use self::tools::check::{self, CheckArgs};
use self::tools::plan::{self, PlanArgs};
use self::tools::replay::{self, ReplayArgs};

/// A KEDA external scaler that turns a wait-time service level into replicas with Erlang C.
///
/// It reads the arrival rate and the mean service time of a service from Prometheus, finds the
/// fewest servers for which "P(wait ≤ T) ≥ p" holds, and tells KEDA the replicas to run.
#[derive(Debug, Parser)]
#[command(name = "admit-scaler", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve KEDA's `externalscaler.ExternalScaler` gRPC service.
    Serve(ServeArgs),
    /// Validate the external triggers of ScaledObject manifests, without I/O.
    ///
    /// Exits 0 if every trigger is valid and no two share a namespace, name and metric, 1 if
    /// any is invalid (each problem names its key and raw value) or shares its key, 2 on a
    /// usage or manifest error.
    Check(CheckArgs),
    /// One evaluation against Prometheus: the inputs, the table around the answer, and the
    /// predicted service level.
    Plan(PlanArgs),
    /// What the scaler would have recommended over a past time range, step by step: a table,
    /// and optionally an SVG chart.
    Replay(ReplayArgs),
}

/// The errors that end a command, shown to the operator.
type BoxError = Box<dyn Error + Send + Sync>;

/// Runs the command line.
pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Check(args) => check::main(args),
        Command::Plan(args) => plan::main(args),
        Command::Replay(args) => replay::main(args),
    }
}
