//! The server under test (a child process): an axum server on one core whose `/work` handler
//! burns CPU, behind the policy's layers.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use admit::bound::{Bound, BoundLayer};
use admit::clock::MonotonicClock;
use admit::criticality::CRITICALITY_HEADER;
use admit::middleware::{CriticalityHeader, RequestStart, TimeoutHeader};
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::{CpuSignal, CpuWait, ManualCpu, Smoothing, SystemCpu};
use admit::signal::queue::header::HeaderConfig;
use admit::signal::queue::{LagProbe, QueueGate};
use admit::warmup::{WarmUp, WarmUpLayer};
use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};
use little_loadshedder::{LoadShedLayer, LoadShedResponse};
use tower::ServiceBuilder;

use admit_testkit::work::{Distribution, Work, burn};

use crate::policy::Policy;
use crate::{BoxError, flag_value};

/// Where the handler does its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Style {
    /// On tokio's blocking pool (`spawn_blocking`), as a tokio service should.
    Blocking,
    /// Inside the async handler: the anti-pattern that hides the queue in tokio's run queue.
    Inline,
    /// I/O-bound: awaits [`IO_WAIT`] (a call to another service), then does its CPU work
    /// inside the async handler, as a handler that formats an answer does.
    Io,
}

impl Style {
    /// How the charts and tables name it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Style::Blocking => "on spawn_blocking",
            Style::Inline => "inline",
            Style::Io => "I/O-bound",
        }
    }
}

/// What an I/O-bound request awaits before its CPU work.
pub(crate) const IO_WAIT: Duration = Duration::from_millis(20);

/// Requests cost this many times their steady cost when the server has just started.
const COLD_FACTOR: f64 = 3.0;

/// The seed of the service times (each worker thread draws its own from it).
const SEED: u64 = 0x5eed;

/// How to run the server: the hidden `serve` subcommand's flags, which the load generator's
/// process passes to the child.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct ServeArgs {
    /// What protects the server.
    #[arg(long)]
    pub(crate) policy: Policy,
    /// Mean CPU work per request once warm, ms.
    #[arg(long)]
    pub(crate) work_ms: f64,
    /// How service times are drawn.
    #[arg(long, value_enum)]
    pub(crate) distribution: Distribution,
    /// Requests cost three times their steady cost at first, falling to it over this (0: warm).
    #[arg(long)]
    pub(crate) cold_ms: u64,
    /// Time constant of admit's CPU smoothing, ms.
    #[arg(long)]
    pub(crate) cpu_horizon_ms: u64,
    /// Where the handler works.
    #[arg(long, value_enum)]
    pub(crate) style: Style,
    /// Iterations of the work loop per ms of CPU, calibrated by the parent.
    #[arg(long)]
    pub(crate) iterations_per_ms: f64,
}

impl ServeArgs {
    /// The flags that give these arguments back.
    pub(crate) fn to_args(&self) -> Vec<String> {
        vec![
            format!("--policy={}", self.policy),
            format!("--work-ms={}", self.work_ms),
            format!("--distribution={}", flag_value(self.distribution)),
            format!("--cold-ms={}", self.cold_ms),
            format!("--cpu-horizon-ms={}", self.cpu_horizon_ms),
            format!("--style={}", flag_value(self.style)),
            format!("--iterations-per-ms={}", self.iterations_per_ms),
        ]
    }

    /// The server's nominal capacity on its one core, requests per second.
    fn nominal_capacity(&self) -> f64 {
        1000.0 / self.work_ms
    }

    /// What a request waits for besides the CPU.
    pub(crate) fn io_wait(&self) -> Duration {
        if self.style == Style::Io {
            IO_WAIT
        } else {
            Duration::ZERO
        }
    }

    /// The latency a protected server should keep its requests under: ten mean service times
    /// (the CPU work and any wait for I/O).
    pub(crate) fn latency_target(&self) -> Duration {
        10 * (self.io_wait() + Duration::from_secs_f64(self.work_ms / 1e3))
    }
}

/// What the handlers share.
#[derive(Debug)]
struct Server {
    started: Instant,
    work: Work,
    /// Requests whose work has not finished (queued for or running on the blocking pool).
    in_flight: AtomicUsize,
    style: Style,
    cpu: SystemCpu,
    limiter: Option<Arc<WarmUp>>,
    shedder: Option<Arc<Shedder>>,
    /// Whether the handler reports how long its work waited for the CPU.
    reports_cpu_wait: bool,
    /// Whether blocking work runs through admit's `spawn_blocking`, which counts the wait for
    /// a pool thread to start it too.
    measures_dispatch: bool,
    /// Whether the lower classes' blocking work runs at the lowest priority
    /// (`spawn_blocking_as`).
    lowers_classes: bool,
}

impl Server {
    /// Burns `iterations`, measuring the CPU wait if this server reports it, and counts the
    /// request out of `in_flight`.
    fn burn(&self, iterations: u64) -> CpuWait {
        let wait = if self.reports_cpu_wait {
            CpuWait::measure(|| std::hint::black_box(burn(iterations))).1
        } else {
            std::hint::black_box(burn(iterations));
            CpuWait::NONE
        };
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        wait
    }
}

async fn work(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    let iterations = server.work.iterations_here(server.started.elapsed(), SEED);
    server.in_flight.fetch_add(1, Ordering::Relaxed);
    if server.style == Style::Io {
        tokio::time::sleep(IO_WAIT).await;
    }
    if server.style != Style::Blocking {
        // The worker thread is busy until the work is done; the requests behind it wait in
        // tokio's run queue, unseen by any in-flight count.
        return (Extension(server.burn(iterations)), StatusCode::OK).into_response();
    }
    let job = Arc::clone(&server);
    if server.measures_dispatch {
        let run = move || {
            std::hint::black_box(burn(iterations));
            job.in_flight.fetch_sub(1, Ordering::Relaxed);
        };
        let measured = if server.lowers_classes {
            let class = headers
                .get(CRITICALITY_HEADER)
                .and_then(|value| value.to_str().ok()?.parse().ok())
                .unwrap_or_default();
            admit::bound::spawn_blocking_as(class, run)
        } else {
            admit::bound::spawn_blocking(run)
        };
        return match measured.await {
            Ok(((), wait)) => (Extension(wait), StatusCode::OK).into_response(),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
    }
    // If the client gives up, this handler is dropped, but the job runs on: blocking work
    // cannot be cancelled, as in a real service.
    match tokio::task::spawn_blocking(move || job.burn(iterations)).await {
        Ok(wait) => (Extension(wait), StatusCode::OK).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A refusal: `503 Service Unavailable`, retry in a second.
fn refusal() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "1")]).into_response()
}

/// A refusal by a layer that refuses with an error.
async fn refused(_: BoxError) -> Response {
    refusal()
}

/// `in_flight cpu_permille limit` for the demo's live line.
async fn stats(State(server): State<Arc<Server>>) -> String {
    let cpu = server
        .cpu
        .load_permille()
        .map_or_else(|| "-".to_owned(), |cpu| cpu.to_string());
    let limit = server.limiter.as_ref().map_or_else(
        || "-".to_owned(),
        |l| format!("{:.0}", l.snapshot().qps_limit),
    );
    format!("{} {cpu} {limit}", server.in_flight.load(Ordering::Relaxed))
}

/// The shedder's cut: the marginal class while it sheds, `-` otherwise.
async fn cut(State(server): State<Arc<Server>>) -> &'static str {
    server
        .shedder
        .as_ref()
        .and_then(|shedder| shedder.snapshot().cut)
        .map_or("-", |class| class.as_str())
}

/// Serves until killed, printing `listening <addr>` once bound.
pub(crate) fn serve(args: &ServeArgs) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let cold = Duration::from_millis(args.cold_ms);
        let horizon = Duration::from_millis(args.cpu_horizon_ms);
        let cpu = SystemCpu::with_smoothing(Smoothing::Exponential { horizon });
        let limiter = match args.policy {
            // Twice the nominal capacity once warm, a sixth of that (a third of the capacity,
            // matching the cold penalty) while cold, warming up over the cold period. A warm
            // server (no cold period) starts warm, with a 10 s period as a service would have:
            // a period within the burst makes the bucket refuse requests a few ms apart after
            // any pause. The runs that read classes keep half the burst for the critical
            // requests.
            Policy::Admit
            | Policy::AdmitCpuWait
            | Policy::AdmitClasses
            | Policy::GoZero
            | Policy::AdmitBound
            | Policy::GateBound
            | Policy::GateBoundLow => Some(Arc::new(
                WarmUp::builder(2.0 * args.nominal_capacity())
                    .cold_factor(6)
                    .warm_up_period(if cold.is_zero() {
                        Duration::from_secs(10)
                    } else {
                        cold
                    })
                    .start_warm(cold.is_zero())
                    .critical_share(
                        if matches!(
                            args.policy,
                            Policy::AdmitClasses
                                | Policy::AdmitBound
                                | Policy::GateBound
                                | Policy::GateBoundLow
                        ) {
                            0.5
                        } else {
                            0.0
                        },
                    )
                    .build()?,
            )),
            _ => None,
        };
        let shedder = limiter
            .is_some()
            .then(|| shedder(args, cpu.clone()))
            .transpose()?;
        let server = Arc::new(Server {
            started: Instant::now(),
            work: Work {
                mean: Duration::from_secs_f64(args.work_ms / 1e3),
                distribution: args.distribution,
                cold_factor: COLD_FACTOR,
                cold,
                iterations_per_ms: args.iterations_per_ms,
            },
            in_flight: AtomicUsize::new(0),
            style: args.style,
            cpu: cpu.clone(),
            limiter: limiter.clone(),
            shedder: shedder.clone(),
            reports_cpu_wait: matches!(
                args.policy,
                Policy::AdmitCpuWait
                    | Policy::Bound
                    | Policy::AdmitBound
                    | Policy::GateBound
                    | Policy::GateBoundLow
            ),
            measures_dispatch: matches!(
                args.policy,
                Policy::Bound | Policy::AdmitBound | Policy::GateBound | Policy::GateBoundLow
            ),
            lowers_classes: args.policy == Policy::GateBoundLow,
        });
        let app = protect(
            Router::new().route("/work", get(work)),
            args,
            limiter,
            shedder,
        )?;
        let app = app
            .route("/stats", get(stats))
            .route("/cut", get(cut))
            .with_state(Arc::clone(&server));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening {}", listener.local_addr()?);
        axum::serve(listener, app).await?;
        Ok::<(), BoxError>(())
    })
}

/// `app` behind the policy's layers.
fn protect(
    app: Router<Arc<Server>>,
    args: &ServeArgs,
    limiter: Option<Arc<WarmUp>>,
    shedder: Option<Arc<Shedder>>,
) -> Result<Router<Arc<Server>>, BoxError> {
    Ok(match args.policy {
        Policy::Unprotected => app,
        // The usual tower stack, refusing once `k` requests are in flight.
        Policy::Tower(k) => app.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .load_shed()
                .concurrency_limit(k),
        ),
        // Vegas moves the limit with each request's latency; `load_shed` refuses beyond it.
        Policy::TowerAcc => app.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .load_shed()
                .layer(tower_acc::ConcurrencyLimitLayer::new(
                    tower_acc::Vegas::default(),
                )),
        ),
        // An EWMA weight of 0.25 per request; the target average latency is the protocol's
        // p99 target.
        Policy::LittleLoadShedder => app.layer(
            ServiceBuilder::new()
                .map_response(|answer: LoadShedResponse<Response>| match answer {
                    LoadShedResponse::Inner(response) => response,
                    LoadShedResponse::Overload => refusal(),
                })
                .layer(LoadShedLayer::new(0.25, args.latency_target()))
                .map_err(|never: Infallible| match never {}),
        ),
        // Requests beyond the bound wait in its queue, by class.
        Policy::Bound => {
            let bound = Bound::builder().build()?;
            app.layer(
                BoundLayer::new(bound)
                    .http()
                    .inspect((CriticalityHeader::new(), TimeoutHeader::new())),
            )
        }
        Policy::AdmitBound | Policy::GateBound | Policy::GateBoundLow => {
            let limiter = limiter.ok_or("admit's policies have a warm-up bucket")?;
            let shedder = shedder.ok_or("admit's policies have a shedder")?;
            let start = RequestStart::new(HeaderConfig::default())?;
            let class = CriticalityHeader::new();
            app.layer(
                ServiceBuilder::new()
                    .layer(WarmUpLayer::new(limiter).inspect(class.clone()).http())
                    .layer(
                        ShedLayer::new(shedder)
                            .http()
                            .inspect((start, class.clone())),
                    )
                    .layer(
                        BoundLayer::new(Bound::builder().build()?)
                            .http()
                            .inspect((class, TimeoutHeader::new())),
                    ),
            )
        }
        Policy::Admit | Policy::AdmitCpuWait | Policy::AdmitClasses | Policy::GoZero => {
            let limiter = limiter.ok_or("admit's policies have a warm-up bucket")?;
            let shedder = shedder.ok_or("admit's policies have a shedder")?;
            let start = RequestStart::new(HeaderConfig::default())?;
            // The guide's recipe, the bucket outside (the shedder learns only from the
            // requests it lets through): each answers a refusal itself, a 503 with
            // `Retry-After` and its reason in `admit-refusal`.
            if args.policy == Policy::AdmitClasses {
                // Each layer also reads the request's class from `admit-criticality`.
                let class = CriticalityHeader::new();
                app.layer(
                    ServiceBuilder::new()
                        .layer(WarmUpLayer::new(limiter).inspect(class.clone()).http())
                        .layer(ShedLayer::new(shedder).http().inspect((start, class))),
                )
            } else {
                app.layer(
                    ServiceBuilder::new()
                        .layer(WarmUpLayer::new(limiter).http())
                        .layer(ShedLayer::new(shedder).http().inspect(start)),
                )
            }
        }
    })
}

/// admit's shedder for `args.policy`: the CPU signal, and for all but go-zero's the queue-time
/// signals at their defaults.
fn shedder(args: &ServeArgs, cpu: SystemCpu) -> Result<Arc<Shedder>, BoxError> {
    // One clock for the decisions and the probe's ticks.
    let clock = MonotonicClock::new();
    let mut shedder = Shedder::builder().clock(clock);
    shedder = if matches!(args.policy, Policy::GateBound | Policy::GateBoundLow) {
        // A CPU reading that is never hot: the shedder decides on the queue-time signals.
        shedder.cpu(ManualCpu::new(0))
    } else {
        shedder.cpu(cpu)
    };
    if args.policy != Policy::GoZero {
        // The waits the load generator stamps as `X-Request-Start` (as a proxy would), and
        // the runtime's timer lateness.
        let probe = LagProbe::default();
        tokio::spawn(probe.run(clock));
        shedder = shedder
            .queue_gate(QueueGate::default())
            .runtime_probe(probe);
    }
    Ok(Arc::new(shedder.build()?))
}
