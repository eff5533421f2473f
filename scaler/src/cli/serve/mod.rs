//! `admit-scaler serve`: the gRPC service KEDA calls, and the HTTP side for Prometheus and
//! Kubernetes probes.

mod health;
mod routes;
mod tasks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use admit_scaler::proto::external_scaler_server::ExternalScalerServer;
use admit_scaler::service::{AllowList, ScalerService, ServiceOptions};
use admit_scaler::transport::grpc::{self, GrpcLimits};
use admit_scaler::transport::http::{self, HttpLimits};
use admit_scaler::transport::tls::{ReloadingTls, TlsFiles};
use clap::Args;
use clap::builder::RangedU64ValueParser;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::Routes;
use tracing_subscriber::EnvFilter;

use self::routes::{http_router, install_recorder};
use self::tasks::{Signal, Signals, reload_tls, signalled, sweep};
use super::BoxError;
use super::duration;
use super::prometheus::{PrometheusArgs, client_options, serve_allow_list};

/// The largest `--max-concurrent-decisions`.
const MAX_CONCURRENT_DECISIONS: usize = 256;

/// The largest `--http-max-scrapes`: half the HTTP side's connections, so that probes always
/// find some not taken by a scrape.
const MAX_SCRAPES: usize = 32;

/// The HTTP side's connections ([`HttpLimits::default`]'s).
const MAX_HTTP_CONNECTIONS: usize = 64;

/// `serve`'s flags. Each can also be set by the environment variable in brackets.
#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Where the gRPC service (ExternalScaler and grpc.health.v1.Health) listens.
    #[arg(long, env = "ADMIT_SCALER_GRPC_LISTEN", default_value = "0.0.0.0:6000")]
    grpc_listen: SocketAddr,
    /// Where the HTTP side listens: GET /metrics (Prometheus text), /healthz, /readyz.
    #[arg(long, env = "ADMIT_SCALER_HTTP_LISTEN", default_value = "0.0.0.0:8080")]
    http_listen: SocketAddr,
    /// PEM certificate chain of the gRPC server: with --tls-key, gRPC is served over TLS
    /// (TLS 1.2 and 1.3, ALPN h2). Its SAN must match the host of the triggers'
    /// `scalerAddress`.
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_CERT",
        requires = "tls_key",
        value_name = "PATH"
    )]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_KEY",
        requires = "tls_cert",
        value_name = "PATH"
    )]
    tls_key: Option<PathBuf>,
    /// PEM CA certificates: clients (KEDA) must present a certificate they signed (mutual TLS).
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_CLIENT_CA",
        requires = "tls_cert",
        value_name = "PATH"
    )]
    tls_client_ca: Option<PathBuf>,
    /// How often the TLS files are read again: a changed, valid set (cert-manager or a
    /// Secret volume rotating them) is used for new connections without a restart.
    #[arg(long, env = "ADMIT_SCALER_TLS_RELOAD_INTERVAL", default_value = "30s", value_parser = duration::between("1s", "1h"), value_name = "DURATION")]
    tls_reload_interval: Duration,
    /// A trigger's decision is reused for this long, so KEDA's repeated calls (three per poll,
    /// plus the HPA's) query Prometheus once. Also StreamIsActive's evaluation period.
    #[arg(long, env = "ADMIT_SCALER_DECISION_INTERVAL", default_value = "10s", value_parser = duration::between("100ms", "1h"), value_name = "DURATION")]
    decision_interval: Duration,
    /// A trigger not called for this long is forgotten (its planner and its metrics). At
    /// least twice the larger of --decision-interval and the 15 s sweep of the scaler-wide
    /// gauges: 30 s with the defaults.
    #[arg(long, env = "ADMIT_SCALER_STATE_TTL", default_value = "10m", value_parser = duration::between("1s", "7d"), value_name = "DURATION")]
    state_ttl: Duration,
    /// The most triggers tracked at once (a trigger under each configuration KEDA sends):
    /// a new one beyond it gets RESOURCE_EXHAUSTED until an unused one is forgotten.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS", default_value_t = admit_scaler::service::DEFAULT_MAX_TRIGGERS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers: usize,
    /// The most triggers tracked at once in one namespace, and StreamIsActive streams open for
    /// it: a new one beyond gets RESOURCE_EXHAUSTED. Default: half --max-triggers; at most it.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS_PER_NAMESPACE", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers_per_namespace: Option<usize>,
    /// The most triggers tracked at once for one ScaledObject (each trigger under each
    /// configuration KEDA sends): a new one beyond gets RESOURCE_EXHAUSTED.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS_PER_OBJECT", default_value_t = admit_scaler::service::DEFAULT_MAX_TRIGGERS_PER_OBJECT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers_per_object: usize,
    /// The most decisions (two queries and the model) running at once; more wait for a slot,
    /// which goes to the waiting namespaces in turn.
    #[arg(long, env = "ADMIT_SCALER_MAX_CONCURRENT_DECISIONS", default_value_t = admit_scaler::service::DEFAULT_MAX_CONCURRENT_DECISIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENT_DECISIONS as u64))]
    max_concurrent_decisions: usize,
    /// The most decisions running at once for one namespace: the rest stay free for the
    /// others. Default: half --max-concurrent-decisions; at most it.
    #[arg(long, env = "ADMIT_SCALER_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENT_DECISIONS as u64))]
    max_concurrent_decisions_per_namespace: Option<usize>,
    /// The longest a decision waits for a slot: past it, RESOURCE_EXHAUSTED, and no decision
    /// is made. With --query-timeout, shorter than --request-timeout.
    #[arg(long, env = "ADMIT_SCALER_MAX_DECISION_WAIT", default_value = "10s", value_parser = duration::between("10ms", "10m"), value_name = "DURATION")]
    max_decision_wait: Duration,
    /// The longest an RPC may take (a decision waiting for its turn and its queries); past it
    /// the RPC fails with CANCELLED and its decision goes on for the next caller. At least
    /// twice --query-timeout.
    #[arg(long, env = "ADMIT_SCALER_REQUEST_TIMEOUT", default_value = "30s", value_parser = duration::between("1s", "10m"), value_name = "DURATION")]
    request_timeout: Duration,
    /// The most gRPC connections open at once, besides those closing (KEDA keeps one per
    /// process; kubelet's gRPC probes open one each). At the cap a new connection gets in at
    /// once: an idle connection is closed for it (one that never made a call and is over a
    /// second old first, else the one idle longest; never one with an RPC in flight), or, if
    /// none is idle, the new one is refused (closed at once).
    #[arg(long, env = "ADMIT_SCALER_MAX_GRPC_CONNECTIONS", default_value_t = 32, value_parser = RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    max_grpc_connections: usize,
    /// The most gRPC connections open at once from one IP address (KEDA's operator and metrics
    /// server each have their own; kubelet's probes come from the node's): at it, one of that
    /// address's idle connections is closed for its new one, or the new one is refused. At
    /// most --max-grpc-connections. Behind a proxy or a mesh sidecar every caller has the
    /// proxy's address: raise it.
    #[arg(long, env = "ADMIT_SCALER_MAX_GRPC_CONNECTIONS_PER_PEER", default_value_t = 8, value_parser = RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    max_grpc_connections_per_peer: usize,
    /// A gRPC connection with no RPC in flight for this long is closed (GOAWAY; the client
    /// reconnects at its next call).
    #[arg(long, env = "ADMIT_SCALER_GRPC_IDLE_TIMEOUT", default_value = "5m", value_parser = duration::between("1s", "1d"), value_name = "DURATION")]
    grpc_idle_timeout: Duration,
    /// A new gRPC connection must finish its handshakes (TLS, HTTP/2) and start its first RPC
    /// within this, or it is closed.
    #[arg(long, env = "ADMIT_SCALER_GRPC_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = duration::between("1s", "5m"), value_name = "DURATION")]
    grpc_handshake_timeout: Duration,
    /// The bytes all gRPC requests in flight may hold: each is charged 2 KiB until its message
    /// begins and 16 KiB from then on, its headers and twice its message, until it is answered;
    /// one address's requests whose body has not ended, at most a quarter. A request past it
    /// gets RESOURCE_EXHAUSTED.
    /// Default: room for 2 × --max-triggers of KEDA's usual calls, 18 KiB each (its operator
    /// and metrics server each waiting on every trigger): 73728000 at 2000 triggers.
    #[arg(long, env = "ADMIT_SCALER_GRPC_MAX_REQUEST_BYTES_IN_FLIGHT", value_parser = RangedU64ValueParser::<usize>::new().range(1 << 20..=1 << 30), value_name = "BYTES")]
    grpc_max_request_bytes_in_flight: Option<usize>,
    /// A gRPC request's message must arrive whole within this of its head; past it the RPC
    /// fails with DEADLINE_EXCEEDED.
    #[arg(long, env = "ADMIT_SCALER_GRPC_REQUEST_BODY_TIMEOUT", default_value = "10s", value_parser = duration::between("100ms", "10m"), value_name = "DURATION")]
    grpc_request_body_timeout: Duration,
    /// The most HTTP connections open at once from one IP address (Prometheus keeps one per
    /// replica; kubelet's probes come from the node's address), of the 64 the HTTP side keeps:
    /// at it, one of that address's idle connections is closed for its new one, or the new one
    /// is refused.
    #[arg(long, env = "ADMIT_SCALER_MAX_HTTP_CONNECTIONS_PER_PEER", default_value_t = 16, value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_HTTP_CONNECTIONS as u64))]
    max_http_connections_per_peer: usize,
    /// An HTTP answer (a /metrics page, say) must be sent whole within this of its request's
    /// head, or its connection is closed.
    #[arg(long, env = "ADMIT_SCALER_HTTP_REQUEST_TIMEOUT", default_value = "10s", value_parser = duration::between("1s", "10m"), value_name = "DURATION")]
    http_request_timeout: Duration,
    /// The most /metrics scrapes answered at once (they share one rendered page); more get 503
    /// at once. The probes need no scrape slot.
    #[arg(long, env = "ADMIT_SCALER_HTTP_MAX_SCRAPES", default_value_t = 4, value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_SCRAPES as u64))]
    http_max_scrapes: usize,
    #[command(flatten)]
    prometheus: PrometheusArgs,
    /// Let triggers name any Prometheus URL: any caller that reaches the gRPC port can then
    /// make the scaler send requests anywhere it can reach (cloud metadata endpoints
    /// included). Without it, --allow-prometheus is required.
    #[arg(
        long,
        env = "ADMIT_SCALER_ALLOW_ANY_PROMETHEUS",
        conflicts_with = "allow_prometheus"
    )]
    allow_any_prometheus: bool,
    /// At SIGTERM the scaler stops being ready at once, and keeps serving for this long while
    /// KEDA and the Service's endpoints learn it is leaving; a second signal (or a first
    /// SIGINT) skips the wait.
    #[arg(long, env = "ADMIT_SCALER_SHUTDOWN_DELAY", default_value = "5s", value_parser = duration::between("0s", "10m"), value_name = "DURATION")]
    shutdown_delay: Duration,
    /// After the delay, how long the scaler waits for RPCs in flight, and connections to close,
    /// before stopping anyway; a further signal stops it at once.
    #[arg(long, env = "ADMIT_SCALER_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration::between("0s", "10m"), value_name = "DURATION")]
    shutdown_grace: Duration,
    /// Log filter (tracing's EnvFilter syntax), e.g. `info` or `admit_scaler=debug`.
    #[arg(long, env = "ADMIT_SCALER_LOG", default_value = "info")]
    log: String,
}

/// How often triggers past their TTL are forgotten and the scaler-wide gauges refreshed.
const SWEEP_PERIOD: Duration = Duration::from_secs(15);

/// The runtime's blocking threads: decisions' models take at most `--max-concurrent-decisions`
/// (at most half of them, by the flag's range), so DNS lookups and bearer-token reads, which run
/// there too, always find a thread.
const BLOCKING_THREADS: usize = 2 * MAX_CONCURRENT_DECISIONS;

/// How long blocking work (a decision's model) may hold the process after the servers stop.
const BLOCKING_GRACE: Duration = Duration::from_millis(100);

pub(super) fn main(args: ServeArgs) -> ExitCode {
    let allow = match check(&args) {
        Ok(allow) => allow,
        Err(error) => {
            eprintln!("admit-scaler serve: {error}");
            return ExitCode::from(2);
        }
    };
    let filter = match EnvFilter::try_new(&args.log) {
        Ok(filter) => filter,
        Err(error) => {
            eprintln!("admit-scaler: --log {:?}: {error}", args.log);
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(args, allow));
    // Dropping the runtime would wait for every blocking task, a decision's model among them.
    runtime.shutdown_timeout(BLOCKING_GRACE);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// The settings that cannot work, refused before anything starts. (Each flag's own range is
/// checked as it is parsed.)
fn check(args: &ServeArgs) -> Result<AllowList, String> {
    // A trigger must outlive the time between KEDA's calls, and the scaler-wide gauges the
    // sweeps that refresh them.
    let least = args.decision_interval.max(SWEEP_PERIOD).saturating_mul(2);
    if args.state_ttl < least {
        return Err(format!(
            "--state-ttl {:?} is too short: at least twice the decision interval and {:?} \
             ({least:?})",
            args.state_ttl, SWEEP_PERIOD
        ));
    }
    // The two queries of a decision run side by side, each within --query-timeout.
    let least = args.prometheus.query_timeout.saturating_mul(2);
    if args.request_timeout < least {
        return Err(format!(
            "--request-timeout {:?} is too short: at least twice --query-timeout ({least:?})",
            args.request_timeout
        ));
    }
    // A decision that waited its longest for a slot still answers before the RPC's limit.
    let decision = args
        .max_decision_wait
        .saturating_add(args.prometheus.query_timeout);
    if decision >= args.request_timeout {
        return Err(format!(
            "--max-decision-wait {:?} is too long: with --query-timeout ({decision:?}) it must \
             be shorter than --request-timeout ({:?})",
            args.max_decision_wait, args.request_timeout
        ));
    }
    // A share is a share: one larger than the whole would not be a cap at all.
    for (flag, share, total, of) in [
        (
            "--max-grpc-connections-per-peer",
            Some(args.max_grpc_connections_per_peer),
            args.max_grpc_connections,
            "--max-grpc-connections",
        ),
        (
            "--max-triggers-per-namespace",
            args.max_triggers_per_namespace,
            args.max_triggers,
            "--max-triggers",
        ),
        (
            "--max-concurrent-decisions-per-namespace",
            args.max_concurrent_decisions_per_namespace,
            args.max_concurrent_decisions,
            "--max-concurrent-decisions",
        ),
    ] {
        if let Some(share) = share
            && share > total
        {
            return Err(format!("{flag} {share} is above {of} ({total})"));
        }
    }
    // Queries beyond the client's slots wait in arrival order, whatever their namespace.
    let queries = args.max_concurrent_decisions.saturating_mul(2);
    if args.prometheus.prometheus_max_in_flight.get() < queries {
        return Err(format!(
            "--prometheus-max-in-flight {} is too small: at least twice \
             --max-concurrent-decisions ({queries}), or decisions wait for one another's queries",
            args.prometheus.prometheus_max_in_flight
        ));
    }
    serve_allow_list(&args.prometheus, args.allow_any_prometheus)
}

async fn serve(args: ServeArgs, allow: AllowList) -> Result<(), BoxError> {
    let mut signals = Signals::subscribe()?;
    let metrics = install_recorder(args.state_ttl)?;
    let tls = tls_files(&args)
        .map(|files| ReloadingTls::load(files).map(Arc::new))
        .transpose()?;
    tracing::info!(target: "admit_scaler", "triggers may query Prometheus at: {allow}");
    let service = ScalerService::new(ServiceOptions {
        decision_interval: args.decision_interval,
        state_ttl: args.state_ttl,
        max_triggers: args.max_triggers,
        max_triggers_per_namespace: per_namespace(
            args.max_triggers_per_namespace,
            args.max_triggers,
        ),
        max_triggers_per_object: args.max_triggers_per_object,
        max_concurrent_decisions: args.max_concurrent_decisions,
        max_concurrent_decisions_per_namespace: per_namespace(
            args.max_concurrent_decisions_per_namespace,
            args.max_concurrent_decisions,
        ),
        max_decision_wait: args.max_decision_wait,
        client: client_options(&args.prometheus)?,
        allow,
    });

    let grpc_listener = TcpListener::bind(args.grpc_listen)
        .await
        .map_err(|error| format!("--grpc-listen {}: {error}", args.grpc_listen))?;
    let http_listener = TcpListener::bind(args.http_listen)
        .await
        .map_err(|error| format!("--http-listen {}: {error}", args.http_listen))?;
    let grpc_addr = grpc_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;

    let health = tonic_health::server::HealthReporter::new();
    let health_service = health::check_only(&health);
    health
        .set_serving::<ExternalScalerServer<ScalerService>>()
        .await;
    let ready = Arc::new(AtomicBool::new(true));
    let (stop, stopped) = watch::channel(false);

    let routes = Routes::new(health_service.max_decoding_message_size(4 << 10))
        .add_service(service.clone().into_server());
    let grpc = tokio::spawn(grpc::serve(
        grpc_listener,
        routes,
        tls.clone(),
        grpc_limits(&args),
        signalled(stopped.clone()),
    ));
    let http = tokio::spawn(http::serve(
        http_listener,
        http_router(metrics.clone(), args.http_max_scrapes, Arc::clone(&ready)),
        HttpLimits {
            request_timeout: args.http_request_timeout,
            max_connections: MAX_HTTP_CONNECTIONS,
            max_connections_per_peer: args.max_http_connections_per_peer,
            ..HttpLimits::default()
        },
        signalled(stopped.clone()),
    ));
    let sweeper = tokio::spawn(sweep(service.clone(), metrics, stopped.clone()));
    let reloader =
        tls.map(|tls| tokio::spawn(reload_tls(tls, args.tls_reload_interval, stopped.clone())));

    tracing::info!(
        grpc = %grpc_addr,
        http = %http_addr,
        tls = args.tls_cert.is_some(),
        "admit-scaler {} serving",
        env!("CARGO_PKG_VERSION")
    );

    // Not ready at once: the Service's endpoints and the kubelet's probes learn it while the
    // scaler still serves, for the delay; a second signal, or a SIGINT, skips it.
    let signal = signals.next().await;
    let delay = match signal {
        Signal::Terminate => args.shutdown_delay,
        Signal::Interrupt => Duration::ZERO,
    };
    tracing::info!(
        "{signal}: not ready; serving for {delay:?} (--shutdown-delay), then stopping within \
         {:?}",
        args.shutdown_grace
    );
    ready.store(false, Ordering::SeqCst);
    health
        .set_not_serving::<ExternalScalerServer<ScalerService>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        signal = signals.next() => tracing::info!("{signal}: stopping now"),
    }

    // Open StreamIsActive streams, and RPCs waiting for a decision, would hold the graceful
    // shutdown: they end with UNAVAILABLE. The listeners close; every connection is told to
    // go (GOAWAY) and closes once its RPCs are answered.
    service.shut_down();
    let _ = stop.send(true);
    let drained = tokio::select! {
        drained = tokio::time::timeout(args.shutdown_grace, async {
            let grpc = grpc.await;
            let http = http.await;
            (grpc, http)
        }) => drained.map_err(|_| format!(
            "RPCs still in flight after --shutdown-grace {:?}; stopping anyway",
            args.shutdown_grace
        )),
        signal = signals.next() => Err(format!("{signal}: stopping at once")),
    };
    sweeper.abort();
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    let (grpc, http) = drained?;
    grpc?;
    http?;
    tracing::info!("stopped");
    Ok(())
}

/// The gRPC server's limits, from the flags.
fn grpc_limits(args: &ServeArgs) -> GrpcLimits {
    let defaults = GrpcLimits::new(args.max_triggers, args.request_timeout);
    GrpcLimits {
        max_connections: args.max_grpc_connections,
        max_connections_per_peer: args.max_grpc_connections_per_peer,
        idle_timeout: args.grpc_idle_timeout,
        handshake_timeout: args.grpc_handshake_timeout,
        max_request_bytes_in_flight: args
            .grpc_max_request_bytes_in_flight
            .unwrap_or(defaults.max_request_bytes_in_flight),
        request_body_timeout: args.grpc_request_body_timeout,
        ..defaults
    }
}

/// A namespace's share of `total`: `given`, or half of it (at least 1).
fn per_namespace(given: Option<usize>, total: usize) -> usize {
    given.unwrap_or((total / 2).max(1))
}

fn tls_files(args: &ServeArgs) -> Option<TlsFiles> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return None;
    };
    Some(TlsFiles {
        cert: cert.clone(),
        key: key.clone(),
        client_ca: args.tls_client_ca.clone(),
    })
}
