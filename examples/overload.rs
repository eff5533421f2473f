//! A real server under overload, with and without admit.
//!
//! ```text
//! cargo run --release --example overload
//! cargo run --release --example overload -- --help
//! ```
//!
//! The program starts an axum server on 127.0.0.1 in a child process and drives it from a load
//! generator in this process, twice: once unprotected, once behind admit's warm-up layer and
//! load shedder. Each run goes through four phases:
//!
//! 1. **cold start**: normal load on a freshly started server whose requests cost three times
//!    their steady cost at first (cold caches), falling to the steady cost over the phase;
//! 2. **normal** load: half the server's capacity;
//! 3. **overload**: three times its capacity;
//! 4. **recovery**: normal load again.
//!
//! The handler does CPU-bound work (exponentially distributed, 1 ms on average) the way a tokio
//! service should, on `spawn_blocking`. The load generator (`admit-loadgen`, in `loadgen/`) is
//! open-loop: requests arrive as a Poisson process whose rate does not drop when the server
//! slows down, as real users keep arriving, and a client gives up after a deadline (500 ms),
//! after which a response is no longer useful. Goodput counts the useful responses.
//!
//! On a machine with two or more CPUs the server is pinned to CPU 0 and the load generator to
//! CPU 1 (with `taskset`, if installed), so that the server has exactly one core and the load
//! generator does not steal from it; admit's CPU signal then measures the server's own CPU
//! time against that one core. Its smoothing is shortened to a 1 s time constant
//! (`--cpu-horizon-ms`): with go-zero's 5 s the shedder engages several seconds into an
//! overload, after a backlog has built up (see `tests/shed_simulation.rs`).
//!
//! The warm-up bucket allows twice the server's nominal capacity once warm, so it is no
//! hand-tuned limit: under overload the shedder finds the sustainable load by itself.
//!
//! admit's run also uses the queue-time signals at their defaults: the load generator stamps
//! every request with `X-Request-Start`, as a proxy in front of the server would, and the
//! shedder's queue gate reads the wait from it; a runtime lag probe watches how late tokio runs
//! its timers. `--go-zero` adds a run with the CPU signal alone, as before those signals.
//!
//! `--inline` does the work inside the async handler instead, the anti-pattern that hides the
//! queue in tokio's run queue (see the README).
//!
//! `--tower <k>` adds a run behind tower's `load_shed + concurrency_limit(k)` with a
//! hand-picked `k`, for comparison. `--json <path>` writes the summary for a program to check.
//!
//! It prints a line per second while it runs, a side-by-side summary at the end, and writes an
//! SVG chart of goodput and p99 latency over time for every run.

use std::error::Error;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use admit::clock::MonotonicClock;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::{CpuSignal, Smoothing, SystemCpu};
use admit::signal::queue::header::HeaderConfig;
use admit::signal::queue::{LagProbe, QueueGate, RequestStart};
use admit::warmup::{WarmUp, WarmUpLayer};
use admit_loadgen::{Driver, Report, Tally, Trace};
use axum::Router;
use axum::body::Bytes;
use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::routing::get;
use http::header::{HeaderName, RETRY_AFTER};
use http::{StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;
/// The load generator's client, for the requests it drives.
type LoadClient = admit_loadgen::HttpClient<Empty<Bytes>>;

const USAGE: &str = "\
Runs a real HTTP server through a cold start, normal load, a 3x overload and recovery, first
unprotected and then behind admit's warm-up layer and load shedder, and compares them.

Usage: cargo run --release --example overload -- [options]

Options:
  --work-ms <ms>           mean CPU work per request [default: 1.0]
  --deadline-ms <ms>       the client gives up after this long [default: 500]
  --cold <s>               cold-start phase [default: 5]
  --normal <s>             normal-load phase [default: 6]
  --overload <s>           overload phase [default: 14]
  --recovery <s>           recovery phase [default: 5]
  --normal-load <x>        normal load, as a multiple of capacity [default: 0.5]
  --overload-load <x>      overload, as a multiple of capacity [default: 3.0]
  --cpu-horizon-ms <ms>    time constant of admit's CPU smoothing [default: 1000]
  --chart <path>           where to write the SVG chart [default: target/overload.svg]
  --tower <k>              also run tower's load_shed + concurrency_limit(k)
  --go-zero                also run admit with the CPU signal alone (go-zero's shedder, as
                           before the queue-time signals)
  --only <run>             run only `unprotected`, `admit`, `go-zero` or `tower:<k>`
  --no-pin                 do not pin the server and the load generator to CPUs
  --inline                 do the work inside the async handler (the anti-pattern), not on
                           spawn_blocking
  --json <path>            also write the per-phase summary as JSON
  --capacity <r/s>         the server's capacity, instead of measuring it first
  -h, --help               print this help
";

/// Requests cost this many times their steady cost when the server has just started.
const COLD_PENALTY: f64 = 3.0;

#[derive(Clone, Debug)]
struct Options {
    work_ms: f64,
    deadline: Duration,
    phases: [Phase; 4],
    cpu_horizon: Duration,
    chart: PathBuf,
    runs: Vec<Protection>,
    pin: bool,
    /// Burn the CPU inside the async handler instead of on `spawn_blocking`.
    inline: bool,
    /// Where to write the summary as JSON.
    json: Option<PathBuf>,
    /// What the server completes per second, saturated: measured before the runs, unless
    /// given with `--capacity`. Offered loads are multiples of it.
    capacity: Option<f64>,
    /// Iterations of `burn` per millisecond of CPU, calibrated once here and passed to every
    /// server, so that every run does the same work.
    burn_rate: f64,
}

#[derive(Clone, Copy, Debug)]
struct Phase {
    name: &'static str,
    seconds: u64,
    /// Offered load as a multiple of the server's capacity.
    load: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protection {
    Unprotected,
    /// admit's warm-up layer and shedder, with the queue-time signals.
    Admit,
    /// admit as before the queue-time signals: the CPU signal alone (go-zero's shedder).
    GoZero,
    /// tower's `load_shed + concurrency_limit(k)`, with a hand-picked `k`.
    Tower(usize),
}

impl Protection {
    /// How the run is labelled in the output.
    fn name(self) -> String {
        match self {
            Protection::Unprotected => "unprotected".to_string(),
            Protection::Admit => "admit".to_string(),
            Protection::GoZero => "admit go-zero".to_string(),
            Protection::Tower(k) => format!("tower k={k}"),
        }
    }

    /// How the run is named on the command line (`--only`, and to the server process).
    fn arg(self) -> String {
        match self {
            Protection::Tower(k) => format!("tower:{k}"),
            Protection::GoZero => "go-zero".to_string(),
            other => other.name(),
        }
    }

    fn parse(name: &str) -> Result<Self, BoxError> {
        match name {
            "unprotected" => Ok(Protection::Unprotected),
            "admit" => Ok(Protection::Admit),
            "go-zero" => Ok(Protection::GoZero),
            other => match other.strip_prefix("tower:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Protection::Tower(k)),
                _ => Err(format!(
                    "unknown run `{other}` (unprotected, admit, go-zero or tower:<k> with k > 0)"
                )
                .into()),
            },
        }
    }
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        return serve(&args[1..]);
    }
    let mut options = match parse(&args)? {
        Some(options) => options,
        None => {
            print!("{USAGE}");
            return Ok(());
        }
    };
    let pinned = options.pin && pin_self_to_cpu(1);
    options.burn_rate = calibrate();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(drive(options, pinned))
}

fn parse(args: &[String]) -> Result<Option<Options>, BoxError> {
    let mut options = Options {
        work_ms: 1.0,
        deadline: Duration::from_millis(500),
        phases: [
            Phase {
                name: "cold start",
                seconds: 5,
                load: 0.5,
            },
            Phase {
                name: "normal",
                seconds: 6,
                load: 0.5,
            },
            Phase {
                name: "overload",
                seconds: 14,
                load: 3.0,
            },
            Phase {
                name: "recovery",
                seconds: 5,
                load: 0.5,
            },
        ],
        cpu_horizon: Duration::from_secs(1),
        chart: PathBuf::from("target/overload.svg"),
        runs: vec![Protection::Unprotected, Protection::Admit],
        pin: true,
        inline: false,
        json: None,
        capacity: None,
        burn_rate: 0.0,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value"))
                .cloned()
        };
        let number = |text: String| -> Result<f64, BoxError> {
            match text.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(format!("{flag}: `{text}` is not a positive number").into()),
            }
        };
        let seconds = |text: String| -> Result<u64, BoxError> {
            text.parse::<u64>()
                .map_err(|_| format!("{flag}: `{text}` is not a whole number of seconds").into())
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--work-ms" => options.work_ms = number(value()?)?,
            "--deadline-ms" => options.deadline = Duration::from_secs_f64(number(value()?)? / 1e3),
            "--cold" => options.phases[0].seconds = seconds(value()?)?,
            "--normal" => options.phases[1].seconds = seconds(value()?)?,
            "--overload" => options.phases[2].seconds = seconds(value()?)?,
            "--recovery" => options.phases[3].seconds = seconds(value()?)?,
            "--normal-load" => {
                let load = number(value()?)?;
                for phase in [0, 1, 3] {
                    options.phases[phase].load = load;
                }
            }
            "--overload-load" => options.phases[2].load = number(value()?)?,
            "--cpu-horizon-ms" => {
                options.cpu_horizon = Duration::from_secs_f64(number(value()?)? / 1e3);
            }
            "--chart" => options.chart = PathBuf::from(value()?),
            "--only" => options.runs = vec![Protection::parse(&value()?)?],
            "--tower" => {
                let run = Protection::parse(&format!("tower:{}", value()?))?;
                options.runs.push(run);
            }
            "--go-zero" => options.runs.push(Protection::GoZero),
            "--json" => options.json = Some(PathBuf::from(value()?)),
            "--capacity" => options.capacity = Some(number(value()?)?),
            "--no-pin" => options.pin = false,
            "--inline" => options.inline = true,
            other => return Err(format!("unknown option `{other}`; try --help").into()),
        }
    }
    if options.phases.iter().all(|phase| phase.seconds == 0) {
        return Err("every phase is empty".into());
    }
    Ok(Some(options))
}

/// Pins every thread of this process to `cpu` with `taskset`, if the machine has another CPU
/// for the server and `taskset` is installed.
fn pin_self_to_cpu(cpu: usize) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        return false;
    }
    Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

// ---------------------------------------------------------------------------------------------
// The server (the child process)
// ---------------------------------------------------------------------------------------------

/// What the server's handlers share.
struct Server {
    started: Instant,
    /// Iterations of `burn` per millisecond of CPU, calibrated at start.
    iterations_per_ms: f64,
    work_ms: f64,
    cold: Duration,
    /// Requests whose work has not finished (queued for or running on the blocking pool).
    in_flight: AtomicUsize,
    /// See [`Options::inline`].
    inline: bool,
    seed: AtomicU64,
    cpu: SystemCpu,
    limiter: Option<Arc<WarmUp>>,
}

impl Server {
    /// This request's work, in iterations: exponential around the mean, times the cold penalty.
    fn next_work(&self) -> u64 {
        let mut z = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let uniform = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let warmth = (self.started.elapsed().as_secs_f64() / self.cold.as_secs_f64()).min(1.0);
        let penalty = COLD_PENALTY - (COLD_PENALTY - 1.0) * warmth;
        (-uniform.ln() * self.work_ms * penalty * self.iterations_per_ms) as u64
    }
}

/// CPU-bound work: `iterations` rounds of a mixing function the optimiser cannot skip.
fn burn(iterations: u64) -> u64 {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.rotate_left(5) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

/// Iterations of `burn` per millisecond: the fastest of 50 short rounds (the others were
/// interrupted).
fn calibrate() -> f64 {
    const ROUNDS: u64 = 1 << 20;
    (0..50)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(burn(ROUNDS));
            ROUNDS as f64 / (start.elapsed().as_secs_f64() * 1e3)
        })
        .fold(0.0, f64::max)
}

async fn work(State(server): State<Arc<Server>>) -> StatusCode {
    let iterations = server.next_work();
    server.in_flight.fetch_add(1, Ordering::Relaxed);
    if server.inline {
        // The anti-pattern: the worker thread is busy until the work is done, and the
        // requests behind it wait in tokio's run queue, unseen by any in-flight count.
        std::hint::black_box(burn(iterations));
        server.in_flight.fetch_sub(1, Ordering::Relaxed);
        return StatusCode::OK;
    }
    let job = Arc::clone(&server);
    // If the client gives up, this handler is dropped, but the job runs on: blocking work
    // cannot be cancelled, as in a real service.
    let done = tokio::task::spawn_blocking(move || {
        std::hint::black_box(burn(iterations));
        job.in_flight.fetch_sub(1, Ordering::Relaxed);
    })
    .await;
    match done {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A refusal by either limiter: `503 Service Unavailable`, retry in a second.
async fn refused(_: BoxError) -> (StatusCode, [(HeaderName, &'static str); 1]) {
    (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "1")])
}

/// `in_flight cpu_permille limit` for the load generator's live line.
async fn stats(State(server): State<Arc<Server>>) -> String {
    let cpu = server
        .cpu
        .load_permille()
        .map_or_else(|| "-".to_string(), |cpu| cpu.to_string());
    let limit = server.limiter.as_ref().map_or_else(
        || "-".to_string(),
        |l| format!("{:.0}", l.snapshot().qps_limit),
    );
    format!("{} {cpu} {limit}", server.in_flight.load(Ordering::Relaxed))
}

/// `--serve <unprotected|admit|tower:k> <work_ms> <cold_s> <cpu_horizon_ms> <inline|blocking>
/// <iterations_per_ms>`: serves until killed.
fn serve(args: &[String]) -> Result<(), BoxError> {
    const USAGE: &str =
        "--serve <run> <work_ms> <cold_s> <cpu_horizon_ms> <inline|blocking> <iterations_per_ms>";
    let [protection, work_ms, cold, horizon, style, burn_rate] = args else {
        return Err(USAGE.into());
    };
    let inline = style == "inline";
    let protection = Protection::parse(protection)?;
    let work_ms: f64 = work_ms.parse()?;
    let cold = Duration::from_secs_f64(cold.parse::<f64>()?.max(0.001));
    let horizon = Duration::from_secs_f64(horizon.parse::<f64>()? / 1e3);
    let iterations_per_ms: f64 = burn_rate.parse()?;
    // One core: its nominal capacity, in requests per second.
    let capacity = 1000.0 / work_ms;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let cpu = SystemCpu::with_smoothing(Smoothing::Exponential { horizon });
        // admit's queue-time signals, at their defaults: a 5 ms target over 100 ms intervals
        // for the waits the proxy's header shows, and a probe of the runtime's timer lateness
        // (10 ms ticks, 5 ms target) for a runtime too busy to serve.
        let limiter = match protection {
            Protection::Unprotected | Protection::Tower(_) => None,
            // Twice the nominal capacity once warm, a sixth of that (a third of the capacity,
            // matching the cold penalty) while cold, warming up over the cold phase.
            Protection::Admit | Protection::GoZero => Some(Arc::new(
                WarmUp::builder(2.0 * capacity)
                    .cold_factor(6)
                    .warm_up_period(cold)
                    .build()?,
            )),
        };
        let server = Arc::new(Server {
            started: Instant::now(),
            iterations_per_ms,
            work_ms,
            cold,
            in_flight: AtomicUsize::new(0),
            inline,
            seed: AtomicU64::new(0x5eed),
            cpu: cpu.clone(),
            limiter: limiter.clone(),
        });
        let mut app = Router::new().route("/work", get(work));
        if let Protection::Tower(k) = protection {
            // The usual tower stack, refusing once `k` requests are in flight.
            app = app.layer(
                tower::ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .load_shed()
                    .concurrency_limit(k),
            );
        }
        if let Some(limiter) = limiter {
            // One clock for the decisions and the probe's ticks.
            let clock = MonotonicClock::new();
            let mut shedder = Shedder::builder().clock(clock).cpu(cpu);
            if protection == Protection::Admit {
                let probe = LagProbe::default();
                tokio::spawn(probe.run(clock));
                shedder = shedder
                    .queue_gate(QueueGate::default())
                    .runtime_probe(probe);
            }
            let shedder = Arc::new(shedder.build()?);
            // The waits the load generator stamps as `X-Request-Start`, as a proxy would.
            let start = RequestStart::new(HeaderConfig::default())?;
            // The bucket outside: the shedder learns only from the requests it lets through.
            // Both refuse with a boxed zero-sized error, which `refused` turns into a 503.
            app = app.layer(
                tower::ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(WarmUpLayer::new(limiter))
                    .layer(ShedLayer::new(shedder).queue_time(start)),
            );
        }
        let app = app
            .route("/stats", get(stats))
            .with_state(Arc::clone(&server));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening {}", listener.local_addr()?);
        axum::serve(listener, app).await?;
        Ok::<(), BoxError>(())
    })
}

// ---------------------------------------------------------------------------------------------
// The load generator (this process)
// ---------------------------------------------------------------------------------------------

/// One run's protection and what became of its requests, second by second.
struct Run {
    protection: Protection,
    report: Report,
}

async fn drive(mut options: Options, pinned: bool) -> Result<(), BoxError> {
    println!(
        "Server: one core{}, {:.1} ms of CPU work per request on average {}, {} ms client deadline.",
        if pinned {
            " (pinned to CPU 0, load generator on CPU 1)"
        } else {
            " (not pinned: the load generator shares the machine's CPUs)"
        },
        options.work_ms,
        if options.inline {
            "done inline in the async handler"
        } else {
            "on spawn_blocking"
        },
        options.deadline.as_millis()
    );
    let capacity = match options.capacity {
        Some(capacity) => capacity,
        None => {
            let capacity = calibrate_capacity(&options, pinned).await?;
            println!(
                "Capacity: {capacity:.0} requests/s, measured by keeping the unprotected server \
                 saturated for {} s (nominal {:.0}/s: HTTP costs the rest).",
                CALIBRATION.as_secs(),
                1000.0 / options.work_ms
            );
            capacity
        }
    };
    options.capacity = Some(capacity);
    let plan: Vec<String> = options
        .phases
        .iter()
        .map(|p| format!("{} {} s at {:.0}/s", p.name, p.seconds, p.load * capacity))
        .collect();
    println!("Phases: {}.", plan.join(", "));

    let mut runs = Vec::new();
    for &protection in &options.runs {
        println!("\n=== {} ===", protection.name());
        let report = run_once(&options, protection, pinned).await?;
        runs.push(Run { protection, report });
    }
    summarise(&options, &runs);
    if let Some(path) = &options.json {
        match write_json(&options, &runs, path) {
            Ok(()) => println!("\nSummary as JSON: {}", path.display()),
            Err(error) => println!("\nCould not write {}: {error}", path.display()),
        }
    }
    if let Err(error) = write_chart(&options, &runs) {
        println!(
            "\nCould not write the chart to {}: {error}",
            options.chart.display()
        );
    } else {
        println!(
            "\nChart of goodput and p99 latency: {}",
            options.chart.display()
        );
    }
    Ok(())
}

/// Starts the server for one run (`warm`: without the cold-start phase) and returns it with
/// the address it listens on.
fn spawn_server(
    options: &Options,
    protection: Protection,
    pinned: bool,
    warm: bool,
) -> Result<(Child, String), BoxError> {
    let exe = std::env::current_exe()?;
    let cold = if warm {
        0
    } else {
        options.phases[0].seconds.max(1)
    };
    let args = [
        "--serve".to_string(),
        protection.arg(),
        options.work_ms.to_string(),
        cold.to_string(),
        options.cpu_horizon.as_millis().to_string(),
        if options.inline { "inline" } else { "blocking" }.to_string(),
        options.burn_rate.to_string(),
    ];
    let mut command = if pinned {
        let mut command = Command::new("taskset");
        command.arg("-c").arg("0").arg(exe);
        command
    } else {
        Command::new(exe)
    };
    let mut child = command.args(args).stdout(Stdio::piped()).spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout from the server")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .ok_or_else(|| format!("unexpected server output: {line:?}"))?
        .to_string();
    Ok((child, addr))
}

async fn run_once(
    options: &Options,
    protection: Protection,
    pinned: bool,
) -> Result<Report, BoxError> {
    let (mut child, addr) = spawn_server(options, protection, pinned, false)?;
    let result = load(options, &addr).await;
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// How long the calibration keeps the server saturated, after a second to settle.
const CALIBRATION: Duration = Duration::from_secs(3);
/// Requests the calibration keeps outstanding: enough that the core never waits for one.
const CALIBRATION_CLIENTS: usize = 6;

/// The server's capacity: requests completed per second by a warm, unprotected server kept
/// saturated by a closed loop of clients (no client waits longer than a few tens of ms, and no
/// request is refused, so it is the most the server can do).
async fn calibrate_capacity(options: &Options, pinned: bool) -> Result<f64, BoxError> {
    let (mut child, addr) = spawn_server(options, Protection::Unprotected, pinned, true)?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let work: Uri = format!("http://{addr}/work").parse()?;
    let start = tokio::time::Instant::now();
    let (from, until) = (
        start + Duration::from_secs(1),
        start + Duration::from_secs(1) + CALIBRATION,
    );
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CALIBRATION_CLIENTS)
        .map(|_| {
            let (client, work, done) = (client.clone(), work.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                while tokio::time::Instant::now() < until {
                    let response = client.get(work.clone()).await?;
                    let ok = response.status() == StatusCode::OK;
                    response.into_body().collect().await?;
                    let now = tokio::time::Instant::now();
                    if ok && now >= from && now < until {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok::<(), BoxError>(())
            })
        })
        .collect();
    let mut result = Ok(());
    for client in clients {
        if let Err(error) = client.await? {
            result = Err(error);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    result?;
    let capacity = done.load(Ordering::Relaxed) as f64 / CALIBRATION.as_secs_f64();
    if capacity < 1.0 {
        return Err("the calibration completed no request".into());
    }
    Ok(capacity)
}

/// The seed of the Poisson arrivals: every run gets the same ones.
const SEED: u64 = 0x0123_4567_89ab_cdef;

/// The offered load: each phase a constant segment at its multiple of the capacity.
fn trace(options: &Options, capacity: f64) -> Result<Trace, BoxError> {
    let mut trace = Trace::builder();
    for phase in options.phases.iter().filter(|phase| phase.seconds > 0) {
        trace = trace.constant(phase.load * capacity, Duration::from_secs(phase.seconds));
    }
    Ok(trace.build()?)
}

/// Drives the server at `addr` through the phases, open-loop (see `admit_loadgen`), and
/// prints a line per second.
async fn load(options: &Options, addr: &str) -> Result<Report, BoxError> {
    let capacity = options.capacity.unwrap_or(1000.0 / options.work_ms);
    let trace = trace(options, capacity)?;
    let total = trace.duration().as_secs() as usize;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
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
        let phases = options.phases;
        tokio::spawn(async move {
            while let Some((second, tally)) = seconds.recv().await {
                let view = views.recv().await.flatten();
                let phase = phase_at(&phases, second).name;
                println!("{}", live_line(second, phase, &tally, view.as_deref()));
            }
        })
    };
    // Each request in flight holds a socket: the driver's default cap stays within half the
    // open-file limit, and counts the arrivals beyond it as dropped.
    let report = Driver::new(options.deadline)
        .run(
            &LoadClient::new(),
            trace.duration(),
            trace.arrivals(SEED),
            |_| {
                // Stamped as a proxy in front of the server would (Envoy's
                // `t=%START_TIME(%s.%6f)%`): when the request left for the server.
                http::Request::get(work.clone())
                    .header("x-request-start", request_start())
                    .body(Empty::new())
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

/// The wall clock as a request-start header value: `t=<seconds>.<microseconds>`.
fn request_start() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("t={}.{:06}", now.as_secs(), now.subsec_micros())
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

async fn server_view(client: &HttpClient, stats: &Uri) -> Option<String> {
    let answer = tokio::time::timeout(Duration::from_millis(300), async {
        let response = client.get(stats.clone()).await.ok()?;
        let body = response.into_body().collect().await.ok()?.to_bytes();
        String::from_utf8(body.to_vec()).ok()
    });
    answer.await.ok().flatten()
}

/// A latency in ms with one decimal, or `-` without one.
fn ms(value: Option<Duration>) -> String {
    value.map_or_else(
        || "-".to_string(),
        |d| format!("{:.1}", d.as_secs_f64() * 1e3),
    )
}

fn live_line(second: usize, phase: &str, tally: &Tally, view: Option<&str>) -> String {
    let mut view = view.unwrap_or("- - -").split_whitespace();
    let mut next = || view.next().unwrap_or("-").to_string();
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

/// A summary row: its label's value for one run's totals over a span.
type Row<'a> = dyn Fn(&Span) -> String + 'a;

/// One run's requests due in a span of seconds.
struct Span {
    seconds: usize,
    tally: Tally,
}

impl Span {
    fn of(run: &Run, seconds: std::ops::Range<usize>) -> Span {
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

/// A latency in ms, for JSON.
fn as_ms(latency: Option<Duration>) -> Option<f64> {
    latency.map(|d| d.as_secs_f64() * 1e3)
}

fn summarise(options: &Options, runs: &[Run]) {
    let capacity = options.capacity.unwrap_or(1000.0 / options.work_ms);
    println!(
        "\nSummary, per phase (goodput and shed per second, goodput as a share of the {capacity:.0}/s \
         capacity; latency of answered requests):"
    );
    let mut header = format!("{:<10}  {:<16}", "phase", "");
    for run in runs {
        let _ = write!(header, "  {:>14}", run.protection.name());
    }
    println!("{header}");
    for (name, span) in spans(options) {
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
                let _ = write!(line, "  {:>14}", value(span));
            }
            println!("{line}");
        }
    }
}

/// The spans the summary reports: each phase, the overload's first second, and the overload
/// once settled (from its third second on).
fn spans(options: &Options) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for phase in &options.phases {
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

/// The summary as JSON: the setting, the calibrated capacity, and for each run and span the
/// goodput and shed rates, the share timed out, the latency quantiles, and the load
/// generator's tally (every count by outcome, and a latency summary).
fn write_json(options: &Options, runs: &[Run], path: &std::path::Path) -> std::io::Result<()> {
    let runs: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            let phases: Vec<serde_json::Value> = spans(options)
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
                        // Every count by outcome, and the latency summary in µs.
                        "tally": t.tally,
                    })
                })
                .collect();
            serde_json::json!({ "run": run.protection.name(), "phases": phases })
        })
        .collect();
    let summary = serde_json::json!({
        "work_ms": options.work_ms,
        "capacity_per_s": options.capacity.unwrap_or(1000.0 / options.work_ms),
        "deadline_ms": options.deadline.as_secs_f64() * 1e3,
        "inline": options.inline,
        "runs": runs,
    });
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&summary)?)
}

/// Two panels, goodput and p99 latency per second, one line per run, phases shaded.
fn write_chart(options: &Options, runs: &[Run]) -> std::io::Result<()> {
    const WIDTH: f64 = 900.0;
    const PANEL: f64 = 260.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 40.0;
    const GAP: f64 = 60.0;
    let total: usize = options.phases.iter().map(|p| p.seconds as usize).sum();
    let plot_width = WIDTH - LEFT - RIGHT;
    let x = |second: f64| LEFT + plot_width * second / total.max(1) as f64;
    let colours = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"];
    let deadline_ms = options.deadline.as_secs_f64() * 1e3;
    let goodput_max = runs
        .iter()
        .flat_map(|run| run.report.seconds.iter().map(|s| s.offered.max(s.ok)))
        .max()
        .unwrap_or(1)
        .max(1) as f64;

    let mut svg = String::new();
    let height = TOP + 2.0 * PANEL + GAP + 50.0;
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="20" font-size="15">admit overload demo: {:.1} ms work, {} ms deadline</text>"#,
        options.work_ms,
        options.deadline.as_millis()
    );
    let panels: [(&str, f64, f64); 2] = [
        ("goodput (answered in time, per second)", TOP, goodput_max),
        (
            "p99 latency of answered requests (ms)",
            TOP + PANEL + GAP,
            deadline_ms,
        ),
    ];
    for (title, top, max) in panels {
        let bottom = top + PANEL;
        // Phases.
        let mut start = 0.0;
        for (i, phase) in options.phases.iter().enumerate() {
            let end = start + phase.seconds as f64;
            let shade = if i % 2 == 0 { "#f4f4f4" } else { "#e8e8e8" };
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{top}" width="{:.1}" height="{PANEL}" fill="{shade}"/><text x="{:.1}" y="{:.1}" fill="dimgray">{}</text>"#,
                x(start),
                x(end) - x(start),
                x(start) + 4.0,
                top + 14.0,
                phase.name
            );
            start = end;
        }
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{:.1}">{title}</text><line x1="{LEFT}" y1="{bottom}" x2="{:.1}" y2="{bottom}" stroke="black"/><line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}" stroke="black"/>"#,
            top - 6.0,
            WIDTH - RIGHT
        );
        for tick in 0..=4 {
            let value = max * f64::from(tick) / 4.0;
            let y = bottom - PANEL * f64::from(tick) / 4.0;
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{value:.0}</text>"#,
                LEFT - 6.0,
                y + 4.0
            );
        }
        for (run, colour) in runs.iter().zip(colours) {
            let points: Vec<String> = run
                .report
                .seconds
                .iter()
                .enumerate()
                .filter_map(|(second, tally)| {
                    let value = if top == TOP {
                        Some(tally.ok as f64)
                    } else {
                        as_ms(tally.p99())
                    }?;
                    let y = bottom - PANEL * (value / max).min(1.0);
                    Some(format!("{:.1},{y:.1}", x(second as f64 + 0.5)))
                })
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
        }
    }
    let legend_y = TOP + 2.0 * PANEL + GAP + 30.0;
    for (i, (run, colour)) in runs.iter().zip(colours).enumerate() {
        let lx = LEFT + 160.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="{:.1}" width="14" height="4" fill="{colour}"/><text x="{:.1}" y="{legend_y}">{}</text>"#,
            legend_y - 5.0,
            lx + 20.0,
            run.protection.name()
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{legend_y}" text-anchor="end">seconds 0–{total}</text></svg>"#,
        WIDTH - RIGHT
    );
    if let Some(dir) = options.chart.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&options.chart, svg)
}
