//! The drain layer.

use tower_layer::Layer;

use super::{Drain, DrainPermit};
use crate::middleware::classify::ErrorsPass;
use crate::middleware::{AdmitBody, AdmitLayer, AdmitService, AtBodyEnd, HttpVersion};
use crate::respond::HttpResponder;

/// A tower layer that counts each request in flight until its response body ends, closes
/// HTTP/1 connections after their response once the drain is announced, and refuses new
/// requests once it is draining, without calling the inner service: the
/// [`AdmitLayer`] with the [`Drain`] as its limiter, reading each request's
/// [HTTP version](HttpVersion) and holding its permit until the [body ends](AtBodyEnd).
///
/// A refused request leaves nothing reserved in the inner service: the service replaces it
/// with a fresh clone, dropping what its `poll_ready` reserved (a `ConcurrencyLimit`'s permit,
/// a `Buffer`'s slot), so the inner service must be `Clone`.
///
/// Refusals ([`Draining`](super::Draining)) go to a
/// [`Respond`](crate::respond::Respond)er: by default [`HttpResponder`] (`503` with
/// `Retry-After`, `admit-refusal: draining` and, on HTTP/1, `Connection: close`);
/// [`grpc`](Self::grpc) answers `UNAVAILABLE`. Refusals carry the
/// [`Refused`](crate::respond::Refused) mark, so go-zero classifiers count them as failures.
///
/// Outermost, it counts every request as offered
/// ([`DrainSnapshot::offered`](crate::drain::DrainSnapshot::offered)) but those it refuses
/// while draining, which another replica counts when the request is sent there; the admit
/// layers inside count none: see
/// [`Limiter::count_offered`](crate::middleware::Limiter::count_offered).
///
/// ```
/// use admit::drain::{Drain, DrainLayer};
/// use http::{Request, Response, StatusCode};
/// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let drain = Drain::default();
/// let mut service = ServiceBuilder::new()
///     .layer(DrainLayer::new(drain.clone()))
///     .service(service_fn(|_: Request<String>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
///     }));
/// let response = service.ready().await?.call(Request::new(String::new())).await?;
/// assert_eq!(response.status(), StatusCode::OK);
///
/// drain.start_now();
/// let response = service.ready().await?.call(Request::new(String::new())).await?;
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.headers()["connection"], "close");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct DrainLayer<R = HttpResponder> {
    admit: AdmitLayer<Drain, ErrorsPass, R, HttpVersion, AtBodyEnd>,
}

/// The service a [`DrainLayer`] makes of `S`.
pub type DrainService<S, R = HttpResponder> =
    AdmitService<S, Drain, ErrorsPass, R, HttpVersion, AtBodyEnd>;

/// The body of a response a [`DrainLayer`] passed: the inner body, holding the request's
/// in-flight count until its last frame, an error, or its drop. Refusals and
/// `101 Switching Protocols` hold none.
pub type DrainBody<B> = AdmitBody<B, DrainPermit>;

impl DrainLayer {
    /// Refusals answered with `503 Service Unavailable`.
    pub fn new(drain: Drain) -> Self {
        DrainLayer {
            admit: AdmitLayer::new(drain)
                .respond_with(HttpResponder::service_unavailable())
                .inspect(HttpVersion)
                .until_body_end(),
        }
    }
}

impl<R> DrainLayer<R> {
    /// Refusals answered by `responder`.
    pub fn respond_with<R2>(self, responder: R2) -> DrainLayer<R2> {
        DrainLayer {
            admit: self.admit.respond_with(responder),
        }
    }

    /// Refusals answered as gRPC `UNAVAILABLE` statuses, the code clients retry on another
    /// connection.
    #[cfg(feature = "tonic")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
    pub fn grpc(self) -> DrainLayer<crate::respond::GrpcResponder> {
        self.respond_with(crate::respond::GrpcResponder::unavailable())
    }
}

impl<S, R: Clone> Layer<S> for DrainLayer<R> {
    type Service = DrainService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        self.admit.layer(inner)
    }
}
