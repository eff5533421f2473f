//! The tower [`Layer`].

use std::fmt;
use std::marker::PhantomData;

use tower_layer::Layer;

use super::classify::ErrorsPass;
use super::hold::AtResponse;
use super::read::ReadNothing;
use super::service::AdmitService;
use super::{IntoShared, Limiter};
use crate::Shared;
use crate::respond::BoxErrorResponder;

/// Applies a [`Limiter`] to a tower service: requests the limiter refuses never reach the
/// service. [`ShedLayer`](crate::shed::ShedLayer) and [`WarmUpLayer`](crate::warmup::WarmUpLayer)
/// are this layer with a [`Shedder`](crate::shed::Shedder) or a warm-up bucket.
///
/// The layer holds a limiter created before it, in an `Arc` or as a `&'static` reference
/// ([`Shared`]): every service it produces, and every clone of them, shares that one limiter.
/// This matters because axum's `Router::layer` calls [`Layer::layer`] again for every
/// connection (under `axum::serve`) or even every request (when the router is itself used as a
/// service, for example wrapped in another layer or nested), and tonic and hyper clone services
/// per connection: state kept per service would limit nothing.
///
/// Each request is decided in `call`; `poll_ready` only forwards the inner service's
/// readiness, so idle connections hold nothing. A refused request leaves nothing reserved in
/// the inner service either: the service replaces it with a fresh clone, dropping what its
/// `poll_ready` reserved (a `ConcurrencyLimit`'s permit, a `Buffer`'s slot), so the inner
/// service must be `Clone`. A request the limiter makes wait (a
/// [`Bound`](crate::bound::Bound)'s queue) takes the ready inner service along, with what its
/// `poll_ready` reserved, and calls it when its wait ends; the layer keeps a fresh clone. An
/// admitted request holds the limiter's permit
/// in the response future until the inner service answers, or with [`http`](Self::http),
/// [`grpc`](Self::grpc) or [`until_body_end`](Self::until_body_end) in the response body until
/// its last frame ([`AtBodyEnd`](super::AtBodyEnd)), so that a streamed response counts in
/// flight for as long as it streams. The [classifier](Self::classify) decides from the response
/// whether the request passed or failed (limiters that learn nothing from outcomes, such as the
/// warm-up buckets, ignore it). Dropping the future or the body first (a disconnected client, a
/// timeout further out) ends the request as cancelled. The admitted path allocates nothing.
///
/// What a refused request gets depends on the [responder](crate::respond):
///
/// - by default the service's error becomes a [`BoxError`](crate::respond::BoxError) holding
///   the zero-sized [`Refused`](crate::respond::Refused), whichever limiter refused;
/// - [`http`](Self::http) answers `503 Service Unavailable` with `Retry-After` itself;
/// - [`grpc`](Self::grpc) answers a `RESOURCE_EXHAUSTED` status with `grpc-retry-pushback-ms`.
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
/// // The same shedder, for metrics: the request is in flight until its body has been sent.
/// assert_eq!(shedder.snapshot().flying, 1);
/// axum::body::to_bytes(response.into_body(), usize::MAX).await?;
/// assert_eq!((shedder.snapshot().flying, shedder.snapshot().passed), (0, 1));
/// # Ok(())
/// # }
/// ```
pub struct AdmitLayer<
    L: 'static,
    K = ErrorsPass,
    R = BoxErrorResponder,
    Q = ReadNothing,
    H = AtResponse,
> {
    limiter: Shared<L>,
    classifier: K,
    responder: R,
    reader: Q,
    hold: PhantomData<fn() -> H>,
}

/// What [`AdmitLayer::http`] returns: `limiter` applied to an HTTP service, reading requests
/// with `Q`. Name it to keep the layer in a struct field:
///
/// ```
/// use admit::middleware::{CriticalityHeader, HttpLayer, RequestStart};
/// use admit::shed::{ShedLayer, Shedder};
/// use admit::signal::queue::header::HeaderConfig;
///
/// struct Layers {
///     shed: HttpLayer<Shedder, (RequestStart, CriticalityHeader)>,
/// }
///
/// let shedder = Shedder::builder().build()?;
/// let reader = (RequestStart::new(HeaderConfig::default())?, CriticalityHeader::new());
/// let layers = Layers { shed: ShedLayer::new(shedder).http().inspect(reader) };
/// # let _ = layers.shed;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub type HttpLayer<L, Q = ReadNothing> =
    AdmitLayer<L, super::classify::GoZeroHttp, crate::respond::HttpResponder, Q, super::AtBodyEnd>;

/// What [`AdmitLayer::grpc`] returns: `limiter` applied to a tonic server, reading requests
/// with `Q`.
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
pub type GrpcLayer<L, Q = ReadNothing> =
    AdmitLayer<L, super::classify::GoZeroGrpc, crate::respond::GrpcResponder, Q, super::AtBodyEnd>;

impl<L: Limiter> AdmitLayer<L> {
    /// A layer applying `limiter`: the limiter, an `Arc` of it, or a `&'static` one (which
    /// saves two atomic operations per request when permits hold the limiter; see [`Shared`]).
    /// Admitted requests pass ([`ErrorsPass`]) and refusals are boxed errors
    /// ([`BoxErrorResponder`]).
    pub fn new(limiter: impl IntoShared<L>) -> Self {
        AdmitLayer {
            limiter: limiter.into_shared(),
            classifier: ErrorsPass,
            responder: BoxErrorResponder,
            reader: ReadNothing,
            hold: PhantomData,
        }
    }
}

impl<L: 'static, K, R, Q, H> AdmitLayer<L, K, R, Q, H> {
    /// Decide with `classifier` whether an admitted request passed or failed (see
    /// [`classify`](super::classify)).
    pub fn classify<K2>(self, classifier: K2) -> AdmitLayer<L, K2, R, Q, H> {
        AdmitLayer {
            limiter: self.limiter,
            classifier,
            responder: self.responder,
            reader: self.reader,
            hold: PhantomData,
        }
    }

    /// Answer refused requests with `responder` (see [`respond`](crate::respond)).
    pub fn respond_with<R2>(self, responder: R2) -> AdmitLayer<L, K, R2, Q, H> {
        AdmitLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            responder,
            reader: self.reader,
            hold: PhantomData,
        }
    }

    /// Read each request with `reader` (default: [`ReadNothing`]) and give what it read
    /// (an [`Arrival`](crate::signal::Arrival)) to the limiter: how long the request waited before
    /// reaching the layer ([`RequestStart`](super::RequestStart), from a proxy's header), which
    /// the shedder feeds to its [queue gate](crate::shed::ShedderBuilder::queue_gate); its class
    /// ([`CriticalityHeader`](super::CriticalityHeader)); or both, as a pair (see
    /// [`Inspect`](super::Inspect)).
    pub fn inspect<Q2>(self, reader: Q2) -> AdmitLayer<L, K, R, Q2, H> {
        AdmitLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            responder: self.responder,
            reader,
            hold: PhantomData,
        }
    }

    /// End each admitted request as `H2` says (see [`Hold`](super::Hold)).
    pub fn hold<H2>(self) -> AdmitLayer<L, K, R, Q, H2> {
        AdmitLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            responder: self.responder,
            reader: self.reader,
            hold: PhantomData,
        }
    }

    /// Hold each admitted request's permit in its response body until the body's last frame
    /// ([`AtBodyEnd`](super::AtBodyEnd)): a streamed response counts in flight, and its latency
    /// runs, until it has streamed. [`http`](Self::http) and [`grpc`](Self::grpc) do this.
    ///
    /// A client that stops reading keeps its request in flight for as long as its connection
    /// lives: hyper polls a response body only when it can write what the body yields, so
    /// nothing inside the body (a timer either) runs meanwhile. Bound it outside: a write
    /// timeout on each connection's IO, a proxy's client timeout, or the drain's deadline
    /// while draining (the [guide](crate::guide::recipes#a-client-that-never-reads) says how).
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn until_body_end(self) -> AdmitLayer<L, K, R, Q, super::AtBodyEnd> {
        self.hold()
    }

    /// For HTTP services, as go-zero's REST server: refusals are answered with an empty
    /// `503 Service Unavailable` and `Retry-After`
    /// ([`HttpResponder`](crate::respond::HttpResponder)), admitted requests answered with
    /// 503 fail ([`GoZeroHttp`](super::classify::GoZeroHttp)), and a request ends with its
    /// response body ([`until_body_end`](Self::until_body_end)). For a per-client limiter,
    /// answer 429 with `respond_with(HttpResponder::too_many_requests())` instead.
    #[cfg(feature = "http")]
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(self) -> HttpLayer<L, Q> {
        self.classify(super::classify::GoZeroHttp)
            .respond_with(crate::respond::HttpResponder::service_unavailable())
            .until_body_end()
    }

    /// For tonic servers, as go-zero's zRPC server: refusals are answered with
    /// `RESOURCE_EXHAUSTED` and `grpc-retry-pushback-ms`
    /// ([`GrpcResponder`](crate::respond::GrpcResponder)), and admitted requests answered with
    /// `DEADLINE_EXCEEDED` fail ([`GoZeroGrpc`](super::classify::GoZeroGrpc)), and a request
    /// ends with its response body, so a server stream counts in flight until it ends
    /// ([`until_body_end`](Self::until_body_end)).
    #[cfg(feature = "tonic")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
    pub fn grpc(self) -> GrpcLayer<L, Q> {
        self.classify(super::classify::GoZeroGrpc)
            .respond_with(crate::respond::GrpcResponder::resource_exhausted())
            .until_body_end()
    }
}

impl<Svc, L: Limiter, K: Clone, R: Clone, Q: Clone, H> Layer<Svc> for AdmitLayer<L, K, R, Q, H> {
    type Service = AdmitService<Svc, L, K, R, Q, H>;

    fn layer(&self, inner: Svc) -> Self::Service {
        AdmitService::new(
            inner,
            self.limiter.clone(),
            self.classifier.clone(),
            self.responder.clone(),
        )
        .with_inspect(self.reader.clone())
        .with_hold()
    }
}

impl<L: 'static, K: Clone, R: Clone, Q: Clone, H> Clone for AdmitLayer<L, K, R, Q, H> {
    fn clone(&self) -> Self {
        AdmitLayer {
            limiter: self.limiter.clone(),
            classifier: self.classifier.clone(),
            responder: self.responder.clone(),
            reader: self.reader.clone(),
            hold: PhantomData,
        }
    }
}

impl<L: fmt::Debug + 'static, K: fmt::Debug, R: fmt::Debug, Q: fmt::Debug, H> fmt::Debug
    for AdmitLayer<L, K, R, Q, H>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitLayer")
            .field("limiter", &self.limiter)
            .field("classifier", &self.classifier)
            .field("responder", &self.responder)
            .field("reader", &self.reader)
            .field("hold", &std::any::type_name::<H>())
            .finish()
    }
}
