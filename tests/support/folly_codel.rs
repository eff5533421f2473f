//! folly's `Codel` (`folly/executors/Codel.cpp`), transcribed from its published semantics:
//! the reference the queue gate is compared with. Single-threaded, times in ns.
//!
//! Include it with `#[path = "support/folly_codel.rs"] mod folly_codel;`.

#![allow(dead_code, unreachable_pub)]

pub struct FollyCodel {
    target: u64,
    interval: u64,
    min_delay: u64,
    interval_end: u64,
    reset: bool,
    overloaded: bool,
}

impl FollyCodel {
    /// Built at time 0.
    pub fn new(target: u64, interval: u64) -> Self {
        assert!(0 < target && target < interval);
        FollyCodel {
            target,
            interval,
            min_delay: 0,
            interval_end: 0,
            reset: true,
            overloaded: false,
        }
    }

    /// `overloaded(delay)` at `now`: whether to shed this request.
    pub fn overloaded(&mut self, delay: u64, now: u64) -> bool {
        let min = self.min_delay;
        if now > self.interval_end && !self.reset {
            self.reset = true;
            self.interval_end = now + self.interval;
            self.overloaded = min > self.target;
        }
        if self.reset {
            self.reset = false;
            self.min_delay = delay;
            return false;
        }
        if delay < self.min_delay {
            self.min_delay = delay;
        }
        self.overloaded && delay > 2 * self.target
    }

    /// `load()`: the interval's minimum as a percentage of twice the target, at most 100.
    pub fn load(&self) -> u64 {
        (100 * self.min_delay / (2 * self.target)).min(100)
    }
}
