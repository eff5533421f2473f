//! Building a [`Drain`].

use std::time::Duration;

use super::{Drain, Phase};
use crate::ConfigError;

/// The longest duration a drain accepts (the timer's range is about 30 years; longer is a
/// mistake).
const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Builds a [`Drain`]; see [`Drain::builder`].
#[derive(Clone, Debug)]
pub struct DrainBuilder {
    pub(super) propagation_delay: Duration,
    pub(super) deadline: Duration,
    pub(super) reconnect_spread: Duration,
    pub(super) retry_after: Duration,
    pub(super) readiness_fails_at: Phase,
}

impl Default for DrainBuilder {
    fn default() -> Self {
        DrainBuilder {
            propagation_delay: Duration::from_secs(5),
            deadline: Duration::from_secs(25),
            reconnect_spread: Duration::ZERO,
            retry_after: Duration::from_secs(1),
            readiness_fails_at: Phase::Announced,
        }
    }
}

impl DrainBuilder {
    /// How long after [`start`](Drain::start) requests are still served, while endpoint removal
    /// reaches kube-proxy, ingress controllers and load balancers. Default 5 s; raise it behind
    /// slow cloud load balancers. [`start_now`](Drain::start_now) skips it.
    pub fn propagation_delay(mut self, delay: Duration) -> Self {
        self.propagation_delay = delay;
        self
    }

    /// How long after [`start`](Drain::start) the drain gives up and
    /// [`finished`](Drain::finished) reports what was left. Default 25 s, inside Kubernetes'
    /// default grace period of 30 s: keep `deadline + margin ≤ terminationGracePeriodSeconds`.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Spreads the sessions' reconnect notices over this window from the start of
    /// [`Draining`](Phase::Draining), so clients do not all reconnect to the remaining replicas
    /// at once. Default 0 (all at once).
    pub fn reconnect_spread(mut self, spread: Duration) -> Self {
        self.reconnect_spread = spread;
        self
    }

    /// The `Retry-After` of refusals (whole seconds, rounded up). Default 1 s.
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The phase from which [`is_ready`](Drain::is_ready) is false: `Announced` (default: the
    /// readiness probe fails at once, so endpoints stop routing here) or `Draining`. Any later
    /// phase counts as `Draining`; `Serving` as `Announced`.
    pub fn readiness_fails_at(mut self, phase: Phase) -> Self {
        self.readiness_fails_at = phase.clamp(Phase::Announced, Phase::Draining);
        self
    }

    /// The drain, in [`Serving`](Phase::Serving).
    ///
    /// # Errors
    ///
    /// [`ConfigError::DeadlineNotAfterDelay`] if `deadline ≤ propagation_delay`;
    /// [`ConfigError::ReconnectSpreadTooLong`] if `reconnect_spread ≥ deadline −
    /// propagation_delay` (a zero spread always passes);
    /// [`ConfigError::DurationTooShort`] for a `retry_after` under one second;
    /// [`ConfigError::DurationTooLong`] for a duration over a century.
    pub fn build(self) -> Result<Drain, ConfigError> {
        for (setting, value) in [
            ("propagation_delay", self.propagation_delay),
            ("deadline", self.deadline),
            ("reconnect_spread", self.reconnect_spread),
            ("retry_after", self.retry_after),
        ] {
            if value > MAX {
                return Err(ConfigError::DurationTooLong { setting, value });
            }
        }
        if self.retry_after < Duration::from_secs(1) {
            return Err(ConfigError::DurationTooShort {
                setting: "retry_after",
                value: self.retry_after,
                min: Duration::from_secs(1),
            });
        }
        if self.deadline <= self.propagation_delay {
            return Err(ConfigError::DeadlineNotAfterDelay {
                deadline: self.deadline,
                propagation_delay: self.propagation_delay,
            });
        }
        let window = self.deadline - self.propagation_delay;
        if !self.reconnect_spread.is_zero() && self.reconnect_spread >= window {
            return Err(ConfigError::ReconnectSpreadTooLong {
                reconnect_spread: self.reconnect_spread,
                window,
            });
        }
        Ok(Drain::from_builder(self))
    }
}
