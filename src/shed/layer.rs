//! The shedder as a tower [`Layer`].

use std::fmt;

use tower_layer::Layer;

use super::classify::ErrorsPass;
use super::cpu::{CpuSignal, SystemCpu};
use super::service::ShedService;
use super::shared::SharedShedder;
use crate::clock::{Clock, MonotonicClock};
use crate::respond::BoxErrorResponder;

/// Applies a [`Shedder`](super::Shedder) to a tower service: requests arriving while the
/// service is overloaded are refused before they reach it.
///
/// The layer holds a shedder created before it, in an `Arc` or as a `&'static` reference
/// ([`SharedShedder`]): every service it produces, and every clone of them, shares that one
/// shedder. This matters because axum's `Router::layer` calls [`Layer::layer`] again for every
/// connection (under `axum::serve`) or even every request (when the router is itself used as a
/// service, for example wrapped in another layer or nested), and tonic and hyper clone services
/// per connection: state kept per service would limit nothing. (tower's own
/// `ConcurrencyLimitLayer` makes a new semaphore in each `layer` call and is caught by exactly
/// this.)
///
/// Each request is decided in `call` (the decision [`Shedder::allow`](super::Shedder::allow)
/// makes); `poll_ready` only forwards the inner service's readiness, so idle connections hold
/// nothing. An admitted request holds its permit in the response future until the inner
/// service answers; the [classifier](Self::classify) then records a pass or a failure.
/// Dropping the future first (a disconnected client, a timeout further out) counts as a
/// failure. The admitted path allocates nothing; a `&'static` shedder also saves the
/// reference-count increment and decrement an `Arc` costs per request.
///
/// What a refused request gets depends on the [responder](crate::respond):
///
/// - by default the service's error becomes a [`BoxError`](crate::respond::BoxError), and a
///   refusal is a boxed, zero-sized [`ShedRejection`](super::error::ShedRejection);
/// - [`http`](Self::http) answers `503 Service Unavailable` with `Retry-After` itself;
/// - [`grpc`](Self::grpc) answers a `RESOURCE_EXHAUSTED` status with `grpc-retry-pushback-ms`.
///
/// # Where it goes in the stack
///
/// Put it inside any other layer that refuses requests, such as a
/// [`WarmUpLayer`](crate::warmup::WarmUpLayer) or an authentication check, so that it sees
/// only the requests that reach the service. A refusal from a layer inside it arrives as an
/// error or an error response with a near-zero latency; counted as a pass, it would convince
/// the shedder that the service is faster than it is. The go-zero classifiers recognise admit's
/// own refusals ([`Refused`](crate::respond::Refused)) and count them as failures, but not
/// other layers' answers, and the default classifier passes everything. With tower's
/// `ServiceBuilder` and tonic's `Server::layer` the first layer added is the outermost; with
/// axum's `Router::layer` the last call is.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use axum::{Router, body::Body, routing::get};
/// use admit::shed::{ShedLayer, Shedder};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shedder = Arc::new(Shedder::builder().build()?);
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(ShedLayer::new(shedder.clone()).http());
///
/// let response = app.oneshot(http::Request::new(Body::empty())).await?;
/// assert_eq!(response.status(), 200);
/// // The same shedder, for metrics: the request has completed and passed.
/// assert_eq!(shedder.snapshot().passed, 1);
/// # Ok(())
/// # }
/// ```
pub struct ShedLayer<
    C: Clock + 'static = MonotonicClock,
    S: CpuSignal + 'static = SystemCpu,
    K = ErrorsPass,
    R = BoxErrorResponder,
> {
    shedder: SharedShedder<C, S>,
    classifier: K,
    responder: R,
}

impl<C: Clock + 'static, S: CpuSignal + 'static> ShedLayer<C, S> {
    /// A layer applying `shedder`: a [`Shedder`](super::Shedder), an `Arc` of one, or a `&'static` one (which
    /// saves two atomic operations per request; see [`SharedShedder`]). Admitted requests
    /// always pass ([`ErrorsPass`]) and refusals are boxed errors ([`BoxErrorResponder`]).
    pub fn new(shedder: impl Into<SharedShedder<C, S>>) -> Self {
        ShedLayer {
            shedder: shedder.into(),
            classifier: ErrorsPass,
            responder: BoxErrorResponder,
        }
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static, K, R> ShedLayer<C, S, K, R> {
    /// Decide with `classifier` whether an admitted request passed or failed (see
    /// [`classify`](super::classify)).
    pub fn classify<K2>(self, classifier: K2) -> ShedLayer<C, S, K2, R> {
        ShedLayer {
            shedder: self.shedder,
            classifier,
            responder: self.responder,
        }
    }

    /// Answer refused requests with `responder` (see [`respond`](crate::respond)).
    pub fn respond_with<R2>(self, responder: R2) -> ShedLayer<C, S, K, R2> {
        ShedLayer {
            shedder: self.shedder,
            classifier: self.classifier,
            responder,
        }
    }

    /// For HTTP services, as go-zero's REST server: refusals are answered with an empty
    /// `503 Service Unavailable` and `Retry-After`
    /// ([`HttpResponder`](crate::respond::HttpResponder)), and admitted requests answered with
    /// 503 count as failures ([`GoZeroHttp`](super::classify::GoZeroHttp)).
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(
        self,
    ) -> ShedLayer<C, S, super::classify::GoZeroHttp, crate::respond::HttpResponder> {
        self.classify(super::classify::GoZeroHttp)
            .respond_with(crate::respond::HttpResponder::service_unavailable())
    }

    /// For tonic servers, as go-zero's zRPC server: refusals are answered with
    /// `RESOURCE_EXHAUSTED` and `grpc-retry-pushback-ms`
    /// ([`GrpcResponder`](crate::respond::GrpcResponder)), and admitted requests answered with
    /// `DEADLINE_EXCEEDED` count as failures ([`GoZeroGrpc`](super::classify::GoZeroGrpc)).
    #[cfg(feature = "tonic")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
    pub fn grpc(
        self,
    ) -> ShedLayer<C, S, super::classify::GoZeroGrpc, crate::respond::GrpcResponder> {
        self.classify(super::classify::GoZeroGrpc)
            .respond_with(crate::respond::GrpcResponder::resource_exhausted())
    }

    /// The shedder every service from this layer shares.
    pub fn shedder(&self) -> &SharedShedder<C, S> {
        &self.shedder
    }
}

impl<Svc, C: Clock + 'static, S: CpuSignal + 'static, K: Clone, R: Clone> Layer<Svc>
    for ShedLayer<C, S, K, R>
{
    type Service = ShedService<Svc, C, S, K, R>;

    fn layer(&self, inner: Svc) -> Self::Service {
        ShedService::new(
            inner,
            self.shedder.clone(),
            self.classifier.clone(),
            self.responder.clone(),
        )
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static, K: Clone, R: Clone> Clone
    for ShedLayer<C, S, K, R>
{
    fn clone(&self) -> Self {
        ShedLayer {
            shedder: self.shedder.clone(),
            classifier: self.classifier.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<C: Clock + 'static, S: CpuSignal + 'static, K: fmt::Debug, R: fmt::Debug> fmt::Debug
    for ShedLayer<C, S, K, R>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("shedder", &self.shedder)
            .field("classifier", &self.classifier)
            .field("responder", &self.responder)
            .finish()
    }
}
