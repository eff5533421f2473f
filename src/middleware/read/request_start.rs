//! A layer's queue time from a request-start header.

use std::fmt;

use http::HeaderName;
use http::header::InvalidHeaderName;

use super::Inspect;
use crate::clock::{SystemWallClock, WallClock};
use crate::signal::Arrival;
use crate::signal::queue::header::{HeaderConfig, HeaderError, stamp_age};

/// Reads the request-start stamp a proxy put on a request (`X-Request-Start` by default, or AWS
/// ALB's trace id; see [`header`](crate::signal::queue::header) for the formats) and gives its
/// age on the service's wall clock ([`SystemWallClock`] by default): the wait plus the clocks'
/// offset. Give it to a layer with [`AdmitLayer::inspect`](crate::middleware::AdmitLayer::inspect);
/// the shedder learns the offset from the requests that find the service idle and takes the
/// age less it as the request's wait (see
/// [`Shedder::allow_with`](crate::shed::Shedder::allow_with)).
///
/// Only trust a header your edge proxy overwrites (or appends to, read with the default
/// [`Pick::Last`](crate::signal::queue::header::Pick::Last)), and set the parser's
/// [`max_future`](HeaderConfig::with_max_future) to the clocks' worst skew (see
/// [`floor`](crate::signal::queue::floor) and the [guide](crate::guide::signals)).
///
/// A request without the header has no stamp; a malformed value gives its [`HeaderError`],
/// which the shedder counts ([`ShedSnapshot::header_errors`](crate::shed::ShedSnapshot::header_errors)),
/// never a made-up wait. Reading allocates nothing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::middleware::{Inspect, RequestStart};
/// use admit::signal::queue::header::{HeaderConfig, HeaderError};
///
/// let wall = ManualClock::new();
/// wall.set(Duration::from_secs(1_700_000_000));
/// let start = RequestStart::new(HeaderConfig::default())?.wall_clock(wall);
/// let stamped = |value: &str| {
///     let request = http::Request::get("/").header("x-request-start", value).body(()).unwrap();
///     start.inspect(&request).stamp_age()
/// };
/// assert_eq!(stamped("t=1699999999.950"), Some(Ok(50_000_000))); // 50 ms old
/// assert_eq!(stamped("soon"), Some(Err(HeaderError::Invalid)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RequestStart<W = SystemWallClock> {
    name: HeaderName,
    config: HeaderConfig,
    wall: W,
}

impl RequestStart {
    /// Reads the header `config` names (`X-Amzn-Trace-Id` with
    /// [`with_alb`](HeaderConfig::with_alb)), on the system's wall clock.
    ///
    /// # Errors
    ///
    /// The header name is not a valid HTTP header name.
    pub fn new(config: HeaderConfig) -> Result<Self, InvalidHeaderName> {
        Ok(RequestStart {
            name: HeaderName::from_bytes(config.header().as_bytes())?,
            config,
            wall: SystemWallClock,
        })
    }
}

impl<W> RequestStart<W> {
    /// The same reader on another wall clock, which the stamps are compared with (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn wall_clock<W2: WallClock>(self, wall: W2) -> RequestStart<W2> {
        RequestStart {
            name: self.name,
            config: self.config,
            wall,
        }
    }
}

impl<W: WallClock> RequestStart<W> {
    /// The age of `request`'s stamp in signed ns, or why it could not be read; `None` without
    /// the header.
    fn stamped<B>(&self, request: &http::Request<B>) -> Option<Result<i64, HeaderError>> {
        let mut values = request.headers().get_all(&self.name).iter().peekable();
        values.peek()?;
        let wall = self.wall.unix_nanos();
        Some(stamp_age(
            values.map(|value| value.as_bytes()),
            wall,
            &self.config,
        ))
    }
}

/// Reads the request's [stamp's age](Arrival::stamp_age).
impl<W: WallClock, B> Inspect<http::Request<B>> for RequestStart<W> {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Arrival {
        match self.stamped(request) {
            Some(age) => Arrival::new().with_stamp_age(age),
            None => Arrival::new(),
        }
    }
}

impl<W> fmt::Debug for RequestStart<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestStart")
            .field("header", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
