//! Deadlines that travel: the time the request being served has left, sent on with each
//! request made for it.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::time_left;
use crate::clock::{Clock, MonotonicClock};
use crate::middleware::propagate;
use crate::respond::BoxError;

/// A request whose deadline had passed when it was to be sent: it was not sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeadlineExceeded;

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request's deadline passed before it was sent")
    }
}

impl Error for DeadlineExceeded {}

/// A tower layer for clients: sends each request with the time it has left, and fails one with
/// none left before sending it.
///
/// A request's time left is the least of:
///
/// - what the request being served has left, inside a
///   [`ScopeLayer`](crate::middleware::propagate::ScopeLayer) whose reader reads a deadline
///   ([`GrpcTimeout`](crate::middleware::GrpcTimeout),
///   [`TimeoutHeader`](crate::middleware::TimeoutHeader));
/// - what the request already carries (a `grpc-timeout` tonic's `Request::set_timeout` wrote,
///   or [`TIMEOUT_HEADER`](crate::middleware::TIMEOUT_HEADER));
/// - the layer's own [timeout](Self::with_timeout), if set.
///
/// It is written as `grpc-timeout` on a gRPC call (its content type is `application/grpc`) and
/// as [`TIMEOUT_HEADER`](crate::middleware::TIMEOUT_HEADER), in whole milliseconds, on any
/// other request, both rounded down. A request with no time left fails with
/// [`DeadlineExceeded`] (boxed) and is not sent: nobody waits for its answer. A request for
/// which none of the three is known, or whose own time left is the least, is sent as it is and
/// allocates nothing; writing the time left allocates its value's bytes once.
///
/// The layer does not time the request out itself: the server's deadline is what stops the
/// work, and the caller's own timeout what stops the wait. Put it outside a
/// [`RetryPolicy`](super::RetryPolicy)'s retry layer: the policy reads the time left from the
/// request and retries only within it.
///
/// ```
/// use std::time::Duration;
/// use admit::client::{DeadlineExceeded, DeadlineLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // A backend that answers with the time the request said it had left.
/// let backend = service_fn(|request: http::Request<()>| async move {
///     let left = request.headers().get("admit-timeout-ms").cloned();
///     Ok::<_, std::convert::Infallible>(left)
/// });
/// let client = DeadlineLayer::new().with_timeout(Duration::from_millis(300)).layer(backend);
/// let request = http::Request::get("/").header("admit-timeout-ms", "120").body(())?;
/// assert_eq!(client.clone().oneshot(request).await?.unwrap(), "120");
/// let spent = http::Request::get("/").header("admit-timeout-ms", "0").body(())?;
/// let error = client.oneshot(spent).await.unwrap_err();
/// assert!(error.is::<DeadlineExceeded>());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DeadlineLayer<C = MonotonicClock> {
    timeout: Option<Duration>,
    clock: C,
}

impl DeadlineLayer {
    /// A layer sending on the time the request being served has left, on the process's
    /// monotonic clock, as a [`ScopeLayer`](crate::middleware::propagate::ScopeLayer) dates it
    /// by default.
    pub fn new() -> Self {
        DeadlineLayer {
            timeout: None,
            clock: MonotonicClock::process(),
        }
    }
}

impl Default for DeadlineLayer {
    fn default() -> Self {
        DeadlineLayer::new()
    }
}

impl<C> DeadlineLayer<C> {
    /// Gives each request at most `timeout`: its time left outside a scope, and a cap inside
    /// one.
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        DeadlineLayer {
            timeout: Some(timeout),
            ..self
        }
    }

    /// Reads the time on `clock`: the same clock the server's
    /// [`ScopeLayer`](crate::middleware::propagate::ScopeLayer) was given.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> DeadlineLayer<C2> {
        DeadlineLayer {
            timeout: self.timeout,
            clock,
        }
    }
}

impl<C: Clock> DeadlineLayer<C> {
    /// The time a request with `headers` has left, if known, and whether the headers already
    /// say so.
    fn time_left(&self, headers: &http::HeaderMap) -> (Option<Duration>, bool) {
        let scoped = propagate::deadline_nanos()
            .map(|deadline| Duration::from_nanos(deadline.saturating_sub(self.clock.now_nanos())));
        let carried = time_left::carried(headers);
        let left = [scoped, carried, self.timeout].into_iter().flatten().min();
        (left, carried.is_some() && left == carried)
    }
}

impl<S, C: Clone> Layer<S> for DeadlineLayer<C> {
    type Service = DeadlineService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`DeadlineLayer`] makes.
#[derive(Clone, Debug)]
pub struct DeadlineService<S, C = MonotonicClock> {
    inner: S,
    layer: DeadlineLayer<C>,
}

impl<S, C> DeadlineService<S, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, B> Service<http::Request<B>> for DeadlineService<S, C>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
    C: Clock,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let sent = match self.layer.time_left(request.headers()) {
            (Some(Duration::ZERO), _) => None,
            (Some(left), false) => {
                time_left::write(request.headers_mut(), left);
                Some(self.inner.call(request))
            }
            (None, _) | (Some(_), true) => Some(self.inner.call(request)),
        };
        DeadlineFuture { sent }
    }
}

pin_project! {
    /// The future [`DeadlineService`] returns: the inner service's, or a [`DeadlineExceeded`]
    /// for a request that was not sent.
    #[derive(Debug)]
    pub struct DeadlineFuture<F> {
        #[pin]
        sent: Option<F>,
    }
}

impl<F, T, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().sent.as_pin_mut() {
            Some(inner) => inner.poll(cx).map_err(Into::into),
            None => Poll::Ready(Err(Box::new(DeadlineExceeded))),
        }
    }
}
