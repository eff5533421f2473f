//! `admit-cluster run`: every policy over the same load trace, one after another, each with its
//! own proxy, Prometheus, scaler and replicas; then the comparison.
//!
//! Every period of the controllers and the replicas (HPA sync, scale-down window, scrape
//! interval, rate windows, pod start, propagation and grace, the replicas' cold phase) is
//! divided by the time-compression factor; the trace is already in compressed time. CPU work
//! per request is not compressed.

mod one;
mod scaler;
mod sessions;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use admit_loadgen::{Segment, Trace};
use admit_testkit::haproxy;

pub use self::one::{PolicyRun, Reconcile, ScalerInputs, Second, lost};
pub use self::sessions::SessionCounts;
use crate::fleet::ScaleIn;
use crate::policy::{Kind, window};
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
}

/// `admit-cluster run`'s flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The policies to compare, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "admit,cpu,concurrency,fixed,queue-time,sessions"
    )]
    pub policies: Vec<Kind>,
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

/// How the proxy picks a replica for each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each replica in turn (HAProxy's `roundrobin`, its default): a queue per replica.
    RoundRobin,
    /// The replica with the fewest connections (HAProxy's `leastconn`): closer to one queue for
    /// the fleet, Erlang C's model.
    LeastConn,
}

impl From<Balance> for haproxy::Balance {
    fn from(balance: Balance) -> Self {
        match balance {
            Balance::RoundRobin => haproxy::Balance::RoundRobin,
            Balance::LeastConn => haproxy::Balance::LeastConn,
        }
    }
}

/// What every policy's run shares.
#[derive(Debug, Clone)]
pub struct Setup {
    /// This executable, whose `replica` command the replicas run.
    pub binary: PathBuf,
    /// The `admit-scaler` executable.
    pub scaler: Option<PathBuf>,
    /// The time-compression factor.
    pub compression: f64,
    /// Each replica's quota, or none.
    pub cpus: Option<f64>,
    /// How the proxy balances.
    pub balance: Balance,
    /// The replicas' work.
    pub work_mean: Duration,
    /// Their distribution.
    pub distribution: Distribution,
    /// Their cold factor.
    pub cold_factor: f64,
    /// Their cold phase, compressed.
    pub cold: Duration,
    /// `burn` iterations per ms.
    pub iterations_per_ms: f64,
    /// Client deadline.
    pub deadline: Duration,
    /// Session clients.
    pub sessions: usize,
    /// Their mean session lifetime.
    pub session_lifetime: Duration,
    /// Replica bounds.
    pub min_replicas: u32,
    /// Replica bounds.
    pub max_replicas: u32,
    /// admit-scaler's target.
    pub wait_threshold: Duration,
    /// admit-scaler's target.
    pub target_sl: f64,
    /// Seed.
    pub seed: u64,
}

impl Setup {
    /// A replica's capacity once warm: its CPUs over the mean work.
    pub fn replica_capacity(&self) -> f64 {
        self.cpus.unwrap_or(1.0) / self.work_mean.as_secs_f64()
    }

    /// `replica`'s flags, but its name, seed and SIGTERM behaviour.
    pub fn replica_args(&self) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let compressed = |d: Duration| d.div_f64(self.compression);
        vec![
            "--work-mean".to_owned(),
            format!("{}ms", self.work_mean.as_secs_f64() * 1e3),
            "--distribution".to_owned(),
            clap::ValueEnum::to_possible_value(&self.distribution)
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default(),
            "--cold-factor".to_owned(),
            self.cold_factor.to_string(),
            "--cold".to_owned(),
            ms(self.cold),
            "--iterations-per-ms".to_owned(),
            format!("{:.0}", self.iterations_per_ms),
            "--capacity".to_owned(),
            format!("{:.3}", self.replica_capacity()),
            "--drain-delay".to_owned(),
            ms(compressed(Duration::from_secs(5))),
            "--drain-deadline".to_owned(),
            ms(compressed(Duration::from_secs(25))),
            "--reconnect-spread".to_owned(),
            ms(compressed(Duration::from_secs(10))),
        ]
    }

    /// A PromQL rate window of one minute, compressed.
    fn minute(&self) -> String {
        window(Duration::from_secs(60), self.compression)
    }

    /// admit-scaler's metadata: the queries of `deploy/README.md` for a CPU-bound service over
    /// `prometheus`.
    pub fn admit_metadata(&self, prometheus: &str) -> BTreeMap<String, String> {
        let w = self.minute();
        [
            ("scalerAddress", "admit-scaler:6000".to_owned()),
            ("prometheusURL", prometheus.to_owned()),
            // Every arrival once, at whichever admit layer saw it first (here the drain's).
            (
                "arrivalRateQuery",
                format!("sum(irate(admit_offered_requests_total[{w}]))"),
            ),
            // The handler is CPU-bound: s is CPU time per request over a server's CPUs (one
            // server per replica), as `deploy/README.md` says for such services.
            (
                "serviceTimeQuery",
                format!(
                    "sum(rate(container_cpu_usage_seconds_total{{job=\"cadvisor\"}}[{w}])) / \
                     sum(rate(admit_shed_requests_total{{limiter=\"work\",outcome!=\"dropped\"}}[{w}])) / {}",
                    self.cpus.unwrap_or(1.0)
                ),
            ),
            (
                "waitThresholdSeconds",
                self.wait_threshold.as_secs_f64().to_string(),
            ),
            ("targetSL", self.target_sl.to_string()),
            ("minReplicas", self.min_replicas.to_string()),
            ("maxReplicas", self.max_replicas.to_string()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    /// A KEDA Prometheus trigger's query and threshold for `kind`.
    pub fn prometheus_trigger(&self, kind: Kind) -> (String, f64) {
        let w = self.minute();
        match kind {
            Kind::Concurrency => (
                "sum(admit_shed_requests_in_flight{limiter=\"work\"})".to_owned(),
                100.0,
            ),
            Kind::QueueTime => (
                format!(
                    "histogram_quantile(0.9, sum(rate(admit_queue_wait_seconds_bucket{{source=\"request\"}}[{w}])) by (le))"
                ),
                0.05,
            ),
            Kind::Sessions => (
                "sum(admit_active_sessions) / count(up{job=\"admit\"} == 1)".to_owned(),
                500.0,
            ),
            Kind::Admit | Kind::Cpu | Kind::Fixed => (String::new(), 1.0),
        }
    }

    /// The fixed policy's replicas: the trace's peak at 70 % of a replica's capacity.
    pub fn fixed_replicas(&self, trace: &Trace) -> u32 {
        let peak = trace
            .segments()
            .iter()
            .map(|segment| match *segment {
                Segment::Constant { rate, .. } => rate,
                Segment::Ramp { from, to, .. } => from.max(to),
            })
            .fold(0.0, f64::max);
        ((peak / (0.7 * self.replica_capacity())).ceil() as u32)
            .clamp(self.min_replicas, self.max_replicas)
    }
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
    }
    .build()
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
    let setup = Setup {
        binary,
        scaler: args.scaler.clone().or_else(scaler::binary),
        compression: args.compression,
        cpus,
        balance: args.balance,
        work_mean: args.work_mean,
        distribution: args.distribution,
        cold_factor: args.cold_factor,
        cold: args.cold.div_f64(args.compression),
        iterations_per_ms: crate::replica::calibrate(),
        deadline: args.deadline,
        sessions: args.sessions,
        session_lifetime: args.session_lifetime,
        min_replicas: args.min_replicas,
        max_replicas: args.max_replicas,
        wait_threshold: args.wait_threshold,
        target_sl: args.target_sl,
        seed: args.seed,
    };
    let trace = trace(args.trace, args.base_rate)?;
    let mut runs = Vec::new();
    let mut plan: Vec<(Kind, ScaleIn)> = args
        .policies
        .iter()
        .map(|&kind| (kind, ScaleIn::Drain))
        .collect();
    plan.extend(
        args.scale_in_variants
            .iter()
            .filter(|&&variant| variant != ScaleIn::Drain)
            .map(|&variant| (Kind::Admit, variant)),
    );
    for (kind, scale_in) in plan {
        let idle_before = crate::report::idle_share_now();
        let run = one::run(&setup, kind, scale_in, &trace).await?;
        let idle = crate::report::idle_share_since(idle_before);
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
    Ok(())
}
