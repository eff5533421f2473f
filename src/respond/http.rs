//! Refusals answered as HTTP responses.

use http::header::RETRY_AFTER;
use http::{HeaderValue, Response, StatusCode};

use super::{Refusal, Refused, Respond};

/// Refusals become an empty HTTP response with a status (503 Service Unavailable by default)
/// and a `Retry-After` header: the retry hint in whole seconds, rounded up, at least 1. The
/// service keeps the inner service's error type, so axum needs no `HandleErrorLayer`.
///
/// Which status: 503 says the *server* is temporarily overloaded (RFC 9110 §15.6.4), right for
/// the shedder and for a process-wide warm-up bucket; 429 says the *client* sent too many
/// requests (RFC 6585 §4), right for a per-client bucket.
///
/// The response body is the body type's `Default` (empty for axum's and hyper's bodies); its
/// extensions carry the [`Refused`] marker.
/// Building the response allocates (its header map); the admitted path allocates nothing.
///
/// # Example
///
/// ```
/// use admit::clock::ManualClock;
/// use admit::respond::HttpResponder;
/// use admit::warmup::{WarmUp, WarmUpLayer};
///
/// // A per-client bucket answers 429.
/// let limiter = WarmUp::builder(100.0).build()?;
/// let _layer = WarmUpLayer::new(limiter).respond_with(HttpResponder::too_many_requests());
///
/// // What a refusal looks like: 3 requests per second, 1 while cold.
/// let limiter = WarmUp::builder(3.0).clock(ManualClock::new()).build()?;
/// limiter.try_acquire().unwrap();
/// let rejected = limiter.try_acquire().unwrap_err();
/// let response: http::Response<()> = HttpResponder::too_many_requests().response(rejected);
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["retry-after"], "1");
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpResponder {
    status: StatusCode,
}

impl HttpResponder {
    /// Refusals are answered with `status`.
    pub const fn new(status: StatusCode) -> Self {
        HttpResponder { status }
    }

    /// 503 Service Unavailable: the server is overloaded (the default).
    pub const fn service_unavailable() -> Self {
        HttpResponder::new(StatusCode::SERVICE_UNAVAILABLE)
    }

    /// 429 Too Many Requests: the client exceeded its rate.
    pub const fn too_many_requests() -> Self {
        HttpResponder::new(StatusCode::TOO_MANY_REQUESTS)
    }

    /// The status refusals are answered with.
    pub const fn status(&self) -> StatusCode {
        self.status
    }

    /// The response for `refusal`.
    pub fn response<F: Refusal, B: Default>(&self, refusal: F) -> Response<B> {
        let mut response = Response::new(B::default());
        *response.status_mut() = self.status;
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(refusal.retry_after_secs()));
        response.extensions_mut().insert(Refused);
        response
    }
}

impl Default for HttpResponder {
    fn default() -> Self {
        HttpResponder::service_unavailable()
    }
}

impl<F: Refusal, B: Default, E> Respond<F, Response<B>, E> for HttpResponder {
    type Error = E;

    fn respond(&self, refusal: F) -> Result<Response<B>, E> {
        Ok(self.response(refusal))
    }

    fn inner_error(error: E) -> E {
        error
    }
}
