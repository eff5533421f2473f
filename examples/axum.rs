//! An axum service behind a warm-up bucket and a load shedder, driven by its own client.
//!
//! The shape of a production service: one process-wide [`WarmUp`] bucket and one process-wide
//! [`Shedder`], each created once in an `Arc` and applied with `Router::layer`, plus an
//! unprotected `/metrics` route that reports both. The program then plays the first seconds
//! after a deploy against itself over real HTTP (a hyper client on 127.0.0.1):
//!
//! 1. a burst of requests the moment the server is up: the cold bucket spaces requests at a
//!    third of the full rate, so of the burst arriving together one passes and the rest are
//!    answered `503 Service Unavailable` with `Retry-After`;
//! 2. a steady 300 requests per second for a few seconds, one row per second, while the
//!    bucket warms up towards its full 200 per second;
//! 3. what `/metrics` says at the end.
//!
//! The shedder is there as it would be in production, but on an idle machine its CPU signal
//! stays cool and it refuses nothing: it only sheds while the CPU is at 90 % or more of what
//! the process may use (see `examples/direct.rs` for a CPU-bound run).
//!
//! ```text
//! cargo run --example axum --features http
//! ```
//!
//! It runs for about five seconds.

use std::error::Error;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use admit::clock::Clock;
use admit::shed::{ShedLayer, Shedder};
use admit::warmup::{Phase, WarmUp, WarmUpLayer};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::get;
use http::header::RETRY_AFTER;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

type BoxError = Box<dyn Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// The full rate once warm, in requests per second.
const FULL_RATE: f64 = 200.0;
/// While cold the bucket admits `FULL_RATE / COLD_FACTOR`.
const COLD_FACTOR: u32 = 3;
/// Short, so that the demo shows the whole ramp; a real service would use tens of seconds.
const WARM_UP_PERIOD: Duration = Duration::from_secs(3);
/// Requests fired at once right after start.
const BURST: usize = 100;
/// The steady load: `PER_TICK` requests every tick, 300 per second (above the full rate, so
/// that the limit in force is visible in every row).
const PER_TICK: usize = 3;
const TICKS_PER_SECOND: u32 = 100;
const TICK: Duration = Duration::from_millis(1000 / TICKS_PER_SECOND as u64);
const LOAD_SECONDS: u64 = 4;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// What the handlers share: the same two limiters the layers hold, for `/metrics`.
#[derive(Clone)]
struct Limits {
    limiter: Arc<WarmUp>,
    shedder: Arc<Shedder>,
}

fn app(limits: Limits) -> Router {
    Router::new()
        .route("/", get(hello))
        // `Router::layer` wraps what is already in the router, and each call wraps the result
        // of the previous ones: the layer added last is the outermost, the first to see a
        // request. Here the warm-up bucket is outermost and the shedder sits inside it:
        //
        // - The bucket's refusals never reach the shedder. The shedder learns what the service
        //   can carry from the requests it admits (their count is its throughput, their
        //   latency its response time) and counts every admitted 503 as a failure (go-zero's
        //   HTTP rule). Outside the bucket it would also count the bucket's instant 503s, and
        //   its in-flight and arrival figures would describe the bucket rather than the
        //   handlers.
        // - The bucket is the cheaper check and, while cold, refuses most requests: refusing
        //   them first costs one compare-and-swap each and leaves the shedder's counters
        //   alone.
        //
        // The price: a request the bucket admits and the shedder then refuses has used a
        // warm-up permit without doing any work, so an overloaded service warms up slightly
        // faster than its real traffic would imply. Both refuse with 503 and `Retry-After`:
        // for a process-wide bucket the server, not the client, is short of capacity (answer
        // 429 with `HttpResponder::too_many_requests()` for a per-client bucket).
        .layer(ShedLayer::new(limits.shedder.clone()).http())
        .layer(WarmUpLayer::new(limits.limiter.clone()).http())
        // Added after the layers, so neither applies: monitoring must still get through while
        // the service is cold or shedding (that is when it matters most), and a scrape every
        // few seconds should neither use up warm-up permits nor count as the shedder's
        // throughput. Protect it separately if it is expensive.
        .route("/metrics", get(metrics))
        .with_state(limits)
}

async fn hello() -> &'static str {
    "hello\n"
}

async fn metrics(State(limits): State<Limits>) -> String {
    render(&limits)
}

/// Both snapshots as `name value` lines, in the spirit of Prometheus' text format.
fn render(limits: &Limits) -> String {
    let warm = limits.limiter.snapshot();
    let shed = limits.shedder.snapshot();
    let phase = match warm.phase {
        Phase::Cold => "cold",
        Phase::Warming => "warming",
        Phase::Warm => "warm",
    };
    let cpu = shed
        .cpu_permille
        .map_or_else(|| "unknown".to_string(), |cpu| cpu.to_string());
    let service_time = shed
        .mean_service_time_ms
        .map_or_else(|| "none".to_string(), |ms| format!("{ms:.1}"));
    let mut text = String::new();
    let lines: [(&str, String); 15] = [
        ("warmup_qps_limit", format!("{:.2}", warm.qps_limit)),
        ("warmup_phase", phase.to_string()),
        ("warmup_progress", format!("{:.2}", warm.progress())),
        ("warmup_stored_tokens", format!("{:.1}", warm.stored_tokens)),
        ("shed_cpu_permille", cpu),
        ("shed_hot", shed.hot.to_string()),
        ("shed_flying", shed.flying.to_string()),
        ("shed_avg_flying", format!("{:.2}", shed.avg_flying)),
        ("shed_max_flight", format!("{:.1}", shed.max_flight)),
        ("shed_min_rt_ms", shed.min_rt_ms.to_string()),
        ("shed_passed_total", shed.passed.to_string()),
        ("shed_failed_total", shed.failed.to_string()),
        ("shed_dropped_total", shed.dropped.to_string()),
        ("shed_arrival_rate", format!("{:.1}", shed.arrival_rate)),
        ("shed_mean_service_time_ms", service_time),
    ];
    for (name, value) in lines {
        // Writing to a `String` cannot fail.
        let _ = writeln!(text, "{name} {value}");
    }
    text
}

/// One response as the client saw it.
struct Reply {
    status: StatusCode,
    /// The `Retry-After` header, in seconds.
    retry_after: Option<u64>,
    body: Bytes,
}

async fn fetch(client: HttpClient, uri: Uri) -> Result<Reply, BoxError> {
    let request = Request::get(uri).body(Empty::new())?;
    let response = client.request(request).await?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    // Reading the body to the end lets the connection go back to the client's pool.
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Reply {
        status,
        retry_after,
        body,
    })
}

/// Responses counted by status.
#[derive(Default)]
struct Tally {
    ok: u32,
    unavailable: u32,
    other: u32,
    /// The longest `Retry-After` among the 503s.
    retry_after: Option<u64>,
}

impl Tally {
    async fn collect(mut tasks: JoinSet<Result<Reply, BoxError>>) -> Result<Self, BoxError> {
        let mut tally = Tally::default();
        while let Some(joined) = tasks.join_next().await {
            let reply = joined??;
            match reply.status {
                StatusCode::OK => tally.ok += 1,
                StatusCode::SERVICE_UNAVAILABLE => {
                    tally.unavailable += 1;
                    tally.retry_after = tally.retry_after.max(reply.retry_after);
                }
                _ => tally.other += 1,
            }
        }
        Ok(tally)
    }

    fn retry_after(&self) -> String {
        self.retry_after
            .map_or_else(|| "-".to_string(), |secs| format!("{secs} s"))
    }
}

/// Sleeps until the limiter's clock reads `at_nanos` (at once if it already has).
async fn sleep_until(limiter: &WarmUp, at_nanos: u64) {
    let now = limiter.clock().now_nanos();
    tokio::time::sleep(Duration::from_nanos(at_nanos.saturating_sub(now))).await;
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // Created once per process and shared: every connection, route and clone of the layered
    // services must count against the same two limiters.
    let limits = Limits {
        limiter: Arc::new(
            WarmUp::builder(FULL_RATE)
                .warm_up_period(WARM_UP_PERIOD)
                .cold_factor(COLD_FACTOR)
                .build()?,
        ),
        shedder: Arc::new(Shedder::builder().build()?),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, app(limits.clone()))
            .with_graceful_shutdown(async {
                // Either a message or the sender dropped: both mean stop.
                let _ = stopped.await;
            })
            .into_future(),
    );
    println!(
        "Serving on http://{addr}: full rate {FULL_RATE}/s, cold rate {:.1}/s, warm-up period {} s.",
        FULL_RATE / f64::from(COLD_FACTOR),
        WARM_UP_PERIOD.as_secs()
    );

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let root: Uri = format!("http://{addr}/").parse()?;

    // 1. A burst right after the deploy, all at once.
    let mut burst = JoinSet::new();
    for _ in 0..BURST {
        burst.spawn(fetch(client.clone(), root.clone()));
    }
    let tally = Tally::collect(burst).await?;
    println!(
        "\nA burst of {BURST} requests while cold: {} × 200 OK, {} × 503 (Retry-After: {}), {} other.",
        tally.ok,
        tally.unavailable,
        tally.retry_after(),
        tally.other
    );

    // 2. A steady load, one row per second. The rows are aligned to the bucket's own seconds
    //    (it updates its limit once per second, on its clock's whole seconds), so each row's
    //    "limit" is the limit in force for exactly that row's requests.
    println!(
        "\nThen {} requests/s for {LOAD_SECONDS} s:\n",
        PER_TICK * TICKS_PER_SECOND as usize
    );
    println!("second  sent  200 OK  503  of which shed  Retry-After  limit (req/s)  phase");
    let clock_now = limits.limiter.clock().now_nanos();
    let first_second = (clock_now / NANOS_PER_SEC + 1) * NANOS_PER_SEC;
    for second in 0..LOAD_SECONDS {
        let start = first_second + second * NANOS_PER_SEC;
        sleep_until(&limits.limiter, start).await;
        let warm = limits.limiter.snapshot();
        let dropped_before = limits.shedder.snapshot().dropped;

        let mut sent = 0;
        let mut requests = JoinSet::new();
        let mut ticker = tokio::time::interval(TICK);
        for _ in 0..TICKS_PER_SECOND {
            ticker.tick().await;
            for _ in 0..PER_TICK {
                requests.spawn(fetch(client.clone(), root.clone()));
                sent += 1;
            }
        }
        let tally = Tally::collect(requests).await?;
        let shed = limits.shedder.snapshot().dropped - dropped_before;
        let phase = match warm.phase {
            Phase::Cold => "cold".to_string(),
            Phase::Warming => format!("warming {:>3.0} %", warm.progress() * 100.0),
            Phase::Warm => "warm".to_string(),
        };
        println!(
            "{:>6}  {sent:>4}  {:>6}  {:>3}  {shed:>13}  {:>11}  {:>13.2}  {phase}",
            second + 1,
            tally.ok,
            tally.unavailable,
            tally.retry_after(),
            warm.qps_limit,
        );
    }

    // 3. What monitoring sees. `/metrics` is outside both layers, so it answers even now.
    let reply = fetch(client.clone(), format!("http://{addr}/metrics").parse()?).await?;
    println!(
        "\nGET /metrics ({}):\n{}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    let shed = limits.shedder.snapshot();
    if shed.dropped == 0 {
        println!(
            "The shedder refused nothing: its CPU signal read {}, below its {} ‰ threshold, so \
             every 503 above came from the warm-up bucket.",
            shed.cpu_permille
                .map_or_else(|| "unknown".to_string(), |cpu| format!("{cpu} ‰")),
            shed.cpu_threshold
        );
    }

    // Closing the client's pooled connections first lets the graceful shutdown finish at
    // once instead of waiting for idle keep-alive connections.
    drop(client);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .map_err(|_| "the server did not shut down within 5 s")???;
    Ok(())
}
