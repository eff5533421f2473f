//! [`StartError`], why a launch fails, and [`ApiError`], why a runtime API call fails.

use std::error::Error;
use std::fmt;
use std::io;
use std::time::Duration;

use super::INSTALL_HINT;

/// Why [`launch`](fn@super::launch) failed.
#[derive(Debug)]
pub enum StartError {
    /// There is no HAProxy [`binary`](super::binary).
    NotInstalled,
    /// The [`HaproxyConfig`](super::HaproxyConfig) has a name or path HAProxy would refuse or
    /// misread: which, and why.
    InvalidConfig(String),
    /// Preparing the temporary directory, finding a port or spawning the binary failed.
    Io(io::Error),
    /// The process exited, or its runtime API and frontend did not answer in time.
    NotReady {
        /// What went wrong: the exit status, or how long the launch waited and the last error.
        reason: String,
        /// The last lines of HAProxy's log, with its alerts.
        log_tail: String,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NotInstalled => write!(f, "no HAProxy binary: {INSTALL_HINT}"),
            StartError::InvalidConfig(why) => write!(f, "an invalid HAProxy configuration: {why}"),
            StartError::Io(error) => write!(f, "starting HAProxy: {error}"),
            StartError::NotReady { reason, log_tail } => write!(
                f,
                "HAProxy did not become ready: {reason}; the end of its log:\n{log_tail}"
            ),
        }
    }
}

impl Error for StartError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StartError::Io(error) => Some(error),
            StartError::NotInstalled
            | StartError::InvalidConfig(_)
            | StartError::NotReady { .. } => None,
        }
    }
}

impl From<io::Error> for StartError {
    fn from(error: io::Error) -> Self {
        StartError::Io(error)
    }
}

/// Why a call to HAProxy's runtime API failed. HAProxy's answers are quoted up to 512
/// characters.
#[derive(Debug)]
pub enum ApiError {
    /// A server name HAProxy would refuse, or that would split the command: names are letters,
    /// digits, `-`, `_`, `.` and `:`; or a raw command with a line break.
    InvalidName(String),
    /// The socket could not be reached or failed, or the whole answer did not come within
    /// [`NET_TIMEOUT`](crate::wait::NET_TIMEOUT) (`TimedOut`) or was longer than 16 MiB
    /// (`InvalidData`).
    Io {
        /// The command sent.
        command: String,
        /// What failed.
        error: io::Error,
    },
    /// HAProxy refused the command, such as "No such server." for an unknown server.
    Refused {
        /// The command sent.
        command: String,
        /// HAProxy's answer, quoted.
        answer: String,
    },
    /// An answer this client cannot read: not the statistics it asked for, or a field it does
    /// not know.
    Unexpected {
        /// The command sent.
        command: String,
        /// What is wrong, with the answer quoted.
        answer: String,
    },
    /// The backend has no server of this name.
    NoSuchServer(String),
    /// A bounded wait ran out: for a new server's first health check, for a state, or for a
    /// server to have no connections left so that it can be deleted.
    Timeout {
        /// The server waited for.
        server: String,
        /// What was waited for.
        waiting_for: String,
        /// How long.
        limit: Duration,
        /// The last thing seen: the server's row, or HAProxy's last answer, quoted.
        last: String,
    },
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::InvalidName(name) => write!(
                f,
                "{name:?} is not a name HAProxy's runtime API takes (letters, digits, '-', '_', \
                 '.' and ':')"
            ),
            ApiError::Io { command, error } => {
                write!(f, "HAProxy's runtime API, `{command}`: {error}")
            }
            ApiError::Refused { command, answer } => {
                write!(f, "HAProxy refused `{command}`: {answer:?}")
            }
            ApiError::Unexpected { command, answer } => {
                write!(
                    f,
                    "an unexpected answer from HAProxy to `{command}`: {answer}"
                )
            }
            ApiError::NoSuchServer(name) => write!(f, "HAProxy's backend has no server {name:?}"),
            ApiError::Timeout {
                server,
                waiting_for,
                limit,
                last,
            } => write!(
                f,
                "HAProxy's server {server:?}: no {waiting_for} within {limit:?}; the last seen: \
                 {last}"
            ),
        }
    }
}

impl Error for ApiError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ApiError::Io { error, .. } => Some(error),
            ApiError::InvalidName(_)
            | ApiError::Refused { .. }
            | ApiError::Unexpected { .. }
            | ApiError::NoSuchServer(_)
            | ApiError::Timeout { .. } => None,
        }
    }
}
