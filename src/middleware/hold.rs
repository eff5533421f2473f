//! When an admitted request ends: as its response arrives, or as its response body ends.

use super::classify::Outcome;
use super::limiter::Finish;
use crate::signal::cpu::CpuWait;

/// When an admitted request ends, and so when the layer finishes its permit: how a response
/// `T` carries a permit `P` until then.
///
/// [`AtResponse`] (the default) ends it as the inner service answers; [`AtBodyEnd`] (`http`
/// feature, what [`AdmitLayer::http`](super::AdmitLayer::http) and
/// [`grpc`](super::AdmitLayer::grpc) choose) when the response body ends, so that a streamed
/// response counts in flight until its last frame.
pub trait Hold<T, P: Finish> {
    /// What the layer returns for a response `T`.
    type Response;

    /// An admitted request's `response`, its permit, and what the classifier read from it:
    /// finishes the permit with `outcome` and `cpu_wait` now, or takes it (leaving `None`) to
    /// finish once the response ends. The layer drops what is left in `permit` afterwards.
    fn hold(
        response: T,
        permit: &mut Option<P>,
        outcome: Outcome,
        cpu_wait: CpuWait,
    ) -> Self::Response;

    /// A response that holds no permit: the answer to a refusal.
    fn bare(response: T) -> Self::Response;
}

/// Ends a request as the inner service answers: the layer returns the response as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtResponse;

impl<T, P: Finish> Hold<T, P> for AtResponse {
    type Response = T;

    #[inline]
    fn hold(response: T, permit: &mut Option<P>, outcome: Outcome, cpu_wait: CpuWait) -> T {
        if let Some(permit) = permit {
            permit.finish_after(outcome, cpu_wait);
        }
        response
    }

    #[inline]
    fn bare(response: T) -> T {
        response
    }
}

#[cfg(feature = "http")]
pub use self::body_end::AtBodyEnd;

#[cfg(feature = "http")]
mod body_end {
    use http::Response;
    use http_body::Body;

    use super::super::body::AdmitBody;
    use super::{Finish, Hold, Outcome};
    use crate::signal::cpu::CpuWait;

    /// Ends a request when its response body ends (its last frame, an error, or its drop,
    /// which counts as cancelled): the layer returns the response with an [`AdmitBody`]
    /// holding the permit. A body that is empty from the start ends with the response head, as
    /// does a request whose permit says so ([`Finish::on_head`]).
    /// A body error ends the request as failed. A body its client never reads is never polled,
    /// and holds the permit until its connection ends
    /// ([`until_body_end`](super::super::AdmitLayer::until_body_end) says how to bound it).
    ///
    /// The response's body type is the layer's own: inside axum's `Router::layer` axum turns
    /// it into its own; around a router served with `axum::serve`, which wants axum's
    /// `Response`, add `map_response(IntoResponse::into_response)` outside the layer.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct AtBodyEnd;

    impl<B: Body, P: Finish> Hold<Response<B>, P> for AtBodyEnd {
        type Response = Response<AdmitBody<B, P>>;

        #[inline]
        fn hold(
            mut response: Response<B>,
            permit: &mut Option<P>,
            outcome: Outcome,
            cpu_wait: CpuWait,
        ) -> Self::Response {
            let Some(mut permit) = permit.take() else {
                return response.map(AdmitBody::bare);
            };
            let status = response.status();
            if permit.on_head(status, response.headers_mut()) && !response.body().is_end_stream() {
                response.map(|body| AdmitBody::new(body, permit, outcome, cpu_wait))
            } else {
                permit.finish_after(outcome, cpu_wait);
                response.map(AdmitBody::bare)
            }
        }

        #[inline]
        fn bare(response: Response<B>) -> Self::Response {
            response.map(AdmitBody::bare)
        }
    }
}
