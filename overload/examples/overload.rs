//! A real server under overload, with and without admit: the README's demo.
//!
//! ```text
//! cargo run --release --example overload
//! cargo run --release --example overload -- --help
//! cargo run --release --example overload -- protocol --help
//! ```
//!
//! The same program as the `admit-overload` binary; see the `admit_overload` crate.

fn main() -> std::process::ExitCode {
    admit_overload::main()
}
