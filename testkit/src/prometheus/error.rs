//! [`StartError`], why a start fails.

use std::error::Error;
use std::fmt;
use std::io;

use super::INSTALL_HINT;

/// Why [`start`](super::start) failed.
#[derive(Debug)]
pub enum StartError {
    /// There is no Prometheus [`binary`](super::binary).
    NotInstalled,
    /// Preparing the temporary directory, finding a port or spawning the binary failed.
    Io(io::Error),
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
            StartError::Io(error) => write!(f, "starting Prometheus: {error}"),
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
            StartError::NotInstalled | StartError::NotReady { .. } => None,
        }
    }
}

impl From<io::Error> for StartError {
    fn from(error: io::Error) -> Self {
        StartError::Io(error)
    }
}
