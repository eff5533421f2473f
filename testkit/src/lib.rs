//! Helpers shared by `admit`'s integration tests, one module per concern:
//!
//! - [`wait`]: bounded waits, so that no network await can hang a test run;
//! - [`server`]: a server task on a loopback port, [`TestServer`], stopped gracefully when
//!   dropped or with [`TestServer::shutdown`];
//! - [`axum`] and [`tonic`]: how the end-to-end tests start those servers;
//! - [`counting_alloc`]: a global allocator that counts each thread's heap allocations, and
//!   [`poll`], which drives a tower service without a runtime for those counts;
//! - [`prometheus`]: a real Prometheus server that scrapes test servers or serves backfilled
//!   samples, and its query API;
//! - [`haproxy`]: a real HAProxy in front of test servers, whose servers change at runtime;
//! - [`keda`]: KEDA trigger metadata for the scaler's tests and benchmarks;
//! - [`cgroup`]: a memory cgroup with a Deployment's limit, for a child process;
//! - [`work`]: a test server's CPU work per request, from a service-time distribution;
//! - [`scrape`]: a Prometheus text exposition, parsed, for the metrics tests.
//!
//! Launchers for outside processes the tests talk to belong here too, each in a module of its own
//! (`prometheus`, `haproxy`).
//!
//! The kit does not depend on `admit`: as one of admit's dev-dependencies, a kit that did would
//! hand the tests a second copy of admit's types.

pub mod axum;
pub mod cgroup;
pub mod counting_alloc;
pub mod haproxy;
pub mod keda;
pub mod poll;
mod process;
pub mod prometheus;
pub mod scrape;
pub mod server;
pub mod tonic;
pub mod wait;
pub mod work;

pub use server::TestServer;
