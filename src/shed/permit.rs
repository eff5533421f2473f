//! The permits an admitted request holds until it completes.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use super::Shedder;
use crate::clock::Clock;
use crate::shed::cpu::CpuSignal;

/// What both permit kinds hold: the shedder (borrowed or shared), the admission time, and
/// whether the request is still open. Ending it records the outcome exactly once; dropping it
/// open records a failure.
pub(crate) struct Completion<P: Deref<Target = Shedder<C, S>>, C: Clock, S: CpuSignal> {
    shedder: P,
    admitted_at: u64,
    open: bool,
}

impl<P: Deref<Target = Shedder<C, S>>, C: Clock, S: CpuSignal> Completion<P, C, S> {
    pub(crate) fn new(shedder: P, admitted_at: u64) -> Self {
        Completion {
            shedder,
            admitted_at,
            open: true,
        }
    }

    /// Ends the request, as passed or failed.
    pub(crate) fn finish(mut self, passed: bool) {
        self.open = false;
        self.shedder.complete(self.admitted_at, passed);
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("admitted_at_nanos", &self.admitted_at)
            .finish_non_exhaustive()
    }
}

impl<P: Deref<Target = Shedder<C, S>>, C: Clock, S: CpuSignal> fmt::Debug for Completion<P, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.debug(f, "Permit")
    }
}

impl<P: Deref<Target = Shedder<C, S>>, C: Clock, S: CpuSignal> Drop for Completion<P, C, S> {
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
pub struct Permit<'a, C: Clock, S: CpuSignal>(Completion<&'a Shedder<C, S>, C, S>);

impl<'a, C: Clock, S: CpuSignal> Permit<'a, C, S> {
    pub(crate) fn new(shedder: &'a Shedder<C, S>, admitted_at: u64) -> Self {
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

impl<C: Clock, S: CpuSignal> fmt::Debug for Permit<'_, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f, "Permit")
    }
}

/// An admitted request holding its [`Shedder`] by `Arc`: `'static`, so it can move into a
/// spawned task or a response future. Otherwise exactly a [`Permit`]: [`pass`](Self::pass),
/// [`fail`](Self::fail), and dropping it counts as a failure.
#[must_use = "dropping a permit at once counts the request as failed"]
pub struct OwnedPermit<C: Clock, S: CpuSignal>(Completion<Arc<Shedder<C, S>>, C, S>);

impl<C: Clock, S: CpuSignal> OwnedPermit<C, S> {
    pub(crate) fn new(shedder: Arc<Shedder<C, S>>, admitted_at: u64) -> Self {
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
    pub fn shedder(&self) -> &Arc<Shedder<C, S>> {
        &self.0.shedder
    }
}

impl<C: Clock, S: CpuSignal> fmt::Debug for OwnedPermit<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f, "OwnedPermit")
    }
}
