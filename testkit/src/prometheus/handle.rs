//! The [`Prometheus`] handle: what a test asks of a running server, and its stop.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::Duration;

use super::http::http_get;
use super::launch::LOG_FILE;
use super::query::{parse_answer, percent_encode};
use super::{JOB, QueryError, Sample};
use crate::process::{TempDir, file_tail, terminate};
use crate::wait::NET_TIMEOUT;

/// How often [`Prometheus::wait_until`] queries again.
const QUERY_POLL: Duration = Duration::from_millis(100);

/// A running Prometheus server scraping the test servers given to [`start`](super::start), or
/// serving the samples given to [`start_backfilled`](super::start_backfilled), with its
/// temporary directory.
///
/// [`stop`](Prometheus::stop) stops it by process id (SIGTERM, then SIGKILL if it lingers);
/// dropping the handle does the same, without panicking. Either way the temporary directory
/// goes too.
#[derive(Debug)]
pub struct Prometheus {
    /// `None` once stopped.
    pub(super) child: Option<Child>,
    pub(super) pid: u32,
    pub(super) addr: SocketAddr,
    /// How many targets the scrape job has.
    pub(super) targets: usize,
    pub(super) scrape_interval: Duration,
    /// Dropped after [`Prometheus`]'s own `drop` has stopped the process.
    pub(super) dir: TempDir,
}

impl Prometheus {
    /// The address of Prometheus' web server and HTTP API, on `127.0.0.1`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Prometheus' base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The process id of the Prometheus server.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The scrape interval, as given to [`start`](super::start); Prometheus' default of 1 min
    /// for [`start_backfilled`](super::start_backfilled), which scrapes nothing.
    pub fn scrape_interval(&self) -> Duration {
        self.scrape_interval
    }

    /// The temporary directory with the configuration (`prometheus.yml`), the TSDB (`data/`)
    /// and the server's output (`prometheus.log`); for
    /// [`start_backfilled`](super::start_backfilled), also the OpenMetrics text (`backfill.om`)
    /// and promtool's stderr (`promtool.log`). It is removed when the handle is stopped or
    /// dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of the server's output, for failure messages.
    pub fn log_tail(&self) -> String {
        file_tail(&self.dir.path().join(LOG_FILE))
    }

    /// The answer to the instant query `promql` at the current time, from
    /// `GET /api/v1/query`: one [`Sample`] per series of a `vector`, or one without labels for a
    /// `scalar`.
    ///
    /// # Errors
    ///
    /// [`QueryError::Io`] if the request fails or takes longer than [`NET_TIMEOUT`];
    /// [`QueryError::Prometheus`] if Prometheus answers with an error;
    /// [`QueryError::Unexpected`] for any other result type (`matrix`, `string`) or an answer
    /// this client cannot read.
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, QueryError> {
        self.instant_query(promql, None).await
    }

    /// [`query`](Prometheus::query) at `time`, in seconds since the Unix epoch (`time=`, to the
    /// millisecond), such as a time among [backfilled](super::start_backfilled) samples.
    /// Prometheus takes `NaN` and infinities too, for meaningless times: keep `time` finite.
    ///
    /// # Errors
    ///
    /// As [`query`](Prometheus::query).
    pub async fn query_at(&self, promql: &str, time: f64) -> Result<Vec<Sample>, QueryError> {
        self.instant_query(promql, Some(time)).await
    }

    /// `GET /api/v1/query` of `promql`, at `time` if given, else now.
    async fn instant_query(
        &self,
        promql: &str,
        time: Option<f64>,
    ) -> Result<Vec<Sample>, QueryError> {
        let mut target = format!("/api/v1/query?query={}", percent_encode(promql));
        if let Some(time) = time {
            // Rust writes floats without exponents, as Prometheus reads them.
            target.push_str(&format!("&time={}", percent_encode(&time.to_string())));
        }
        let response = http_get(self.addr, &target, NET_TIMEOUT)
            .await
            .map_err(QueryError::Io)?;
        parse_answer(response.status, &response.body)
    }

    /// Queries `promql` every 100 ms until `accept` holds for an answer, and returns that
    /// answer. Failed queries count as not accepted.
    ///
    /// # Panics
    ///
    /// If no answer is accepted within `limit`, with `what`, the last answer and the end of
    /// Prometheus' log.
    pub async fn wait_until<F>(
        &self,
        what: &str,
        promql: &str,
        limit: Duration,
        mut accept: F,
    ) -> Vec<Sample>
    where
        F: FnMut(&[Sample]) -> bool,
    {
        let mut last = None;
        let polling = async {
            loop {
                match self.query(promql).await {
                    Ok(samples) if accept(&samples) => return samples,
                    answer => last = Some(answer),
                }
                tokio::time::sleep(QUERY_POLL).await;
            }
        };
        if let Ok(samples) = tokio::time::timeout(limit, polling).await {
            return samples;
        }
        let last = match last {
            None => "no answer".to_owned(),
            Some(Ok(samples)) => format!("{samples:?}"),
            Some(Err(error)) => error.to_string(),
        };
        panic!(
            "{what}: `{promql}` not as expected within {limit:?}; the last answer: {last}; \
             the end of Prometheus' log:\n{}",
            self.log_tail()
        );
    }

    /// Waits until Prometheus has scraped every target successfully: `up{job="admit"}` is 1
    /// for each. Returns those `up` samples. Allow for the first scrape's delay of about 5 s;
    /// [`FIRST_SCRAPE_LIMIT`](super::FIRST_SCRAPE_LIMIT) does.
    ///
    /// Each scrape's samples are stored together with its `up`, so the scraped series can be
    /// queried as soon as this returns.
    ///
    /// # Panics
    ///
    /// As [`wait_until`](Prometheus::wait_until), if a target is not up within `limit`.
    pub async fn wait_for_scrape(&self, limit: Duration) -> Vec<Sample> {
        let targets = self.targets;
        self.wait_until(
            "every target scraped",
            &format!("up{{job=\"{JOB}\"}}"),
            limit,
            |samples| samples.len() == targets && samples.iter().all(|sample| sample.value == 1.0),
        )
        .await
    }

    /// Sets the targets of a Prometheus from [`start_discovered`](super::start_discovered):
    /// each address, with its labels (a target's series carry them, as `pod` or `namespace`
    /// from Kubernetes' service discovery), replacing the last set. The file is replaced
    /// whole, so Prometheus never reads half of it; it notices within a second or two.
    ///
    /// # Errors
    ///
    /// The file cannot be written.
    pub fn set_targets<'a>(
        &self,
        targets: impl IntoIterator<Item = (SocketAddr, &'a [(&'a str, &'a str)])>,
    ) -> io::Result<()> {
        let groups: Vec<serde_json::Value> = targets
            .into_iter()
            .map(|(addr, labels)| {
                let labels: serde_json::Map<String, serde_json::Value> = labels
                    .iter()
                    .map(|(name, value)| ((*name).to_owned(), (*value).into()))
                    .collect();
                serde_json::json!({ "targets": [addr.to_string()], "labels": labels })
            })
            .collect();
        let file = self.dir.path().join(super::launch::TARGETS_FILE);
        let partial = file.with_extension("json.partial");
        fs::write(&partial, serde_json::Value::Array(groups).to_string())?;
        fs::rename(&partial, &file)
    }

    /// Stops the server by its process id: SIGTERM, then SIGKILL if it has not exited within
    /// 10 s; then removes the temporary directory. Returns how the process exited (Prometheus
    /// exits with 0 on SIGTERM).
    ///
    /// It blocks the calling thread while it waits, for milliseconds as a rule.
    ///
    /// # Panics
    ///
    /// If the process cannot be signalled or has not exited even after SIGKILL, with the end of
    /// the log.
    pub fn stop(mut self) -> ExitStatus {
        let Some(child) = self.child.as_mut() else {
            unreachable!("only `stop` and `drop` stop the process, and both consume the handle")
        };
        match terminate(child) {
            Ok(status) => {
                self.child = None;
                status
            }
            Err(error) => panic!(
                "stopping Prometheus (pid {}): {error}; the end of its log:\n{}",
                self.pid,
                self.log_tail()
            ),
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Best effort: a process that cannot be stopped is left behind rather than a panic
            // raised in a destructor.
            let _ = terminate(&mut child);
        }
    }
}
