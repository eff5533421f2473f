//! A response body that keeps its request in flight until it ends.

use crate::drain::RequestGuard;
use crate::middleware::{AdmitBody, Finish, Outcome};
use crate::signal::cpu::CpuWait;

/// The body of a response the [`DrainLayer`](super::DrainLayer) passed: the one glue's
/// [`AdmitBody`], holding the request's in-flight count until its last frame, an error, or its
/// drop. Refusals and `101 Switching Protocols` carry no count.
pub type DrainBody<B> = AdmitBody<B, RequestGuard>;

/// The drain records no outcome: its guard counts the request in flight until dropped.
impl Finish for RequestGuard {
    #[inline]
    fn finish(&mut self, _outcome: Outcome) {}
}

/// `inner`, holding `guard` if any.
pub(crate) fn drain_body<B>(inner: B, guard: Option<RequestGuard>) -> DrainBody<B> {
    match guard {
        Some(guard) => AdmitBody::new(inner, guard, Outcome::Pass, CpuWait::NONE),
        None => AdmitBody::bare(inner),
    }
}
