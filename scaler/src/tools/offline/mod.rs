//! What `admit-scaler plan` and `replay` compute, for operators: one evaluation with the table
//! around its answer ([`plan()`]), and the recommendations over a past time range ([`replay()`]),
//! both against Prometheus' data at given times.

mod plan;
mod replay;
mod time;

pub use self::plan::{Plan, plan};
pub use self::replay::{MAX_STEPS, RangeError, ReplayStep, replay, replay_chart, replay_table};
pub use self::time::{TimeError, format_time, parse_time};
