//! The counts and the phase, and the one ordering that matters: a request never starts after
//! the drainer saw zero.
//!
//! Admission increments the in-flight count, then loads the phase; the drainer stores
//! `Draining`, then loads the count. All are `SeqCst`, so one total order holds them (under
//! loom, which models `SeqCst` accesses more weakly, a fence between the write and the read
//! stands in for it: `store_load_barrier`). If a request saw an old phase, its increment
//! precedes the drainer's load, which sees it; otherwise the request sees `Draining`, undoes
//! its increment and is refused. A request leaving does the same (decrement, then load the
//! phase), so the last one out while draining always knows to wake the drainer, or the drainer
//! sees zero itself.

use super::Phase;
use crate::sync::{AtomicU64, Ordering::SeqCst, store_load_barrier};

#[derive(Debug)]
pub(crate) struct Gate {
    phase: AtomicU64,
    in_flight: AtomicU64,
    sessions: AtomicU64,
}

impl Gate {
    pub(crate) fn new() -> Self {
        Gate {
            phase: AtomicU64::new(Phase::Serving.to_u64()),
            in_flight: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        Phase::from_u64(self.phase.load(SeqCst))
    }

    /// Counts a request in, and returns the phase it saw after counting.
    pub(crate) fn enter(&self) -> Phase {
        self.in_flight.fetch_add(1, SeqCst);
        store_load_barrier();
        self.phase()
    }

    /// Counts a request out; true if it was the last one and the drain refuses requests (the
    /// drainer may be waiting for zero).
    pub(crate) fn leave(&self) -> bool {
        let last = self.in_flight.fetch_sub(1, SeqCst) == 1;
        store_load_barrier();
        last && self.phase().refuses()
    }

    /// Counts a session in.
    pub(crate) fn open_session(&self) {
        self.sessions.fetch_add(1, SeqCst);
    }

    /// Counts a session out; true as [`leave`](Self::leave).
    pub(crate) fn close_session(&self) -> bool {
        let last = self.sessions.fetch_sub(1, SeqCst) == 1;
        store_load_barrier();
        last && self.phase().refuses()
    }

    /// Moves from `from` to `to`; false if the phase was not `from`.
    pub(crate) fn advance(&self, from: Phase, to: Phase) -> bool {
        self.phase
            .compare_exchange(from.to_u64(), to.to_u64(), SeqCst, SeqCst)
            .is_ok()
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(SeqCst)
    }

    pub(crate) fn sessions(&self) -> u64 {
        self.sessions.load(SeqCst)
    }

    /// No request in flight and no session open; after a phase change, ordered after it.
    pub(crate) fn idle(&self) -> bool {
        store_load_barrier();
        self.in_flight() == 0 && self.sessions() == 0
    }
}

#[cfg(all(test, admit_loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;

    /// A request racing the drainer either is refused or is seen by the drainer: never admitted
    /// while the drainer saw zero.
    #[test]
    fn loom_no_request_starts_after_drained() {
        loom::model(|| {
            let gate = Arc::new(Gate::new());
            assert!(gate.advance(Phase::Serving, Phase::Announced));
            let request = {
                let gate = Arc::clone(&gate);
                loom::thread::spawn(move || {
                    let phase = gate.enter();
                    if phase.refuses() {
                        gate.leave();
                        false
                    } else {
                        true
                    }
                })
            };
            assert!(gate.advance(Phase::Announced, Phase::Draining));
            let saw_zero = gate.idle();
            let admitted = request.join().unwrap();
            assert!(
                !(admitted && saw_zero),
                "a request started after the drain saw zero"
            );
        });
    }

    /// The last request out while draining always reports it, or the drainer sees zero itself.
    #[test]
    fn loom_the_last_one_out_wakes_the_drainer() {
        loom::model(|| {
            let gate = Arc::new(Gate::new());
            assert_eq!(gate.enter(), Phase::Serving);
            let request = {
                let gate = Arc::clone(&gate);
                loom::thread::spawn(move || gate.leave())
            };
            assert!(gate.advance(Phase::Serving, Phase::Draining));
            let saw_zero = gate.idle();
            let woke = request.join().unwrap();
            assert!(
                saw_zero || woke,
                "the drainer would wait for a wake-up that never comes"
            );
        });
    }
}
