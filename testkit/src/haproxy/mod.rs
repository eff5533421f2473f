//! A real HAProxy in front of test servers: [`launch`](fn@launch) runs the `haproxy` binary
//! (Debian's `haproxy` package, version 2.6) with a generated [`HaproxyConfig`]: one HTTP
//! frontend on a free loopback port and one backend without servers. The tests add, drain,
//! take out and remove its servers at runtime through HAProxy's runtime API (the stats socket,
//! `level admin`), and read each server's state and sessions back ([`Haproxy::servers`]).
//!
//! A test that needs HAProxy asks [`require`] first, so that every such test follows one rule:
//! without a binary it prints a `SKIPPED:` line and returns, unless [`REQUIRE_ENV`]
//! (`ADMIT_REQUIRE_HAPROXY`) is set, when it fails instead.
//!
//! ```no_run
//! use admit_testkit::TestServer;
//! use admit_testkit::haproxy::{self, HaproxyConfig, State};
//!
//! async fn behind_haproxy(replica: &TestServer) {
//!     if haproxy::require("behind_haproxy").is_none() {
//!         return;
//!     }
//!     let proxy = haproxy::launch(HaproxyConfig::default())
//!         .await
//!         .unwrap_or_else(|error| panic!("{error}"));
//!     // Returns after the server's first health check (`GET /readyz`).
//!     let server = proxy.add_server("r1", replica.addr()).await.expect("added");
//!     assert_eq!(server.state, State::Up, "{server:?}");
//!     // … requests to `proxy.url()` …
//!     proxy.drain("r1").await.expect("drained");
//!     proxy.remove("r1").await.expect("removed once its requests are done");
//!     assert!(proxy.stop().success());
//! }
//! ```
//!
//! What HAProxy 2.6 does that the tests must allow for (checked on Debian's 2.6.12):
//!
//! - `bind` does not take port 0, so [`launch`](fn@launch) picks a free port and starts again
//!   on another one if another process takes it first (the configuration sets `noreuseport`,
//!   so that two HAProxies cannot share a port).
//! - A server added at runtime starts in maintenance, and leaving maintenance makes it UP at
//!   once, before its first health check, which comes one check interval later. So
//!   [`Haproxy::add_server`] takes it out of maintenance into drain (checked, but sent no
//!   requests), waits for the first check, and only then makes it ready: a server whose
//!   readiness endpoint fails is DOWN before it is sent anything. Leaving maintenance also sets
//!   the check's health to the `rise` threshold, so a single failed check takes the server
//!   down whatever `fall` is.
//! - `set server … state drain` stops new requests to the server; requests in flight finish.
//!   `state maint` does not cut them either. `del server` is refused for a server not in
//!   maintenance and, while a request is still in flight, with "Server still has connections
//!   attached to it": [`Haproxy::remove`] asks again until it is done.
//! - HAProxy answers 500, 502, 503 and 504 itself with its default page bodies; the
//!   configuration adds the [`PROXY_ERROR_HEADER`] to them, so that a harness can tell a 503 for
//!   want of a server from a 503 a server sent. A server's own 503 is passed on as it is: only
//!   connection failures are retried (`retry-on conn-failure`).
//! - A dynamic server gets a new connection for every request: HAProxy keeps no idle
//!   connection to it (`show stat` counts no `reuse`, even with `pool-max-conn -1`), where a
//!   server from the configuration file has its connections reused. So nothing idle holds up
//!   `del server` either.
//! - SIGUSR1 stops it softly: listeners closed, idle keep-alive connections closed, requests in
//!   flight finished, exit status 0. A client connection that has not sent a request yet (a
//!   spare a client pool opened) is not closed, though, and holds the process until
//!   `hard-stop-after` (5 s here): close clients before [`Haproxy::stop`]. SIGTERM stops it at
//!   once.
//!
//! The proxy lives as long as its [`Haproxy`] handle: [`Haproxy::stop`] or dropping the handle
//! stops the process and removes its temporary directory. A test process killed outright
//! (SIGKILL) runs no destructor and leaves both behind.
//!
//! The waits here are bounded by tokio's timer, so they need a runtime whose clock runs
//! (not `start_paused`): a paused clock would jump past every limit while the real proxy works.

mod api;
mod config;
mod error;
mod handle;
mod launch;
mod servers;

use std::path::PathBuf;

pub use config::{Balance, HaproxyConfig, Timeouts};
pub use error::{ApiError, StartError};
pub use handle::Haproxy;
pub use launch::launch;
pub use servers::{REMOVE_LIMIT, Server, State};

use crate::process::{self, find_binary};

/// The environment variable that names the HAProxy binary, ahead of any search.
pub const BINARY_ENV: &str = "HAPROXY";

/// The environment variable that turns [`require`]'s skip into a failure, whatever its value:
/// set it where HAProxy must be installed, such as CI.
pub const REQUIRE_ENV: &str = "ADMIT_REQUIRE_HAPROXY";

/// The header that stamps each request with the time HAProxy received it, when
/// [`HaproxyConfig::request_start`] is on: `t=<microseconds since the Unix epoch>`.
pub const REQUEST_START_HEADER: &str = "x-request-start";

/// The header on the error responses HAProxy makes itself (500, 502, 503 and 504), whose value
/// is the status: a 503 with it is HAProxy's own, for want of a server; a 503 without it came
/// from a server.
pub const PROXY_ERROR_HEADER: &str = "x-haproxy-error";

/// Where Debian's `haproxy` package installs the binary: `/usr/sbin`, often not on a user's
/// `PATH`.
const DEBIAN_BINARY: &str = "/usr/sbin/haproxy";

const INSTALL_HINT: &str = "install Debian's `haproxy` package (`apt-get install -y haproxy`) \
     or set HAPROXY to the binary's path";

/// The HAProxy binary: the path in [`BINARY_ENV`] (`$HAPROXY`) if set, else the first
/// executable `haproxy` on `PATH`, else Debian's `/usr/sbin/haproxy` if it is there.
pub fn binary() -> Option<PathBuf> {
    find_binary(BINARY_ENV, "haproxy", DEBIAN_BINARY)
}

/// The one rule for tests that need HAProxy: the [`binary`] if there is one; otherwise a
/// `SKIPPED: <test>: …` line on stderr and `None`, and the test should return.
///
/// ```no_run
/// if admit_testkit::haproxy::require("my_test").is_none() {
///     return;
/// }
/// ```
///
/// # Panics
///
/// If there is no binary and [`REQUIRE_ENV`] (`ADMIT_REQUIRE_HAPROXY`) is set, with the install
/// hint.
pub fn require(test: &str) -> Option<PathBuf> {
    process::require(test, "HAProxy", binary(), REQUIRE_ENV, INSTALL_HINT)
}
