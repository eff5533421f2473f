//! The shedder's queue signal: measured waits, or the runtime probe's estimate of them.

use std::sync::Arc;

use super::{LagProbe, QueueGate, QueueState, WaitSource};
use crate::signal::{Arrival, OverloadSignal, Pressure};

/// A shedder's [`QueueGate`] and [`LagProbe`], either or both absent, as one signal: the gate's
/// verdict from measured waits, and the probe's only while the gate has none (no gate, or no
/// wait recorded in its last interval).
#[derive(Debug, Default)]
pub(crate) struct QueueSignal {
    pub(crate) gate: Option<Arc<QueueGate>>,
    pub(crate) probe: Option<LagProbe>,
}

impl QueueSignal {
    #[inline]
    fn probe(&self, arrival: &Arrival) -> Pressure {
        self.probe
            .as_ref()
            .map_or(Pressure::CALM, |probe| probe.assess(arrival))
    }
}

impl OverloadSignal for QueueSignal {
    fn pressure(&self, now_nanos: u64) -> Pressure {
        match &self.gate {
            Some(gate) if gate.state(now_nanos) != QueueState::Unknown => gate.pressure(now_nanos),
            _ => self
                .probe
                .as_ref()
                .map_or(Pressure::CALM, |probe| probe.pressure(now_nanos)),
        }
    }

    // Inlined into every decision, where without a gate and a probe it folds away.
    #[inline(always)]
    fn assess(&self, arrival: &Arrival) -> Pressure {
        let Some(gate) = &self.gate else {
            return self.probe(arrival);
        };
        match gate.judge(
            WaitSource::Request,
            arrival.now_nanos(),
            arrival.wait_nanos(),
        ) {
            (QueueState::Unknown, _) => self.probe(arrival),
            (_, pressure) => pressure,
        }
    }
}
