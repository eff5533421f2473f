//! `admit-cluster`: admit's autoscaling loop on one machine. `admit-cluster help <command>`
//! documents every flag.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// admit's autoscaling loop on one machine, with real parts.
#[derive(Debug, Parser)]
#[command(name = "admit-cluster", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every policy over the same load trace, then the comparison: a table, JSON, a chart.
    Run(admit_cluster::run::RunArgs),
    /// The same comparison in a seeded simulation of the loop: any fleet size, in minutes.
    Simulate(admit_cluster::sim::SimulateArgs),
    /// The sample service one replica runs (the harness starts it).
    Replica(admit_cluster::replica::ReplicaArgs),
    /// Prints `burn` iterations per millisecond of CPU on this machine.
    Calibrate,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => admit_cluster::run::main(args),
        Command::Simulate(args) => admit_cluster::sim::main(args),
        Command::Replica(args) => admit_cluster::replica::main(args),
        Command::Calibrate => {
            println!("{:.0}", admit_cluster::replica::calibrate());
            ExitCode::SUCCESS
        }
    }
}
