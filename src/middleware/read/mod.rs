//! What a layer reads from each request for its limiter: the [`Inspect`] readers and what
//! they read, [`Inbound`].

use std::time::Duration;

use crate::criticality::Criticality;
use crate::signal::queue::header::HeaderError;

mod criticality;
#[cfg(feature = "http")]
mod http_version;
#[cfg(feature = "http")]
mod request_start;

pub use self::criticality::CriticalityFrom;
#[cfg(feature = "http")]
pub use self::criticality::CriticalityHeader;
#[cfg(feature = "http")]
pub use self::http_version::HttpVersion;
#[cfg(feature = "http")]
pub use self::request_start::RequestStart;

/// What an [`AdmitLayer`](super::AdmitLayer) read from a request before asking its
/// [`Limiter`](super::Limiter): how long the request waited before reaching the layer (or the
/// age of a proxy's stamp, from which the shedder derives it), its [`Criticality`], and whether
/// it came over HTTP/1. A field the layer's [reader](Inspect) does not read is unknown: `None`,
/// or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inbound {
    waited: Option<Duration>,
    stamped: Option<Result<i64, HeaderError>>,
    criticality: Option<Criticality>,
    http1: bool,
}

impl Inbound {
    /// Nothing known.
    pub const fn new() -> Self {
        Inbound {
            waited: None,
            stamped: None,
            criticality: None,
            http1: false,
        }
    }

    /// With how long the request waited before reaching the layer, if known.
    #[must_use]
    pub const fn with_waited(self, waited: Option<Duration>) -> Self {
        Inbound { waited, ..self }
    }

    /// With the age of the request-start stamp a proxy put on the request, if it had one: the
    /// service's wall clock less the stamp in signed ns (the wait plus the clocks' offset,
    /// [`parse_request_start`](crate::signal::queue::header::parse_request_start)'s value), or
    /// why the stamp could not be read.
    #[must_use]
    pub const fn with_stamped(self, stamped: Option<Result<i64, HeaderError>>) -> Self {
        Inbound { stamped, ..self }
    }

    /// With the request's class.
    #[must_use]
    pub const fn with_criticality(self, criticality: Criticality) -> Self {
        Inbound {
            criticality: Some(criticality),
            ..self
        }
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

    /// The age of the request's start stamp, or why it could not be read; `None` without a
    /// stamp. Without a [wait](Self::waited), the shedder takes the age less its
    /// [skew floor](crate::shed::ShedderBuilder::skew_floor) as the wait, and counts the
    /// errors.
    pub const fn stamped(&self) -> Option<Result<i64, HeaderError>> {
        self.stamped
    }

    /// The request's class, if read. A limiter takes a request without one as
    /// [`Critical`](Criticality::Critical), the default.
    pub const fn criticality(&self) -> Option<Criticality> {
        self.criticality
    }

    /// Whether the request came over HTTP/1: the drain then closes its connection when it
    /// answers.
    pub const fn http1(&self) -> bool {
        self.http1
    }

    /// What `self` knows, and what `other` knows that `self` does not.
    #[must_use]
    pub const fn or(self, other: Inbound) -> Self {
        Inbound {
            waited: match self.waited {
                Some(waited) => Some(waited),
                None => other.waited,
            },
            stamped: match self.stamped {
                Some(stamped) => Some(stamped),
                None => other.stamped,
            },
            criticality: match self.criticality {
                Some(criticality) => Some(criticality),
                None => other.criticality,
            },
            http1: self.http1 || other.http1,
        }
    }
}

/// How an [`AdmitLayer`](super::AdmitLayer) reads a request's [`Inbound`]: given with
/// [`AdmitLayer::inspect`](super::AdmitLayer::inspect).
///
/// [`ReadNothing`] (the default) reads nothing; [`RequestStart`] (feature `http`) reads the
/// age of a proxy's request-start stamp; [`HttpVersion`] reads the HTTP version;
/// [`CriticalityHeader`] and [`CriticalityFrom`] read the class. A pair reads with both:
/// `(RequestStart::new(..)?, CriticalityHeader::new())` reads the wait and the class, the first
/// reader's answer winning where both know one. Implement it for a reader of your own.
///
/// ```
/// use std::time::Duration;
/// use admit::middleware::{Inbound, Inspect};
///
/// /// The wait a load balancer wrote in a header of its own, in milliseconds.
/// #[derive(Clone)]
/// struct QueuedMs;
///
/// impl<B> Inspect<http::Request<B>> for QueuedMs {
///     fn inspect(&self, request: &http::Request<B>) -> Inbound {
///         let waited = request
///             .headers()
///             .get("x-queued-ms")
///             .and_then(|value| value.to_str().ok()?.parse().ok())
///             .map(Duration::from_millis);
///         Inbound::new().with_waited(waited)
///     }
/// }
///
/// let request = http::Request::get("/").header("x-queued-ms", "12").body(())?;
/// assert_eq!(QueuedMs.inspect(&request).waited(), Some(Duration::from_millis(12)));
/// # Ok::<(), http::Error>(())
/// ```
pub trait Inspect<Req> {
    /// What the layer's limiter learns from `request`.
    fn inspect(&self, request: &Req) -> Inbound;
}

/// Reads nothing: the layer decides on its limiter's other signals alone, and takes every
/// request as [`Critical`](Criticality::Critical).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadNothing;

impl<Req> Inspect<Req> for ReadNothing {
    #[inline]
    fn inspect(&self, _request: &Req) -> Inbound {
        Inbound::new()
    }
}

impl<Req, A: Inspect<Req>, B: Inspect<Req>> Inspect<Req> for (A, B) {
    #[inline]
    fn inspect(&self, request: &Req) -> Inbound {
        self.0.inspect(request).or(self.1.inspect(request))
    }
}

#[cfg(all(test, feature = "http", not(admit_loom)))]
mod tests {
    use std::time::Duration;

    use http::{Request, Version};

    use super::{HttpVersion, Inbound, Inspect, ReadNothing};

    #[test]
    fn nothing_reads_nothing_and_http_version_reads_the_version() {
        let request = |version| Request::builder().version(version).body(()).unwrap();
        assert_eq!(
            ReadNothing.inspect(&request(Version::HTTP_11)),
            Inbound::new()
        );
        let known = Inbound::new()
            .with_waited(Some(Duration::from_millis(7)))
            .with_http1(true);
        assert_eq!(Inbound::new().or(known), known);
        assert_eq!(known.or(Inbound::new()), known);
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
