//! `admit-cluster simulate`: the autoscaling loop as a deterministic, seeded discrete-event
//! simulation, for fleets and loads one machine cannot run.
//!
//! What it keeps of the real loop:
//!
//! - the load: the same trace and the same Poisson arrivals for a seed, open loop, each
//!   client giving up at its deadline;
//! - the proxy: round-robin or fewest requests over the replicas it has been told of;
//! - each replica: admit's own [`WarmUp`](admit::warmup::WarmUp) and
//!   [`Shedder`](admit::shed::Shedder) on the simulation's clock (the shedder's CPU signal
//!   sampled and smoothed as the system sampler does, its queue gate fed each request's wait),
//!   the same service times and cold cost, processor sharing among the requests in service
//!   on at most `--cores`, and the CFS quota's throttling per 100 ms period, during which the
//!   replica's runtime cannot take requests either;
//! - Prometheus: scrapes at the compressed interval (a throttled replica answers when its
//!   period ends), new replicas scraped only after the discovery manager's 5 s update,
//!   cAdvisor's CPU series for every pod, and the harness's queries evaluated by their meaning
//!   (`rate` extrapolated as Prometheus does, `irate`, `histogram_quantile`);
//! - the controllers: admit-scaler's own decisions, the HPA's arithmetic
//!   ([`crate::hpa`]) at its sync period, metrics-server's CPU readings;
//! - the pods: the start delay, the drain (served for the drain delay, off the proxy after the
//!   propagation delay, gone when empty or at the deadline).
//!
//! What it leaves out: the machine's own contention (the replicas and the parts share two
//! cores in the real loop), the network but for a fixed latency (`--proxy-latency`), and the
//! sessions' connections (the sessions policy reads a constant count spread over the replicas
//! up).

mod calibration;
mod control;
mod cpu;
mod pods;
mod replica;
mod scrape;
mod trace_file;
mod traffic;
mod world;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use admit_loadgen::Trace;

use crate::policy::{Kind, Policy, Setting};
use crate::report::Report;
use crate::run::{RunArgs, Setup};

pub use self::trace_file::{TraceFileError, read_trace};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `admit-cluster simulate`'s flags: `run`'s, and the simulation's own.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The loop's flags, as `run` takes them (the scale-in variants and the binaries aside).
    #[command(flatten)]
    pub run: RunArgs,
    /// Multiplies the base load, the fewest and most replicas, the sessions and the fixed
    /// fleets: `--scale 200` sizes the default trace's peak for a thousand replicas.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    pub scale: f64,
    /// The cores a replica's threads may run on at once (the machine's).
    #[arg(long, default_value_t = 2.0, value_parser = positive)]
    pub cores: f64,
    /// CPU each request costs a replica besides its work: its HTTP stack, runtime and layers
    /// (0.5 ms on the real loop: s measured 22.1 ms at a quarter CPU for 5 ms of work).
    #[arg(long, default_value = "0.5ms", value_parser = crate::duration::parse)]
    pub request_overhead: std::time::Duration,
    /// What the proxy, the network and the client add to every answer's latency (1.5 ms on
    /// the real loop: its median answer took 5.3 ms where the simulation's took 3.8 ms).
    #[arg(long, default_value = "1.5ms", value_parser = crate::duration::parse)]
    pub proxy_latency: std::time::Duration,
    /// The trace from a file instead: λ over time as Prometheus' `/api/v1/query_range`
    /// answers it (JSON, one series), linear between its points, its times divided by
    /// `--compression`.
    #[arg(long, value_name = "PATH")]
    pub trace_file: Option<PathBuf>,
    /// A real run's JSON (`admit-cluster run --json`): each of its drain runs beside the
    /// simulation's on SLO attainment (within 2 points) and replica-seconds (within 5 %);
    /// fails if one is outside.
    #[arg(long, value_name = "PATH")]
    pub against: Option<PathBuf>,
}

fn positive(raw: &str) -> Result<f64, String> {
    raw.parse::<f64>()
        .ok()
        .filter(|value| value.is_finite() && *value > 0.0)
        .ok_or_else(|| format!("{raw:?} is not a number above 0"))
}

/// Runs the simulation.
pub fn main(args: SimulateArgs) -> ExitCode {
    match simulate(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("admit-cluster: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Whether every run was within the calibration bounds (true without `--against`).
fn simulate(args: &SimulateArgs) -> Result<bool, BoxError> {
    let run = &args.run;
    if run.replica_bound {
        return Err("the simulator does not model the replicas' bound (--replica-bound)".into());
    }
    let binary = std::env::current_exe()?;
    let cpus = (!run.no_quota).then_some(run.cpus);
    let mut setup = crate::run::setup(run, binary, cpus, 0.0);
    setup.min_replicas = scaled(setup.min_replicas, args.scale);
    setup.max_replicas = scaled(setup.max_replicas, args.scale);
    setup.sessions = scaled(setup.sessions as u32, args.scale) as usize;
    let trace = match &args.trace_file {
        Some(path) => read_trace(path, run.compression, args.scale)?,
        None => crate::run::trace(run.trace, run.base_rate * args.scale)?,
    };
    let policies: Vec<Policy> = crate::run::policies(run)?
        .into_iter()
        .map(|policy| scale_policy(policy, args.scale))
        .collect();
    let world = world::World {
        periods: world::Periods::compressed(run.compression),
        cores: args.cores,
        overhead: args.request_overhead.as_secs_f64(),
        proxy_latency: args.proxy_latency.as_secs_f64(),
    };
    let started = Instant::now();
    let runs = run_all(&setup, world, &policies, &trace)?;
    let report = Report::new(&setup, &trace, run.slo, runs);
    println!("{}", report.table());
    println!(
        "simulated {} policies in {:.1} s",
        policies.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &run.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("JSON: {}", path.display());
    }
    crate::report::chart(&report, &run.svg)?;
    println!("chart: {}", run.svg.display());
    println!("{}", report.frontier.table());
    report.frontier.chart(&run.frontier_svg)?;
    println!("frontier: {}", run.frontier_svg.display());
    match &args.against {
        Some(path) => {
            let real: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
            let calibration = calibration::Calibration::new(&real, &report)?;
            println!("{}", calibration.table());
            Ok(calibration.within())
        }
        None => Ok(true),
    }
}

/// Every policy, on as many threads as the machine has, in order.
fn run_all(
    setup: &Setup,
    world: world::World,
    policies: &[Policy],
    trace: &Trace,
) -> Result<Vec<(crate::run::PolicyRun, Option<f64>)>, String> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<crate::run::PolicyRun, String>>> =
        (0..policies.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(policies.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&policy) = policies.get(i) else {
                        return;
                    };
                    let result = world::run(setup, world, policy, trace);
                    if let Ok(run) = &result {
                        println!(
                            "{:<24} simulated: {} requests, {} syncs",
                            run.name,
                            run.total.offered,
                            run.syncs.len()
                        );
                    }
                    slots
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(result);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|result| {
            let run = result.ok_or("a simulation thread ended early")??;
            Ok((run, None))
        })
        .collect()
}

fn scaled(count: u32, scale: f64) -> u32 {
    (f64::from(count) * scale)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// `policy` for a fleet `scale` times larger: fixed fleets grow with it; every other setting
/// is per replica or a time.
fn scale_policy(policy: Policy, scale: f64) -> Policy {
    match (policy.kind, policy.setting) {
        (Kind::Fixed, Setting::Value(replicas)) => Policy {
            setting: Setting::Value(f64::from(scaled(replicas as u32, scale))),
            ..policy
        },
        _ => policy,
    }
}
