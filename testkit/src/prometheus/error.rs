//! [`StartError`], why a start fails.

use std::error::Error;
use std::fmt;
use std::io;

use super::INSTALL_HINT;

/// Why [`start`](super::start) or [`start_backfilled`](super::start_backfilled) failed.
#[derive(Debug)]
pub enum StartError {
    /// There is no Prometheus [`binary`](super::binary).
    NotInstalled,
    /// There is no `promtool` beside the Prometheus [`binary`](super::binary) or on `PATH`, for
    /// [`start_backfilled`](super::start_backfilled).
    NoPromtool,
    /// Preparing the temporary directory, finding a port or spawning a binary failed.
    Io(io::Error),
    /// `promtool tsdb create-blocks-from openmetrics` failed, for
    /// [`start_backfilled`](super::start_backfilled): promtool's stderr (such as
    /// `… data does not end with # EOF` for a text without its end), its exit status if it wrote
    /// nothing there, or how long it ran before it was killed.
    Backfill(String),
    /// The process exited, or `/-/ready` did not answer 200 in time.
    NotReady {
        /// What went wrong: the exit status, or how long the start waited.
        reason: String,
        /// The last lines of Prometheus' log.
        log_tail: String,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NotInstalled => write!(f, "no Prometheus binary: {INSTALL_HINT}"),
            StartError::NoPromtool => write!(
                f,
                "no promtool beside the Prometheus binary or on PATH: {INSTALL_HINT}"
            ),
            StartError::Io(error) => write!(f, "starting Prometheus: {error}"),
            StartError::Backfill(message) => {
                write!(f, "promtool could not backfill Prometheus' TSDB: {message}")
            }
            StartError::NotReady { reason, log_tail } => write!(
                f,
                "Prometheus did not become ready: {reason}; the end of its log:\n{log_tail}"
            ),
        }
    }
}

impl Error for StartError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StartError::Io(error) => Some(error),
            StartError::NotInstalled
            | StartError::NoPromtool
            | StartError::Backfill(_)
            | StartError::NotReady { .. } => None,
        }
    }
}

impl From<io::Error> for StartError {
    fn from(error: io::Error) -> Self {
        StartError::Io(error)
    }
}
