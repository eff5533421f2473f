//! `admit-overload`: the overload demo and the overload protocol; see the `admit_overload`
//! crate.

fn main() -> std::process::ExitCode {
    admit_overload::main()
}
