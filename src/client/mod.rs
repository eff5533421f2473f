//! The client half of overload control: refusing locally what the backend would refuse.
//!
//! A server that refuses is still paying for each refusal, and clients that retry at once
//! multiply what it is offered. A [`Throttle`] at the client sends only about `k` times what the
//! backend has been accepting and refuses the rest before a round trip.
//!
//! | piece | role |
//! |---|---|
//! | [`Throttle`], [`ThrottleBuilder`] | adaptive throttling over a sliding window |
//! | [`Throttled`] | a request refused locally |
//! | [`ThrottleSnapshot`] | the window's counts and the refusal probability |
//! | `ThrottleLayer` (feature `http`) | the throttle in front of an HTTP or gRPC client, reading each answer |

mod builder;
#[cfg(feature = "http")]
mod layer;
mod throttle;
mod window;

pub use self::builder::ThrottleBuilder;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::layer::{ThrottleFuture, ThrottleLayer, ThrottleService};
pub use self::throttle::{Throttle, ThrottleSnapshot, Throttled};

#[cfg(all(test, not(admit_loom)))]
mod tests;
