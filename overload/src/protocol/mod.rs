//! The overload protocol: the curves of goodput and latency against offered load, a step and
//! a retry storm, for every policy, each point on a fresh server.

mod clients;
mod point;
mod report;
mod timeline;
mod transient;

use std::path::PathBuf;

use crate::policy::Policy;
use crate::run::RunArgs;
use crate::server::{ServeArgs, Style};
use crate::{BoxError, capacity, positive};
use admit_testkit::work::Distribution;

use self::clients::ClientStyle;
use self::report::{Curve, Curves, Protocol, Transients};

/// The overload protocol: goodput and latency of admitted requests from 0.5 to 10 × the
/// measured capacity, for each service-time distribution and work style; the response to a
/// step from 0.5 × to 4 ×; and a retry storm. Every policy in one run, each point on a fresh
/// server pinned to CPU 0.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct ProtocolArgs {
    /// Offered loads, as multiples of the capacity.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,1.4,2,4,10", value_parser = positive)]
    loads: Vec<f64>,
    /// Service-time distributions.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "exponential,bimodal"
    )]
    distributions: Vec<Distribution>,
    /// Where the handler works: on spawn_blocking, or inline in the async handler; io awaits
    /// 20 ms, then works inline (give it a smaller --work-ms, e.g. 0.2).
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "blocking,inline"
    )]
    styles: Vec<Style>,
    /// The policies (see the demo's --runs). tower:64 is the k of tower's own
    /// `ServiceBuilder` docs; the best k of --sweep joins them.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "unprotected,tower:64,little-loadshedder,tower-acc,go-zero,admit"
    )]
    peers: Vec<Policy>,
    /// The k of tower's pair to sweep, for each distribution and style, at --sweep-load; the
    /// one with the best goodput (then the lowest p99) joins the peers.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,128")]
    sweep: Vec<usize>,
    /// Sweep no k.
    #[arg(long)]
    no_sweep: bool,
    /// The offered load of the sweep, as a multiple of the capacity.
    #[arg(long, default_value_t = 4.0, value_parser = positive)]
    sweep_load: f64,
    /// Skip the step (0.5x to 4x), run for the first distribution and style.
    #[arg(long)]
    no_step: bool,
    /// Skip the retry storm, run for the first distribution and style.
    #[arg(long)]
    no_storm: bool,
    /// The storm's overloads, as multiples of the capacity.
    #[arg(long, value_delimiter = ',', default_value = "4", value_parser = positive)]
    storm_peaks: Vec<f64>,
    /// How the storm's clients retry: `immediate`, `backoff` (exponential, 50 ms to 1 s, full
    /// jitter), `admit` (admit's throttle, retry policy and budget, and deadline, with their
    /// defaults) or `admit:<s>` (the same, the throttle's window this long).
    #[arg(long, value_delimiter = ',', default_value = "immediate")]
    storm_clients: Vec<ClientStyle>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Where to write protocol.json and the charts.
    #[arg(long, default_value = "target/protocol")]
    out: PathBuf,
}

impl ProtocolArgs {
    fn server(
        &self,
        policy: Policy,
        distribution: Distribution,
        style: Style,
        burn: f64,
    ) -> ServeArgs {
        ServeArgs {
            policy,
            work_ms: self.run.work_ms,
            distribution,
            cold_ms: 0,
            cpu_horizon_ms: self.run.cpu_horizon_ms,
            style,
            iterations_per_ms: burn,
        }
    }

    /// The sweep's k, unless turned off.
    fn sweep(&self) -> &[usize] {
        if self.no_sweep { &[] } else { &self.sweep }
    }

    /// How long the whole protocol takes, roughly, s.
    fn estimate(&self) -> u64 {
        let point = self.run.point_seconds();
        let combos = (self.distributions.len() * self.styles.len()) as u64;
        let peers = self.peers.len() as u64 + u64::from(!self.sweep().is_empty());
        let curves =
            combos * (5 + point * (self.sweep().len() as u64 + peers * self.loads.len() as u64));
        let step = if self.no_step {
            0
        } else {
            transient::STEP_SECONDS * peers
        };
        let storm = if self.no_storm {
            0
        } else {
            let storms = (self.storm_peaks.len() * self.storm_clients.len()) as u64;
            transient::STORM_SECONDS * peers * storms
        };
        curves + step + storm
    }
}

/// Runs the protocol, the load generator pinned to CPU 1 if `pinned`.
pub(crate) async fn run(args: ProtocolArgs, pinned: bool, burn: f64) -> Result<(), BoxError> {
    if args.distributions.is_empty() || args.styles.is_empty() || args.peers.is_empty() {
        return Err("the protocol needs a distribution, a style and a policy".into());
    }
    if args.sweep().contains(&0) {
        return Err("--sweep: tower's k must be positive".into());
    }
    println!(
        "The overload protocol: about {} min{}.",
        args.estimate().div_ceil(60),
        if pinned {
            ", server on CPU 0, load generator on CPU 1"
        } else {
            ", not pinned"
        }
    );
    let schedule = args.run.schedule();
    let mut protocol = Protocol::new(&args);
    for &distribution in &args.distributions {
        for &style in &args.styles {
            let template = args.server(Policy::Unprotected, distribution, style, burn);
            let capacity = match args.run.capacity {
                Some(capacity) => capacity,
                None => capacity::measure(&template, pinned).await?,
            };
            println!(
                "\n=== {distribution:?} service times, work {style:?}: capacity {capacity:.0}/s ==="
            );
            let mut curves = Curves::new(distribution, style, capacity);
            for &k in args.sweep() {
                let server = ServeArgs {
                    policy: Policy::Tower(k),
                    ..template.clone()
                };
                let point =
                    point::run(&server, pinned, capacity, args.sweep_load, schedule).await?;
                println!("{}", report::line("sweep", Policy::Tower(k), &point));
                curves.sweep.push((k, point));
            }
            let mut peers = args.peers.clone();
            if let Some(best) = curves.best_k() {
                println!("Best k of the sweep at {}x: {best}", args.sweep_load);
                if !peers.contains(&Policy::Tower(best)) {
                    let admit = peers.iter().position(|&p| p == Policy::Admit);
                    peers.insert(admit.unwrap_or(peers.len()), Policy::Tower(best));
                }
            }
            for &policy in &peers {
                let server = ServeArgs {
                    policy,
                    ..template.clone()
                };
                let mut curve = Curve::new(policy);
                for &load in &args.loads {
                    let point = point::run(&server, pinned, capacity, load, schedule).await?;
                    println!("{}", report::line("point", policy, &point));
                    curve.points.push(point);
                }
                curves.curves.push(curve);
            }
            println!("{}", curves.table(&args.loads));
            protocol.curves.push(curves);
        }
    }
    if !(args.no_step && args.no_storm) {
        let first = &protocol.curves[0];
        let (distribution, style, capacity) = (first.distribution, first.style, first.capacity);
        let policies: Vec<Policy> = first.curves.iter().map(|curve| curve.policy).collect();
        let mut transients = Transients::new(distribution, style, capacity);
        println!(
            "\n=== Step {}x to {}x, and retry storm ===",
            transient::STEP_FROM,
            transient::STEP_TO
        );
        for policy in policies {
            let server = args.server(policy, distribution, style, burn);
            let step = if args.no_step {
                None
            } else {
                let step = transient::step(
                    &server,
                    pinned,
                    capacity,
                    args.run.deadline(),
                    server.latency_target().as_secs_f64(),
                )
                .await?;
                println!("{}", report::step_line(policy, &step));
                Some(step)
            };
            let mut storms = Vec::new();
            if !args.no_storm {
                for &peak in &args.storm_peaks {
                    for &clients in &args.storm_clients {
                        let storm = transient::storm(
                            &server,
                            pinned,
                            capacity,
                            args.run.deadline(),
                            peak,
                            clients,
                        )
                        .await?;
                        println!("{}", report::storm_line(policy, &storm));
                        storms.push(storm);
                    }
                }
            }
            transients.push(policy, step, storms);
        }
        protocol.transients = Some(transients);
    }
    protocol.write(&args.out)?;
    Ok(())
}
