//! `admit-scaler serve`: the gRPC service KEDA calls, and the HTTP side for Prometheus and
//! Kubernetes probes.

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
use admit_scaler::transport::grpc::GrpcLimits;
use admit_scaler::transport::http::{self, HttpLimits};
use admit_scaler::transport::tls::{self, ReloadingTls, TlsAcceptLimits, TlsFiles};
use clap::Args;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

use self::routes::{http_router, install_recorder};
use self::tasks::{reload_tls, signalled, stop_signal, sweep};
use super::BoxError;
use super::duration;
use super::prometheus::{PrometheusArgs, client_options, serve_allow_list};

/// The largest `--max-concurrent-decisions`.
const MAX_CONCURRENT_DECISIONS: usize = 256;

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
    /// it: a new one beyond gets RESOURCE_EXHAUSTED.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS_PER_NAMESPACE", default_value_t = admit_scaler::service::DEFAULT_MAX_TRIGGERS_PER_NAMESPACE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers_per_namespace: usize,
    /// The most triggers tracked at once for one ScaledObject (each trigger under each
    /// configuration KEDA sends): a new one beyond gets RESOURCE_EXHAUSTED.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS_PER_OBJECT", default_value_t = admit_scaler::service::DEFAULT_MAX_TRIGGERS_PER_OBJECT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers_per_object: usize,
    /// The most decisions (two queries and the model) running at once; more wait for a slot,
    /// which goes to the waiting namespaces in turn.
    #[arg(long, env = "ADMIT_SCALER_MAX_CONCURRENT_DECISIONS", default_value_t = admit_scaler::service::DEFAULT_MAX_CONCURRENT_DECISIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENT_DECISIONS as u64))]
    max_concurrent_decisions: usize,
    /// The most decisions running at once for one namespace (at most
    /// --max-concurrent-decisions): the rest stay free for the others.
    #[arg(long, env = "ADMIT_SCALER_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE", default_value_t = admit_scaler::service::DEFAULT_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENT_DECISIONS as u64))]
    max_concurrent_decisions_per_namespace: usize,
    /// The longest a decision waits for a slot: past it, RESOURCE_EXHAUSTED, and no decision
    /// is made. With --query-timeout, shorter than --request-timeout.
    #[arg(long, env = "ADMIT_SCALER_MAX_DECISION_WAIT", default_value = "10s", value_parser = duration::between("10ms", "10m"), value_name = "DURATION")]
    max_decision_wait: Duration,
    /// The longest an RPC may take (a decision waiting for its turn and its queries); past it
    /// the RPC fails with CANCELLED and its decision goes on for the next caller. At least
    /// twice --query-timeout.
    #[arg(long, env = "ADMIT_SCALER_REQUEST_TIMEOUT", default_value = "30s", value_parser = duration::between("1s", "10m"), value_name = "DURATION")]
    request_timeout: Duration,
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
    /// How long a stop (SIGTERM, SIGINT) waits for RPCs in flight before closing.
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
    let stop_signal = stop_signal()?;
    let metrics = install_recorder(args.state_ttl)?;
    let tls = tls_files(&args)
        .map(|files| ReloadingTls::load(files).map(Arc::new))
        .transpose()?;
    tracing::info!(target: "admit_scaler", "triggers may query Prometheus at: {allow}");
    let service = ScalerService::new(ServiceOptions {
        decision_interval: args.decision_interval,
        state_ttl: args.state_ttl,
        max_triggers: args.max_triggers,
        max_triggers_per_namespace: args.max_triggers_per_namespace,
        max_triggers_per_object: args.max_triggers_per_object,
        max_concurrent_decisions: args.max_concurrent_decisions,
        max_concurrent_decisions_per_namespace: args.max_concurrent_decisions_per_namespace,
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

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<ExternalScalerServer<ScalerService>>()
        .await;
    let ready = Arc::new(AtomicBool::new(true));
    let (stop, stopped) = watch::channel(false);

    let limits = GrpcLimits::new(args.max_triggers, args.request_timeout);
    let router = limits
        .server()
        .add_service(health_service.max_decoding_message_size(4 << 10))
        .add_service(service.clone().into_server());
    let grpc = match &tls {
        Some(tls) => {
            let accept = TlsAcceptLimits {
                tcp_keepalive: limits.tcp_keepalive,
                ..TlsAcceptLimits::default()
            };
            let incoming = tls::accept(grpc_listener, Arc::clone(tls), accept);
            tokio::spawn(router.serve_with_incoming_shutdown(incoming, signalled(stopped.clone())))
        }
        None => tokio::spawn(router.serve_with_incoming_shutdown(
            limits.incoming(grpc_listener),
            signalled(stopped.clone()),
        )),
    };
    let http = tokio::spawn(http::serve(
        http_listener,
        http_router(metrics.clone(), Arc::clone(&ready)),
        HttpLimits::default(),
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

    let signal = stop_signal.await;
    tracing::info!(
        "{signal}: not ready, stopping within {:?}",
        args.shutdown_grace
    );
    ready.store(false, Ordering::SeqCst);
    // Open StreamIsActive streams, and RPCs waiting for a decision, would hold the graceful
    // shutdown: they end with UNAVAILABLE.
    service.shut_down();
    health
        .set_not_serving::<ExternalScalerServer<ScalerService>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    let _ = stop.send(true);
    let drained = tokio::time::timeout(args.shutdown_grace, async {
        let grpc = grpc.await;
        let http = http.await;
        (grpc, http)
    })
    .await;
    sweeper.abort();
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    match drained {
        Ok((grpc, http)) => {
            grpc??;
            http?;
            tracing::info!("stopped");
            Ok(())
        }
        Err(_) => Err(format!(
            "RPCs still in flight after --shutdown-grace {:?}; stopping anyway",
            args.shutdown_grace
        )
        .into()),
    }
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
