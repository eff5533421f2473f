//! The time an HTTP request has left, from a header in milliseconds.

use std::time::Duration;

use http::HeaderName;
use http::header::InvalidHeaderName;

use super::Inspect;
use crate::signal::Arrival;

/// The header admit's clients send an HTTP request's time left in, as whole milliseconds:
/// `admit-timeout-ms: 250`. gRPC calls carry `grpc-timeout` instead.
pub const TIMEOUT_HEADER: &str = "admit-timeout-ms";

/// The most digits a time left in ms may have: 12, about 31 years.
const MAX_DIGITS: usize = 12;

/// Reads the time an HTTP request has left ([`Arrival::with_time_left`]) from a header holding
/// whole milliseconds: [`TIMEOUT_HEADER`] by default, as the clients'
/// [`DeadlineLayer`](crate::client::DeadlineLayer) writes it. A [`Bound`](crate::bound::Bound)
/// then refuses a request whose deadline has passed or that its service no longer fits in, and
/// a [`ScopeLayer`](crate::middleware::propagate::ScopeLayer) sends the rest on.
///
/// A missing header, or a value that is not 1 to 12 ASCII digits, leaves the time unknown.
/// [`with_name`](Self::with_name) reads another header in the same form, such as Envoy's
/// `x-envoy-expected-rq-timeout-ms`. Reading allocates nothing.
///
/// ```
/// use admit::middleware::{Inspect, TimeoutHeader};
///
/// let request = http::Request::get("/").header("admit-timeout-ms", "250").body(())?;
/// assert_eq!(TimeoutHeader::new().inspect(&request).time_left_nanos(), Some(250_000_000));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeoutHeader {
    name: HeaderName,
}

impl TimeoutHeader {
    /// Reads [`TIMEOUT_HEADER`].
    pub fn new() -> Self {
        TimeoutHeader {
            name: HeaderName::from_static(TIMEOUT_HEADER),
        }
    }

    /// Reads the header `name` instead.
    ///
    /// # Errors
    ///
    /// `name` is not a valid header name.
    pub fn with_name(self, name: &str) -> Result<Self, InvalidHeaderName> {
        Ok(TimeoutHeader {
            name: HeaderName::try_from(name)?,
        })
    }
}

impl Default for TimeoutHeader {
    fn default() -> Self {
        TimeoutHeader::new()
    }
}

impl<B> Inspect<http::Request<B>> for TimeoutHeader {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Arrival {
        match request
            .headers()
            .get(&self.name)
            .and_then(|value| parse_ms(value.as_bytes()))
        {
            Some(left) => Arrival::new().with_time_left(left),
            None => Arrival::new(),
        }
    }
}

/// 1 to 12 ASCII digits of milliseconds.
pub(crate) fn parse_ms(value: &[u8]) -> Option<Duration> {
    super::decimal(value, MAX_DIGITS).map(Duration::from_millis)
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    #[test]
    fn whole_milliseconds_and_every_malformed_value() {
        assert_eq!(parse_ms(b"0"), Some(Duration::ZERO));
        assert_eq!(parse_ms(b"250"), Some(Duration::from_millis(250)));
        assert_eq!(
            parse_ms(b"999999999999"),
            Some(Duration::from_millis(999_999_999_999))
        );
        for bad in [
            &b""[..],
            b"1000000000000",
            b"-1",
            b"1.5",
            b" 1",
            b"1m",
            b"0x10",
        ] {
            assert_eq!(parse_ms(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_renamed_header_is_read_and_the_default_is_not() {
        let envoy = TimeoutHeader::new()
            .with_name("x-envoy-expected-rq-timeout-ms")
            .unwrap();
        let request = http::Request::get("/")
            .header("x-envoy-expected-rq-timeout-ms", "40")
            .header(TIMEOUT_HEADER, "90")
            .body(())
            .unwrap();
        assert_eq!(envoy.inspect(&request).time_left_nanos(), Some(40_000_000));
        assert!(TimeoutHeader::new().with_name("bad name").is_err());
    }
}
