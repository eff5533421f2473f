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
//! lower classes first: see [Request criticality](crate::shed#request-criticality).

mod class;
#[cfg(feature = "http")]
mod header;

pub use self::class::{Criticality, ParseCriticalityError};
#[cfg(feature = "http")]
pub(crate) use self::header::{Claim, claim, claim_lines};

/// The header (HTTP) or metadata key (gRPC) that carries a request's class: what
/// [`CriticalityHeader`](crate::middleware::CriticalityHeader) reads by default, the
/// propagation layer writes, and admit's refusals answer with.
///
/// Several lines of it, or a comma-separated list (as a proxy may fold lines into one), are
/// one list whose **last** element counts: an edge proxy that appends its own line decides the
/// class whatever the client sent, as
/// [`Pick::Last`](crate::signal::queue::header::Pick::Last) does for request-start stamps.
pub const CRITICALITY_HEADER: &str = "admit-criticality";
