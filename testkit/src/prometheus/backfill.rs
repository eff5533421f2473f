//! Filling the TSDB before the start: OpenMetrics text turned into blocks by
//! `promtool tsdb create-blocks-from openmetrics`.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::StartError;

/// The file names in the temporary directory: the OpenMetrics text, and promtool's stderr.
const INPUT_FILE: &str = "backfill.om";
const PROMTOOL_LOG: &str = "promtool.log";

/// How long promtool may run, and how often the wait looks whether it has exited.
const BACKFILL_LIMIT: Duration = Duration::from_secs(60);
const BACKFILL_POLL: Duration = Duration::from_millis(10);

/// Writes `openmetrics` to [`INPUT_FILE`] in `dir` and has `promtool` turn it into blocks in
/// `data_dir`, which it creates.
pub(super) async fn backfill(
    promtool: &Path,
    dir: &Path,
    data_dir: &Path,
    openmetrics: &str,
) -> Result<(), StartError> {
    let input = dir.join(INPUT_FILE);
    fs::write(&input, openmetrics)?;
    let log_file = dir.join(PROMTOOL_LOG);
    let log = File::create(&log_file)?;
    let child = Command::new(promtool)
        // `--quiet`: without it promtool lists the blocks it wrote on stdout.
        .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
        .arg(&input)
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("spawning {}: {error}", promtool.display()),
            )
        })?;
    let mut promtool = Running(child);
    let stderr = || {
        let log = fs::read(&log_file).unwrap_or_default();
        String::from_utf8_lossy(&log).trim().to_owned()
    };
    let deadline = Instant::now() + BACKFILL_LIMIT;
    let status = loop {
        if let Some(status) = promtool.0.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            return Err(StartError::Backfill(format!(
                "still running after {BACKFILL_LIMIT:?}, killed; its stderr: {}",
                stderr()
            )));
        }
        tokio::time::sleep(BACKFILL_POLL).await;
    };
    if status.success() {
        return Ok(());
    }
    let stderr = stderr();
    Err(StartError::Backfill(if stderr.is_empty() {
        format!("it exited ({status}) with nothing on stderr")
    } else {
        stderr
    }))
}

/// promtool's process, killed (SIGKILL) and reaped if it is dropped before it exits: on a
/// timeout, an error, or a start given up on.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
