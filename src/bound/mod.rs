//! A bound on the work in service, and a short queue ordered by class in front of it.
//!
//! Admission decides whether a request may enter; a [`Bound`] also limits how many are in
//! service at once, so that admitted work does not share the cores with more work than they
//! run, and orders the requests that wait for a place: the highest
//! [class](crate::criticality::Criticality) first, in arrival order within a class.
//!
//! | piece | role |
//! |---|---|
//! | [`Bound`], [`BoundBuilder`] | the bound (from the floor, moved by contention) and its queue |
//! | [`BoundLayer`] | the tower layer: [`AdmitLayer`](crate::middleware::AdmitLayer) with a bound |
//! | [`BoundPermit`] | a request's place in service |
//! | [`Waiting`] | a waiting request: resolves to a permit or a refusal |
//! | [`Busy`], [`Why`] | a refusal and its reason |
//! | [`BoundSnapshot`], [`WaitCounts`] | what the bound has seen: its bound, its queue, the waiters' outcomes by class |
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use axum::{Router, routing::get};
//! use admit::bound::{Bound, BoundLayer};
//! use admit::middleware::CriticalityHeader;
//!
//! let bound = Arc::new(Bound::builder().build()?);
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(BoundLayer::new(bound).http().inspect(CriticalityHeader::new()));
//! # let _ = app;
//! # Ok::<(), admit::ConfigError>(())
//! ```

#[cfg(unix)]
mod blocking;
mod builder;
mod control;
mod error;
mod limiter;
mod permit;
mod queue;
mod snapshot;
mod wait;

#[cfg(unix)]
pub use self::blocking::{spawn_blocking, spawn_blocking_as};
pub use self::builder::BoundBuilder;
pub use self::error::{Busy, Why};
pub use self::limiter::Bound;
use self::limiter::Entry;
pub use self::permit::BoundPermit;
pub use self::snapshot::{BoundSnapshot, WaitCounts};
pub use self::wait::Waiting;

use crate::Shared;
use crate::clock::Clock;
use crate::middleware::{Admission, Limiter};
use crate::signal::Arrival;

/// [`AdmitLayer`](crate::middleware::AdmitLayer) applying a [`Bound`]: requests beyond the bound
/// wait in its queue, and reach the service when a place frees up, or are refused.
///
/// Put it innermost, after any layer that refuses requests (a
/// [`ShedLayer`](crate::shed::ShedLayer), a [`WarmUpLayer`](crate::warmup::WarmUpLayer)): a
/// request should wait only once nothing else will refuse it.
pub type BoundLayer<
    C = crate::clock::MonotonicClock,
    K = crate::middleware::classify::ErrorsPass,
    R = crate::respond::BoxErrorResponder,
    Q = crate::middleware::ReadNothing,
    H = crate::middleware::AtResponse,
> = crate::middleware::AdmitLayer<Bound<C>, K, R, Q, H>;

/// The bound in the tower glue: a request enters, waits ([`Waiting`]) or is refused.
impl<C: Clock + 'static> Limiter for Bound<C> {
    type Permit = BoundPermit<C>;
    type Refusal = Busy;
    type Wait = Waiting<C>;

    #[inline]
    fn count_offered(this: &Shared<Self>) {
        this.offer();
    }

    #[inline]
    fn admit(this: &Shared<Self>, arrival: Arrival) -> Admission<BoundPermit<C>, Busy, Waiting<C>> {
        let now = this.now();
        match this.decide(&arrival, now) {
            Entry::Now => Admission::Enter(BoundPermit::new(this.clone(), now)),
            Entry::Wait(ticket, until) => {
                let class = arrival.class().unwrap_or_default();
                Admission::Wait(Waiting::new(this.clone(), ticket, class, now, until))
            }
            Entry::Refused(why) => Admission::Refuse(Busy::new(
                why,
                arrival.class().unwrap_or_default(),
                this.retry_after(),
            )),
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests;
