//! What a layer reads from each request for its limiter.

use std::time::Duration;

use super::queue_time::QueueTime;

/// What an [`AdmitLayer`](super::AdmitLayer) read from a request before asking its
/// [`Limiter`](super::Limiter): how long the request waited before reaching the layer, and
/// whether it came over HTTP/1. A field the layer's [reader](Inspect) does not read is unknown:
/// `None`, or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inbound {
    waited: Option<Duration>,
    http1: bool,
}

impl Inbound {
    /// Nothing known.
    pub const fn new() -> Self {
        Inbound {
            waited: None,
            http1: false,
        }
    }

    /// With how long the request waited before reaching the layer, if known.
    #[must_use]
    pub const fn with_waited(self, waited: Option<Duration>) -> Self {
        Inbound { waited, ..self }
    }

    /// With whether the request came over HTTP/1 (0.9, 1.0 or 1.1).
    #[must_use]
    pub const fn with_http1(self, http1: bool) -> Self {
        Inbound { http1, ..self }
    }

    /// How long the request waited before reaching the layer, if known. The shedder feeds it
    /// to its [queue gate](crate::shed::ShedderBuilder::queue_gate).
    pub const fn waited(&self) -> Option<Duration> {
        self.waited
    }

    /// Whether the request came over HTTP/1: the drain then closes its connection when it
    /// answers.
    pub const fn http1(&self) -> bool {
        self.http1
    }
}

/// How an [`AdmitLayer`](super::AdmitLayer) reads a request's [`Inbound`]: given with
/// [`AdmitLayer::inspect`](super::AdmitLayer::inspect).
///
/// Every [`QueueTime`] is a reader of the wait ([`NoQueueTime`](super::NoQueueTime), the
/// default, reads nothing); [`HttpVersion`] (feature `http`) reads the HTTP version.
pub trait Inspect<Req> {
    /// What the layer's limiter learns from `request`.
    fn inspect(&self, request: &Req) -> Inbound;
}

impl<Req, Q: QueueTime<Req>> Inspect<Req> for Q {
    #[inline]
    fn inspect(&self, request: &Req) -> Inbound {
        Inbound::new().with_waited(self.waited(request))
    }
}

/// Reads whether an HTTP request came over HTTP/1: what the
/// [`DrainLayer`](crate::drain::DrainLayer) reads, to close HTTP/1 connections while it drains.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpVersion;

#[cfg(feature = "http")]
impl<B> Inspect<http::Request<B>> for HttpVersion {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Inbound {
        Inbound::new().with_http1(request.version() <= http::Version::HTTP_11)
    }
}

#[cfg(all(test, feature = "http", not(admit_loom)))]
mod tests {
    use std::time::Duration;

    use http::{Request, Version};

    use super::{HttpVersion, Inbound, Inspect};
    use crate::middleware::NoQueueTime;

    #[test]
    fn a_queue_time_reads_the_wait_and_http_version_reads_the_version() {
        let request = |version| Request::builder().version(version).body(()).unwrap();
        let wait = |_: &Request<()>| Some(Duration::from_millis(7));
        let read = wait.inspect(&request(Version::HTTP_11));
        assert_eq!(
            read,
            Inbound::new().with_waited(Some(Duration::from_millis(7)))
        );
        assert_eq!(
            NoQueueTime.inspect(&request(Version::HTTP_11)),
            Inbound::new()
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
