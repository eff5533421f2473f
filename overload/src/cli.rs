//! The command line: the demo by default, `protocol`, and the hidden `serve` that runs the
//! server in its child process.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::BoxError;
use crate::classes::ClassesArgs;
use crate::demo::DemoArgs;
use crate::process::pin_self_to_cpu;
use crate::protocol::ProtocolArgs;
use crate::server::{ServeArgs, serve};

/// A real server under overload: the demo (by default) and the overload protocol.
#[derive(Debug, Parser)]
#[command(name = "admit-overload", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    demo: DemoArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The overload protocol: goodput and latency from 0.5x to 10x capacity, a step and a
    /// retry storm, for every peer.
    Protocol(ProtocolArgs),
    /// Critical and sheddable requests together at 2x, 4x and 10x capacity and a spike of
    /// the sheddable class, for admit without and with classes.
    Classes(ClassesArgs),
    /// Runs the server under test (the child process).
    #[command(hide = true)]
    Serve(ServeArgs),
}

/// Parses the command line and runs what it asks for.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Serve(args)) => serve(&args),
        Some(Command::Protocol(args)) => drive(args.run.pin(), |pinned, burn| {
            crate::protocol::run(args, pinned, burn)
        }),
        Some(Command::Classes(args)) => drive(args.run.pin(), |pinned, burn| {
            crate::classes::run(args, pinned, burn)
        }),
        None => drive(!cli.demo.no_pin(), |pinned, burn| {
            crate::demo::run(cli.demo, pinned, burn)
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Pins this process to CPU 1 if asked (and possible), calibrates the work loop, and runs
/// `body` on a single-threaded runtime.
fn drive<F, Fut>(pin: bool, body: F) -> Result<(), BoxError>
where
    F: FnOnce(bool, f64) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let pinned = pin && pin_self_to_cpu(1);
    let burn_rate = admit_testkit::work::calibrate();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(body(pinned, burn_rate))
}
