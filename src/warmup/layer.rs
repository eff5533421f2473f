//! The warm-up bucket as a tower [`Layer`].

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::WarmUp;
use super::service::WarmUpService;
use crate::clock::{Clock, MonotonicClock};
use crate::respond::BoxErrorResponder;

/// Applies a [`WarmUp`] limiter to a tower service: each request takes one permit, and requests
/// beyond the current limit are refused before they reach the service.
///
/// The layer holds the limiter in an `Arc`, created before the layer: every service it
/// produces, and every clone of them, shares that one limiter. This matters because axum's
/// `Router::layer` calls [`Layer::layer`] again for every connection (under `axum::serve`) or
/// even every request (when the router is itself used as a service, for example wrapped in
/// another layer or nested), and tonic and hyper clone services per connection: state kept
/// per service would limit nothing. (tower's own `ConcurrencyLimitLayer` makes a new
/// semaphore in each `layer` call and is caught by exactly this.)
///
/// Each request is decided in `call` ([`WarmUp::try_acquire`]); `poll_ready` only forwards the
/// inner service's readiness, so idle connections hold nothing. The admitted path allocates
/// nothing.
///
/// What a refused request gets depends on the [responder](crate::respond):
///
/// - by default the service's error becomes a [`BoxError`](crate::respond::BoxError), and a
///   refusal is a boxed, zero-sized [`WarmUpRejection`](super::error::WarmUpRejection);
/// - [`http`](Self::http) answers `503 Service Unavailable` with `Retry-After` itself
///   ([`HttpResponder::too_many_requests`](crate::respond::HttpResponder::too_many_requests)
///   answers 429, for a per-client limiter);
/// - [`grpc`](Self::grpc) answers a `RESOURCE_EXHAUSTED` status with `grpc-retry-pushback-ms`
///   (for tonic, [`WarmUpInterceptor`](super::WarmUpInterceptor) works too).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, body::Body, routing::get};
/// use admit::warmup::{WarmUp, WarmUpLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 3 requests per second once warm, 1 per second while cold.
/// let limiter = WarmUp::builder(3.0).warm_up_period(Duration::from_secs(30)).build()?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(WarmUpLayer::new(limiter).http());
///
/// let admitted = app.clone().oneshot(http::Request::new(Body::empty())).await?;
/// assert_eq!(admitted.status(), 200);
/// let refused = app.oneshot(http::Request::new(Body::empty())).await?;
/// assert_eq!(refused.status(), 503);
/// assert!(refused.headers().contains_key("retry-after"));
/// # Ok(())
/// # }
/// ```
pub struct WarmUpLayer<C = MonotonicClock, R = BoxErrorResponder> {
    limiter: Arc<WarmUp<C>>,
    responder: R,
}

impl<C: Clock> WarmUpLayer<C> {
    /// A layer applying `limiter` (a [`WarmUp`] or an `Arc` of one). Refusals are boxed errors
    /// ([`BoxErrorResponder`]).
    pub fn new(limiter: impl Into<Arc<WarmUp<C>>>) -> Self {
        WarmUpLayer {
            limiter: limiter.into(),
            responder: BoxErrorResponder,
        }
    }
}

impl<C: Clock, R> WarmUpLayer<C, R> {
    /// Answer refused requests with `responder` (see [`respond`](crate::respond)).
    pub fn respond_with<R2>(self, responder: R2) -> WarmUpLayer<C, R2> {
        WarmUpLayer {
            limiter: self.limiter,
            responder,
        }
    }

    /// Answer refusals with an empty `503 Service Unavailable` and `Retry-After`
    /// ([`HttpResponder`](crate::respond::HttpResponder)). For a per-client limiter, answer 429
    /// with `respond_with(HttpResponder::too_many_requests())` instead.
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(self) -> WarmUpLayer<C, crate::respond::HttpResponder> {
        self.respond_with(crate::respond::HttpResponder::service_unavailable())
    }

    /// Answer refusals with `RESOURCE_EXHAUSTED` and `grpc-retry-pushback-ms`
    /// ([`GrpcResponder`](crate::respond::GrpcResponder)).
    #[cfg(feature = "tonic")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
    pub fn grpc(self) -> WarmUpLayer<C, crate::respond::GrpcResponder> {
        self.respond_with(crate::respond::GrpcResponder::resource_exhausted())
    }

    /// The limiter every service from this layer shares.
    pub fn limiter(&self) -> &Arc<WarmUp<C>> {
        &self.limiter
    }
}

impl<Svc, C: Clock, R: Clone> Layer<Svc> for WarmUpLayer<C, R> {
    type Service = WarmUpService<Svc, C, R>;

    fn layer(&self, inner: Svc) -> Self::Service {
        WarmUpService::new(inner, self.limiter.clone(), self.responder.clone())
    }
}

impl<C, R: Clone> Clone for WarmUpLayer<C, R> {
    fn clone(&self) -> Self {
        WarmUpLayer {
            limiter: self.limiter.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<C, R: fmt::Debug> fmt::Debug for WarmUpLayer<C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUpLayer")
            .field("limiter", &self.limiter)
            .field("responder", &self.responder)
            .finish()
    }
}
