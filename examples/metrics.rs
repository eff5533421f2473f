//! Metrics for Prometheus: an axum service behind a warm-up bucket and a load shedder, with a
//! `/metrics` endpoint in Prometheus' text format, driven by its own client.
//!
//! The application installs the recorder (`metrics-exporter-prometheus`), names its limiters,
//! and builds one [`Reporter`] over them. `/metrics` is routed outside both layers, so scrapes
//! get through while the service is cold or shedding; each scrape publishes the limiters'
//! current state (`reporter.report()`) and renders the recorder. State transitions (shedding
//! started and stopped, warm-up at its full rate) are `tracing` events, printed as they happen.
//!
//! The program plays four seconds against itself over real HTTP (requests take 20 ms each): a
//! steady 300 requests per second while the bucket warms up towards 200 per second; for the
//! middle second the CPU signal reads 95 %, so the shedder sheds. The CPU is a `ManualCpu`
//! here so that the overload happens on cue; a real service keeps the default system signal.
//! It then prints the `admit_*` series of a scrape, and the offered load λ they give: the
//! bucket, outside the shedder, counts every request in `admit_offered_requests_total`, the
//! ones it refuses included, which the shedder's own series never see.
//!
//! ```text
//! cargo run --example metrics --features metrics,http,tracing
//! cargo run --example metrics --features metrics,http,tracing -- --serve   # keep serving
//! ```
//!
//! With `--serve` it keeps serving (Ctrl-C stops it): point a Prometheus scrape job at the
//! address it prints and try the README's queries.

use std::error::Error;
use std::sync::Arc;
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

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let serve = std::env::args().any(|arg| arg == "--serve");
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

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(axum::serve(listener, app(shedder, bucket, scrape)).into_future());
    println!("Serving on http://{addr} (scrape http://{addr}/metrics)");

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let root: Uri = format!("http://{addr}/").parse()?;
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

    if serve {
        println!("\nStill serving on http://{addr}; Ctrl-C stops.");
        tokio::signal::ctrl_c().await?;
    }
    server.abort();
    Ok(())
}
