//! The CPU as an [`OverloadSignal`]: go-zero's threshold and overload factor.

use std::fmt;

use std::any::Any;

use super::{CpuSignal, ManualCpu, SystemCpu};
use crate::ConfigError;
use crate::signal::{Cause, OverloadSignal, Pressure};

/// The overload factor's floor: even a saturated CPU admits 10 % of the proven concurrency.
const OVERLOAD_FACTOR_FLOOR: f64 = 0.1;

/// go-zero's CPU rule as an [`OverloadSignal`]: overloaded while the load is at or above
/// `threshold` ‰, with go-zero's overload factor `(1000 − load) / (1000 − threshold)`,
/// clamped to `0.1..=1`, as the headroom. An unknown load is not overloaded and leaves full
/// headroom. Every [`Shedder`](crate::shed::Shedder) has one, built from its builder's
/// [`cpu`](crate::shed::ShedderBuilder::cpu) and
/// [`cpu_threshold`](crate::shed::ShedderBuilder::cpu_threshold).
pub(crate) struct CpuOverload {
    source: Source,
    threshold: u32,
}

/// The signal read: admit's own kinds dispatched statically (their load is inlined into every
/// decision), anything else through a dynamic call.
pub(crate) enum Source {
    System(SystemCpu),
    Manual(ManualCpu),
    Other(Box<dyn CpuSignal>),
}

impl Source {
    pub(crate) fn new<S: CpuSignal + 'static>(source: S) -> Source {
        let any: &dyn Any = &source;
        if let Some(system) = any.downcast_ref::<SystemCpu>() {
            Source::System(system.clone())
        } else if let Some(manual) = any.downcast_ref::<ManualCpu>() {
            Source::Manual(manual.clone())
        } else {
            Source::Other(Box::new(source))
        }
    }

    #[inline]
    fn load_permille(&self) -> Option<u32> {
        match self {
            Source::System(system) => system.load_permille(),
            Source::Manual(manual) => manual.load_permille(),
            Source::Other(other) => other.load_permille(),
        }
    }
}

impl CpuOverload {
    /// Overloaded at or above `threshold` ‰ of what `source` reports.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CpuThresholdOutOfRange`] if `threshold` is outside `1..=999`: at 0 every
    /// moment would be overloaded, at 1000 the CPU could never reach it (and the overload
    /// factor divides by `1000 − threshold`).
    pub(crate) fn of(source: Source, threshold: u32) -> Result<Self, ConfigError> {
        if !(1..=999).contains(&threshold) {
            return Err(ConfigError::CpuThresholdOutOfRange {
                cpu_threshold: threshold,
            });
        }
        Ok(CpuOverload { source, threshold })
    }

    /// The load in ‰, at most 1000, or `None` if unknown.
    #[inline]
    pub(crate) fn load_permille(&self) -> Option<u32> {
        self.source.load_permille().map(|load| load.min(1000))
    }

    /// The threshold, in ‰.
    pub(crate) fn threshold(&self) -> u32 {
        self.threshold
    }

    /// The reading for a load of `load` ‰ (`None`: unknown).
    #[inline]
    pub(crate) fn pressure_at(&self, load: Option<u32>) -> Pressure {
        match load {
            Some(load) if load >= self.threshold => {
                Pressure::overloaded(Cause::Cpu).with_headroom(self.overload_factor(load.min(1000)))
            }
            // Below the threshold the factor exceeds 1 and clamps to 1: no division needed.
            _ => Pressure::CALM,
        }
    }

    /// go-zero's `overloadFactor`.
    #[inline]
    pub(crate) fn overload_factor(&self, load: u32) -> f64 {
        let factor = (1000.0 - f64::from(load)) / (1000.0 - f64::from(self.threshold));
        factor.clamp(OVERLOAD_FACTOR_FLOOR, 1.0)
    }
}

impl OverloadSignal for CpuOverload {
    #[inline]
    fn pressure(&self, _now_nanos: u64) -> Pressure {
        self.pressure_at(self.load_permille())
    }
}

impl fmt::Debug for CpuOverload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuOverload")
            .field("permille", &self.load_permille())
            .field("threshold", &self.threshold)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_at_the_threshold_with_go_zeros_factor_as_headroom() {
        let cpu = ManualCpu::new(950);
        let signal = CpuOverload::of(Source::new(cpu.clone()), 900).unwrap();
        let pressure = signal.pressure(0);
        assert_eq!(pressure.cause(), Some(Cause::Cpu));
        assert_eq!(pressure.headroom(), 0.5); // (1000 − 950) / (1000 − 900)
        cpu.set(1000);
        assert_eq!(signal.pressure(0).headroom(), 0.1, "the factor's floor");
        cpu.set(899);
        assert_eq!(signal.pressure(0), Pressure::CALM);
        cpu.set_unknown();
        assert_eq!(signal.pressure(0), Pressure::CALM);
        for threshold in [0, 1000] {
            assert!(CpuOverload::of(Source::new(ManualCpu::new(0)), threshold).is_err());
        }
    }
}
