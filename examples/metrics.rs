//! Metrics for Prometheus: an axum service behind a warm-up bucket and a load shedder, with a
//! `/metrics` endpoint in Prometheus' text format, driven by its own client.
//!
//! The application installs the recorder (`metrics-exporter-prometheus`), names its limiters
//! (both `api` here), and builds one [`Reporter`] over them. `/metrics` is routed outside both
//! layers, so scrapes get through while the service is cold or shedding; each scrape publishes
//! the limiters' current state (`reporter.report()`) and renders the recorder. State
//! transitions (shedding started and stopped, warm-up at its full rate) are `tracing` events,
//! printed as they happen.
//!
//! By default the program plays four seconds against itself over real HTTP (requests take
//! 20 ms each): a steady 300 requests per second while the bucket warms up towards 200 per
//! second; for the middle second the CPU signal reads 95 %, so the shedder sheds. The CPU is a
//! `ManualCpu` here so that the overload happens on cue; a real service keeps the default
//! system signal. It then prints the `admit_*` series of a scrape, and the offered load λ they
//! give: the bucket, outside the shedder, counts every request in
//! `admit_offered_requests_total`, the ones it refuses included, which the shedder's own series
//! never see.
//!
//! With `--serve` it listens on `127.0.0.1:9184` (or the address given after the flag) and
//! offers itself an open-loop load until Ctrl-C: 120 requests per second for a minute, then
//! 240 per second for a minute (above the bucket's 200, so it refuses about 40 per second), by
//! turns, with a line every 10 s. The CPU signal stays at 30 %, so the shedder refuses nothing.
//! `deploy/local/prometheus.yml` scrapes that port, and `deploy/local/target.yaml` holds the
//! scaler trigger that reads these series: the walkthrough is in the guide,
//! `admit::guide::scaler`, "On a laptop".
//!
//! ```text
//! cargo run --example metrics --features metrics,http,tracing
//! cargo run --example metrics --features metrics,http,tracing -- --serve   # until Ctrl-C
//! cargo run --example metrics --features metrics,http,tracing -- --serve 127.0.0.1:9000
//! ```

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use admit::metrics::Reporter;
use admit::shed::{ShedLayer, Shedder};
use admit::signal::cpu::ManualCpu;
use admit::warmup::{WarmUp, WarmUpLayer};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::get;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::task::JoinSet;

type BoxError = Box<dyn Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Where `--serve` listens without an address: the target of `deploy/local/prometheus.yml`.
const SERVE_ADDR: &str = "127.0.0.1:9184";
/// `--serve`'s open-loop load, in requests per second: each rate for [`PHASE`], by turns.
const RATES: [f64; 2] = [120.0, 240.0];
const PHASE: Duration = Duration::from_secs(60);
/// How often `--serve` prints what its requests got.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// What `/metrics` needs: the reporter over the limiters, and the recorder to render.
#[derive(Clone)]
struct Scrape {
    reporter: Arc<Reporter>,
    prometheus: PrometheusHandle,
}

fn app(shedder: Arc<Shedder>, bucket: Arc<WarmUp>, scrape: Scrape) -> Router {
    Router::new()
        .route("/", get(work))
        .layer(ShedLayer::new(shedder).http())
        .layer(WarmUpLayer::new(bucket).http())
        // After the layers, so neither applies to scrapes.
        .route("/metrics", get(metrics))
        .with_state(scrape)
}

async fn work() -> &'static str {
    tokio::time::sleep(Duration::from_millis(20)).await;
    "done\n"
}

async fn metrics(State(scrape): State<Scrape>) -> String {
    scrape.reporter.report();
    scrape.prometheus.render()
}

async fn fetch(client: HttpClient, uri: Uri) -> Result<(StatusCode, Bytes), BoxError> {
    let response = client
        .request(Request::get(uri).body(Empty::new())?)
        .await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

/// Metrics for Prometheus: plays four seconds against itself and prints a scrape.
#[derive(Debug, clap::Parser)]
struct Flags {
    /// Serve on ADDR under an open-loop load until Ctrl-C instead.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = SERVE_ADDR)]
    serve: Option<SocketAddr>,
}

/// Answers to `--serve`'s requests since the last report.
#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    ok: AtomicU64,
    refused: AtomicU64,
    lost: AtomicU64,
}

/// An open-loop load on `root` until the program stops: [`RATES`] by turns, each for
/// [`PHASE`], requests sent on schedule whatever the answers, a line every [`REPORT_EVERY`].
async fn offer_load(client: HttpClient, root: Uri) {
    let tally = Arc::new(Tally::default());
    let tick = Duration::from_millis(10);
    let mut ticks = tokio::time::interval(tick);
    let started = ticks.tick().await;
    let mut next_report = started + REPORT_EVERY;
    let mut due = 0.0;
    loop {
        let now = ticks.tick().await;
        let elapsed = now - started;
        let phase = (elapsed.as_secs() / PHASE.as_secs()) as usize % RATES.len();
        due += RATES[phase] * tick.as_secs_f64();
        while due >= 1.0 {
            due -= 1.0;
            tally.sent.fetch_add(1, Ordering::Relaxed);
            let (client, root, tally) = (client.clone(), root.clone(), Arc::clone(&tally));
            tokio::spawn(async move {
                let counter = match fetch(client, root).await {
                    Ok((StatusCode::OK, _)) => &tally.ok,
                    Ok(_) => &tally.refused,
                    Err(_) => &tally.lost,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            });
        }
        if now >= next_report {
            next_report += REPORT_EVERY;
            let take = |counter: &AtomicU64| counter.swap(0, Ordering::Relaxed);
            let (sent, lost) = (take(&tally.sent), take(&tally.lost));
            let window = REPORT_EVERY.as_secs();
            println!(
                "{:>5} s  sent {sent} in {window} s ({}/s); answers: {} × 200 OK, {} refused{}",
                elapsed.as_secs(),
                sent / window,
                take(&tally.ok),
                take(&tally.refused),
                if lost > 0 {
                    format!(", {lost} lost")
                } else {
                    String::new()
                }
            );
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let serve = <Flags as clap::Parser>::parse().serve;
    tracing_subscriber::fmt().with_target(false).init();
    // The recorder first: the reporter registers its series with it.
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let cpu = ManualCpu::new(300);
    let shedder = Arc::new(Shedder::builder().name("api").cpu(cpu.clone()).build()?);
    let bucket = Arc::new(
        WarmUp::builder(200.0)
            .name("api")
            .warm_up_period(Duration::from_secs(2))
            .build()?,
    );
    let reporter = Reporter::builder()
        .shedder(Arc::clone(&shedder))
        .warm_up(Arc::clone(&bucket))
        .build()?;
    let scrape = Scrape {
        reporter: Arc::new(reporter),
        prometheus,
    };

    let bind = serve.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|error| format!("listen on {bind}: {error}"))?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(axum::serve(listener, app(shedder, bucket, scrape)).into_future());
    println!("Serving on http://{addr} (scrape http://{addr}/metrics)");

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let root: Uri = format!("http://{addr}/").parse()?;
    if serve.is_some() {
        println!(
            "Offering {} and {} requests/s by turns, {} s each, to limiter \"api\"; Ctrl-C stops.",
            RATES[0],
            RATES[1],
            PHASE.as_secs()
        );
        tokio::select! {
            () = offer_load(client, root) => {}
            stopped = tokio::signal::ctrl_c() => stopped?,
        }
        server.abort();
        return Ok(());
    }
    let mut requests = JoinSet::new();
    let mut ticks = tokio::time::interval(Duration::from_millis(10));
    let started = tokio::time::Instant::now();
    for tick in 0..400u32 {
        ticks.tick().await;
        match tick {
            150 => cpu.set(950),
            250 => cpu.set(300),
            _ => {}
        }
        for _ in 0..3 {
            requests.spawn(fetch(client.clone(), root.clone()));
        }
    }
    let sending = started.elapsed().as_secs_f64();
    let (mut ok, mut refused) = (0u32, 0u32);
    while let Some(reply) = requests.join_next().await {
        match reply??.0 {
            StatusCode::OK => ok += 1,
            _ => refused += 1,
        }
    }
    println!("\n1200 requests: {ok} × 200 OK, {refused} refused.\n");

    let (_, body) = fetch(client.clone(), format!("http://{addr}/metrics").parse()?).await?;
    let scrape = String::from_utf8_lossy(&body);
    let (mut offered, mut reached_shedder) = (0.0, 0.0);
    for line in scrape.lines().filter(|line| line.starts_with("admit_")) {
        println!("{line}");
        let value: f64 = line.rsplit(' ').next().unwrap_or_default().parse()?;
        if line.starts_with("admit_offered_requests_total") {
            offered += value;
        } else if line.starts_with("admit_shed_requests_total") {
            reached_shedder += value;
        }
    }
    // What `sum(rate(admit_offered_requests_total[1m]))` reads over a steady minute.
    println!(
        "\nOffered: {offered} requests in {sending:.1} s, λ = {:.0}/s (the shedder alone saw \
         {reached_shedder}).",
        offered / sending
    );

    server.abort();
    Ok(())
}
