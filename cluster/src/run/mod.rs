//! `admit-cluster run`: every policy over the same load trace, one after another, each with its
//! own proxy, Prometheus, scaler and replicas; then the comparison.
//!
//! Every period of the controllers and the replicas (HPA sync, scale-down window, scrape
//! interval, rate windows, pod start, propagation and grace, the replicas' cold phase) is
//! divided by the time-compression factor; the trace is already in compressed time. CPU work
//! per request is not compressed.

mod idle;
pub(crate) mod one;
mod scaler;
mod sessions;
pub(crate) mod setup;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use admit_loadgen::Trace;

pub use self::one::{PolicyRun, Reconcile, ScalerInputs, Second, lost};
pub use self::sessions::SessionCounts;
pub use self::setup::{Balance, Setup};
use crate::fleet::ScaleIn;
use crate::policy::{Kind, Policy};
use crate::replica::Distribution;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The traces a run can use, in compressed seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceKind {
    /// Base, ×4 for 40 s, base for 50 s (a scale-in).
    Step,
    /// Base, a ramp to ×4 over 40 s, held 10 s, base for 50 s.
    Ramp,
    /// Base, ×4 for 5 s, base for 40 s.
    Spike,
    /// The step, the ramp and the spike in a row.
    All,
    /// A short step for tests: base 10 s, ×4 for 20 s, base for 40 s.
    Short,
    /// The base alone for 180 s (30 minutes uncompressed): how often the replicas change
    /// under a steady load's noise.
    Steady,
    /// A day's shape in 240 s: a night at half the base, a morning rise to ×3, a midday dip
    /// to ×2.5, an evening peak at ×4, back to the night, each change a 30 s ramp.
    Diurnal,
    /// A flash crowd: 0.4 × base for 20 s, ten times that (×4 the base) within 1 s (10 s
    /// uncompressed), held 30 s, back for 50 s.
    Flash,
}

/// `admit-cluster run`'s flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The policies to compare, in order, each at its system's default or at a setting:
    /// `admit:50ms` (the wait threshold), `cpu:40` (percent), `concurrency:2` or
    /// `concurrency:derived` (per replica), `queue-time:25ms` (p90), `sessions:5` (per
    /// replica), `fixed:3` (replicas).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "admit,cpu,concurrency,fixed,queue-time,sessions"
    )]
    pub policies: Vec<Policy>,
    /// Run the frontier's sweep instead of `--policies`: every policy across the settings a
    /// team would try (`admit-cluster help run` lists them under `--policies`' syntax), with
    /// no scale-in variants.
    #[arg(long)]
    pub sweep: bool,
    /// The frontier chart: SLO attainment against replica-seconds, a line per policy.
    #[arg(long, value_name = "PATH", default_value = "target/frontier.svg")]
    pub frontier_svg: PathBuf,
    /// Scale-in variants run with admit-scaler besides its drain run: plain graceful
    /// shutdown on SIGTERM, and SIGKILL.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "graceful,kill"
    )]
    pub scale_in_variants: Vec<ScaleIn>,
    /// The load trace.
    #[arg(long, value_enum, default_value = "all")]
    pub trace: TraceKind,
    /// Every period of Kubernetes, KEDA and Prometheus is divided by this.
    #[arg(long, default_value_t = 10.0)]
    pub compression: f64,
    /// The base load, requests per second; steps go to four times it.
    #[arg(long, default_value_t = 40.0)]
    pub base_rate: f64,
    /// Each replica's CPU quota, in CPUs (its pod's CPU limit and request).
    #[arg(long, default_value_t = 0.25)]
    pub cpus: f64,
    /// Run replicas without CPU cgroups: less realistic (they share the machine freely), for
    /// machines where cgroups cannot be written.
    #[arg(long)]
    pub no_quota: bool,
    /// How the proxy picks a replica for each request.
    #[arg(long, value_enum, default_value = "round-robin")]
    pub balance: Balance,
    /// The mean CPU time of a request.
    #[arg(long, default_value = "5ms", value_parser = crate::duration::parse_positive)]
    pub work_mean: Duration,
    /// How service times are distributed.
    #[arg(long, value_enum, default_value = "exponential")]
    pub distribution: Distribution,
    /// How much dearer requests are at a replica's start.
    #[arg(long, default_value_t = 3.0)]
    pub cold_factor: f64,
    /// How long a replica is cold (uncompressed).
    #[arg(long, default_value = "30s", value_parser = crate::duration::parse)]
    pub cold: Duration,
    /// The SLO: a request is within it if answered 200 within this.
    #[arg(long, default_value = "100ms", value_parser = crate::duration::parse_positive)]
    pub slo: Duration,
    /// Clients give up on a request after this.
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse_positive)]
    pub deadline: Duration,
    /// Clients holding a session (a server-sent event stream) through the proxy.
    #[arg(long, default_value_t = 20)]
    pub sessions: usize,
    /// The mean lifetime of a session, exponentially distributed; a client opens the next one
    /// when it ends, so sessions spread over the replicas as users come and go.
    #[arg(long, default_value = "20s", value_parser = crate::duration::parse_positive)]
    pub session_lifetime: Duration,
    /// The fewest and most replicas.
    #[arg(long, default_value_t = 1)]
    pub min_replicas: u32,
    /// The most replicas.
    #[arg(long, default_value_t = 10)]
    pub max_replicas: u32,
    /// admit-scaler's target: P(wait ≤ this) ≥ --target-sl.
    #[arg(long, default_value = "50ms", value_parser = crate::duration::parse_positive)]
    pub wait_threshold: Duration,
    /// admit-scaler's service level.
    #[arg(long, default_value_t = 0.95)]
    pub target_sl: f64,
    /// admit-scaler reads λ as a point, not with its Poisson confidence
    /// (`arrivalRateWindowSeconds` unset).
    #[arg(long)]
    pub no_confidence: bool,
    /// Each replica bounds its work in service with admit's `BoundLayer` (`replica --bound`).
    /// The simulator does not model the bound.
    #[arg(long)]
    pub replica_bound: bool,
    /// Seeds the arrivals and the service times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The summary as JSON.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// The chart.
    #[arg(long, value_name = "PATH", default_value = "target/cluster.svg")]
    pub svg: PathBuf,
    /// The `admit-scaler` binary (default: `ADMIT_SCALER`, or beside this one).
    #[arg(long, value_name = "PATH")]
    pub scaler: Option<PathBuf>,
}

/// The trace `kind` around `base` requests per second, in compressed seconds.
pub fn trace(kind: TraceKind, base: f64) -> Result<Trace, admit_loadgen::TraceError> {
    let s = Duration::from_secs;
    let peak = 4.0 * base;
    let builder = Trace::builder().constant(base, s(20));
    let step = |b: admit_loadgen::TraceBuilder| b.constant(peak, s(40)).constant(base, s(50));
    let ramp = |b: admit_loadgen::TraceBuilder| {
        b.ramp(base, peak, s(40))
            .constant(peak, s(10))
            .constant(base, s(50))
    };
    let spike = |b: admit_loadgen::TraceBuilder| b.constant(peak, s(5)).constant(base, s(40));
    match kind {
        TraceKind::Step => step(builder),
        TraceKind::Ramp => ramp(builder),
        TraceKind::Spike => spike(builder),
        TraceKind::All => spike(ramp(step(builder))),
        TraceKind::Short => Trace::builder()
            .constant(base, s(10))
            .constant(peak, s(20))
            .constant(base, s(40)),
        TraceKind::Steady => Trace::builder().constant(base, s(180)),
        TraceKind::Diurnal => Trace::builder()
            .constant(0.5 * base, s(20))
            .ramp(0.5 * base, 3.0 * base, s(30))
            .constant(3.0 * base, s(20))
            .ramp(3.0 * base, 2.5 * base, s(30))
            .constant(2.5 * base, s(20))
            .ramp(2.5 * base, peak, s(30))
            .constant(peak, s(30))
            .ramp(peak, 0.5 * base, s(30))
            .constant(0.5 * base, s(30)),
        TraceKind::Flash => Trace::builder()
            .constant(0.4 * base, s(20))
            .ramp(0.4 * base, peak, s(1))
            .constant(peak, s(30))
            .constant(0.4 * base, s(50)),
    }
    .build()
}

/// The setup `args` describe, with this executable `binary`, each replica's quota `cpus`
/// (none: no cgroups) and `burn`'s `iterations_per_ms`.
pub fn setup(args: &RunArgs, binary: PathBuf, cpus: Option<f64>, iterations_per_ms: f64) -> Setup {
    Setup {
        binary,
        scaler: args.scaler.clone().or_else(scaler::binary),
        compression: args.compression,
        cpus,
        balance: args.balance,
        work_mean: args.work_mean,
        distribution: args.distribution,
        cold_factor: args.cold_factor,
        cold: args.cold.div_f64(args.compression),
        iterations_per_ms,
        deadline: args.deadline,
        sessions: args.sessions,
        session_lifetime: args.session_lifetime,
        min_replicas: args.min_replicas,
        max_replicas: args.max_replicas,
        wait_threshold: args.wait_threshold,
        target_sl: args.target_sl,
        confidence: !args.no_confidence,
        bound: args.replica_bound,
        seed: args.seed,
    }
}

/// The policies `args` name: `--policies`, or the sweep's.
///
/// # Errors
///
/// A sweep entry that does not parse (a bug in [`Policy::SWEEP`]).
pub fn policies(args: &RunArgs) -> Result<Vec<Policy>, String> {
    if args.sweep {
        Policy::SWEEP
            .split(',')
            .map(|raw| raw.trim().parse())
            .collect()
    } else {
        Ok(args.policies.clone())
    }
}

/// Runs the comparison.
pub fn main(args: RunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("admit-cluster: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(compare(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("admit-cluster: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn compare(args: RunArgs) -> Result<(), BoxError> {
    let binary = std::env::current_exe()?;
    let cpus = if args.no_quota {
        None
    } else {
        // Fail early, with how to run without.
        admit_testkit::cgroup::Cgroup::cpu("admit-cluster-probe", args.cpus).map_err(|why| {
            format!(
                "cannot make a CPU cgroup ({why}): run as root on Linux with a writable cgroup \
                 hierarchy, or pass --no-quota (less realistic: replicas then share the \
                 machine's CPUs freely)"
            )
        })?;
        Some(args.cpus)
    };
    let setup = setup(&args, binary, cpus, crate::replica::calibrate());
    let trace = trace(args.trace, args.base_rate)?;
    let mut runs = Vec::new();
    let policies = policies(&args)?;
    let mut plan: Vec<(Policy, ScaleIn)> = policies
        .iter()
        .map(|&policy| (policy, ScaleIn::Drain))
        .collect();
    if !args.sweep {
        plan.extend(
            args.scale_in_variants
                .iter()
                .filter(|&&variant| variant != ScaleIn::Drain)
                .map(|&variant| (Policy::default_of(Kind::Admit), variant)),
        );
    }
    for (policy, scale_in) in plan {
        let idle_before = idle::idle_share_now();
        let run = one::run(&setup, policy, scale_in, &trace).await?;
        let idle = idle::idle_share_since(idle_before);
        runs.push((run, idle));
    }
    let report = crate::report::Report::new(&setup, &trace, args.slo, runs);
    println!("{}", report.table());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("JSON: {}", path.display());
    }
    crate::report::chart(&report, &args.svg)?;
    println!("chart: {}", args.svg.display());
    println!("{}", report.frontier.table());
    report.frontier.chart(&args.frontier_svg)?;
    println!("frontier: {}", args.frontier_svg.display());
    Ok(())
}
