//! Stopping the server's process by its id: SIGTERM, then SIGKILL.

use std::io;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// How long a stop waits for the process to exit after each signal, and how often it looks.
const EXIT_LIMIT: Duration = Duration::from_secs(10);
const EXIT_POLL: Duration = Duration::from_millis(10);

/// SIGTERM, then SIGKILL if the process has not exited within [`EXIT_LIMIT`]; reaps it.
pub(super) fn terminate(child: &mut Child) -> io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    // Not reaped yet, so the id cannot belong to another process.
    let pid = Pid::from_child(child);
    kill_process(pid, Signal::TERM)?;
    if let Some(status) = wait_exit(child)? {
        return Ok(status);
    }
    kill_process(pid, Signal::KILL)?;
    wait_exit(child)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("still running {EXIT_LIMIT:?} after SIGKILL"),
        )
    })
}

/// Polls the process until it exits (`Some`) or [`EXIT_LIMIT`] passes (`None`).
fn wait_exit(child: &mut Child) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + EXIT_LIMIT;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(EXIT_POLL);
    }
}
