//! The pods in the simulation, as the real fleet runs them: started after the start delay,
//! removed in the ReplicaSet's order, drained.

use std::time::Duration;

use admit_loadgen::Outcome;
use rand::Rng;

use super::replica::Replica;
use super::world::{Event, Pod, Sim};
use crate::fleet::{Phase, scale_down_order};

impl Sim<'_> {
    /// Pods not leaving: the HPA's current count.
    pub(super) fn replicas(&self) -> u32 {
        self.pods
            .values()
            .filter(|pod| pod.phase != Phase::Terminating)
            .count() as u32
    }

    pub(super) fn create(&mut self, now: f64) -> u64 {
        let id = self.next_pod;
        self.next_pod += 1;
        self.pods.insert(
            id,
            Pod {
                phase: Phase::Pending,
                created: now,
                ready_at: None,
                replica: None,
                version: 0,
                signalled: None,
                refusing: false,
                sessions_moved: false,
            },
        );
        id
    }

    /// The pod's process serves, and the proxy adds it.
    pub(super) fn start_pod(&mut self, pod: u64, now: f64) -> Result<(), String> {
        let phase = self.rng.random::<f64>() * self.world.periods.cfs;
        let seed = self.setup.seed ^ (pod + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let Some(p) = self.pods.get_mut(&pod) else {
            return Ok(());
        };
        if p.phase != Phase::Pending {
            return Ok(());
        }
        let replica = Replica::start(&self.spec, &self.clock, now, phase, seed)
            .map_err(|error| error.to_string())?;
        p.replica = Some(replica);
        p.phase = Phase::Ready;
        p.ready_at = Some(now);
        self.rotation.push(pod);
        Ok(())
    }

    /// Scales to `desired` as the real fleet does: new pods start after the start delay;
    /// leaving, the unready go first, then the newest.
    pub(super) fn scale(&mut self, now: f64, desired: u32) {
        let current = self.replicas();
        if desired > current {
            for _ in current..desired {
                let pod = self.create(now);
                self.push(now + self.world.periods.start_delay, Event::PodStart(pod));
            }
            return;
        }
        let pods = self
            .pods
            .iter()
            .filter(|(_, pod)| pod.phase != Phase::Terminating)
            .map(|(&id, pod)| {
                (
                    id,
                    pod.phase == Phase::Ready,
                    pod.ready_at.unwrap_or(pod.created),
                )
            });
        for id in scale_down_order(pods, (current - desired) as usize) {
            self.signal(id, now);
        }
    }

    /// SIGTERM: a pod without a process goes at once; a replica drains.
    pub(super) fn signal(&mut self, pod: u64, now: f64) {
        let Some(p) = self.pods.get_mut(&pod) else {
            return;
        };
        p.phase = Phase::Terminating;
        p.signalled = Some(now);
        if p.replica.is_none() {
            self.pods.remove(&pod);
            return;
        }
        let periods = self.world.periods;
        // Its sessions, an even share of them, are told to reconnect evenly over the spread
        // after the delay; the last at m/(m + 1) of it.
        let ready = self.rotation.len().max(1) as f64;
        let sessions = (self.setup.sessions as f64 / ready).round();
        let told = periods.reconnect_spread * sessions / (sessions + 1.0);
        self.push(now + periods.propagation, Event::Deregister(pod));
        self.push(now + periods.drain_delay, Event::DrainDelay(pod));
        let moved = now + periods.drain_delay + told + periods.exit;
        self.push(moved, Event::SessionsMoved(pod));
        self.push(now + periods.drain_deadline, Event::DrainDeadline(pod));
    }

    /// The pod is gone; `expired`: at its drain's deadline, with requests cut.
    pub(super) fn gone(&mut self, pod: u64, now: f64, expired: bool) {
        let Some(p) = self.pods.remove(&pod) else {
            return;
        };
        self.rotation.retain(|&id| id != pod);
        self.prometheus.forget(pod);
        if let Some(signalled) = p.signalled {
            self.departures.push((signalled, now));
        }
        if expired && let Some(replica) = p.replica {
            self.events.killed_at_grace += u32::from(replica.busy() > 0);
            // The requests still there lose their connection.
            for request in replica.requests() {
                if let Some(arrived) = self.arrivals.get(&request).copied() {
                    let latency = Duration::from_secs_f64(now - arrived);
                    self.record(request, Outcome::Lost(admit_loadgen::Lost::Closed), latency);
                }
            }
        }
    }
}
