//! The real `admit-scaler serve`, started beside the harness.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `admit-scaler serve`.
#[derive(Debug)]
pub(super) struct ScalerProcess {
    child: Child,
    /// Its gRPC address.
    pub(super) grpc: SocketAddr,
    /// Its HTTP address (`/metrics`).
    pub(super) http: SocketAddr,
}

/// Where `admit-scaler` is: `ADMIT_SCALER`, or beside this executable (`cargo build -p
/// admit-scaler` puts it there; a test binary's directory is one level deeper).
pub(super) fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ADMIT_SCALER") {
        return Some(path.into());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir, dir.parent()?]
        .into_iter()
        .map(|dir| dir.join("admit-scaler"))
        .find(|path| path.is_file())
}

impl ScalerProcess {
    /// Starts `binary serve` on loopback with `args`, and waits for its "serving" line.
    ///
    /// # Errors
    ///
    /// The process does not start or says nothing of its address within 30 s.
    pub(super) async fn start(binary: &Path, args: &[String]) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args([
                "serve",
                "--grpc-listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
                "--log",
                "warn,admit_scaler=info",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("{}: {error}", binary.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let (grpc, http) = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("serving") {
                    let address = |name: &str| -> Option<SocketAddr> {
                        let start = line.find(name)? + name.len();
                        line[start..].split_whitespace().next()?.parse().ok()
                    };
                    return Some((address("grpc=")?, address("http=")?));
                }
                eprintln!("admit-scaler: {line}");
            }
            None
        })
        .await
        .ok()
        .flatten()
        .ok_or("admit-scaler did not say where it serves")?;
        // Its warnings (a failed decision) go on to the harness's stderr.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("admit-scaler: {line}");
            }
        });
        Ok(ScalerProcess { child, grpc, http })
    }

    /// Stops it (SIGKILL: the harness has no use for a graceful stop here).
    pub(super) async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
