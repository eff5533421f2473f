//! The permits an admitted request holds until it completes.

use std::fmt;
use std::ops::Deref;

use super::Shedder;
use crate::Shared;
use crate::clock::Clock;
use crate::signal::cpu::CpuWait;

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

    /// Ends the request, as passed or failed, unless it has ended already.
    #[inline]
    fn finish(&mut self, passed: bool, cpu_wait: CpuWait) {
        if self.open {
            self.open = false;
            let wait = u64::try_from(cpu_wait.0.as_nanos()).unwrap_or(u64::MAX);
            self.shedder.complete(self.admitted_at, passed, wait);
        }
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
            self.shedder.complete(self.admitted_at, false, 0);
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
    pub fn pass(mut self) {
        self.0.finish(true, CpuWait::NONE);
    }

    /// The request succeeded after its work waited `cpu_wait` for a CPU: it counts towards the
    /// throughput, and its latency less the wait towards the latency (see [`CpuWait`]).
    pub fn pass_after(mut self, cpu_wait: CpuWait) {
        self.0.finish(true, cpu_wait);
    }

    /// The request failed (for example it timed out): it leaves the in-flight count and is
    /// recorded as a failure, but teaches the shedder nothing about capacity.
    pub fn fail(mut self) {
        self.0.finish(false, CpuWait::NONE);
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
    pub fn pass(mut self) {
        self.0.finish(true, CpuWait::NONE);
    }

    /// The request succeeded after its work waited `cpu_wait` for a CPU, as
    /// [`Permit::pass_after`].
    pub fn pass_after(mut self, cpu_wait: CpuWait) {
        self.0.finish(true, cpu_wait);
    }

    /// The request failed: it leaves the in-flight count and is recorded as a failure.
    pub fn fail(mut self) {
        self.0.finish(false, CpuWait::NONE);
    }
}

/// The layer's verdict: [`Pass`](crate::middleware::Outcome::Pass) passes, anything else fails.
/// Only the first call (or [`pass`](OwnedPermit::pass) / [`fail`](OwnedPermit::fail)) records.
#[cfg(feature = "tower")]
impl<C: Clock + 'static> crate::middleware::Finish for OwnedPermit<C> {
    #[inline]
    fn finish(&mut self, outcome: crate::middleware::Outcome) {
        self.finish_after(outcome, CpuWait::NONE);
    }

    #[inline]
    fn finish_after(&mut self, outcome: crate::middleware::Outcome, cpu_wait: CpuWait) {
        self.0
            .finish(outcome == crate::middleware::Outcome::Pass, cpu_wait);
    }
}

impl<C: Clock + 'static> fmt::Debug for OwnedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f, "OwnedPermit")
    }
}

#[cfg(all(test, feature = "tower", not(admit_loom)))]
mod tests {
    use std::sync::Arc;

    use crate::clock::ManualClock;
    use crate::middleware::{Finish, Outcome};
    use crate::shed::Shedder;
    use crate::signal::cpu::ManualCpu;

    /// The layer finishes a permit in place and drops it after: only the first finish records,
    /// and the drop records nothing more.
    #[test]
    fn a_finished_permit_records_once() {
        let shedder = Arc::new(
            Shedder::builder()
                .clock(ManualClock::new())
                .cpu(ManualCpu::new(0))
                .build()
                .unwrap(),
        );
        let mut permit = shedder.allow_owned().unwrap();
        permit.finish(Outcome::Pass);
        permit.finish(Outcome::Fail);
        drop(permit);
        let unfinished = shedder.allow_owned().unwrap();
        drop(unfinished);
        let snapshot = shedder.snapshot();
        assert_eq!(
            (snapshot.passed, snapshot.failed, snapshot.flying),
            (1, 1, 0)
        );
    }
}
