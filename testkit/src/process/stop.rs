//! Stopping a process by its id: a first signal, then SIGKILL.

use std::io;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// How long a stop waits for the process to exit after each signal, and how often it looks.
const EXIT_LIMIT: Duration = Duration::from_secs(10);
const EXIT_POLL: Duration = Duration::from_millis(10);

/// SIGTERM, then SIGKILL if the process has not exited within [`EXIT_LIMIT`]; reaps it.
pub(crate) fn terminate(child: &mut Child) -> io::Result<ExitStatus> {
    stop(child, Signal::TERM)
}

/// `first`, then SIGKILL if the process has not exited within [`EXIT_LIMIT`]; reaps it.
pub(crate) fn stop(child: &mut Child, first: Signal) -> io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    // Not reaped yet, so the id cannot belong to another process.
    let pid = Pid::from_child(child);
    kill_process(pid, first)?;
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

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn the_first_signal_stops_a_process_that_heeds_it() {
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let status = stop(&mut child, Signal::USR1).expect("stopped");
        assert_eq!(status.signal(), Some(Signal::USR1.as_raw()), "{status}");
        // Reaped: stopping it again reports the same status without a signal.
        assert_eq!(terminate(&mut child).expect("already stopped"), status);
    }
}
