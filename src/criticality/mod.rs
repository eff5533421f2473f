//! Request criticality: how important a request is, so that under overload the least
//! important work is refused first.
//!
//! The [guide](crate::guide::criticality) says how the classes are used and why.
//!
//! Four ordered classes, with Google's names ([`Criticality`]). A layer reads each request's
//! class (from a header or gRPC metadata with
//! [`CriticalityHeader`](crate::middleware::CriticalityHeader), or from a function of the
//! request with [`CriticalityFrom`](crate::middleware::CriticalityFrom)), with a default for
//! requests that carry none and a cap on what a caller may claim. The shedder then refuses
//! lower classes first: see [`Shedder`](crate::shed::Shedder).

mod class;

pub use self::class::{Criticality, ParseCriticalityError};

/// The header (HTTP) or metadata key (gRPC) that carries a request's class: what
/// [`CriticalityHeader`](crate::middleware::CriticalityHeader) reads by default, the
/// propagation layer writes, and admit's refusals answer with.
pub const CRITICALITY_HEADER: &str = "admit-criticality";
