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

/// A stop signal: SIGTERM (Kubernetes) or SIGINT (a terminal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signal {
    Terminate,
    Interrupt,
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
        })
    }
}

/// The process's stop signals, from the moment [`Signals::subscribe`] returns: a signal that
/// comes at once is caught, not fatal, and so is every later one.
#[derive(Debug)]
pub(super) struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn subscribe() -> Result<Self, BoxError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal (never, once the runtime stops delivering them).
    pub(super) async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.terminate.recv() => Signal::Terminate,
            Some(()) = self.interrupt.recv() => Signal::Interrupt,
            else => std::future::pending().await,
        }
    }
}
