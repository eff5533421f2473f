//! The criticality run: the critical class at a fixed rate (0.2 × the capacity), the sheddable
//! class filling the load to 2, 4 and 10 × the capacity, and a spike of the sheddable class
//! alone, for admit without and with classes, each run on a fresh server.

mod mix;
mod report;
mod spike;

use std::path::PathBuf;

use admit_testkit::work::Distribution;

use self::mix::Mix;
use self::report::{Classes, PolicyRuns, Report};
use crate::policy::Policy;
use crate::run::RunArgs;
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
    /// The critical requests' rate, as a multiple of the capacity: the same at every load, so
    /// that it always fits; the sheddable class fills the rest of each load.
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
    /// Where the handler works: on spawn_blocking, or inline in the async handler.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "blocking,inline"
    )]
    styles: Vec<Style>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
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
    fn server(&self, policy: Policy, style: Style, burn: f64) -> ServeArgs {
        ServeArgs {
            policy,
            work_ms: self.run.work_ms,
            distribution: Distribution::Exponential,
            cold_ms: 0,
            cpu_horizon_ms: self.run.cpu_horizon_ms,
            style,
            iterations_per_ms: burn,
        }
    }

    /// How long the run takes, roughly, s.
    fn estimate(&self) -> u64 {
        let point = self.run.point_seconds();
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
    let capacity = match args.run.capacity {
        Some(capacity) => capacity,
        None => capacity::measure(&template, pinned).await?,
    };
    println!("\n=== work {style:?}: capacity {capacity:.0}/s ===");
    let schedule = args.run.schedule();
    // The critical class alone at its rate: the latency it has uncontended.
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
                critical: args.critical,
                sheddable: (load - args.critical).max(0.0),
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
