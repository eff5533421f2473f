//! The operator's subcommands, one module each, on [`admit_scaler::tools`]: they read
//! manifests and ask Prometheus, but serve nothing.

pub(super) mod check;
mod input;
pub(super) mod plan;
pub(super) mod replay;
