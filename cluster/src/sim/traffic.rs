//! The requests in the simulation: balanced by the proxy, served or refused by a replica, and
//! counted in the second they were sent.

use std::time::Duration;

use admit_loadgen::{Outcome, Refusal};
use http::StatusCode;

use super::replica::{Admission, Replica};
use super::world::{Event, Pod, Sim};
use crate::run::Balance;

impl Sim<'_> {
    /// A request reaches the proxy.
    pub(super) fn arrive(&mut self, now: f64, request: u64) {
        let pod = match self.setup.balance {
            _ if self.rotation.is_empty() => None,
            Balance::RoundRobin => {
                self.cursor = (self.cursor + 1) % self.rotation.len();
                Some(self.rotation[self.cursor])
            }
            Balance::LeastConn => self.rotation.iter().copied().min_by_key(|id| {
                self.pods
                    .get(id)
                    .and_then(|pod| pod.replica.as_ref())
                    .map_or(usize::MAX, Replica::busy)
            }),
        };
        let Some(pod) = pod else {
            // The proxy's own answer: no server.
            self.record(
                request,
                Outcome::Status(StatusCode::SERVICE_UNAVAILABLE),
                Duration::ZERO,
            );
            return;
        };
        self.step(pod, now);
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        if p.refusing {
            self.refuse(request, now, now, "draining");
            return;
        }
        let Some(replica) = p.replica.as_mut() else {
            return;
        };
        if let Some(Admission::Refused(reason)) = replica.arrive(now, request) {
            self.refuse(request, now, now, reason);
        }
        self.reschedule(pod);
    }

    /// Brings pod `pod` to `now` and records what finished.
    pub(super) fn step(&mut self, pod: u64, now: f64) {
        let (mut done, mut refused) = (
            std::mem::take(&mut self.done),
            std::mem::take(&mut self.refused),
        );
        let leave = match self.pods.get_mut(&pod) {
            Some(Pod {
                replica: Some(replica),
                sessions_moved,
                ..
            }) => {
                replica.step(now, &mut done, &mut refused);
                *sessions_moved && replica.busy() == 0
            }
            _ => false,
        };
        for (request, arrived, finished) in done.drain(..) {
            let latency = finished - arrived + self.world.proxy_latency;
            let outcome = if latency > self.setup.deadline.as_secs_f64() {
                Outcome::TimedOut
            } else {
                Outcome::Ok
            };
            self.record(request, outcome, Duration::from_secs_f64(latency));
        }
        for (request, arrived, reason) in refused.drain(..) {
            self.refuse(request, arrived, now, reason);
        }
        (self.done, self.refused) = (done, refused);
        if leave {
            self.gone(pod, now, false);
        } else {
            self.reschedule(pod);
        }
    }

    pub(super) fn reschedule(&mut self, pod: u64) {
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        p.version += 1;
        let version = p.version;
        if let Some(next) = p.replica.as_ref().and_then(Replica::next_event) {
            self.push(next, Event::Replica { pod, version });
        }
    }

    pub(super) fn refuse(&mut self, request: u64, arrived: f64, now: f64, reason: &str) {
        let refusal = Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
            reason: Some(reason.to_owned()),
        };
        let latency = now - arrived + self.world.proxy_latency;
        self.record(
            request,
            Outcome::Refused(refusal),
            Duration::from_secs_f64(latency),
        );
    }

    /// Counts `request`'s outcome in the second it was sent.
    pub(super) fn record(&mut self, request: u64, outcome: Outcome, latency: Duration) {
        let Some(arrived) = self.arrivals.remove(&request) else {
            return;
        };
        if let Some(tally) = self.seconds.get_mut(arrived as usize) {
            tally.record(&outcome, latency);
        }
        self.total.record(&outcome, latency);
    }
}
