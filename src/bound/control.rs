//! How the bound moves: a window of completions in, the next bound out.
//!
//! Every completion reports how long it was in service and how long its work waited for a CPU
//! it was ready to run on ([`CpuWait`](crate::signal::cpu::CpuWait)). At the end of each window
//! (the first completion [`WINDOW`] after the last move), the share of the service time spent
//! waiting decides:
//!
//! - above [`TARGET_SHARE`] (two fifths): more work is in service than the cores run, and the
//!   bound falls by that excess, `bound · max(½, 1 − (share − target) / target)` (Breakwater's
//!   decrease);
//! - at or below it, if a request had to wait or was refused for room during the window: the
//!   bound rises by an eighth (at least one);
//! - otherwise it stays: an idle service keeps its bound.
//!
//! Always within the floor and the ceiling. A window without completions moves nothing.

use std::time::Duration;

/// How often the bound moves, at most.
pub(crate) const WINDOW: Duration = Duration::from_millis(10);

/// The share of the service time spent waiting for a CPU above which the bound falls, in parts
/// per million: two fifths. Measured from the call of
/// [`spawn_blocking`](crate::bound::spawn_blocking), one CPU-bound job per core waits only while
/// the runtime's own threads run, two wait about a quarter of their time (each for the other to
/// finish), three half of it.
pub(crate) const TARGET_SHARE: u64 = 400_000;

const PPM: u64 = 1_000_000;

/// What one window saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Window {
    /// The completions' time in service, summed.
    pub(crate) service_nanos: u64,
    /// Their waits for a CPU, summed.
    pub(crate) wait_nanos: u64,
    /// Whether a request found no room at once.
    pub(crate) demand: bool,
}

/// The bound after `window`, from `bound`, within `floor..=ceiling`.
pub(crate) fn next(bound: u64, floor: u64, ceiling: u64, window: Window) -> u64 {
    let next = if window.service_nanos == 0 {
        bound
    } else {
        let share = ratio_ppm(window.wait_nanos, window.service_nanos);
        if share > TARGET_SHARE {
            let cut = ((share - TARGET_SHARE) * PPM / TARGET_SHARE).min(PPM / 2);
            // At most `u64::MAX / 10^6 · 10^6`: `bound` is at most the ceiling, a `u32`.
            bound * (PPM - cut) / PPM
        } else if window.demand {
            bound + (bound / 8).max(1)
        } else {
            bound
        }
    };
    next.clamp(floor, ceiling)
}

/// `part / whole` in parts per million, at most one million.
fn ratio_ppm(part: u64, whole: u64) -> u64 {
    let ppm = u128::from(part.min(whole)) * u128::from(PPM) / u128::from(whole);
    // At most `PPM`.
    ppm as u64
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn window(service: u64, wait: u64, demand: bool) -> Window {
        Window {
            service_nanos: service,
            wait_nanos: wait,
            demand,
        }
    }

    #[test]
    fn contention_above_the_target_cuts_by_its_excess_at_most_half() {
        // 80 % of the time waiting: twice the target, the largest cut.
        assert_eq!(next(40, 1, 100, window(1000, 800, true)), 20);
        // 48 %: a fifth over the target, a fifth off.
        assert_eq!(next(40, 1, 100, window(1000, 480, true)), 32);
        // Never below the floor.
        assert_eq!(next(3, 2, 100, window(1000, 900, false)), 2);
    }

    #[test]
    fn demand_without_contention_grows_by_an_eighth() {
        assert_eq!(next(40, 1, 100, window(1000, 400, true)), 45);
        assert_eq!(next(1, 1, 100, window(1000, 0, true)), 2);
        assert_eq!(next(99, 1, 100, window(1000, 0, true)), 100);
        // No demand, no growth; no completions, no move.
        assert_eq!(next(40, 1, 100, window(1000, 0, false)), 40);
        assert_eq!(next(40, 1, 100, window(0, 0, true)), 40);
    }

    proptest! {
        #[test]
        fn the_bound_stays_within_its_floor_and_ceiling(
            bound in 0u64..=u64::from(u32::MAX),
            floor in 1u64..1000,
            span in 0u64..=u64::from(u32::MAX),
            service in any::<u64>(),
            wait in any::<u64>(),
            demand in any::<bool>(),
        ) {
            let ceiling = floor.saturating_add(span).min(u64::from(u32::MAX));
            let bound = bound.clamp(floor, ceiling);
            let moved = next(bound, floor, ceiling, window(service, wait, demand));
            prop_assert!((floor..=ceiling).contains(&moved));
            if ratio_ppm(wait, service.max(1)) > TARGET_SHARE && service > 0 {
                prop_assert!(moved <= bound);
            } else {
                prop_assert!(moved >= bound);
            }
        }
    }
}
