//! An admitted request's place in service.

use std::fmt;

use super::Bound;
use crate::Shared;
use crate::clock::Clock;
use crate::middleware::{Finish, Outcome};
use crate::signal::cpu::CpuWait;

/// A request's place in service under a [`Bound`]: held until the request ends, then given to
/// the next waiter. Finishing it reports how long the request was in service and how long its
/// work waited for a CPU, which moves the bound; dropping it unfinished (a cancelled request)
/// gives the place back and reports nothing.
#[must_use = "dropping a permit at once ends the request"]
pub struct BoundPermit<C: Clock + 'static> {
    bound: Shared<Bound<C>>,
    admitted_at: u64,
    open: bool,
}

impl<C: Clock + 'static> BoundPermit<C> {
    pub(crate) fn new(bound: Shared<Bound<C>>, admitted_at: u64) -> Self {
        BoundPermit {
            bound,
            admitted_at,
            open: true,
        }
    }
}

impl<C: Clock + 'static> Finish for BoundPermit<C> {
    #[inline]
    fn finish(&mut self, outcome: Outcome) {
        self.finish_after(outcome, CpuWait::NONE);
    }

    #[inline]
    fn finish_after(&mut self, _outcome: Outcome, cpu_wait: CpuWait) {
        if std::mem::replace(&mut self.open, false) {
            let now = self.bound.now();
            let service = now.saturating_sub(self.admitted_at);
            self.bound.finish(now, Some((service, cpu_wait)));
        }
    }
}

impl<C: Clock + 'static> Drop for BoundPermit<C> {
    #[inline]
    fn drop(&mut self) {
        if self.open {
            self.bound.finish(self.bound.now(), None);
        }
    }
}

impl<C: Clock + 'static> fmt::Debug for BoundPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundPermit")
            .field("admitted_at", &self.admitted_at)
            .field("open", &self.open)
            .finish()
    }
}
