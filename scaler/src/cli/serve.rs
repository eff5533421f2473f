//! `admit-scaler serve`: the gRPC service KEDA calls, and the HTTP side for Prometheus and
//! Kubernetes probes.

use std::error::Error;
use std::fs;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use admit_scaler::proto::external_scaler_server::ExternalScalerServer;
use admit_scaler::service::{AllowList, ScalerService, ServiceOptions};
use admit_scaler::telemetry;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tracing_subscriber::EnvFilter;

use super::{PrometheusArgs, ServeArgs};

/// How often triggers past their TTL are forgotten and the scaler-wide gauges refreshed.
const SWEEP_PERIOD: Duration = Duration::from_secs(15);

type BoxError = Box<dyn Error + Send + Sync>;

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
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args, allow)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// The settings that cannot work, refused before anything starts.
fn check(args: &ServeArgs) -> Result<AllowList, String> {
    if args.decision_interval.is_zero() {
        return Err("--decision-interval must be longer than 0".to_owned());
    }
    if args.prometheus.query_timeout.is_zero() {
        return Err("--query-timeout must be longer than 0".to_owned());
    }
    // A trigger must outlive the time between KEDA's calls, and the scaler-wide gauges the
    // sweeps that refresh them.
    let least = args.decision_interval.max(SWEEP_PERIOD) * 2;
    if args.state_ttl < least {
        return Err(format!(
            "--state-ttl {:?} is too short: at least twice the decision interval and {:?} \
             ({least:?})",
            args.state_ttl, SWEEP_PERIOD
        ));
    }
    AllowList::new(args.allow_prometheus.iter().cloned())
        .map_err(|error| format!("--allow-prometheus: {error}"))
}

async fn serve(args: ServeArgs, allow: AllowList) -> Result<(), BoxError> {
    let metrics = install_recorder(args.state_ttl)?;
    let tls = tls_config(&args)?;
    let service = ScalerService::new(ServiceOptions {
        decision_interval: args.decision_interval,
        state_ttl: args.state_ttl,
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

    let mut grpc = Server::builder();
    if let Some(tls) = tls {
        grpc = grpc.tls_config(tls)?;
    }
    let grpc = grpc
        .add_service(health_service)
        .add_service(service.clone().into_server())
        .serve_with_incoming_shutdown(TcpIncoming::from(grpc_listener), signalled(stopped.clone()));
    let http = axum::serve(
        http_listener,
        http_router(metrics.clone(), Arc::clone(&ready)),
    )
    .with_graceful_shutdown(signalled(stopped.clone()));
    let sweeper = tokio::spawn(sweep(service.clone(), metrics, stopped.clone()));

    tracing::info!(
        grpc = %grpc_addr,
        http = %http_addr,
        tls = args.tls_cert.is_some(),
        "admit-scaler {} serving",
        env!("CARGO_PKG_VERSION")
    );
    let grpc = tokio::spawn(grpc);
    let http = tokio::spawn(async move { http.await });

    let signal = wait_for_signal().await?;
    tracing::info!(
        "{signal}: not ready, stopping within {:?}",
        args.shutdown_grace
    );
    ready.store(false, Ordering::SeqCst);
    // Open StreamIsActive streams would hold the graceful shutdown.
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
    match drained {
        Ok((grpc, http)) => {
            grpc??;
            http??;
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

/// The Prometheus recorder for the scaler's metrics: duration histograms with buckets, and a
/// trigger's series dropped once it has not changed for the state TTL.
fn install_recorder(state_ttl: Duration) -> Result<PrometheusHandle, BoxError> {
    let mut builder = PrometheusBuilder::new().idle_timeout(MetricKindMask::ALL, Some(state_ttl));
    for name in telemetry::HISTOGRAMS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_owned()), &telemetry::DURATION_BUCKETS)?;
    }
    Ok(builder.install_recorder()?)
}

fn tls_config(args: &ServeArgs) -> Result<Option<ServerTlsConfig>, BoxError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |flag: &str, path: &std::path::Path| {
        fs::read(path).map_err(|error| format!("{flag} {}: {error}", path.display()))
    };
    let identity = Identity::from_pem(read("--tls-cert", cert)?, read("--tls-key", key)?);
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &args.tls_client_ca {
        config = config.client_ca_root(Certificate::from_pem(read("--tls-client-ca", ca)?));
    }
    Ok(Some(config))
}

pub(super) fn client_options(
    args: &PrometheusArgs,
) -> Result<admit_scaler::prometheus::ClientOptions, BoxError> {
    let bearer_token = match &args.prometheus_bearer_token_file {
        Some(path) => {
            let token = fs::read_to_string(path).map_err(|error| {
                format!("--prometheus-bearer-token-file {}: {error}", path.display())
            })?;
            if token.trim().is_empty() {
                return Err(format!(
                    "--prometheus-bearer-token-file {}: the file is empty",
                    path.display()
                )
                .into());
            }
            // Checked once here, so that a wrong path stops the scaler at start; read again
            // before every query, so that a rotated token is sent.
            Some(admit_scaler::prometheus::BearerToken::File(path.clone()))
        }
        None => None,
    };
    let extra_roots = match &args.prometheus_ca_file {
        Some(path) => ca_certificates(path)?,
        None => Vec::new(),
    };
    Ok(admit_scaler::prometheus::ClientOptions {
        timeout: args.query_timeout,
        bearer_token,
        extra_roots,
        ..Default::default()
    })
}

/// The certificates of a PEM file, each one accepted as a root by rustls.
fn ca_certificates(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, BoxError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let flag = "--prometheus-ca-file";
    let pem = fs::read(path).map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{flag} {}: no PEM certificate in the file", path.display()).into());
    }
    admit_scaler::prometheus::tls_config(&certificates)
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    Ok(certificates)
}

fn http_router(metrics: PrometheusHandle, ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(metrics): State<PrometheusHandle>| async move { metrics.render() }),
        )
        .with_state(metrics)
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "stopping\n")
                    }
                }
            }),
        )
}

/// Forgets idle triggers and keeps the scaler-wide gauges fresh until stopped.
async fn sweep(
    service: ScalerService,
    metrics: PrometheusHandle,
    mut stopped: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(SWEEP_PERIOD);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                service.sweep();
                metrics.run_upkeep();
            }
            _ = stopped.changed() => return,
        }
    }
}

async fn signalled(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|&stop| stop).await;
}

/// SIGTERM (Kubernetes) or SIGINT (a terminal).
async fn wait_for_signal() -> Result<&'static str, BoxError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
