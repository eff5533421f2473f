//! The share of the burst kept for the critical classes.

use crate::ConfigError;
use crate::criticality::Criticality;

/// How much of the burst each class may not use, in ns: `share · burst` for `Sheddable`,
/// half that for `SheddablePlus`, nothing for `Critical` and `CriticalPlus`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CriticalReserve {
    kept: [u64; Criticality::COUNT],
}

impl CriticalReserve {
    /// The reserve for `share` of a `burst` of ns.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CriticalShareOutOfRange`] unless `0 ≤ share ≤ 1`.
    pub(crate) fn new(share: f64, burst: u64) -> Result<Self, ConfigError> {
        if !(0.0..=1.0).contains(&share) {
            return Err(ConfigError::CriticalShareOutOfRange {
                critical_share: share,
            });
        }
        // `share ≤ 1`, so each product is at most `burst` and the casts are exact or round down.
        let kept = |weight: f64| (share * weight * burst as f64) as u64;
        Ok(CriticalReserve {
            kept: [kept(1.0).min(burst), kept(0.5).min(burst), 0, 0],
        })
    }

    /// The ns of the burst `class` may not use.
    #[inline]
    pub(crate) fn kept_from(&self, class: Criticality) -> u64 {
        self.kept[class.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_classes_give_up_their_share_of_the_burst() {
        let reserve = CriticalReserve::new(0.4, 1_000_000_000).unwrap();
        assert_eq!(reserve.kept_from(Criticality::Sheddable), 400_000_000);
        assert_eq!(reserve.kept_from(Criticality::SheddablePlus), 200_000_000);
        assert_eq!(reserve.kept_from(Criticality::Critical), 0);
        assert_eq!(reserve.kept_from(Criticality::CriticalPlus), 0);
        let all = CriticalReserve::new(1.0, u64::MAX).unwrap();
        assert_eq!(all.kept_from(Criticality::Sheddable), u64::MAX);
        assert_eq!(
            CriticalReserve::new(0.0, 5).unwrap(),
            CriticalReserve::default()
        );
    }

    #[test]
    fn a_share_outside_zero_to_one_is_refused() {
        for share in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let error = CriticalReserve::new(share, 1).unwrap_err();
            assert_eq!(error.setting(), "critical_share");
        }
    }
}
