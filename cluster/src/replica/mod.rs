//! The sample service each replica runs (`admit-cluster replica`): an axum server behind
//! `DrainLayer`, `WarmUpLayer` and `ShedLayer` (CPU signal and a queue gate on the proxy's
//! request-start stamp), and with `--bound` a `BoundLayer` innermost, with CPU-bound work per
//! request, a cold phase, long-lived sessions, a readiness endpoint and admit's metrics.
//!
//! | route | what |
//! |---|---|
//! | `GET /work` | burns a service time drawn from the distribution (more while cold) on a blocking thread |
//! | `GET /session` | a server-sent event stream held open until the drain asks it to reconnect elsewhere (`event: reconnect`) |
//! | `GET /readyz` | 200 while serving, 503 once the drain is announced |
//! | `GET /metrics` | admit's series in Prometheus' text format |
//!
//! SIGTERM starts the drain; the process exits once it has drained (0) or at its deadline (1).

use std::convert::Infallible;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::bound::{Bound, BoundLayer};
use admit::drain::{Drain, DrainLayer, Outcome};
use admit::metrics::Reporter;
use admit::middleware::RequestStart;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::CpuWait;
use admit::signal::queue::QueueGate;
use admit::signal::queue::header::HeaderConfig;
use admit::warmup::{WarmUp, WarmUpLayer};
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::{get, get_service};
use axum::{Extension, Router};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::signal::unix::{SignalKind, signal};

pub use admit_testkit::work::{Distribution, Work, burn, calibrate};

/// `admit-cluster replica`'s flags: set by the harness for each replica it starts.
#[derive(Debug, clap::Args)]
pub struct ReplicaArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The replica's name (the log's prefix).
    #[arg(long, default_value = "replica")]
    pub name: String,
    /// The mean CPU time a request takes once warm.
    #[arg(long, default_value = "10ms", value_parser = crate::duration::parse)]
    pub work_mean: Duration,
    /// How service times are distributed.
    #[arg(long, value_enum, default_value = "exponential")]
    pub distribution: Distribution,
    /// How much more a request costs at the replica's start (falling to 1 over --cold).
    #[arg(long, default_value_t = 3.0)]
    pub cold_factor: f64,
    /// How long the replica is cold.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    pub cold: Duration,
    /// `burn` iterations per millisecond of CPU, as `calibrate` measured it.
    #[arg(long)]
    pub iterations_per_ms: f64,
    /// The requests per second the replica serves once warm: the warm-up bucket's full rate.
    #[arg(long)]
    pub capacity: f64,
    /// After SIGTERM, how long the replica keeps serving while the proxy learns it is leaving.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse)]
    pub drain_delay: Duration,
    /// After SIGTERM, when the replica gives up on what is left.
    #[arg(long, default_value = "20s", value_parser = crate::duration::parse)]
    pub drain_deadline: Duration,
    /// The window over which open sessions are asked to reconnect.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse)]
    pub reconnect_spread: Duration,
    /// Seeds the service times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What SIGTERM does.
    #[arg(long, value_enum, default_value = "drain")]
    pub on_sigterm: OnSigterm,
    /// Bounds the work in service with admit's `BoundLayer`, innermost, at its defaults; the
    /// work then runs through `admit::bound::spawn_blocking`, which reports its wait for a CPU.
    #[arg(long)]
    pub bound: bool,
}

/// What a replica does on SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnSigterm {
    /// admit's drain: keep serving for the drain delay while the proxy learns the replica is
    /// leaving, then refuse new requests, ask sessions to reconnect, and finish what is in
    /// flight by the deadline.
    Drain,
    /// A plain graceful shutdown, as most servers do: stop accepting at once and finish the
    /// requests in flight (sessions end with the connection).
    Graceful,
}

/// What the handlers share.
#[derive(Clone)]
struct Replica {
    work: Work,
    started: Instant,
    seed: u64,
    drain: Drain,
    reporter: Arc<Reporter>,
    prometheus: PrometheusHandle,
}

/// Runs a replica until it has drained.
pub fn main(args: ReplicaArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{}: cannot start the runtime: {error}", args.name);
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("replica: {error}");
            ExitCode::FAILURE
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn serve(args: ReplicaArgs) -> Result<ExitCode, BoxError> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let drain = Drain::builder()
        .propagation_delay(args.drain_delay)
        .deadline(args.drain_deadline)
        .reconnect_spread(args.reconnect_spread)
        .build()?;
    // Subscribed before the replica reports ready.
    let sigterm = match args.on_sigterm {
        OnSigterm::Drain => {
            drain.handle_signals()?;
            None
        }
        OnSigterm::Graceful => Some(signal(SignalKind::terminate())?),
    };
    let shedder = Arc::new(
        Shedder::builder()
            .name("work")
            .queue_gate(QueueGate::default())
            .build()?,
    );
    let bucket = Arc::new(
        WarmUp::builder(args.capacity)
            .name("work")
            // No cold phase: warm from the start (the period must still be positive).
            .warm_up_period(args.cold.max(Duration::from_secs(1)))
            .start_warm(args.cold.is_zero())
            .build()?,
    );
    let bound = if args.bound {
        Some(Arc::new(Bound::builder().name("work").build()?))
    } else {
        None
    };
    let mut reporter = Reporter::builder()
        .shedder(Arc::clone(&shedder))
        .warm_up(Arc::clone(&bucket))
        .drain(drain.clone());
    if let Some(bound) = &bound {
        reporter = reporter.bound(Arc::clone(bound));
    }
    let reporter = reporter.build()?;
    let replica = Replica {
        work: Work {
            mean: args.work_mean,
            distribution: args.distribution,
            cold_factor: args.cold_factor,
            cold: args.cold,
            iterations_per_ms: args.iterations_per_ms,
        },
        started: Instant::now(),
        seed: args.seed,
        drain: drain.clone(),
        reporter: Arc::new(reporter),
        prometheus,
    };
    let waits = RequestStart::new(HeaderConfig::default())?;
    let work = match bound {
        // Innermost, as the guide places it: a request waits only once nothing else refuses.
        Some(bound) => Router::new()
            .route("/work", get(work_measured))
            .layer(BoundLayer::new(bound).http()),
        None => Router::new().route("/work", get(work)),
    };
    let app = work
        .layer(ShedLayer::new(shedder).http().inspect(waits))
        .layer(WarmUpLayer::new(bucket).http())
        .route("/session", get(session))
        .layer(DrainLayer::new(drain.clone()))
        // Outside the drain: the proxy's checks and the scrapes get through while draining.
        .route("/readyz", get_service(drain.readiness()))
        .route("/metrics", get(metrics))
        .with_state(replica);

    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    // The harness reads this line for the address.
    println!("{} listening on {}", args.name, listener.local_addr()?);
    if let Some(mut sigterm) = sigterm {
        // Stop accepting, and end once every connection has: open sessions hold it until the
        // harness kills the process at the grace period, as Kubernetes does.
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                sigterm.recv().await;
            })
            .await?;
        println!("{}: stopped", args.name);
        return Ok(ExitCode::SUCCESS);
    }
    let serve = axum::serve(drain.listener(listener), app)
        .with_graceful_shutdown(drain.stop_accepting())
        .into_future();
    let mut server = tokio::spawn(serve);
    let outcome = tokio::select! {
        outcome = drain.finished() => {
            // Let the server close its connections, briefly.
            let _ = tokio::time::timeout(Duration::from_secs(1), server).await;
            outcome
        }
        served = &mut server => {
            served??;
            drain.finished().await
        }
    };
    println!("{}: {outcome:?}", args.name);
    Ok(match outcome {
        Outcome::Drained { .. } => ExitCode::SUCCESS,
        Outcome::Expired { .. } => ExitCode::FAILURE,
    })
}

/// A request's work, as a job for a blocking thread: its service time, drawn from the
/// distribution, burnt on the CPU.
fn job(replica: &Replica) -> impl FnOnce() + Send + 'static {
    let since_start = replica.started.elapsed();
    let (work, seed) = (replica.work, replica.seed);
    move || {
        let iterations = work.iterations_here(since_start, seed);
        std::hint::black_box(burn(iterations));
    }
}

async fn work(State(replica): State<Replica>) -> StatusCode {
    // Blocking work cannot be cancelled: if the client gives up, it runs on, as in a real
    // service.
    match tokio::task::spawn_blocking(job(&replica)).await {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `work` through admit's `spawn_blocking`: the response carries the job's wait for a CPU,
/// which the bound reads.
async fn work_measured(State(replica): State<Replica>) -> (StatusCode, Extension<CpuWait>) {
    match admit::bound::spawn_blocking(job(&replica)).await {
        Ok(((), wait)) => (StatusCode::OK, Extension(wait)),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, Extension(CpuWait::NONE)),
    }
}

/// A server-sent event stream: `hello` at once, then nothing until the drain asks the client
/// to reconnect elsewhere (`reconnect`), and the stream ends.
async fn session(State(replica): State<Replica>) -> Response {
    let session = replica.drain.session();
    let events = async_stream(session);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The session's events as a body stream.
fn async_stream(
    session: admit::drain::Session,
) -> impl futures_core::Stream<Item = Result<&'static str, Infallible>> + Send {
    let hello = futures_util::stream::once(async { Ok("event: hello\ndata: \n\n") });
    let reconnect = futures_util::stream::once(async move {
        session.reconnect().await;
        Ok("event: reconnect\ndata: \n\n")
    });
    futures_util::StreamExt::chain(hello, reconnect)
}

async fn metrics(State(replica): State<Replica>) -> String {
    replica.reporter.report();
    replica.prometheus.render()
}
