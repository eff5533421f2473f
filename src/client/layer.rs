//! The throttle as a tower layer for HTTP and gRPC clients.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use http::HeaderName;
use http::uri::Authority;

use super::{Throttle, Throttles, answer};
use crate::clock::{Clock, MonotonicClock};
use crate::criticality::{CRITICALITY_HEADER, Claim, Criticality, claim};
use crate::respond::BoxError;

/// [`CRITICALITY_HEADER`], parsed once.
static CLASS_HEADER: HeaderName = HeaderName::from_static(CRITICALITY_HEADER);

/// The class a request's [`CRITICALITY_HEADER`] claims, as a server's reader would read it;
/// [`Critical`](Criticality::Critical) when it claims none. Allocates nothing.
pub(super) fn request_class(headers: &http::HeaderMap) -> Criticality {
    match claim(headers, &CLASS_HEADER) {
        Claim::Class(class) => class,
        Claim::Absent | Claim::Invalid => Criticality::Critical,
    }
}

/// A tower layer for clients: a [`Throttle`] in front of every request the inner service
/// sends, the outcome read from each answer.
///
/// A request the throttle refuses is not sent: the service answers it with a
/// [`Throttled`](super::Throttled) error (boxed, as tower's `LoadShed` does). A sent request
/// counts as refused when its answer is an overload refusal:
///
/// - it carries [`admit-refusal`](crate::respond::REFUSAL_HEADER) (admit refused it, over HTTP or gRPC);
/// - its HTTP status is 503 (Service Unavailable) or 429 (Too Many Requests);
/// - its `grpc-status` header is 8 (`RESOURCE_EXHAUSTED`) or 14 (`UNAVAILABLE`): a
///   trailers-only answer, as a server refusing before it runs any of the request sends it;
///
/// and when the inner service fails (no answer: a connection refused or reset, a timeout of a
/// layer inside this one) or the request is dropped before its answer (a timeout outside it).
/// Any other answer, errors of the backend's own included (a 500, gRPC `INTERNAL`), counts as
/// accepted: the backend took the request and had room for it.
///
/// One throttle counts one backend: give each backend's client its own, or let
/// [`per_authority`](Self::per_authority) keep one per authority the client calls.
///
/// The throttle's [totals](Throttle::totals) count each request as the class its
/// [`admit-criticality`](crate::criticality::CRITICALITY_HEADER) header claims (the last
/// element, as a server reads it; `critical` without one): put a
/// [`PropagateLayer`](crate::middleware::propagate::PropagateLayer) outside this layer to
/// write it.
///
/// ```
/// use std::sync::Arc;
/// use admit::client::{Throttle, ThrottleLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // A backend that refuses everything as overloaded.
/// let backend = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(
///         http::Response::builder().status(503).body(()).unwrap(),
///     )
/// });
/// let throttle = Arc::new(Throttle::builder().build()?);
/// let client = ThrottleLayer::new(Arc::clone(&throttle)).layer(backend);
/// let mut throttled = 0;
/// for _ in 0..1000 {
///     if let Err(error) = client.clone().oneshot(http::Request::new(())).await {
///         assert!(error.is::<admit::client::Throttled>());
///         throttled += 1;
///     }
/// }
/// // Most of them never reached the backend.
/// assert!(throttled > 900, "{throttled}");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ThrottleLayer<C = MonotonicClock> {
    source: Source<C>,
}

/// Where a request's throttle comes from.
#[derive(Debug)]
enum Source<C> {
    One(Arc<Throttle<C>>),
    /// By the request URI's authority; one more for URIs without one.
    PerAuthority {
        throttles: Arc<Throttles<Authority, C>>,
        without: Arc<Throttle<C>>,
    },
}

impl<C> Clone for Source<C> {
    fn clone(&self) -> Self {
        match self {
            Source::One(throttle) => Source::One(Arc::clone(throttle)),
            Source::PerAuthority { throttles, without } => Source::PerAuthority {
                throttles: Arc::clone(throttles),
                without: Arc::clone(without),
            },
        }
    }
}

impl<C: Clock + Clone> Source<C> {
    fn throttle<B>(&self, request: &http::Request<B>) -> Arc<Throttle<C>> {
        match self {
            Source::One(throttle) => Arc::clone(throttle),
            Source::PerAuthority { throttles, without } => match request.uri().authority() {
                Some(authority) => throttles.get(authority),
                None => Arc::clone(without),
            },
        }
    }
}

impl<C> ThrottleLayer<C> {
    /// A layer counting every request in `throttle`.
    pub fn new(throttle: Arc<Throttle<C>>) -> Self {
        ThrottleLayer {
            source: Source::One(throttle),
        }
    }
}

impl<C: Clock + Clone> ThrottleLayer<C> {
    /// A layer counting each request in the throttle of its URI's authority (`host:port`),
    /// from `throttles`; requests whose URI has none share one more, made now with the same
    /// settings.
    pub fn per_authority(throttles: Arc<Throttles<Authority, C>>) -> Self {
        let without = Arc::new(throttles.detached());
        ThrottleLayer {
            source: Source::PerAuthority { throttles, without },
        }
    }
}

impl<C> Clone for ThrottleLayer<C> {
    fn clone(&self) -> Self {
        ThrottleLayer {
            source: self.source.clone(),
        }
    }
}

impl<S, C> Layer<S> for ThrottleLayer<C> {
    type Service = ThrottleService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            source: self.source.clone(),
        }
    }
}

/// The service [`ThrottleLayer`] makes.
#[derive(Debug)]
pub struct ThrottleService<S, C = MonotonicClock> {
    inner: S,
    source: Source<C>,
}

impl<S: Clone, C> Clone for ThrottleService<S, C> {
    fn clone(&self) -> Self {
        ThrottleService {
            inner: self.inner.clone(),
            source: self.source.clone(),
        }
    }
}

impl<S, C, B, RB> Service<http::Request<B>> for ThrottleService<S, C>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Into<BoxError>,
    C: Clock + Clone,
{
    type Response = http::Response<RB>;
    type Error = BoxError;
    type Future = ThrottleFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let throttle = self.source.throttle(&request);
        match throttle.try_send_as(request_class(request.headers())) {
            Ok(()) => ThrottleFuture {
                state: State::Sent {
                    inner: self.inner.call(request),
                    outcome: Outcome(Some(throttle)),
                },
            },
            Err(throttled) => ThrottleFuture {
                state: State::Throttled {
                    error: Some(throttled),
                },
            },
        }
    }
}

/// Counts a sent request's outcome once: refused unless told otherwise, also when dropped.
#[derive(Debug)]
struct Outcome<C: Clock>(Option<Arc<Throttle<C>>>);

impl<C: Clock> Outcome<C> {
    fn count(&mut self, accepted: bool) {
        if let Some(throttle) = self.0.take() {
            if accepted {
                throttle.accepted();
            } else {
                throttle.refused();
            }
        }
    }
}

impl<C: Clock> Drop for Outcome<C> {
    fn drop(&mut self) {
        self.count(false);
    }
}

pin_project! {
    /// The future [`ThrottleService`] returns.
    #[derive(Debug)]
    pub struct ThrottleFuture<F, C: Clock> {
        #[pin]
        state: State<F, C>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F, C: Clock> {
        Sent {
            #[pin]
            inner: F,
            outcome: Outcome<C>,
        },
        Throttled {
            error: Option<super::Throttled>,
        },
    }
}

impl<F, C, RB, E> Future for ThrottleFuture<F, C>
where
    F: Future<Output = Result<http::Response<RB>, E>>,
    E: Into<BoxError>,
    C: Clock,
{
    type Output = Result<http::Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Sent { inner, outcome } => {
                let answer = std::task::ready!(inner.poll(cx));
                match &answer {
                    Ok(response) => outcome.count(!answer::is_refusal(response)),
                    Err(_) => outcome.count(false),
                }
                Poll::Ready(answer.map_err(Into::into))
            }
            StateProj::Throttled { error } => Poll::Ready(Err(match error.take() {
                Some(throttled) => Box::new(throttled),
                None => "polled after completion".into(),
            })),
        }
    }
}
