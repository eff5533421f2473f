//! Refusals answered as HTTP responses.

use http::header::{CONNECTION, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

use super::{REFUSAL_HEADER, Refusal, Refused, Respond};
use crate::criticality::{CRITICALITY_HEADER, Criticality};

/// Refusals become an empty HTTP response with a status (503 Service Unavailable by default),
/// a `Retry-After` header (the retry hint in whole seconds, rounded up, at least 1) and an
/// [`admit-refusal`](REFUSAL_HEADER) header naming the [reason](Refusal::reason), such as
/// `queue-delay`, and the refused request's class as
/// [`admit-criticality`](crate::criticality::CRITICALITY_HEADER) where the refusal knows it
/// (leave both out with [`without_reason`](Self::without_reason)), and `Connection: close`
/// when the refusal [says so](Refusal::closes_connection). The
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
/// assert_eq!(response.headers()["admit-refusal"], "rate-limit");
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpResponder {
    status: StatusCode,
    reason: bool,
}

impl HttpResponder {
    /// Refusals are answered with `status`.
    pub const fn new(status: StatusCode) -> Self {
        HttpResponder {
            status,
            reason: true,
        }
    }

    /// Responses leave out the [`admit-refusal`](REFUSAL_HEADER) and `admit-criticality`
    /// headers, for services that do not tell clients why they were refused.
    pub const fn without_reason(self) -> Self {
        HttpResponder {
            reason: false,
            ..self
        }
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
        let headers = response.headers_mut();
        headers.insert(RETRY_AFTER, HeaderValue::from(refusal.retry_after_secs()));
        // A custom `Refusal` whose reason is not a valid header value goes without.
        if let (true, Ok(reason)) = (self.reason, HeaderValue::from_str(refusal.reason())) {
            headers.insert(REFUSAL, reason);
        }
        if let (true, Some(class)) = (self.reason, refusal.criticality()) {
            headers.insert(CRITICALITY, CLASSES[class.index()].clone());
        }
        if refusal.closes_connection() {
            close_connection(headers);
        }
        response.extensions_mut().insert(Refused);
        response
    }
}

/// [`REFUSAL_HEADER`], parsed once.
const REFUSAL: HeaderName = HeaderName::from_static(REFUSAL_HEADER);

/// [`CRITICALITY_HEADER`], parsed once.
const CRITICALITY: HeaderName = HeaderName::from_static(CRITICALITY_HEADER);

/// Every class's name as a header value, in [`Criticality::ALL`]'s order.
const CLASSES: [HeaderValue; Criticality::COUNT] = [
    HeaderValue::from_static(Criticality::ALL[0].as_str()),
    HeaderValue::from_static(Criticality::ALL[1].as_str()),
    HeaderValue::from_static(Criticality::ALL[2].as_str()),
    HeaderValue::from_static(Criticality::ALL[3].as_str()),
];

/// Adds `Connection: close` unless `headers` already close their connection: on HTTP/1, how a
/// server retires a keep-alive connection after this response.
pub(crate) fn close_connection(headers: &mut HeaderMap) {
    let closes = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"));
    if !closes {
        headers.append(CONNECTION, HeaderValue::from_static("close"));
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

#[cfg(test)]
mod tests {
    use http::Response;

    use super::HttpResponder;
    use crate::criticality::Criticality;
    use crate::shed::Overloaded;
    use crate::signal::Cause;

    fn reason_of(responder: HttpResponder, reason: Cause) -> Option<String> {
        let response: Response<()> =
            responder.response(Overloaded::new(reason, Criticality::Critical, 1));
        assert_eq!(response.status(), 503);
        response
            .headers()
            .get(super::REFUSAL_HEADER)
            .map(|value| value.to_str().unwrap().to_owned())
    }

    /// A custom refusal whose reason is no valid header value.
    #[derive(Clone, Copy, Debug)]
    struct Garbled;

    impl std::fmt::Display for Garbled {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("garbled")
        }
    }

    impl std::error::Error for Garbled {}

    impl crate::respond::Refusal for Garbled {
        fn retry_after(&self) -> std::time::Duration {
            std::time::Duration::from_secs(1)
        }

        fn reason(&self) -> &'static str {
            "two\nlines"
        }
    }

    #[test]
    fn the_reason_header_names_the_overload() {
        let responder = HttpResponder::default();
        for (reason, token) in [
            (Cause::Cpu, "cpu"),
            (Cause::CoolOff, "cool-off"),
            (Cause::Queue, "queue"),
            (Cause::QueueDelay, "queue-delay"),
            (Cause::RuntimeLag, "runtime-lag"),
            // A signal's own name may be any string; the header names them all alike.
            (Cause::Custom("disk queue\n"), "signal"),
        ] {
            assert_eq!(reason_of(responder, reason).as_deref(), Some(token));
        }
        let quiet = responder.without_reason();
        assert_eq!(quiet.response::<_, ()>(Garbled).headers().len(), 1);
        let garbled: Response<()> = responder.response(Garbled);
        assert!(!garbled.headers().contains_key(super::REFUSAL_HEADER));
        assert_eq!(reason_of(quiet, Cause::QueueDelay), None);
        assert_eq!(quiet.status(), responder.status());
    }

    #[test]
    fn a_shedder_refusal_names_the_class_and_a_quiet_responder_does_not() {
        let refusal = Overloaded::new(Cause::Cpu, Criticality::SheddablePlus, 1);
        let class = |responder: HttpResponder| {
            let response: Response<()> = responder.response(refusal);
            response
                .headers()
                .get("admit-criticality")
                .map(|value| value.to_str().unwrap().to_owned())
        };
        assert_eq!(
            class(HttpResponder::default()).as_deref(),
            Some("sheddable_plus")
        );
        assert_eq!(class(HttpResponder::default().without_reason()), None);
    }
}
