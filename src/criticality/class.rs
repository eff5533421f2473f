//! The four classes and their names.

use std::error::Error;
use std::fmt;
use std::str::FromStr;

/// How important a request is, from least to most: the order `<` compares by.
///
/// Google's four levels, the vocabulary most RPC systems copy. A request that carries no class
/// is [`Critical`](Criticality::Critical) (the [`Default`]), so a service that never sets one
/// is shed exactly as without classes.
///
/// ```
/// use admit::criticality::Criticality;
///
/// assert!(Criticality::Sheddable < Criticality::Critical);
/// assert_eq!(Criticality::default(), Criticality::Critical);
/// assert_eq!("SHEDDABLE_PLUS".parse(), Ok(Criticality::SheddablePlus));
/// assert_eq!("critical-plus".parse(), Ok(Criticality::CriticalPlus));
/// assert_eq!(Criticality::SheddablePlus.to_string(), "sheddable_plus");
/// assert!("urgent".parse::<Criticality>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Criticality {
    /// Work nobody waits for: prefetches, batch jobs, telemetry. Refused first.
    Sheddable,
    /// Work that can be retried later, but that someone may notice.
    SheddablePlus,
    /// Work a user waits for (the default).
    #[default]
    Critical,
    /// The most important work: refused last. Usually only trusted callers may claim it.
    CriticalPlus,
}

impl Criticality {
    /// Every class, from the least important.
    pub const ALL: [Criticality; 4] = [
        Criticality::Sheddable,
        Criticality::SheddablePlus,
        Criticality::Critical,
        Criticality::CriticalPlus,
    ];

    /// How many classes there are.
    pub const COUNT: usize = 4;

    /// The class's name as a label and a header value: `sheddable`, `sheddable_plus`,
    /// `critical` or `critical_plus`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Criticality::Sheddable => "sheddable",
            Criticality::SheddablePlus => "sheddable_plus",
            Criticality::Critical => "critical",
            Criticality::CriticalPlus => "critical_plus",
        }
    }

    /// The class's position in [`ALL`](Self::ALL), from 0 (the least important).
    pub const fn index(&self) -> usize {
        *self as usize
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Criticality {
    type Err = ParseCriticalityError;

    /// A class's name in any case, with `_` or `-` between its words (`CRITICAL_PLUS`,
    /// `critical-plus`), surrounding spaces ignored.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Criticality::parse(value.as_bytes()).ok_or(ParseCriticalityError)
    }
}

impl Criticality {
    /// [`from_str`](FromStr::from_str) for bytes, such as a header value's. Allocates nothing.
    /// The names' lengths differ, so the length alone picks the one name to compare with.
    pub(crate) fn parse(value: &[u8]) -> Option<Criticality> {
        let value = value.trim_ascii();
        let class = Criticality::ALL
            .into_iter()
            .find(|class| class.as_str().len() == value.len())?;
        let name = class.as_str().as_bytes();
        // The name as admit writes it, or any case and `-` for `_`.
        let same = value == name
            || name.iter().zip(value).all(|(&want, &got)| {
                want == got.to_ascii_lowercase() || (want == b'_' && got == b'-')
            });
        same.then_some(class)
    }
}

/// A value that names no [`Criticality`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseCriticalityError;

impl fmt::Display for ParseCriticalityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "not a criticality: expected sheddable, sheddable_plus, critical or critical_plus",
        )
    }
}

impl Error for ParseCriticalityError {}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::Criticality;

    #[test]
    fn names_parse_back_in_any_case_and_separator() {
        for class in Criticality::ALL {
            assert_eq!(class.as_str().parse(), Ok(class));
            assert_eq!(class.as_str().to_uppercase().parse(), Ok(class));
            assert_eq!(class.as_str().replace('_', "-").parse(), Ok(class));
            assert_eq!(format!(" {class} ").parse(), Ok(class));
            assert_eq!(Criticality::ALL[class.index()], class);
        }
        for bad in [
            "",
            "critical plus",
            "criticalplus",
            "critical__plus",
            "crítical",
            "sheddable_",
        ] {
            assert!(bad.parse::<Criticality>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_names_lengths_differ() {
        for a in Criticality::ALL {
            for b in Criticality::ALL {
                assert!(
                    a == b || a.as_str().len() != b.as_str().len(),
                    "{a} and {b}"
                );
            }
        }
    }

    #[test]
    fn the_order_is_importance() {
        assert!(Criticality::ALL.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
