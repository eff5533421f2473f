//! The demo: one server through a cold start, normal load, an overload and recovery, once per
//! policy, with a line per second, a summary, JSON and a chart.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use admit_loadgen::{Driver, HttpClient, Report, Tally, Trace};
use bytes::Bytes;
use http::Uri;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

use crate::chart::{Axis, Panel, Series};
use crate::policy::Policy;
use crate::process::ServerProcess;
use crate::server::{ServeArgs, Style};
use crate::{BoxError, capacity, chart, ms, positive, request_start};
use admit_testkit::work::Distribution;

/// Runs a real HTTP server through a cold start, normal load, an overload and recovery, once
/// per policy (unprotected, then admit's warm-up layer and shedder), and compares them.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct DemoArgs {
    /// Mean CPU work per request, ms.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    work_ms: f64,
    /// The client gives up after this long, ms.
    #[arg(long, default_value_t = 500.0, value_parser = positive)]
    deadline_ms: f64,
    /// Cold-start phase, s.
    #[arg(long, default_value_t = 5)]
    cold: u64,
    /// Normal-load phase, s.
    #[arg(long, default_value_t = 6)]
    normal: u64,
    /// Overload phase, s.
    #[arg(long, default_value_t = 14)]
    overload: u64,
    /// Recovery phase, s.
    #[arg(long, default_value_t = 5)]
    recovery: u64,
    /// Normal load, as a multiple of capacity.
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    normal_load: f64,
    /// Overload, as a multiple of capacity.
    #[arg(long, default_value_t = 3.0, value_parser = positive)]
    overload_load: f64,
    /// Time constant of admit's CPU smoothing, ms (go-zero's is 5 s: the shedder would engage
    /// seconds into an overload, after a backlog has built up).
    #[arg(long, default_value_t = 1000)]
    cpu_horizon_ms: u64,
    /// The policies to run, in order: unprotected, admit, admit-cpu-wait (the handler reports
    /// its CPU wait), go-zero (admit with the CPU signal alone), tower:K (tower's load_shed +
    /// concurrency_limit(K)), little-loadshedder, tower-acc.
    #[arg(long, value_delimiter = ',', default_value = "unprotected,admit")]
    runs: Vec<Policy>,
    /// Do the work inside the async handler (the anti-pattern), not on spawn_blocking.
    #[arg(long)]
    inline: bool,
    /// Service times: exponential, or bimodal (90 % short, 10 % ten times longer).
    #[arg(long, value_enum, default_value_t = Distribution::Exponential)]
    distribution: Distribution,
    /// Do not pin the server and the load generator to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// The server's capacity in requests/s, instead of measuring it first.
    #[arg(long, value_parser = positive)]
    capacity: Option<f64>,
    /// Where to write the SVG chart of goodput and p99 per second.
    #[arg(long, default_value = "target/overload.svg")]
    chart: PathBuf,
    /// Also write the per-phase summary as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A phase of the run.
#[derive(Clone, Copy, Debug)]
struct Phase {
    name: &'static str,
    seconds: u64,
    /// Offered load as a multiple of the capacity.
    load: f64,
}

impl DemoArgs {
    /// Whether the server and the load generator stay unpinned.
    pub(crate) fn no_pin(&self) -> bool {
        self.no_pin
    }

    fn phases(&self) -> [Phase; 4] {
        let phase = |name, seconds, load| Phase {
            name,
            seconds,
            load,
        };
        [
            phase("cold start", self.cold, self.normal_load),
            phase("normal", self.normal, self.normal_load),
            phase("overload", self.overload, self.overload_load),
            phase("recovery", self.recovery, self.normal_load),
        ]
    }

    fn deadline(&self) -> Duration {
        Duration::from_secs_f64(self.deadline_ms / 1e3)
    }

    fn server(&self, policy: Policy, cold: bool, iterations_per_ms: f64) -> ServeArgs {
        ServeArgs {
            policy,
            work_ms: self.work_ms,
            distribution: self.distribution,
            cold_ms: if cold { self.cold.max(1) * 1000 } else { 0 },
            cpu_horizon_ms: self.cpu_horizon_ms,
            style: if self.inline {
                Style::Inline
            } else {
                Style::Blocking
            },
            iterations_per_ms,
        }
    }
}

/// One run's policy and what became of its requests, second by second.
#[derive(Debug)]
struct Run {
    policy: Policy,
    report: Report,
}

/// Runs the demo, the load generator pinned to CPU 1 if `pinned`.
pub(crate) async fn run(args: DemoArgs, pinned: bool, burn_rate: f64) -> Result<(), BoxError> {
    if args.phases().iter().all(|phase| phase.seconds == 0) {
        return Err("every phase is empty".into());
    }
    println!(
        "Server: one core{}, {:.1} ms of CPU work per request on average ({:?}) {}, {} ms client \
         deadline.",
        if pinned {
            " (pinned to CPU 0, load generator on CPU 1)"
        } else {
            " (not pinned: the load generator shares the machine's CPUs)"
        },
        args.work_ms,
        args.distribution,
        if args.inline {
            "done inline in the async handler"
        } else {
            "on spawn_blocking"
        },
        args.deadline().as_millis()
    );
    let capacity = match args.capacity {
        Some(capacity) => capacity,
        None => {
            let server = args.server(Policy::Unprotected, false, burn_rate);
            let capacity = capacity::measure(&server, pinned).await?;
            println!(
                "Capacity: {capacity:.0} requests/s, measured by keeping the unprotected server \
                 saturated for {} s (nominal {:.0}/s: HTTP costs the rest).",
                capacity::MEASURED.as_secs(),
                1000.0 / args.work_ms
            );
            capacity
        }
    };
    let plan: Vec<String> = args
        .phases()
        .iter()
        .map(|p| format!("{} {} s at {:.0}/s", p.name, p.seconds, p.load * capacity))
        .collect();
    println!("Phases: {}.", plan.join(", "));

    let mut runs = Vec::new();
    for &policy in &args.runs {
        println!("\n=== {} ===", policy.label());
        let server = ServerProcess::start(&args.server(policy, true, burn_rate), pinned)?;
        let report = load(&args, capacity, server.addr()).await?;
        drop(server);
        runs.push(Run { policy, report });
    }
    summarise(&args, capacity, &runs);
    if let Some(path) = &args.json {
        match write_json(&args, capacity, &runs, path) {
            Ok(()) => println!("\nSummary as JSON: {}", path.display()),
            Err(error) => println!("\nCould not write {}: {error}", path.display()),
        }
    }
    match write_chart(&args, &runs) {
        Ok(()) => println!(
            "\nChart of goodput and p99 latency: {}",
            args.chart.display()
        ),
        Err(error) => println!(
            "\nCould not write the chart to {}: {error}",
            args.chart.display()
        ),
    }
    Ok(())
}

/// The seed of the Poisson arrivals: every run gets the same ones.
const SEED: u64 = 0x0123_4567_89ab_cdef;

/// Drives the server at `addr` through the phases, open-loop, and prints a line per second.
async fn load(args: &DemoArgs, capacity: f64, addr: &str) -> Result<Report, BoxError> {
    let mut trace = Trace::builder();
    for phase in args.phases().iter().filter(|phase| phase.seconds > 0) {
        trace = trace.constant(phase.load * capacity, Duration::from_secs(phase.seconds));
    }
    let trace = trace.build()?;
    let total = trace.duration().as_secs() as usize;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let work: Uri = format!("http://{addr}/work").parse()?;
    let stats: Uri = format!("http://{addr}/stats").parse()?;

    println!(
        "{:>3}  {:<10}  {:>7}  {:>7}  {:>6}  {:>9}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}",
        "s",
        "phase",
        "offered",
        "goodput",
        "shed",
        "timed out",
        "p50 ms",
        "p99 ms",
        "in flight",
        "CPU ‰",
        "limit"
    );
    let start = tokio::time::Instant::now();
    // The server's view at the end of every second, in order.
    let (view_sender, mut views) = mpsc::unbounded_channel();
    let viewer = tokio::spawn(async move {
        for second in 0..total {
            tokio::time::sleep_until(start + Duration::from_secs(second as u64 + 1)).await;
            if view_sender
                .send(server_view(&client, &stats).await)
                .is_err()
            {
                break;
            }
        }
    });
    // A line per second, once every request due in it has an outcome and the server's view
    // of it is in.
    let (second_sender, mut seconds) = mpsc::unbounded_channel::<(usize, Tally)>();
    let printer = {
        let phases = args.phases();
        tokio::spawn(async move {
            while let Some((second, tally)) = seconds.recv().await {
                let view = views.recv().await.flatten();
                let phase = phase_at(&phases, second).name;
                println!("{}", live_line(second, phase, &tally, view.as_deref()));
            }
        })
    };
    let report = Driver::new(args.deadline())
        .run(
            &HttpClient::new(),
            trace.duration(),
            trace.arrivals(SEED),
            |_| {
                http::Request::get(work.clone())
                    .header("x-request-start", request_start())
                    .body(Empty::<Bytes>::new())
                    .expect("a GET of a parsed URI with an ASCII header")
            },
            move |second, tally| {
                let _ = second_sender.send((second, tally.clone()));
            },
        )
        .await;
    viewer.await?;
    printer.await?;
    Ok(report)
}

fn phase_at(phases: &[Phase], second: usize) -> Phase {
    let mut start = 0;
    for phase in phases {
        start += phase.seconds as usize;
        if second < start {
            return *phase;
        }
    }
    phases[phases.len() - 1]
}

async fn server_view(client: &Client<HttpConnector, Empty<Bytes>>, stats: &Uri) -> Option<String> {
    let answer = tokio::time::timeout(Duration::from_millis(300), async {
        let response = client.get(stats.clone()).await.ok()?;
        let body = response.into_body().collect().await.ok()?.to_bytes();
        String::from_utf8(body.to_vec()).ok()
    });
    answer.await.ok().flatten()
}

fn live_line(second: usize, phase: &str, tally: &Tally, view: Option<&str>) -> String {
    let mut view = view.unwrap_or("- - -").split_whitespace();
    let mut next = || view.next().unwrap_or("-").to_owned();
    let (in_flight, cpu, limit) = (next(), next(), next());
    format!(
        "{second:>3}  {phase:<10}  {:>7}  {:>7}  {:>6}  {:>9}  {:>7}  {:>7}  {in_flight:>9}  {cpu:>5}  {limit:>6}",
        tally.offered,
        tally.ok,
        tally.refused,
        tally.failed(),
        ms(tally.p50()),
        ms(tally.p99()),
    )
}

/// One run's requests due in a span of seconds.
struct Span {
    seconds: usize,
    tally: Tally,
}

impl Span {
    fn of(run: &Run, seconds: Range<usize>) -> Span {
        Span {
            seconds: seconds.len(),
            tally: run.report.span(seconds),
        }
    }

    /// `count` per second of the span.
    fn per_second(&self, count: u64) -> f64 {
        count as f64 / self.seconds.max(1) as f64
    }

    /// The share of the offered requests without a useful answer (timed out, lost, dropped
    /// or answered with an error).
    fn timed_out_ratio(&self) -> f64 {
        self.tally.failed() as f64 / self.tally.offered.max(1) as f64
    }
}

/// A summary row: its label's value for one run's totals over a span.
type Row<'a> = dyn Fn(&Span) -> String + 'a;

fn summarise(args: &DemoArgs, capacity: f64, runs: &[Run]) {
    println!(
        "\nSummary, per phase (goodput and shed per second, goodput as a share of the {capacity:.0}/s \
         capacity; latency of answered requests):"
    );
    let mut header = format!("{:<10}  {:<16}", "phase", "");
    for run in runs {
        let _ = write!(header, "  {:>18}", run.policy.label());
    }
    println!("{header}");
    for (name, span) in spans(args) {
        let per_run: Vec<Span> = runs.iter().map(|run| Span::of(run, span.clone())).collect();
        let rows: [(&str, &Row<'_>); 6] = [
            ("goodput/s", &|t| format!("{:.0}", t.per_second(t.tally.ok))),
            ("of capacity", &move |t| {
                format!("{:.1} %", 100.0 * t.per_second(t.tally.ok) / capacity)
            }),
            ("shed/s", &|t| {
                format!("{:.0}", t.per_second(t.tally.refused))
            }),
            ("timed out", &|t| {
                format!("{:.1} %", 100.0 * t.timed_out_ratio())
            }),
            ("p50 latency ms", &|t| ms(t.tally.p50())),
            ("p99 latency ms", &|t| ms(t.tally.p99())),
        ];
        for (i, (label, value)) in rows.iter().enumerate() {
            let mut line = format!("{:<10}  {label:<16}", if i == 0 { name } else { "" });
            for span in &per_run {
                let _ = write!(line, "  {:>18}", value(span));
            }
            println!("{line}");
        }
    }
}

/// The spans the summary reports: each phase, the overload's first second, and the overload
/// once settled (from its third second on).
fn spans(args: &DemoArgs) -> Vec<(&'static str, Range<usize>)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for phase in &args.phases() {
        let span = start..start + phase.seconds as usize;
        start = span.end;
        if phase.name == "overload" && phase.seconds > 4 {
            spans.push((phase.name, span.clone()));
            spans.push(("  first second", span.start..span.start + 1));
            spans.push(("  settled", span.start + 2..span.end));
        } else {
            spans.push((phase.name, span));
        }
    }
    spans
}

/// A latency in ms, for JSON.
fn as_ms(latency: Option<Duration>) -> Option<f64> {
    latency.map(|d| d.as_secs_f64() * 1e3)
}

/// The summary as JSON: the setting, the capacity, and for each run and span the goodput and
/// shed rates, the share timed out, the latency quantiles, and the load generator's tally.
fn write_json(
    args: &DemoArgs,
    capacity: f64,
    runs: &[Run],
    path: &std::path::Path,
) -> std::io::Result<()> {
    let runs: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            let phases: Vec<serde_json::Value> = spans(args)
                .into_iter()
                .map(|(name, span)| {
                    let t = Span::of(run, span);
                    serde_json::json!({
                        "phase": name.trim(),
                        "seconds": t.seconds,
                        "offered_per_s": t.per_second(t.tally.offered),
                        "goodput_per_s": t.per_second(t.tally.ok),
                        "shed_per_s": t.per_second(t.tally.refused),
                        "timed_out_ratio": t.timed_out_ratio(),
                        "p50_ms": as_ms(t.tally.p50()),
                        "p99_ms": as_ms(t.tally.p99()),
                        "tally": t.tally,
                    })
                })
                .collect();
            serde_json::json!({ "run": run.policy.label(), "phases": phases })
        })
        .collect();
    let summary = serde_json::json!({
        "work_ms": args.work_ms,
        "distribution": args.distribution,
        "capacity_per_s": capacity,
        "deadline_ms": args.deadline_ms,
        "inline": args.inline,
        "runs": runs,
    });
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&summary)?)
}

/// Two panels, goodput and p99 latency per second, one line per run.
fn write_chart(args: &DemoArgs, runs: &[Run]) -> Result<(), BoxError> {
    let per_second = |value: &dyn Fn(&Tally) -> Option<f64>| -> Vec<Series> {
        runs.iter()
            .map(|run| Series {
                name: run.policy.label(),
                points: run
                    .report
                    .seconds
                    .iter()
                    .enumerate()
                    .filter_map(|(second, tally)| Some((second as f64 + 0.5, value(tally)?)))
                    .collect(),
            })
            .collect()
    };
    let phases: Vec<String> = args
        .phases()
        .iter()
        .map(|p| format!("{} {} s", p.name, p.seconds))
        .collect();
    let x = Axis::linear(&format!("s ({})", phases.join(", ")));
    chart::draw(
        &args.chart,
        &[
            Panel {
                title: format!(
                    "goodput (answered in time) per second: {:.1} ms work, {} ms deadline",
                    args.work_ms, args.deadline_ms
                ),
                x: x.clone(),
                y: Axis::linear("requests/s"),
                series: per_second(&|t| Some(t.ok as f64)),
            },
            Panel {
                title: "p99 latency of answered requests".to_owned(),
                x,
                y: Axis::log("ms"),
                series: per_second(&|t| as_ms(t.p99())),
            },
        ],
    )
}
