//! The operator's tools, apart from the serving core: what `admit-scaler check`, `plan` and
//! `replay` use, and nothing `serve` needs.
//!
//! - [`manifest`]: the external triggers of ScaledObject manifests, read without I/O.
//! - [`offline`]: one evaluation with the table around its answer, and the recommendations over
//!   a past time range, against Prometheus' data at given times.
//! - [`chart`]: the SVG chart `replay` draws.
//!
//! They build on the core (the decision, the metadata parser, the Prometheus client and the
//! service's failure codes); the core knows nothing of them.

mod calendar;
pub mod chart;
pub mod manifest;
pub mod offline;
