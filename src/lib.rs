//! Admission control for Rust services.
//!
//! `admit` decides, per request and in tens of nanoseconds (a few with a cached clock), whether a
//! service should take on more work. It provides:
//!
//! - [`warmup`]: a warm-up ("cold start") token bucket. A freshly started or long-idle service
//!   admits only `permits_per_second / cold_factor` requests per second and ramps up to the full
//!   rate over the warm-up period, so caches, JIT-like lazy initialisation, connection pools and
//!   downstream autoscalers get time to catch up. [`warmup::WarmUp`] is Guava's smooth warm-up
//!   in nanoseconds, with async waiting and live re-rating;
//!   [`warmup::sentinel::SentinelWarmUp`] reproduces Alibaba Sentinel's `WarmUpController`
//!   bit for bit, without its races.
//! - [`shed`]: an adaptive load shedder (go-zero's algorithm). It refuses requests only while an
//!   overload [`signal`] reports pressure *and* more requests are in flight than the service has
//!   recently shown it can carry. The first signal is the CPU, measured with an understanding of
//!   container quotas; others plug in beside it.
//! - [`signal`]: overload signals, the "is the system under pressure?" the shedder asks: go-zero's
//!   CPU signal, and any [`signal::OverloadSignal`] of your own.
//! - [`erlang`]: capacity planning. Erlang C exact to 1e-13 from a fraction of an erlang to ten
//!   million, Erlang-A for customers who give up, the fewest servers that meet a wait-time
//!   target, and a replica planner with hysteresis.
//! - [`clock`]: the injectable time source every limiter reads, including a [`clock::ManualClock`]
//!   that makes tests deterministic.
//! - [`criticality`]: request classes; the shedder refuses the least important first.
//! - [`client`]: the client's half: adaptive throttling, which refuses locally what the
//!   backend would refuse, retries that cannot storm (a budget, and with `retry` a tower
//!   policy), and deadlines that travel with each request (with `http`).
//! - `bound` (features `tower` and `tokio`): a bound on the work in service from the first
//!   request, and a short queue in front of it that serves the most important requests first.
//! - `drain` (feature `tokio`): graceful drain on scale-in.
//! - `metrics` (feature `metrics`): what the limiters count, through the `metrics` facade.
//!
//! The [`guide`] says why each piece works as it does, and how to choose, tune, deploy and
//! measure it.
//!
//! Both limiters are also tower middleware, for axum, tonic and any tower stack, through one
//! glue ([`middleware`]): [`shed::ShedLayer`] and [`warmup::WarmUpLayer`], deciding each request
//! in `call` with shared state, releasing a cancelled request's slot, and answering refusals the way you choose
//! ([`respond`]): a boxed zero-sized error, an HTTP 503 (or 429) with `Retry-After`, or a gRPC
//! `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms`.
//!
//! # Features
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `tower` | yes | [`middleware`] ([`shed::ShedLayer`], [`warmup::WarmUpLayer`]), [`respond`] |
//! | `http` | yes | answering refusals with HTTP responses, go-zero's HTTP and gRPC classifiers, `RequestStart`, `drain::DrainLayer`, the clients' `ThrottleLayer` and `DeadlineLayer` |
//! | `tonic` | no | answering refusals with `tonic::Status`, `From` conversions into it, [`warmup::WarmUpInterceptor`] |
//! | `tokio` | yes | [`warmup::WarmUp::acquire`]: waiting for permits on tokio's timer; the runtime lag probe's task; [`drain`] (graceful drain); with `tower`, [`bound`] |
//! | `axum` | no | `drain::Drain::listener`: an axum listener whose connections the drain counts |
//! | `signal` | no | `drain::Drain::handle_signals`: SIGTERM starts the drain, SIGINT or a second signal skips its delay, a later one exits |
//! | `metrics` | no | [`metrics`]: publishing what the limiters count through the `metrics` facade |
//! | `tracing` | no | `tracing` events when shedding starts and stops and a warm-up reaches its full rate |
//! | `retry` | no | `client::RetryPolicy`: a tower retry policy that retries only what may be sent again, after the server's hint, within a `RetryBudget` |
//!
//! The hot paths are allocation-free, and the server's lock-free on x86_64 and aarch64: a
//! decision is a clock read and a few atomic operations (see admit::guide::platforms for the
//! rest). The client throttle takes one short lock per call.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use admit::warmup::{Phase, WarmUp};
//!
//! // 100 requests per second once warm; 100 / 3 while cold; a 10 s warm-up.
//! let limiter = WarmUp::builder(100.0)
//!     .warm_up_period(Duration::from_secs(10))
//!     .cold_factor(3)
//!     .build()?;
//!
//! assert_eq!(limiter.snapshot().phase, Phase::Cold);
//! match limiter.try_acquire() {
//!     Ok(()) => { /* serve the request */ }
//!     Err(rejected) => {
//!         // Answer 429/503 and tell the client when to come back.
//!         let _retry_after: Duration = rejected.retry_after();
//!     }
//! }
//! # Ok::<(), admit::ConfigError>(())
//! ```
// The other crate lints live in the workspace manifest; the library alone forbids `unsafe`
// outright (the test kit's counting allocator needs it).
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Links to items behind optional features resolve only with those features on: `cargo doc
// --all-features` (docs.rs, `.ci/run`) checks every link; a build with fewer does not warn.
#![cfg_attr(
    not(all(
        feature = "tonic",
        feature = "metrics",
        feature = "axum",
        feature = "signal",
        feature = "tracing"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]
#![doc(test(attr(deny(warnings))))]

// Every limiter's state is 64-bit words changed by compare-and-swap; without 64-bit atomics
// the build would stop at an unresolved `AtomicU64` import instead of saying why.
#[cfg(not(target_has_atomic = "64"))]
compile_error!(
    "admit needs 64-bit atomics (`target_has_atomic = \"64\"`), which this target lacks: \
     see admit::guide::platforms"
);

#[cfg(all(feature = "tower", feature = "tokio"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "tower", feature = "tokio"))))]
pub mod bound;
pub mod client;
pub mod clock;
pub mod criticality;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod drain;
pub mod erlang;
mod error;
pub mod guide;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod middleware;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod respond;
mod shared;
pub mod shed;
pub mod signal;
mod sync;
pub mod warmup;

pub use error::ConfigError;
pub use shared::Shared;

/// The README's code blocks, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
