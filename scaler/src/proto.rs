//! The KEDA external scaler protocol (`externalscaler.proto`), generated at build time.

#![allow(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    clippy::all
)]

tonic::include_proto!("externalscaler");
