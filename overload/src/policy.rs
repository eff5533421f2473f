//! What protects the server: nothing, admit, or a peer from crates.io.

use std::fmt;
use std::str::FromStr;

/// What protects the server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Policy {
    /// Nothing.
    Unprotected,
    /// admit's defaults: the warm-up layer and the shedder with its CPU signal, queue gate and
    /// runtime probe.
    Admit,
    /// admit's defaults, the handler reporting each request's CPU wait (`CpuWait`).
    AdmitCpuWait,
    /// admit's defaults reading each request's class from `admit-criticality`: the shedder
    /// refuses the lower classes first, and the warm-up bucket keeps half its burst for the
    /// critical ones.
    AdmitClasses,
    /// admit's shedder with the CPU signal alone (go-zero's shedder), and the warm-up layer.
    GoZero,
    /// admit's bound alone (`BoundLayer`), the handler reporting each request's CPU wait.
    Bound,
    /// admit's defaults with the bound innermost, the handler reporting each request's CPU wait.
    AdmitBound,
    /// The same without the shedder's CPU signal: the warm-up layer, the shedder with its
    /// queue-time signals, and the bound.
    GateBound,
    /// The same, the handler running the lower classes' work at the lowest priority
    /// (`spawn_blocking_as`).
    GateBoundLow,
    /// tower's `load_shed` + `concurrency_limit(k)`.
    Tower(usize),
    /// `little-loadshedder`'s `LoadShedLayer`: a queue and a concurrency limit sized by
    /// Little's law for a target average latency.
    LittleLoadShedder,
    /// `tower-acc`'s adaptive `ConcurrencyLimitLayer` (its default `Vegas`) behind tower's
    /// `load_shed`.
    TowerAcc,
}

impl Policy {
    /// How tables and charts name it.
    pub(crate) fn label(self) -> String {
        match self {
            Policy::Unprotected => "unprotected".to_owned(),
            Policy::Admit => "admit".to_owned(),
            Policy::AdmitCpuWait => "admit + CpuWait".to_owned(),
            Policy::AdmitClasses => "admit with classes".to_owned(),
            Policy::GoZero => "admit CPU only".to_owned(),
            Policy::Bound => "admit bound".to_owned(),
            Policy::AdmitBound => "admit + bound".to_owned(),
            Policy::GateBound => "admit queue + bound".to_owned(),
            Policy::GateBoundLow => "admit queue + bound, low".to_owned(),
            Policy::Tower(k) => format!("tower k={k}"),
            Policy::LittleLoadShedder => "little-loadshedder".to_owned(),
            Policy::TowerAcc => "tower-acc Vegas".to_owned(),
        }
    }
}

/// The command-line name: `unprotected`, `admit`, `admit-cpu-wait`, `admit-classes`,
/// `go-zero`, `tower:<k>`, `little-loadshedder` or `tower-acc`.
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Unprotected => f.write_str("unprotected"),
            Policy::Admit => f.write_str("admit"),
            Policy::AdmitCpuWait => f.write_str("admit-cpu-wait"),
            Policy::AdmitClasses => f.write_str("admit-classes"),
            Policy::GoZero => f.write_str("go-zero"),
            Policy::Bound => f.write_str("bound"),
            Policy::AdmitBound => f.write_str("admit-bound"),
            Policy::GateBound => f.write_str("gate-bound"),
            Policy::GateBoundLow => f.write_str("gate-bound-low"),
            Policy::Tower(k) => write!(f, "tower:{k}"),
            Policy::LittleLoadShedder => f.write_str("little-loadshedder"),
            Policy::TowerAcc => f.write_str("tower-acc"),
        }
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "unprotected" => Ok(Policy::Unprotected),
            "admit" => Ok(Policy::Admit),
            "admit-cpu-wait" => Ok(Policy::AdmitCpuWait),
            "admit-classes" => Ok(Policy::AdmitClasses),
            "go-zero" => Ok(Policy::GoZero),
            "bound" => Ok(Policy::Bound),
            "admit-bound" => Ok(Policy::AdmitBound),
            "gate-bound" => Ok(Policy::GateBound),
            "gate-bound-low" => Ok(Policy::GateBoundLow),
            "little-loadshedder" => Ok(Policy::LittleLoadShedder),
            "tower-acc" => Ok(Policy::TowerAcc),
            other => match other.strip_prefix("tower:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Policy::Tower(k)),
                _ => Err(format!(
                    "unknown policy `{other}`: unprotected, admit, admit-cpu-wait, \
                     admit-classes, go-zero, bound, admit-bound, gate-bound, gate-bound-low, \
                     tower:<k> (k > 0), \
                     little-loadshedder or tower-acc"
                )),
            },
        }
    }
}

impl serde::Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for policy in [
            Policy::Unprotected,
            Policy::Admit,
            Policy::AdmitCpuWait,
            Policy::AdmitClasses,
            Policy::GoZero,
            Policy::Bound,
            Policy::AdmitBound,
            Policy::GateBound,
            Policy::GateBoundLow,
            Policy::Tower(64),
            Policy::LittleLoadShedder,
            Policy::TowerAcc,
        ] {
            assert_eq!(policy.to_string().parse::<Policy>(), Ok(policy));
        }
    }

    #[test]
    fn a_bad_name_says_what_is_allowed() {
        for bad in ["tower:0", "tower:x", "tower", "nothing"] {
            let error = bad.parse::<Policy>().unwrap_err();
            assert!(error.contains("tower:<k>"), "{error}");
        }
    }
}
