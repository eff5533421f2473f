//! Queue-time signals: how long requests waited before being served.
//!
//! A [`QueueGate`] applies CoDel's rule to the waits and is hot within one to two 100 ms
//! intervals of an overload. See the [guide](crate::guide::signals) for why the waits see what
//! the CPU signal does not, and which source fits your work.
//!
//! Where the waits come from:
//!
//! - [`header`]: a request-start header stamped by a proxy or load balancer (nginx, HAProxy,
//!   Envoy, Heroku, …), with [`floor::SkewFloor`] removing the clocks' offset; the layers read
//!   it with `middleware::RequestStart` (feature `http`);
//! - [`QueueStamp`]: jobs queued inside the process (`spawn_blocking`, a pool);
//! - [`LagProbe`]: no request at all: how late a timer fires, for the backlog that work done
//!   inline in async handlers leaves in tokio's run queue.

pub mod floor;
mod gate;
pub mod header;
#[cfg(feature = "metrics")]
mod histogram;
mod probe;
#[cfg(feature = "tokio")]
mod probe_task;
mod rng;
mod signal;
mod stamp;

#[cfg(test)]
pub(crate) use self::gate::QueueState;
pub use self::gate::{
    DEFAULT_HOT_SHARE, DEFAULT_INTERVAL, DEFAULT_TARGET, QueueGate, QueueGateBuilder,
};
#[cfg(feature = "metrics")]
pub(crate) use self::histogram::{BOUNDS_NANOS, Waits};
pub use self::probe::{LagProbe, LagProbeBuilder};
pub(crate) use self::signal::QueueSignal;
pub use self::stamp::{Expired, QueueStamp};
