//! The server's process: started from this executable's hidden `serve` subcommand, pinned to
//! CPU 0 while the load generator runs on CPU 1, and killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::BoxError;
use crate::server::ServeArgs;

/// A running server process.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    addr: String,
}

impl ServerProcess {
    /// Starts a server (on CPU 0 if `pinned`) and waits until it listens.
    pub(crate) fn start(args: &ServeArgs, pinned: bool) -> Result<ServerProcess, BoxError> {
        let exe = std::env::current_exe()?;
        let mut command = if pinned {
            let mut command = Command::new("taskset");
            command.arg("-c").arg("0").arg(exe);
            command
        } else {
            Command::new(exe)
        };
        let mut child = command
            .arg("serve")
            .args(args.to_args())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout from the server")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(addr) = line.trim().strip_prefix("listening ") else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the server did not start: {line:?}").into());
        };
        Ok(ServerProcess {
            addr: addr.to_owned(),
            child,
        })
    }

    /// `host:port`.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pins every thread of this process to `cpu` with `taskset`, if the machine has another CPU
/// for the server and `taskset` is installed; says whether it did.
pub(crate) fn pin_self_to_cpu(cpu: usize) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        return false;
    }
    Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
