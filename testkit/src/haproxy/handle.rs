//! The [`Haproxy`] handle: the running proxy's addresses, its runtime API, and its stop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};

use rustix::process::Signal;

use super::launch::LOG_FILE;
use super::{ApiError, HaproxyConfig, api};
use crate::process::{TempDir, file_tail, stop, terminate};

/// A running HAProxy from [`launch`](fn@super::launch), with its temporary directory: the
/// configuration (`haproxy.cfg`), the runtime API's socket (`admin.sock`) and its output
/// (`haproxy.log`).
///
/// [`stop`](Haproxy::stop) stops it softly (SIGUSR1: requests in flight finish); dropping the
/// handle stops it at once (SIGTERM), without panicking. Either way SIGKILL follows if it
/// lingers, and the temporary directory goes too.
#[derive(Debug)]
pub struct Haproxy {
    /// `None` once stopped.
    pub(super) child: Option<Child>,
    pub(super) pid: u32,
    /// The frontend's address.
    pub(super) addr: SocketAddr,
    pub(super) config: HaproxyConfig,
    pub(super) socket: PathBuf,
    /// Dropped after [`Haproxy`]'s own `drop` has stopped the process.
    pub(super) dir: TempDir,
}

impl Haproxy {
    /// The frontend's address, on `127.0.0.1`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The frontend's base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The process id of HAProxy.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The configuration it was launched with.
    pub fn config(&self) -> &HaproxyConfig {
        &self.config
    }

    /// The temporary directory with the configuration file (`haproxy.cfg`), the runtime API's
    /// socket (`admin.sock`) and HAProxy's output (`haproxy.log`). It is removed when the
    /// handle is stopped or dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of HAProxy's output, for failure messages: its alerts, and each server's
    /// state changes (`Server replicas/r1 is DOWN, reason: Layer7 wrong status, code: 503, …`).
    pub fn log_tail(&self) -> String {
        file_tail(&self.dir.path().join(LOG_FILE))
    }

    /// Sends one command to the runtime API and returns HAProxy's whole answer, for what the
    /// other methods do not cover (`show info`, `set server … weight …`). An answer is text
    /// ending in an empty line; HAProxy reports errors in it too.
    ///
    /// # Errors
    ///
    /// [`ApiError::InvalidName`] for a command with a line break; [`ApiError::Io`] if the
    /// socket cannot be reached or the whole answer does not come within
    /// [`NET_TIMEOUT`](crate::wait::NET_TIMEOUT).
    pub async fn command(&self, command: &str) -> Result<String, ApiError> {
        api::exchange(&self.socket, command).await
    }

    /// Stops HAProxy softly by its process id: SIGUSR1, on which it closes its listeners and
    /// idle connections, lets requests in flight finish (closing connections still open after
    /// 5 s, `hard-stop-after`) and exits with status 0; SIGKILL if it has not exited within
    /// 10 s. Then removes the temporary directory. Returns how the process exited.
    ///
    /// It blocks the calling thread while it waits: for milliseconds, or up to 5 s while a
    /// client holds a connection on which it has sent no request yet, which HAProxy 2.6 does
    /// not close. Close clients first.
    ///
    /// # Panics
    ///
    /// If the process cannot be signalled or has not exited even after SIGKILL, with the end of
    /// the log.
    pub fn stop(mut self) -> ExitStatus {
        let Some(child) = self.child.as_mut() else {
            unreachable!("only `stop` and `drop` stop the process, and both consume the handle")
        };
        match stop(child, Signal::USR1) {
            Ok(status) => {
                self.child = None;
                status
            }
            Err(error) => panic!(
                "stopping HAProxy (pid {}): {error}; the end of its log:\n{}",
                self.pid,
                self.log_tail()
            ),
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Best effort: a process that cannot be stopped is left behind rather than a panic
            // raised in a destructor.
            let _ = terminate(&mut child);
        }
    }
}
