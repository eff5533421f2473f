//! The tasks `serve` runs beside its servers, and the stop signal.

use std::sync::Arc;
use std::time::Duration;

use admit_scaler::service::ScalerService;
use admit_scaler::transport::tls::ReloadingTls;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use super::SWEEP_PERIOD;
use crate::cli::BoxError;

/// Reads the TLS files again every `period` until stopped: a changed, valid set is used for
/// new connections; an invalid one is logged and the last good one kept.
pub(super) async fn reload_tls(
    tls: Arc<ReloadingTls>,
    period: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let reloaded = {
            let tls = Arc::clone(&tls);
            tokio::task::spawn_blocking(move || tls.reload()).await
        };
        match reloaded {
            Ok(Ok(true)) => {
                tracing::info!(target: "admit_scaler", "TLS files changed: new connections use them")
            }
            Ok(Ok(false)) => {}
            Ok(Err(error)) => tracing::warn!(
                target: "admit_scaler",
                "TLS files not reloaded, the last good ones stay in force: {error}"
            ),
            Err(error) => tracing::warn!(target: "admit_scaler", "TLS reload: {error}"),
        }
    }
}

/// Forgets idle triggers and keeps the scaler-wide gauges fresh until stopped.
pub(super) async fn sweep(
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

pub(super) async fn signalled(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|&stop| stop).await;
}

/// Resolves at SIGTERM (Kubernetes) or SIGINT (a terminal), with the signal's name. The
/// handlers are installed by this call, not when the future is first polled: a signal that
/// comes at once is caught, not fatal.
pub(super) fn stop_signal() -> Result<impl Future<Output = &'static str>, BoxError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        }
    })
}
