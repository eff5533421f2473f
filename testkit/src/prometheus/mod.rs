//! A real Prometheus server for integration tests: [`start`] runs the `prometheus` binary
//! (Debian's `prometheus` package, version 2.42) on a free loopback port, scraping test servers
//! on loopback; [`start_backfilled`] runs it without scrape targets over samples at fixed
//! timestamps, backfilled with `promtool`; and [`Prometheus::query`] and
//! [`Prometheus::query_at`] ask its HTTP API for instant queries.
//!
//! A test that needs Prometheus asks [`require`] first, so that every such test follows one
//! rule: without a binary it prints a `SKIPPED:` line and returns, unless
//! [`REQUIRE_ENV`] (`ADMIT_REQUIRE_PROMETHEUS`) is set, when it fails instead.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use admit_testkit::TestServer;
//! use admit_testkit::prometheus::{self, FIRST_SCRAPE_LIMIT};
//!
//! async fn scraped(server: &TestServer) {
//!     if prometheus::require("scraped").is_none() {
//!         return;
//!     }
//!     let prometheus = prometheus::start(&[server.addr()], Duration::from_millis(200))
//!         .await
//!         .unwrap_or_else(|error| panic!("{error}"));
//!     prometheus.wait_for_scrape(FIRST_SCRAPE_LIMIT).await;
//!     let samples = prometheus.query("demo_requests_total").await.expect("the query");
//!     assert_eq!(samples[0].value, 42.0);
//!     prometheus.stop();
//! }
//! ```
//!
//! What Prometheus 2.42 does that the tests must allow for:
//!
//! - The first scrape comes about 5 s after the start, whatever the scrape interval: service
//!   discovery, static targets included, hands its targets to the scrape manager on a fixed 5 s
//!   tick, and no flag shortens it. Later scrapes follow the interval. [`FIRST_SCRAPE_LIMIT`]
//!   allows for that.
//! - Scrape intervals of milliseconds are accepted (even `1ms`); the scrape timeout may not
//!   exceed the interval.
//! - It is ready (`/-/ready` answers 200) within a fraction of a second of its start, and on
//!   SIGTERM it exits with status 0 within milliseconds.
//! - `promtool tsdb create-blocks-from openmetrics` takes OpenMetrics text with explicit
//!   timestamps in seconds, ending in `# EOF`, and writes blocks of at most 2 h each, so samples
//!   may span hours. Retention counts back from the newest sample, not from now: old timestamps
//!   are kept, but a query at the current time finds nothing older than its 5 min lookback, so
//!   backfilled samples are queried with [`Prometheus::query_at`].
//!
//! The server lives as long as its [`Prometheus`] handle: [`Prometheus::stop`] or dropping the
//! handle stops the process and removes its temporary directory. A test process killed outright
//! (SIGKILL) runs no destructor and leaves both behind.
//!
//! The waits here are bounded by tokio's timer, so they need a runtime whose clock runs
//! (not `start_paused`): a paused clock would jump past every limit while the real server works.

mod backfill;
mod error;
mod handle;
mod http;
mod launch;
mod query;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::StartError;
pub use handle::Prometheus;
pub use launch::{start, start_backfilled, start_discovered};
pub use query::{QueryError, Sample};

use crate::process::{self, find_binary, is_executable, on_path};

/// The environment variable that names the Prometheus binary, ahead of any search.
pub const BINARY_ENV: &str = "PROMETHEUS";

/// The environment variable that turns [`require`]'s skip into a failure, whatever its value:
/// set it where Prometheus must be installed, such as CI.
pub const REQUIRE_ENV: &str = "ADMIT_REQUIRE_PROMETHEUS";

/// A limit for [`Prometheus::wait_for_scrape`] that allows for Prometheus' first scrape, about
/// 5 s after its start, several times over.
pub const FIRST_SCRAPE_LIMIT: Duration = Duration::from_secs(30);

/// The scrape job's name: every scraped series carries `job="admit"`.
pub const JOB: &str = "admit";

/// Where Debian's `prometheus` package installs the binary.
const DEBIAN_BINARY: &str = "/usr/bin/prometheus";

const INSTALL_HINT: &str = "install Debian's `prometheus` package (`apt-get install -y prometheus`) \
     or set PROMETHEUS to the binary's path";

/// The Prometheus binary: the path in [`BINARY_ENV`] (`$PROMETHEUS`) if set, else the first
/// executable `prometheus` on `PATH`, else Debian's `/usr/bin/prometheus` if it is there.
pub fn binary() -> Option<PathBuf> {
    find_binary(BINARY_ENV, "prometheus", DEBIAN_BINARY)
}

/// The `promtool` that goes with `binary`: the one beside it, else the first executable
/// `promtool` on `PATH`.
fn promtool(binary: &Path) -> Option<PathBuf> {
    let beside = binary.with_file_name("promtool");
    if is_executable(&beside) {
        return Some(beside);
    }
    on_path("promtool")
}

/// The one rule for tests that need Prometheus: the [`binary`] if there is one; otherwise a
/// `SKIPPED: <test>: …` line on stderr and `None`, and the test should return.
///
/// ```no_run
/// if admit_testkit::prometheus::require("my_test").is_none() {
///     return;
/// }
/// ```
///
/// # Panics
///
/// If there is no binary and [`REQUIRE_ENV`] (`ADMIT_REQUIRE_PROMETHEUS`) is set, with the
/// install hint.
pub fn require(test: &str) -> Option<PathBuf> {
    process::require(test, "Prometheus", binary(), REQUIRE_ENV, INSTALL_HINT)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::process::TempDir;

    #[test]
    fn promtool_is_found_beside_the_binary_first() {
        let dir = TempDir::new("prometheus").expect("a dir");
        let binary = dir.path().join("prometheus");
        // Neither file is run, so writing them cannot race another test's `exec`.
        for file in [&binary, &dir.path().join("promtool")] {
            fs::write(file, "#!/bin/sh\n").expect("write a file");
        }
        // Not executable yet: not found beside the binary.
        assert_eq!(promtool(&binary), on_path("promtool"));
        fs::set_permissions(
            dir.path().join("promtool"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("make it executable");
        assert_eq!(promtool(&binary), Some(dir.path().join("promtool")));
    }
}
