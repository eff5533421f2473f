//! The criticality run: critical and sheddable requests together at 2, 4 and 10 × the
//! capacity, and a spike of the sheddable class alone, for admit without and with classes,
//! each run on a fresh server.

mod mix;
mod report;
mod spike;

use std::path::PathBuf;
use std::time::Duration;

use admit_testkit::work::Distribution;

use self::mix::Mix;
use self::report::{Classes, PolicyRuns, Report};
use crate::policy::Policy;
use crate::server::{ServeArgs, Style};
use crate::{BoxError, capacity, positive};

/// Critical and sheddable requests on one server: each class's availability and latency at
/// 2, 4 and 10 × the capacity, then a spike of the sheddable class alone and how fast the
/// shedder's cut settles, for admit without and with classes.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct ClassesArgs {
    /// Offered loads, as multiples of the capacity.
    #[arg(long, value_delimiter = ',', default_value = "2,4,10", value_parser = positive)]
    loads: Vec<f64>,
    /// The critical requests' share of every load (the others are sheddable).
    #[arg(long, default_value_t = 0.2, value_parser = share)]
    critical: f64,
    /// The spike: the sheddable class at this many times its rate, from 0.8 × capacity.
    #[arg(long, default_value_t = 12.0, value_parser = positive)]
    spike: f64,
    /// Skip the spike.
    #[arg(long)]
    no_spike: bool,
    /// The policies compared.
    #[arg(long, value_delimiter = ',', default_value = "admit,admit-classes")]
    policies: Vec<Policy>,
    /// Seconds of load before each point is measured.
    #[arg(long, default_value_t = 2)]
    warm_seconds: u64,
    /// Seconds measured at each point.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..))]
    measured_seconds: u64,
    /// Where the handler works: on spawn_blocking, or inline in the async handler.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "blocking,inline"
    )]
    styles: Vec<Style>,
    /// Mean CPU work per request, ms.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    work_ms: f64,
    /// The client gives up after this long, ms.
    #[arg(long, default_value_t = 500.0, value_parser = positive)]
    deadline_ms: f64,
    /// Time constant of admit's CPU smoothing, ms.
    #[arg(long, default_value_t = 1000)]
    cpu_horizon_ms: u64,
    /// The server's capacity in requests/s, instead of measuring it.
    #[arg(long, value_parser = positive)]
    capacity: Option<f64>,
    /// Do not pin the server and the load generator to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Where to write classes.json and the chart.
    #[arg(long, default_value = "target/classes")]
    out: PathBuf,
}

/// A share strictly between 0 and 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err(format!("`{text}` is not a share between 0 and 1")),
    }
}

impl ClassesArgs {
    /// Whether to pin the server and the load generator to CPUs.
    pub(crate) fn pin(&self) -> bool {
        !self.no_pin
    }

    fn deadline(&self) -> Duration {
        Duration::from_secs_f64(self.deadline_ms / 1e3)
    }

    fn server(&self, policy: Policy, style: Style, burn: f64) -> ServeArgs {
        ServeArgs {
            policy,
            work_ms: self.work_ms,
            distribution: Distribution::Exponential,
            cold_ms: 0,
            cpu_horizon_ms: self.cpu_horizon_ms,
            style,
            iterations_per_ms: burn,
        }
    }

    /// How long the run takes, roughly, s.
    fn estimate(&self) -> u64 {
        let point = self.warm_seconds + self.measured_seconds + 1;
        let policies = self.policies.len() as u64;
        let spike = if self.no_spike { 0 } else { spike::SECONDS };
        let style = 5 + point * (1 + policies * self.loads.len() as u64) + policies * spike;
        style * self.styles.len() as u64
    }
}

/// Runs the criticality run, the load generator pinned to CPU 1 if `pinned`.
pub(crate) async fn run(args: ClassesArgs, pinned: bool, burn: f64) -> Result<(), BoxError> {
    if args.policies.is_empty() || args.loads.is_empty() || args.styles.is_empty() {
        return Err("the run needs a policy, a load and a style".into());
    }
    println!(
        "Critical and sheddable requests: about {} min{}.",
        args.estimate().div_ceil(60),
        if pinned {
            ", server on CPU 0, load generator on CPU 1"
        } else {
            ", not pinned"
        }
    );
    let mut report = Report::new(&args);
    for &style in &args.styles {
        let classes = run_style(&args, style, pinned, burn).await?;
        println!("\n{}", classes.table());
        report.styles.push(classes);
    }
    report.write(&args.out)?;
    Ok(())
}

/// The run with the handler working as `style` says.
async fn run_style(
    args: &ClassesArgs,
    style: Style,
    pinned: bool,
    burn: f64,
) -> Result<Classes, BoxError> {
    let template = args.server(Policy::Unprotected, style, burn);
    let capacity = match args.capacity {
        Some(capacity) => capacity,
        None => capacity::measure(&template, pinned).await?,
    };
    println!("\n=== work {style:?}: capacity {capacity:.0}/s ===");
    let schedule = mix::Schedule {
        warm: args.warm_seconds,
        measured: args.measured_seconds,
        deadline: args.deadline(),
    };
    // The critical class alone at its rate at 1 × capacity: the latency it has uncontended.
    let classed = args.server(Policy::AdmitClasses, style, burn);
    let alone = Mix {
        critical: args.critical,
        sheddable: 0.0,
    };
    let uncontended = mix::run(&classed, pinned, capacity, alone, schedule).await?;
    println!("{}", report::line("uncontended", &uncontended));
    let mut classes = Classes::new(style, capacity, uncontended);
    for &policy in &args.policies {
        let server = args.server(policy, style, burn);
        let mut runs = PolicyRuns::new(policy);
        for &load in &args.loads {
            let mix = Mix {
                critical: args.critical * load,
                sheddable: (1.0 - args.critical) * load,
            };
            let point = mix::run(&server, pinned, capacity, mix, schedule).await?;
            println!("{}", report::line(&policy.label(), &point));
            runs.points.push(point);
        }
        if !args.no_spike {
            let spike = spike::run(&server, pinned, capacity, args).await?;
            println!("{}", report::spike_line(&policy.label(), &spike));
            runs.spike = Some(spike);
        }
        classes.runs.push(runs);
    }
    Ok(classes)
}
