//! How many workers (and replicas) a service needs to meet a wait-time target.
//!
//! ```text
//! cargo run --example capacity -- --rate 1200 --service-time 0.08 --wait 0.1 --target 0.95 --per-replica 8
//! ```
//!
//! Prints the answer and a staffing table around it. Run with `--help` for the options.

use std::process::ExitCode;

use admit::erlang::{ErlangError, MMc, QueueModel, Target};

const HELP: &str = "\
capacity: the fewest servers for a wait-time target (M/M/c, Erlang C)

USAGE:
    capacity --rate <per second> --service-time <seconds> --wait <seconds> --target <fraction>
             [--per-replica <servers>]

OPTIONS:
    --rate <n>          arrivals per second (λ), at least 0
    --service-time <s>  mean service time in seconds (1/μ), greater than 0
    --wait <s>          the wait bound in seconds, at least 0 (0: \"without waiting\")
    --target <p>        the fraction of arrivals to serve within --wait, in [0, 1)
    --per-replica <k>   servers (concurrent requests) per replica, to print replica counts
    -h, --help          this text

EXAMPLE:
    capacity --rate 1200 --service-time 0.08 --wait 0.1 --target 0.95 --per-replica 8
";

#[derive(Debug)]
struct Args {
    rate: f64,
    service_time: f64,
    wait: f64,
    target: f64,
    per_replica: Option<u64>,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut rate = None;
    let mut service_time = None;
    let mut wait = None;
    let mut target = None;
    let mut per_replica = None;
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<f64>()
                .map_err(|_| format!("{flag}: `{value}` is not a number"))
        };
        match flag.as_str() {
            "--rate" => rate = Some(number()?),
            "--service-time" => service_time = Some(number()?),
            "--wait" => wait = Some(number()?),
            "--target" => target = Some(number()?),
            "--per-replica" => {
                let k: u64 = value
                    .parse()
                    .map_err(|_| format!("--per-replica: `{value}` is not a whole number"))?;
                if k == 0 {
                    return Err("--per-replica must be at least 1".into());
                }
                per_replica = Some(k);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let missing = |name: &str| format!("{name} is required (see --help)");
    Ok(Some(Args {
        rate: rate.ok_or_else(|| missing("--rate"))?,
        service_time: service_time.ok_or_else(|| missing("--service-time"))?,
        wait: wait.ok_or_else(|| missing("--wait"))?,
        target: target.ok_or_else(|| missing("--target"))?,
        per_replica,
    }))
}

/// The command-line flag behind an input of the library.
fn flag(field: &str) -> &str {
    match field {
        "arrival_rate" => "--rate",
        "service_rate" => "--service-time",
        "within" => "--wait",
        "at_least" => "--target",
        other => other,
    }
}

/// Explains an error in the command line's own terms.
fn explain(err: ErlangError) -> String {
    match err {
        ErlangError::NonFinite {
            field: "service_rate",
        } => "--service-time is too small".into(),
        ErlangError::NonFinite { field } => format!("{} must be a finite number", flag(field)),
        ErlangError::Negative { field } => format!("{} must not be negative", flag(field)),
        ErlangError::NonPositiveRate { .. } => {
            "--service-time must be a positive, finite number of seconds".into()
        }
        ErlangError::OutOfRange {
            field: "offered_load",
            value,
        } => format!("--rate × --service-time is {value:e} erlangs: at most 1e12 are supported"),
        ErlangError::TargetOutOfRange { target } => {
            format!("--target {target} must be at least 0 and below 1")
        }
        other => other.to_string(),
    }
}

fn run(args: &Args) -> Result<(), ErlangError> {
    if !(args.service_time > 0.0 && args.service_time.is_finite()) {
        return Err(ErlangError::NonPositiveRate {
            field: "service_rate",
        });
    }
    let queue = MMc::new(args.rate, 1.0 / args.service_time)?;
    let target = Target::ServiceLevel {
        within: args.wait,
        at_least: args.target,
    };
    let servers = queue.min_servers(target)?;
    println!(
        "offered load: {:.3} erlangs ({} req/s × {} s)",
        queue.offered_load(),
        args.rate,
        args.service_time
    );
    println!(
        "{} of requests within {} s needs {servers} servers{}",
        args.target,
        args.wait,
        args.per_replica.map_or(String::new(), |k| format!(
            ", {} replicas of {k}",
            servers.div_ceil(k)
        ))
    );
    println!();
    println!(
        "{:>10}  {:>12}  {:>10}  {:>14}  {:>9}  {:>8}",
        "servers", "within wait", "P(wait)", "mean wait (s)", "occupancy", "replicas"
    );
    for c in servers.saturating_sub(3).max(1)..=servers + 3 {
        let Ok(staffed) = queue.with_servers(c) else {
            continue; // unstable: λ ≥ cμ
        };
        println!(
            "{:>10}  {:>11.4}%  {:>10.4}  {:>14.6}  {:>8.1}%  {:>8}{}",
            c,
            staffed.service_level(args.wait)? * 100.0,
            staffed.prob_wait(),
            staffed.mean_wait(),
            staffed.occupancy() * 100.0,
            args.per_replica
                .map_or("-".to_string(), |k| c.div_ceil(k).to_string()),
            if c == servers { "  ← answer" } else { "" }
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match parse(&args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", explain(err));
            ExitCode::from(2)
        }
    }
}
