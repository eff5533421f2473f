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
//! | [`Throttles`] | a throttle per destination, at most a given number of them |
//! | [`RetryBudget`], [`RetryBudgetBuilder`], [`RetryBudgetSnapshot`] | retries as a share of the requests, with a floor |
//! | [`ThrottleSnapshot`] | the window's counts and the refusal probability |
//! | [`ThrottleTotals`], [`RetryBudgetTotals`] | cumulative counts by request class, for metrics |
//! | `ThrottleLayer` (feature `http`) | the throttle in front of an HTTP or gRPC client, reading each answer |
//! | `DeadlineLayer`, `DeadlineExceeded` (feature `http`) | the time the request being served has left, sent on with each request made for it |
//! | `RetryPolicy`, `RetryPolicyBuilder` (feature `retry`) | a tower retry policy: only what may be sent again, after the server's hint, within a budget |

#[cfg(feature = "http")]
mod answer;
mod budget;
mod builder;
#[cfg(feature = "http")]
mod deadline;
mod draw;
#[cfg(feature = "http")]
mod layer;
mod per_destination;
#[cfg(feature = "retry")]
mod retry;
mod tally;
mod throttle;
#[cfg(feature = "http")]
mod time_left;
mod window;

pub use self::budget::{RetryBudget, RetryBudgetBuilder, RetryBudgetSnapshot, RetryBudgetTotals};
pub use self::builder::ThrottleBuilder;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::deadline::{DeadlineExceeded, DeadlineFuture, DeadlineLayer, DeadlineService};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use self::layer::{ThrottleFuture, ThrottleLayer, ThrottleService};
pub use self::per_destination::Throttles;
#[cfg(feature = "retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "retry")))]
pub use self::retry::{RetryPolicy, RetryPolicyBuilder};
pub use self::throttle::{Throttle, ThrottleSnapshot, ThrottleTotals, Throttled};

#[cfg(all(test, not(admit_loom)))]
mod tests;
