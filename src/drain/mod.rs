//! Graceful drain on scale-in: keep serving while load balancers learn a replica is leaving,
//! then refuse new work, tell long-lived sessions to reconnect elsewhere, and wait for what is
//! in flight, up to a deadline inside Kubernetes' grace period.
//!
//! The [guide](crate::guide::drain) has a full axum server, the Kubernetes settings and the
//! pitfalls of waiting for a server's graceful shutdown alone.
//!
//! A [`Drain`] moves through [`Phase`]s: `Serving` → [`start`](Drain::start) (SIGTERM) →
//! `Announced` (readiness fails, HTTP/1 responses close their connection) → after the
//! propagation delay, or [`start_now`](Drain::start_now) → `Draining` (new requests refused,
//! [`stop_accepting`](Drain::stop_accepting) resolves, sessions told to reconnect) → `Drained`
//! once nothing is in flight and no session is open, or `Expired` at the deadline;
//! [`finished`](Drain::finished) says which, and what was left.
//!
//! Timers run on tokio's clock (pausable in tests); the phase also advances whenever it is
//! read, so no task has to drive it.
//!
//! ```
//! use std::time::Duration;
//! use admit::drain::{Drain, Outcome, Phase};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), admit::ConfigError> {
//! let drain = Drain::builder()
//!     .propagation_delay(Duration::from_secs(5))
//!     .deadline(Duration::from_secs(25))
//!     .build()?;
//! let request = drain.admit().expect("serving");
//! drain.start();
//! assert_eq!(drain.phase(), Phase::Announced);
//! assert!(!drain.is_ready());
//! drain.stop_accepting().await; // 5 s later
//! assert!(drain.admit().is_err());
//! drop(request);
//! assert_eq!(drain.finished().await, Outcome::Drained { connections: 0 });
//! # Ok(())
//! # }
//! ```

mod builder;
mod connection;
mod gate;
mod handle;
#[cfg(feature = "http")]
mod layer;
#[cfg(feature = "axum")]
mod listener;
#[cfg(feature = "http")]
mod permit;
mod phase;
#[cfg(feature = "http")]
mod readiness;
#[cfg(feature = "http")]
mod refusal;
#[cfg(all(feature = "signal", any(unix, windows)))]
mod signals;
#[cfg(test)]
mod tests;

pub use self::builder::DrainBuilder;
pub use self::connection::Tracked;
pub use self::handle::{ConnectionGuard, Drain, RequestGuard, Session};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::layer::{DrainBody, DrainLayer, DrainService};
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use self::listener::DrainListener;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::permit::DrainPermit;
pub use self::phase::{DrainSnapshot, Outcome, Phase};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::readiness::Readiness;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::refusal::Draining;
