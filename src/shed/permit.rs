//! The permits an admitted request holds until it completes.

use std::fmt;
use std::ops::Deref;

use super::Shedder;
use crate::Shared;
use crate::clock::Clock;

/// What both permit kinds hold: the shedder (borrowed or shared), the admission time, and
/// whether the request is still open. Ending it records the outcome exactly once; dropping it
/// open records a failure.
struct Completion<P: Deref<Target = Shedder<C>>, C: Clock> {
    shedder: P,
    admitted_at: u64,
    open: bool,
}

impl<P: Deref<Target = Shedder<C>>, C: Clock> Completion<P, C> {
    fn new(shedder: P, admitted_at: u64) -> Self {
        Completion {
            shedder,
            admitted_at,
            open: true,
        }
    }

    /// Ends the request, as passed or failed.
    #[inline]
    fn finish(mut self, passed: bool) {
        self.open = false;
        self.shedder.complete(self.admitted_at, passed);
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("admitted_at_nanos", &self.admitted_at)
            .finish_non_exhaustive()
    }
}

impl<P: Deref<Target = Shedder<C>>, C: Clock> Drop for Completion<P, C> {
    fn drop(&mut self) {
        if self.open {
            self.shedder.complete(self.admitted_at, false);
        }
    }
}

/// An admitted request, borrowed from its [`Shedder`]. Call [`pass`](Permit::pass) when it
/// succeeds or [`fail`](Permit::fail) when it does not; dropping it without either counts as a
/// failure (a cancelled request).
///
/// Only passes teach the shedder what the service can carry (its throughput and latency);
/// failures and cancellations just end the request. Use [`Shedder::allow_owned`] for a permit
/// that can move into a future or another thread.
#[must_use = "dropping a permit at once counts the request as failed"]
pub struct Permit<'a, C: Clock>(Completion<&'a Shedder<C>, C>);

impl<'a, C: Clock> Permit<'a, C> {
    pub(crate) fn new(shedder: &'a Shedder<C>, admitted_at: u64) -> Self {
        Permit(Completion::new(shedder, admitted_at))
    }

    /// The request succeeded: it counts towards the service's measured throughput and latency.
    pub fn pass(self) {
        self.0.finish(true);
    }

    /// The request failed (for example it timed out): it leaves the in-flight count and is
    /// recorded as a failure, but teaches the shedder nothing about capacity.
    pub fn fail(self) {
        self.0.finish(false);
    }
}

impl<C: Clock> fmt::Debug for Permit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f, "Permit")
    }
}

/// An admitted request holding its [`Shedder`] by [`Shared`] handle (an `Arc`, or a `&'static`
/// reference): `'static`, so it can move into a spawned task or a response future. Otherwise
/// exactly a [`Permit`]: [`pass`](Self::pass), [`fail`](Self::fail), and dropping it counts as a
/// failure.
#[must_use = "dropping a permit at once counts the request as failed"]
pub struct OwnedPermit<C: Clock + 'static>(Completion<Shared<Shedder<C>>, C>);

impl<C: Clock + 'static> OwnedPermit<C> {
    pub(crate) fn new(shedder: Shared<Shedder<C>>, admitted_at: u64) -> Self {
        OwnedPermit(Completion::new(shedder, admitted_at))
    }

    /// The request succeeded: it counts towards the service's measured throughput and latency.
    pub fn pass(self) {
        self.0.finish(true);
    }

    /// The request failed: it leaves the in-flight count and is recorded as a failure.
    pub fn fail(self) {
        self.0.finish(false);
    }

    /// The shedder this permit belongs to.
    pub fn shedder(&self) -> &Shared<Shedder<C>> {
        &self.0.shedder
    }
}

/// The layer's verdict: [`Pass`](crate::middleware::Outcome::Pass) passes, anything else fails.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Finish for OwnedPermit<C> {
    #[inline]
    fn finish(self, outcome: crate::middleware::Outcome) {
        self.0.finish(outcome == crate::middleware::Outcome::Pass);
    }
}

impl<C: Clock + 'static> fmt::Debug for OwnedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f, "OwnedPermit")
    }
}
