//! Why the system is under pressure, and why a request was refused.

use std::fmt;

/// What put the system under pressure, or made a shedder refuse a request.
///
/// Signals name the cause of their pressure ([`Pressure::overloaded`](super::Pressure)); a
/// refusal ([`Overloaded::reason`](crate::shed::Overloaded::reason)) names the cause that
/// refused it, which may also be [`CoolOff`](Cause::CoolOff).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// The CPU is at or above its threshold.
    Cpu,
    /// No signal is hot any more, but one was less than the shedder's cool-off period ago.
    CoolOff,
    /// A signal of your own, by its name.
    Custom(&'static str),
    /// Requests wait in a queue longer than its target: a [`QueueGate`](super::queue::QueueGate)
    /// is hot.
    Queue,
    /// The queue gate is hot and this request waited more than twice its target: by the time
    /// it would be served, its client has likely given up.
    QueueDelay,
    /// The runtime runs its timers late: a [`LagProbe`](super::queue::LagProbe) is shedding.
    RuntimeLag,
}

impl Cause {
    /// A short name for logs and labels: `cpu`, `cool-off`, `queue`, `queue-delay`,
    /// `runtime-lag`, or the custom signal's name.
    ///
    /// ```
    /// use admit::signal::Cause;
    ///
    /// assert_eq!(Cause::CoolOff.as_str(), "cool-off");
    /// assert_eq!(Cause::Custom("disk").to_string(), "disk");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Cause::Cpu => "cpu",
            Cause::CoolOff => "cool-off",
            Cause::Custom(name) => name,
            Cause::Queue => "queue",
            Cause::QueueDelay => "queue-delay",
            Cause::RuntimeLag => "runtime-lag",
        }
    }

    /// Which of two causes names a combined reading: the higher rank wins, the earlier of two
    /// equal ones. The CPU outranks signals of your own, which outrank the queue, which
    /// outranks the runtime probe's estimate of it.
    #[inline]
    pub(crate) const fn rank(&self) -> u8 {
        match self {
            Cause::Cpu => 5,
            Cause::Custom(_) => 4,
            Cause::QueueDelay => 3,
            Cause::Queue => 2,
            Cause::RuntimeLag => 1,
            Cause::CoolOff => 0,
        }
    }

    /// The cause as one of a fixed set of tokens: [`as_str`](Self::as_str), with every custom
    /// signal as `signal` (its name is the signal's own and may be any string).
    #[cfg(any(feature = "tower", feature = "metrics"))]
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Cause::Custom(_) => "signal",
            cause => cause.as_str(),
        }
    }

    /// How many causes there are, counting every custom signal as one.
    pub(crate) const COUNT: usize = 6;

    /// Every cause, a custom signal's under an empty name, in the order of
    /// [`index`](Self::index).
    pub(crate) const ALL: [Cause; Self::COUNT] = [
        Cause::Cpu,
        Cause::CoolOff,
        Cause::Custom(""),
        Cause::Queue,
        Cause::QueueDelay,
        Cause::RuntimeLag,
    ];

    /// The cause's counter among [`COUNT`](Self::COUNT).
    #[inline]
    pub(crate) fn index(&self) -> usize {
        match self {
            Cause::Cpu => 0,
            Cause::CoolOff => 1,
            Cause::Custom(_) => 2,
            Cause::Queue => 3,
            Cause::QueueDelay => 4,
            Cause::RuntimeLag => 5,
        }
    }
}

/// [`as_str`](Cause::as_str).
impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_has_its_own_counter() {
        for (i, cause) in Cause::ALL.iter().enumerate() {
            assert_eq!(cause.index(), i, "{cause:?}");
        }
    }
}
