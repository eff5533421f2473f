//! Where a drain is, and how it ended.

/// The phases of a [`Drain`](super::Drain), in order; a drain only moves forward.
///
/// | phase | readiness | requests | HTTP/1 responses | sessions |
/// |---|---|---|---|---|
/// | `Serving` | ready | served | unchanged | — |
/// | `Announced` | per [`readiness_fails_at`](super::DrainBuilder::readiness_fails_at) | served | `Connection: close` added | keep running |
/// | `Draining` | not ready | refused | — | told to reconnect |
/// | `Drained` | not ready | refused | — | — |
/// | `Expired` | not ready | refused | — | abandoned |
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Not started: everything is served.
    Serving,
    /// Started ([`Drain::start`](super::Drain::start)): still serving while load balancers
    /// learn that this replica is leaving; HTTP/1 connections are closed after their response.
    Announced,
    /// The propagation delay is over (or [`Drain::start_now`](super::Drain::start_now)): new
    /// requests are refused, the listener should stop accepting, sessions are told to reconnect.
    Draining,
    /// Nothing is in flight and no session is open.
    Drained,
    /// The deadline passed first.
    Expired,
}

impl Phase {
    pub(crate) const fn to_u64(self) -> u64 {
        self as u64
    }

    pub(crate) const fn from_u64(raw: u64) -> Phase {
        match raw {
            0 => Phase::Serving,
            1 => Phase::Announced,
            2 => Phase::Draining,
            3 => Phase::Drained,
            _ => Phase::Expired,
        }
    }

    /// Whether new requests are refused: `Draining` and after.
    pub const fn refuses(self) -> bool {
        self.to_u64() >= Phase::Draining.to_u64()
    }

    /// Whether the drain has ended: `Drained` or `Expired`.
    pub const fn is_final(self) -> bool {
        self.to_u64() >= Phase::Drained.to_u64()
    }
}

/// How a drain ended ([`Drain::finished`](super::Drain::finished)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every request finished and every session closed before the deadline.
    Drained {
        /// Connections still open (reported, not awaited: the server's own graceful shutdown
        /// closes them).
        connections: u64,
    },
    /// The deadline passed with work left.
    Expired {
        /// Requests still in flight.
        in_flight: u64,
        /// Sessions still open.
        sessions: u64,
        /// Connections still open.
        connections: u64,
    },
}

/// The counts and phase of a drain at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainSnapshot {
    /// The phase.
    pub phase: Phase,
    /// Requests admitted whose response body has not ended.
    pub in_flight: u64,
    /// Open [`Session`](super::Session)s.
    pub sessions: u64,
    /// Open connections (tracked ones only).
    pub connections: u64,
    /// Requests that the drain's layer saw before any other admit layer, but those it refused
    /// while draining (another replica counts them when they are retried there): its share of
    /// the offered load (all of it when the layer is outermost). The layer counts them, not
    /// direct calls of [`Drain::admit`](super::Drain::admit).
    pub offered: u64,
}
