//! What a layer reads from each request for its limiter: the [`Inspect`] readers, which fill
//! an [`Arrival`].

use crate::signal::Arrival;

mod criticality;
#[cfg(feature = "http")]
mod grpc_timeout;
#[cfg(feature = "http")]
mod http_version;
#[cfg(feature = "http")]
mod request_start;
#[cfg(feature = "http")]
mod timeout_header;

pub use self::criticality::CriticalityFrom;
#[cfg(feature = "http")]
pub use self::criticality::CriticalityHeader;
#[cfg(feature = "http")]
pub use self::grpc_timeout::GrpcTimeout;
#[cfg(feature = "http")]
pub use self::http_version::HttpVersion;
#[cfg(feature = "http")]
pub use self::request_start::RequestStart;
#[cfg(feature = "http")]
pub use self::timeout_header::{TIMEOUT_HEADER, TimeoutHeader};
#[cfg(feature = "http")]
pub(crate) use self::{grpc_timeout::parse as parse_grpc_timeout, timeout_header::parse_ms};

/// 1 to `most` ASCII digits (at most 19, so no overflow) as a number.
#[cfg(feature = "http")]
fn decimal(digits: &[u8], most: usize) -> Option<u64> {
    if digits.is_empty() || digits.len() > most.min(19) || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0, |number, digit| number * 10 + u64::from(digit - b'0')),
    )
}

/// How an [`AdmitLayer`](super::AdmitLayer) reads a request into an [`Arrival`]: given with
/// [`AdmitLayer::inspect`](super::AdmitLayer::inspect).
///
/// [`ReadNothing`] (the default) reads nothing; [`RequestStart`] (feature `http`) reads the
/// age of a proxy's request-start stamp; [`HttpVersion`] reads the HTTP version;
/// [`GrpcTimeout`] and [`TimeoutHeader`] read the time a gRPC call or an HTTP request has left;
/// [`CriticalityHeader`] and [`CriticalityFrom`] read the class. A pair reads with both:
/// `(RequestStart::new(..)?, CriticalityHeader::new())` reads the wait and the class, the first
/// reader's answer winning where both know one. Implement it for a reader of your own.
///
/// ```
/// use std::time::Duration;
/// use admit::middleware::Inspect;
/// use admit::signal::Arrival;
///
/// /// The wait a load balancer wrote in a header of its own, in milliseconds.
/// #[derive(Clone)]
/// struct QueuedMs;
///
/// impl<B> Inspect<http::Request<B>> for QueuedMs {
///     fn inspect(&self, request: &http::Request<B>) -> Arrival {
///         let waited = request
///             .headers()
///             .get("x-queued-ms")
///             .and_then(|value| value.to_str().ok()?.parse().ok())
///             .map(Duration::from_millis);
///         match waited {
///             Some(waited) => Arrival::new().with_wait(waited),
///             None => Arrival::new(),
///         }
///     }
/// }
///
/// let request = http::Request::get("/").header("x-queued-ms", "12").body(())?;
/// assert_eq!(QueuedMs.inspect(&request).wait_nanos(), Some(12_000_000));
/// # Ok::<(), http::Error>(())
/// ```
pub trait Inspect<Req> {
    /// What the layer's limiter learns from `request`.
    fn inspect(&self, request: &Req) -> Arrival;
}

/// Reads nothing: the layer decides on its limiter's other signals alone, and takes every
/// request as [`Critical`](crate::criticality::Criticality::Critical).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadNothing;

impl<Req> Inspect<Req> for ReadNothing {
    #[inline]
    fn inspect(&self, _request: &Req) -> Arrival {
        Arrival::new()
    }
}

impl<Req, A: Inspect<Req>, B: Inspect<Req>> Inspect<Req> for (A, B) {
    #[inline]
    fn inspect(&self, request: &Req) -> Arrival {
        self.0.inspect(request).or(self.1.inspect(request))
    }
}

#[cfg(all(test, feature = "http", not(admit_loom)))]
mod tests {
    use http::{Request, Version};

    use super::{HttpVersion, Inspect, ReadNothing};
    use crate::signal::Arrival;

    #[test]
    fn nothing_reads_nothing_and_http_version_reads_the_version() {
        let request = |version| Request::builder().version(version).body(()).unwrap();
        assert_eq!(
            ReadNothing.inspect(&request(Version::HTTP_11)),
            Arrival::new()
        );
        for (version, http1) in [
            (Version::HTTP_09, true),
            (Version::HTTP_10, true),
            (Version::HTTP_11, true),
            (Version::HTTP_2, false),
            (Version::HTTP_3, false),
        ] {
            assert_eq!(HttpVersion.inspect(&request(version)).http1(), http1);
        }
    }
}
