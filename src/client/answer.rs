//! What a backend's answer says of its load: the one reading the throttle layer and the retry
//! policy share.

use crate::respond::REFUSAL_HEADER;

/// Whether `response` refuses its request for overload or unavailability: a 503 or 429, a
/// trailers-only `grpc-status` of `RESOURCE_EXHAUSTED` (8) or `UNAVAILABLE` (14), or admit's
/// [`admit-refusal`](REFUSAL_HEADER).
pub(super) fn is_refusal<B>(response: &http::Response<B>) -> bool {
    let status = response.status();
    status == http::StatusCode::SERVICE_UNAVAILABLE
        || status == http::StatusCode::TOO_MANY_REQUESTS
        || response
            .headers()
            .get("grpc-status")
            .is_some_and(|code| code.as_bytes() == b"8" || code.as_bytes() == b"14")
        || processed_nothing(response)
}

/// Whether `response` says the service ran none of the request: admit's refusals carry
/// [`admit-refusal`](REFUSAL_HEADER).
pub(super) fn processed_nothing<B>(response: &http::Response<B>) -> bool {
    response.headers().contains_key(REFUSAL_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, headers: &[(&str, &str)]) -> http::Response<()> {
        let mut response = http::Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(*name, *value);
        }
        response.body(()).unwrap()
    }

    #[test]
    fn refusals_are_overload_and_unavailability_over_http_and_grpc() {
        for refusal in [
            answer(503, &[]),
            answer(429, &[]),
            answer(200, &[("grpc-status", "8")]),
            answer(200, &[("grpc-status", "14")]),
            answer(200, &[("grpc-status", "14"), ("admit-refusal", "draining")]),
        ] {
            assert!(is_refusal(&refusal), "{refusal:?}");
        }
        for other in [
            answer(200, &[]),
            answer(500, &[]),
            answer(502, &[]),
            answer(200, &[("grpc-status", "0")]),
            answer(200, &[("grpc-status", "13")]),
        ] {
            assert!(!is_refusal(&other), "{other:?}");
        }
        assert!(processed_nothing(&answer(
            503,
            &[("admit-refusal", "rate-limit")]
        )));
        assert!(!processed_nothing(&answer(503, &[])));
    }
}
