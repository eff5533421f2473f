//! The `admit-scaler` binary.

fn main() {
    println!("admit-scaler: not wired yet");
}
