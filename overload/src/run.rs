//! What every measured run shares: its flags (the server's work, the client's deadline, how
//! long each point runs, the capacity and pinning) and the schedule of a point.

use std::time::Duration;

use crate::positive;

/// The flags the protocol and the classes run share.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct RunArgs {
    /// Seconds of load before each point is measured.
    #[arg(long, default_value_t = 2)]
    pub(crate) warm_seconds: u64,
    /// Seconds measured at each point.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) measured_seconds: u64,
    /// Mean CPU work per request, ms.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    pub(crate) work_ms: f64,
    /// The client gives up after this long, ms.
    #[arg(long, default_value_t = 500.0, value_parser = positive)]
    pub(crate) deadline_ms: f64,
    /// Time constant of admit's CPU smoothing, ms.
    #[arg(long, default_value_t = 1000)]
    pub(crate) cpu_horizon_ms: u64,
    /// The server's capacity in requests/s for every distribution and style, instead of
    /// measuring each.
    #[arg(long, value_parser = positive)]
    pub(crate) capacity: Option<f64>,
    /// Do not pin the server and the load generator to CPUs.
    #[arg(long)]
    pub(crate) no_pin: bool,
}

impl RunArgs {
    /// Whether to pin the server and the load generator to CPUs.
    pub(crate) fn pin(&self) -> bool {
        !self.no_pin
    }

    /// How long the client waits for an answer.
    pub(crate) fn deadline(&self) -> Duration {
        Duration::from_secs_f64(self.deadline_ms / 1e3)
    }

    /// How each point is run.
    pub(crate) fn schedule(&self) -> Schedule {
        Schedule {
            warm: self.warm_seconds,
            measured: self.measured_seconds,
            deadline: self.deadline(),
        }
    }

    /// One point's seconds, with one to start its server.
    pub(crate) fn point_seconds(&self) -> u64 {
        self.warm_seconds + self.measured_seconds + 1
    }
}

/// How a point is run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    /// Offered before measuring, s: the controllers find their level.
    pub(crate) warm: u64,
    /// Measured, s.
    pub(crate) measured: u64,
    pub(crate) deadline: Duration,
}
