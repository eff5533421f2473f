//! Launching HAProxy: its configuration, its process on a free loopback port (tried again when
//! another process takes the port first), and the wait until its runtime API and frontend
//! answer.

use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Haproxy, HaproxyConfig, StartError, binary};
use crate::process::{Failure, TempDir, on_a_free_port, tail};

/// How long a launch waits for the runtime API and the frontend to answer, and how often it
/// asks.
const READY_LIMIT: Duration = Duration::from_secs(30);
const READY_POLL: Duration = Duration::from_millis(20);

/// The file names in the temporary directory.
const CONFIG_FILE: &str = "haproxy.cfg";
const SOCKET_FILE: &str = "admin.sock";
pub(super) const LOG_FILE: &str = "haproxy.log";

/// What HAProxy's alert says when the frontend's port is taken.
const PORT_TAKEN: &str = "Address already in use";

/// Launches HAProxy with `config`: writes the configuration under a new temporary directory,
/// runs `haproxy -f <dir>/haproxy.cfg -db` (one process, in the foreground, its output to
/// `<dir>/haproxy.log`) with its frontend on a free loopback port, and waits until its runtime
/// API answers and its frontend accepts connections. The backend has no servers yet:
/// [`Haproxy::add_server`] adds them.
///
/// # Errors
///
/// [`StartError::NotInstalled`] without a [`binary`]; [`StartError::InvalidConfig`] for a
/// backend name or health-check path HAProxy would refuse or misread; [`StartError::Io`] if the
/// temporary directory, the port or the process cannot be had; [`StartError::NotReady`], with
/// the end of the log, if HAProxy exits or does not answer within 30 s. A launch that fails
/// because another process took the port is tried again, up to three times in all.
pub async fn launch(config: HaproxyConfig) -> Result<Haproxy, StartError> {
    let binary = binary().ok_or(StartError::NotInstalled)?;
    launch_with(&binary, config).await
}

/// Launches HAProxy with a given binary, trying again on another port when another process
/// took the port first.
async fn launch_with(binary: &Path, config: HaproxyConfig) -> Result<Haproxy, StartError> {
    config.check().map_err(StartError::InvalidConfig)?;
    on_a_free_port(|| launch_once(binary, &config)).await
}

async fn launch_once(
    binary: &Path,
    config: &HaproxyConfig,
) -> Result<Haproxy, Failure<StartError>> {
    let dir = TempDir::new("haproxy")?;
    let socket = dir.path().join(SOCKET_FILE);
    // Free now; HAProxy may lose it to another process before it binds, hence the retries.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let text = config
        .render(addr, &socket)
        .map_err(|why| Failure::Fatal(StartError::InvalidConfig(why)))?;
    let config_file = dir.path().join(CONFIG_FILE);
    fs::write(&config_file, text)?;
    let log = File::create(dir.path().join(LOG_FILE))?;
    // `-db`: in the foreground, one process (no master-worker), so that its id is the one to
    // signal; alerts and warnings go to stderr.
    let child = Command::new(binary)
        .arg("-f")
        .arg(&config_file)
        .arg("-db")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("spawning {}: {error}", binary.display()),
            )
        })?;
    let mut haproxy = Haproxy {
        pid: child.id(),
        child: Some(child),
        addr,
        config: config.clone(),
        socket,
        dir,
    };
    // On an error the handle drops here: the process is stopped and the directory removed.
    haproxy.wait_ready().await?;
    Ok(haproxy)
}

impl Haproxy {
    /// Polls until the runtime API answers and the frontend accepts a connection, failing if
    /// the process exits first. HAProxy serves its runtime API only once every listener is
    /// bound, so the frontend's port is then its own.
    async fn wait_ready(&mut self) -> Result<(), Failure<StartError>> {
        let deadline = Instant::now() + READY_LIMIT;
        loop {
            let Some(child) = self.child.as_mut() else {
                unreachable!("the process is stopped only by `stop` and `drop`")
            };
            if let Some(status) = child.try_wait()? {
                let log = fs::read(self.dir.path().join(LOG_FILE)).unwrap_or_default();
                let log = String::from_utf8_lossy(&log);
                let error = StartError::NotReady {
                    reason: format!("it exited ({status}) before it was ready"),
                    log_tail: tail(&log),
                };
                return Err(if log.contains(PORT_TAKEN) {
                    Failure::PortTaken(error)
                } else {
                    Failure::Fatal(error)
                });
            }
            // Refused connections are expected until it has bound its sockets.
            let last_error = match self.servers().await {
                Ok(_) => match tokio::time::timeout(
                    Duration::from_secs(1),
                    TcpStream::connect(self.addr),
                )
                .await
                {
                    Ok(Ok(_)) => return Ok(()),
                    Ok(Err(error)) => format!("connecting to the frontend: {error}"),
                    Err(_) => "connecting to the frontend: no answer within 1s".to_owned(),
                },
                Err(error) => error.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(Failure::Fatal(StartError::NotReady {
                    reason: format!(
                        "not ready within {READY_LIMIT:?}; the last error: {last_error}"
                    ),
                    log_tail: self.log_tail(),
                }));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::process::START_ATTEMPTS;

    /// Held by each test that writes scripts and runs them: a process forked while another
    /// thread still holds a script open for writing would make exec'ing it fail (`ETXTBSY`).
    static SCRIPTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// An executable shell script `dir/haproxy` that appends its arguments to
    /// `dir/haproxy.calls`, then runs `body`.
    fn fake_binary(dir: &TempDir, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let calls = dir.path().join("haproxy.calls");
        let script = dir.path().join("haproxy");
        let text = format!("#!/bin/sh\necho \"$@\" >> '{}'\n{body}\n", calls.display());
        fs::write(&script, text).expect("write the script");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        script
    }

    fn calls_in(dir: &TempDir) -> Vec<String> {
        let calls = fs::read_to_string(dir.path().join("haproxy.calls")).unwrap_or_default();
        calls.lines().map(str::to_owned).collect()
    }

    #[tokio::test]
    async fn early_exits_are_retried_only_for_a_taken_port() {
        let _scripts = SCRIPTS.lock().await;
        let (taken, broken) = (
            TempDir::new("haproxy-test").expect("a dir"),
            TempDir::new("haproxy-test").expect("a dir"),
        );
        // The fake keeps the configuration it was given, then fails as HAProxy does.
        let taken_binary = fake_binary(
            &taken,
            "cp \"$2\" \"$(dirname \"$0\")/config\"\n\
             echo '[ALERT]    (1) : Binding [haproxy.cfg:17] for frontend front: cannot bind \
             socket (Address already in use) for [127.0.0.1:1]' >&2\nexit 1",
        );
        let broken_binary = fake_binary(
            &broken,
            "echo \"[ALERT]    (1) : config : parsing [haproxy.cfg:3] : unknown keyword\" >&2\n\
             exit 1",
        );

        let error = launch_with(&taken_binary, HaproxyConfig::default())
            .await
            .expect_err("never ready");
        match &error {
            StartError::NotReady { reason, log_tail } => {
                assert!(reason.contains("exited"), "{reason}");
                assert!(log_tail.ends_with("for [127.0.0.1:1]"), "{log_tail}");
            }
            other => panic!("not NotReady: {other:?}"),
        }
        let calls = calls_in(&taken);
        assert_eq!(calls.len(), START_ATTEMPTS as usize, "{calls:?}");
        for call in &calls {
            let args: Vec<&str> = call.split(' ').collect();
            assert_eq!(args.len(), 3, "{call}");
            assert_eq!((args[0], args[2]), ("-f", "-db"), "{call}");
            assert!(args[1].ends_with("/haproxy.cfg"), "{call}");
            let config = Path::new(args[1]);
            assert!(!config.exists(), "{config:?} removed with its directory");
        }
        let config = fs::read_to_string(taken.path().join("config")).expect("the config");
        assert!(config.contains("\n    bind 127.0.0.1:"), "{config}");
        assert!(
            config.contains("/admin.sock\" mode 600 level admin\n"),
            "{config}"
        );

        let error = launch_with(&broken_binary, HaproxyConfig::default())
            .await
            .expect_err("never ready");
        let message = error.to_string();
        assert!(message.contains("exited"), "{message}");
        assert!(message.ends_with("unknown keyword"), "{message}");
        assert_eq!(calls_in(&broken).len(), 1, "not retried");
    }

    #[tokio::test]
    async fn an_invalid_configuration_runs_nothing() {
        let _scripts = SCRIPTS.lock().await;
        let dir = TempDir::new("haproxy-test").expect("a dir");
        let binary = fake_binary(&dir, "exit 1");
        let config = HaproxyConfig {
            backend: "two words".to_owned(),
            ..HaproxyConfig::default()
        };
        match launch_with(&binary, config).await {
            Err(StartError::InvalidConfig(why)) => assert!(why.contains("two words"), "{why}"),
            other => panic!("not InvalidConfig: {other:?}"),
        }
        assert_eq!(calls_in(&dir), Vec::<String>::new());
    }
}
