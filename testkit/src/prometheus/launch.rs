//! Starting Prometheus: its configuration, its TSDB backfilled if asked, its process on a free
//! port (tried again when another process takes the port first), and the wait until it is ready.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::backfill::backfill;
use super::http::http_get;
use super::{JOB, Prometheus, StartError, binary, promtool};
use crate::process::{Failure, TempDir, on_a_free_port, tail};

/// How long a start waits for `/-/ready` to answer 200, and how often it asks.
const READY_LIMIT: Duration = Duration::from_secs(30);
const READY_POLL: Duration = Duration::from_millis(50);

/// The file names in the temporary directory; Prometheus, or promtool when it backfills,
/// creates the TSDB directory itself.
const CONFIG_FILE: &str = "prometheus.yml";
const DATA_DIR: &str = "data";
pub(super) const LOG_FILE: &str = "prometheus.log";
/// The targets file of [`start_discovered`].
pub(super) const TARGETS_FILE: &str = "targets.json";

/// Starts Prometheus on a free loopback port, scraping `http://<target>/metrics` for each of
/// `targets` every `scrape_interval` (in whole milliseconds, at least 1 ms; the scrape timeout is
/// the same), in the job [`JOB`] (`"admit"`), and waits until it is ready.
///
/// An unspecified target address (`0.0.0.0` or `::`) is scraped on loopback, and an address
/// given twice once; the `instance` label of a target's series is its address, such as
/// `127.0.0.1:40123`.
///
/// Ready means the HTTP API answers: the first scrape comes later, see
/// [`wait_for_scrape`](Prometheus::wait_for_scrape).
///
/// # Errors
///
/// [`StartError::NotInstalled`] without a [`binary`]; [`StartError::Io`] if the temporary
/// directory, the port or the process cannot be had; [`StartError::NotReady`], with the end of
/// the log, if Prometheus exits or is not ready within 30 s. A start that fails because another
/// process took the port is tried again, up to three times in all.
pub async fn start(
    targets: &[SocketAddr],
    scrape_interval: Duration,
) -> Result<Prometheus, StartError> {
    let binary = binary().ok_or(StartError::NotInstalled)?;
    start_with(&binary, &Source::scrape(targets, scrape_interval)).await
}

/// Starts Prometheus over a TSDB built from `openmetrics` (OpenMetrics text with explicit
/// timestamps in seconds, ending in `# EOF`) by `promtool tsdb create-blocks-from openmetrics`,
/// with no scrape targets, and waits until it is ready.
///
/// The samples are there from the start; query them at their own time with
/// [`query_at`](Prometheus::query_at). [`scrape_interval`](Prometheus::scrape_interval) is
/// Prometheus' default, 1 min, and [`wait_for_scrape`](Prometheus::wait_for_scrape) returns at
/// once.
///
/// ```no_run
/// # async fn backfilled() {
/// let openmetrics = "# TYPE demo_requests counter\n\
///                    demo_requests_total 0 1700000000\n\
///                    demo_requests_total 1800 1700000015\n\
///                    # EOF\n";
/// let prometheus = admit_testkit::prometheus::start_backfilled(openmetrics)
///     .await
///     .unwrap_or_else(|error| panic!("{error}"));
/// let samples = prometheus
///     .query_at("demo_requests_total", 1_700_000_015.0)
///     .await
///     .expect("the query");
/// assert_eq!(samples[0].value, 1800.0);
/// prometheus.stop();
/// # }
/// ```
///
/// # Errors
///
/// As [`start`]; besides, [`StartError::NoPromtool`] without a `promtool` beside the
/// [`binary`] or on `PATH`, and [`StartError::Backfill`], with promtool's message, if promtool
/// fails (for text it cannot read, say) or runs longer than 60 s. A start tried again on another
/// port backfills again.
pub async fn start_backfilled(openmetrics: &str) -> Result<Prometheus, StartError> {
    let binary = binary().ok_or(StartError::NotInstalled)?;
    let promtool = promtool(&binary).ok_or(StartError::NoPromtool)?;
    start_with(
        &binary,
        &Source::Backfill {
            promtool: &promtool,
            openmetrics,
        },
    )
    .await
}

/// Starts Prometheus on a free loopback port, scraping the targets of a file it watches
/// (`file_sd_configs`) every `scrape_interval`, in the job [`JOB`], and waits until it is
/// ready. It starts with none: [`Prometheus::set_targets`] writes the file, and Prometheus
/// picks the change up within a second or two, as when Kubernetes' endpoints change.
///
/// # Errors
///
/// As [`start`].
pub async fn start_discovered(scrape_interval: Duration) -> Result<Prometheus, StartError> {
    let binary = binary().ok_or(StartError::NotInstalled)?;
    start_with(
        &binary,
        &Source::Discovered {
            interval: scrape_interval,
        },
    )
    .await
}

/// What Prometheus serves.
enum Source<'a> {
    /// What it scrapes: the job [`JOB`] of `targets`, each once, every `interval`.
    Scrape {
        targets: Vec<SocketAddr>,
        interval: Duration,
    },
    /// The job [`JOB`] of the targets in [`TARGETS_FILE`], every `interval`.
    Discovered { interval: Duration },
    /// No scrape job, and a TSDB that `promtool` fills from `openmetrics` before the start.
    Backfill {
        promtool: &'a Path,
        openmetrics: &'a str,
    },
}

/// The global scrape interval of a configuration without one: Prometheus' default.
const DEFAULT_SCRAPE_INTERVAL: Duration = Duration::from_secs(60);

impl Source<'_> {
    /// The scrape job of `targets` as Prometheus reaches them, each address once: Prometheus
    /// scrapes a target listed twice only once.
    fn scrape(targets: &[SocketAddr], interval: Duration) -> Self {
        let targets: BTreeSet<SocketAddr> = targets
            .iter()
            .map(|&target| scrape_address(target))
            .collect();
        Source::Scrape {
            targets: targets.into_iter().collect(),
            interval,
        }
    }

    /// How many targets, and how often Prometheus scrapes them.
    fn scrapes(&self) -> (usize, Duration) {
        match self {
            Source::Scrape { targets, interval } => (targets.len(), *interval),
            Source::Discovered { interval } => (0, *interval),
            Source::Backfill { .. } => (0, DEFAULT_SCRAPE_INTERVAL),
        }
    }

    /// The configuration file; `dir` holds the targets file.
    fn config(&self, dir: &Path) -> String {
        match self {
            Source::Scrape { targets, interval } => {
                let targets = targets
                    .iter()
                    .map(|target| format!("'{target}'"))
                    .collect::<Vec<_>>()
                    .join(", ");
                config(
                    &format!("static_configs:\n      - targets: [{targets}]\n"),
                    *interval,
                )
            }
            Source::Discovered { interval } => config(
                &format!(
                    "file_sd_configs:\n      - files: ['{}']\n        refresh_interval: 1s\n",
                    dir.join(TARGETS_FILE).display()
                ),
                *interval,
            ),
            Source::Backfill { .. } => "scrape_configs: []\n".to_owned(),
        }
    }
}

/// Starts Prometheus with a given binary, trying again on another port when another process
/// took the port first.
async fn start_with(binary: &Path, source: &Source<'_>) -> Result<Prometheus, StartError> {
    on_a_free_port(|| start_once(binary, source)).await
}

async fn start_once(binary: &Path, source: &Source<'_>) -> Result<Prometheus, Failure<StartError>> {
    let dir = TempDir::new("prometheus")?;
    let data_dir = dir.path().join(DATA_DIR);
    if let Source::Backfill {
        promtool,
        openmetrics,
    } = source
    {
        // On an error the directory drops here, and is removed.
        backfill(promtool, dir.path(), &data_dir, openmetrics)
            .await
            .map_err(Failure::Fatal)?;
    }
    let config_file = dir.path().join(CONFIG_FILE);
    fs::write(&config_file, source.config(dir.path()))?;
    if let Source::Discovered { .. } = source {
        fs::write(dir.path().join(TARGETS_FILE), "[]\n")?;
    }
    let log = File::create(dir.path().join(LOG_FILE))?;
    // Free now; Prometheus may lose it to another process before it binds, hence the retries.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let child = Command::new(binary)
        .arg(flag("--config.file=", &config_file))
        .arg(flag("--storage.tsdb.path=", &data_dir))
        .arg(format!("--web.listen-address={addr}"))
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
    let (targets, scrape_interval) = source.scrapes();
    let mut prometheus = Prometheus {
        pid: child.id(),
        child: Some(child),
        addr,
        targets,
        scrape_interval,
        dir,
    };
    // On an error the handle drops here: the process is stopped and the directory removed.
    prometheus.wait_ready().await?;
    Ok(prometheus)
}

/// `--name=path`, for paths that need not be UTF-8.
fn flag(name: &str, path: &Path) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(path);
    flag
}

/// The configuration file: one scrape job, [`JOB`], whose targets `targets` configures (the
/// `static_configs` or `file_sd_configs` entry, indented under the job).
fn config(targets: &str, scrape_interval: Duration) -> String {
    let interval = format!("{}ms", scrape_interval.as_millis().max(1));
    format!(
        "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n\
         scrape_configs:\n  - job_name: {JOB}\n    metrics_path: /metrics\n    {targets}"
    )
}

/// Where Prometheus reaches a server listening on `addr`: loopback for an unspecified address.
fn scrape_address(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

impl Prometheus {
    /// Polls the process until `/-/ready` answers 200, failing if it exits first.
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
                return Err(if log.contains("address already in use") {
                    Failure::PortTaken(error)
                } else {
                    Failure::Fatal(error)
                });
            }
            // Refused connections and 503s are expected until it is ready.
            let ready = http_get(self.addr, "/-/ready", Duration::from_secs(1)).await;
            if ready.is_ok_and(|response| response.status == 200) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Failure::Fatal(StartError::NotReady {
                    reason: format!("`/-/ready` did not answer 200 within {READY_LIMIT:?}"),
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

    #[test]
    fn the_config_has_one_job_of_static_or_discovered_targets() {
        let dir = Path::new("/tmp/prom");
        let targets = [
            SocketAddr::from(([127, 0, 0, 1], 4000)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 4002)),
        ];
        assert_eq!(
            Source::scrape(&targets, Duration::from_millis(200)).config(dir),
            "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n\
             scrape_configs:\n  - job_name: admit\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: ['127.0.0.1:4000', '[::1]:4002']\n"
        );
        let none = Source::scrape(&[], Duration::ZERO).config(dir);
        assert!(none.contains("scrape_interval: 1ms\n"));
        assert!(none.contains("- targets: []\n"));
        let discovered = Source::Discovered {
            interval: Duration::from_millis(200),
        };
        assert!(
            discovered.config(dir).ends_with(
                "file_sd_configs:\n      - files: ['/tmp/prom/targets.json']\n        \
                 refresh_interval: 1s\n"
            ),
            "{}",
            discovered.config(dir)
        );
        let backfilled = Source::Backfill {
            promtool: Path::new("promtool"),
            openmetrics: "# EOF\n",
        };
        assert_eq!(backfilled.config(dir), "scrape_configs: []\n");
    }

    #[test]
    fn unspecified_addresses_are_scraped_on_loopback() {
        let scraped = |addr: SocketAddr| scrape_address(addr).to_string();
        assert_eq!(scraped(SocketAddr::from(([0, 0, 0, 0], 1))), "127.0.0.1:1");
        assert_eq!(
            scraped(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 2))),
            "[::1]:2"
        );
        assert_eq!(
            scraped(SocketAddr::from(([127, 0, 0, 2], 3))),
            "127.0.0.2:3"
        );
    }

    /// Held by each test that writes scripts and runs them: a process forked while another
    /// thread still holds a script open for writing would make exec'ing it fail (`ETXTBSY`).
    static SCRIPTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// An executable shell script `dir/name` that appends its arguments to `dir/name.calls`,
    /// then runs `body`.
    fn fake_binary(dir: &TempDir, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let calls = dir.path().join(format!("{name}.calls"));
        let script = dir.path().join(name);
        let text = format!("#!/bin/sh\necho \"$@\" >> '{}'\n{body}\n", calls.display());
        fs::write(&script, text).expect("write the script");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        script
    }

    fn calls_in(dir: &TempDir, name: &str) -> Vec<String> {
        let calls =
            fs::read_to_string(dir.path().join(format!("{name}.calls"))).unwrap_or_default();
        calls.lines().map(str::to_owned).collect()
    }

    #[tokio::test]
    async fn early_exits_are_retried_only_for_a_taken_port() {
        let _scripts = SCRIPTS.lock().await;
        let (taken, broken) = (
            TempDir::new("prometheus").expect("a dir"),
            TempDir::new("prometheus").expect("a dir"),
        );
        let taken_binary = fake_binary(
            &taken,
            "prometheus",
            "echo 'level=error msg=\"Unable to start web listener\" \
             err=\"listen tcp 127.0.0.1:1: bind: address already in use\"' >&2\nexit 1",
        );
        let broken_binary = fake_binary(
            &broken,
            "prometheus",
            "echo 'err=\"parsing YAML file\"' >&2\nexit 1",
        );

        let error = start_with(&taken_binary, &Source::scrape(&[], Duration::from_secs(1)))
            .await
            .expect_err("never ready");
        match &error {
            StartError::NotReady { reason, log_tail } => {
                assert!(reason.contains("exited"), "{reason}");
                assert!(log_tail.ends_with("address already in use\""), "{log_tail}");
            }
            other => panic!("not NotReady: {other:?}"),
        }
        let calls = calls_in(&taken, "prometheus");
        assert_eq!(calls.len(), START_ATTEMPTS as usize, "{calls:?}");
        for call in &calls {
            let flags: Vec<&str> = call.split(' ').collect();
            assert!(flags[0].starts_with("--config.file="), "{call}");
            assert!(flags[1].starts_with("--storage.tsdb.path="), "{call}");
            assert!(
                flags[2].starts_with("--web.listen-address=127.0.0.1:"),
                "{call}"
            );
            let config = Path::new(flags[0].trim_start_matches("--config.file="));
            assert!(!config.exists(), "{config:?} removed with its directory");
        }

        let error = start_with(&broken_binary, &Source::scrape(&[], Duration::from_secs(1)))
            .await
            .expect_err("never ready");
        let message = error.to_string();
        assert!(message.contains("exited"), "{message}");
        assert!(message.ends_with("err=\"parsing YAML file\""), "{message}");
        assert_eq!(calls_in(&broken, "prometheus").len(), 1, "not retried");
    }

    /// A backfilled start with `binary` and the `promtool` beside it, which must fail.
    async fn backfill(binary: &Path) -> StartError {
        let promtool = promtool(binary).expect("the fake promtool beside the binary");
        assert_eq!(promtool, binary.with_file_name("promtool"));
        let source = Source::Backfill {
            promtool: &promtool,
            openmetrics: "# EOF\n",
        };
        start_with(binary, &source).await.expect_err("never ready")
    }

    #[tokio::test]
    async fn promtool_fills_the_data_dir_before_prometheus_starts() {
        let _scripts = SCRIPTS.lock().await;
        let (filled, failed) = (
            TempDir::new("prometheus").expect("a dir"),
            TempDir::new("prometheus").expect("a dir"),
        );
        // The fake Prometheus keeps its configuration and exits: not ready, and not retried.
        let filled_binary = fake_binary(
            &filled,
            "prometheus",
            "cat \"${1#--config.file=}\" > \"$(dirname \"$0\")/config\"\nexit 1",
        );
        fake_binary(&filled, "promtool", "exit 0");
        let failed_binary = fake_binary(&failed, "prometheus", "exit 1");
        fake_binary(
            &failed,
            "promtool",
            "echo 'getting min and max timestamp: next: data does not end with # EOF' >&2\nexit 1",
        );
        let error = backfill(&filled_binary).await;
        assert!(matches!(error, StartError::NotReady { .. }), "{error:?}");
        let promtool_calls = calls_in(&filled, "promtool");
        let prometheus_calls = calls_in(&filled, "prometheus");
        assert_eq!(promtool_calls.len(), 1, "{promtool_calls:?}");
        assert_eq!(prometheus_calls.len(), 1, "{prometheus_calls:?}");
        let args: Vec<&str> = promtool_calls[0].split(' ').collect();
        assert_eq!(
            args[..4],
            ["tsdb", "create-blocks-from", "openmetrics", "--quiet"]
        );
        assert!(args[4].ends_with("/backfill.om"), "{args:?}");
        let flags: Vec<&str> = prometheus_calls[0].split(' ').collect();
        assert_eq!(flags[1], format!("--storage.tsdb.path={}", args[5]));
        assert!(args[5].ends_with("/data"), "{args:?}");
        let config = fs::read_to_string(filled.path().join("config")).expect("the config");
        assert_eq!(config, "scrape_configs: []\n");

        match backfill(&failed_binary).await {
            StartError::Backfill(message) => {
                assert!(message.ends_with("does not end with # EOF"), "{message}");
            }
            other => panic!("not Backfill: {other:?}"),
        }
        assert_eq!(calls_in(&failed, "promtool").len(), 1, "not retried");
        assert_eq!(calls_in(&failed, "prometheus"), Vec::<String>::new());
    }
}
