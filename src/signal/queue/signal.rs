//! The shedder's queue signal: measured waits, or the runtime probe's estimate of them.

use std::sync::Arc;

use super::gate::{QueueState, WaitSource};
use super::{LagProbe, QueueGate};
use crate::signal::{Arrival, OverloadSignal, Pressure};

/// A shedder's [`QueueGate`] and [`LagProbe`], either or both absent, as one signal: the gate's
/// verdict from measured waits, and the probe's only while the gate has none (no gate, or no
/// wait recorded in its last interval), with the gate's floor for the limit either way.
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
        let probe = || {
            self.probe
                .as_ref()
                .map_or(Pressure::CALM, |probe| probe.pressure(now_nanos))
        };
        match &self.gate {
            Some(gate) if gate.state(now_nanos) != QueueState::Unknown => gate.pressure(now_nanos),
            // The gate's floor holds while the probe decides.
            Some(gate) => probe().and(gate.pressure(now_nanos)),
            None => probe(),
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
            (QueueState::Unknown, floor) => self.probe(arrival).and(floor),
            (_, pressure) => pressure,
        }
    }
}
