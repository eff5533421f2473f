//! `admit-scaler`: the KEDA external scaler (`serve`) and its offline tools for operators
//! (`check`, `plan`, `replay`). `admit-scaler help <command>` documents every flag.

#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
