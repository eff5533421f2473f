//! admit's overload benchmarks, on one machine with real parts: an axum server in a child
//! process pinned to one core, whose handler burns CPU, driven open-loop by `admit-loadgen`
//! from the other core.
//!
//! - **The demo** (`admit-overload`, or `cargo run --release --example overload`): one server
//!   through a cold start, normal load, an overload and recovery, unprotected and behind
//!   admit, with a line per second, a summary, JSON and a chart.
//! - **The protocol** (`admit-overload protocol`): the overload benchmark of the literature,
//!   against the Rust peers in one run. Goodput and the latency of admitted requests at 0.5 to
//!   10 × the measured capacity, with exponential and bimodal service times, work on
//!   `spawn_blocking` and inline; the response to a step from 0.5 × to 4 ×; and whether
//!   goodput comes back after a retry storm.
//! - **The classes** (`admit-overload classes`): critical requests at 0.2 × the capacity and
//!   sheddable ones filling the load to 2, 4 and 10 × the capacity, and a 12 × spike of the
//!   sheddable class alone, for admit without and with request classes and with the bound:
//!   each class's availability and latency, and how fast the shedder's cut settles.
//!
//! The policies compared: nothing; tower's `load_shed` + `concurrency_limit(k)` at the `k` of
//! tower's own `ServiceBuilder` docs (64) and at the best `k` of a sweep; `little-loadshedder`;
//! `tower-acc` (Vegas) behind `load_shed`; admit's shedder with the CPU signal alone (go-zero);
//! admit's defaults.

mod capacity;
mod chart;
mod classes;
mod cli;
mod demo;
mod policy;
mod process;
mod protocol;
mod run;
mod server;

use std::time::Duration;

pub use crate::cli::main;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A latency in ms with one decimal, or `-` without one.
fn ms(value: Option<Duration>) -> String {
    value.map_or_else(
        || "-".to_owned(),
        |d| format!("{:.1}", d.as_secs_f64() * 1e3),
    )
}

/// A positive, finite number, for the command line.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{text}` is not a positive number")),
    }
}

/// A value's name on the command line.
fn flag_value(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned())
}

/// The wall clock as a request-start header value, `t=<seconds>.<microseconds>`, as a proxy
/// in front of the server stamps it (Envoy's `t=%START_TIME(%s.%6f)%`).
fn request_start() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("t={}.{:06}", now.as_secs(), now.subsec_micros())
}
