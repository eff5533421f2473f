//! A layer's queue time from a request-start header.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use http::header::InvalidHeaderName;

use super::floor::SkewFloor;
use super::header::{HeaderConfig, HeaderError, parse_request_start_values};
use crate::clock::{SystemWallClock, WallClock};
use crate::middleware::QueueTime;
use crate::sync::{AtomicU64, Ordering};

/// How many kinds of [`HeaderError`] there are.
const KINDS: usize = 6;

/// Reads how long a request waited from the request-start header a proxy stamped on it
/// (`X-Request-Start` by default; see [`header`](super::header) for the formats), less the
/// clocks' offset ([`SkewFloor`]). Give it to a layer with
/// [`AdmitLayer::queue_time`](crate::middleware::AdmitLayer::queue_time).
///
/// Only trust a header your edge proxy overwrites: a client that sets it could lower the
/// waits the gate sees. A request without the header has no known wait; a malformed value is
/// counted by its [`HeaderError`] ([`errors`](Self::errors)) and also gives no wait, never a
/// made-up one.
///
/// Clones share the floor and the error counts.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::middleware::QueueTime;
/// use admit::signal::queue::RequestStart;
/// use admit::signal::queue::header::HeaderConfig;
///
/// let wall = ManualClock::new();
/// wall.set(Duration::from_secs(1_700_000_000));
/// let start = RequestStart::new(HeaderConfig::default())?.wall_clock(wall);
/// let request = http::Request::get("/")
///     .header("x-request-start", "t=1699999999.950")
///     .body(())?;
/// assert_eq!(start.waited(&request), Some(Duration::from_millis(30))); // 50 ms less the 20 ms cap
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RequestStart<W = SystemWallClock> {
    name: HeaderName,
    config: HeaderConfig,
    shared: Arc<Shared>,
    wall: W,
}

struct Shared {
    floor: SkewFloor,
    errors: [AtomicU64; KINDS],
}

impl RequestStart {
    /// Reads the header `config` names, with a default [`SkewFloor`] (300 s window, 20 ms cap)
    /// and the system's wall clock.
    ///
    /// # Errors
    ///
    /// The header name is not a valid HTTP header name.
    pub fn new(config: HeaderConfig) -> Result<Self, InvalidHeaderName> {
        Ok(RequestStart {
            name: HeaderName::from_bytes(config.name().as_bytes())?,
            config,
            shared: Arc::new(Shared {
                floor: SkewFloor::default(),
                errors: std::array::from_fn(|_| AtomicU64::new(0)),
            }),
            wall: SystemWallClock,
        })
    }
}

impl<W> RequestStart<W> {
    /// The same reader with `floor` (shared by the clones made after this call).
    pub fn floor(mut self, floor: SkewFloor) -> Self {
        self.shared = Arc::new(Shared {
            floor,
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
        });
        self
    }

    /// The same reader on another wall clock (a [`ManualClock`](crate::clock::ManualClock) in
    /// tests).
    pub fn wall_clock<W2: WallClock>(self, wall: W2) -> RequestStart<W2> {
        RequestStart {
            name: self.name,
            config: self.config,
            shared: self.shared,
            wall,
        }
    }

    /// How many values failed to parse, by error, since this reader was made: one count per
    /// request with a malformed header.
    pub fn errors(&self) -> impl Iterator<Item = (HeaderError, u64)> + '_ {
        ERRORS
            .iter()
            .zip(&self.shared.errors)
            .map(|(&error, count)| (error, count.load(Ordering::Relaxed)))
    }
}

/// Every error, in the order of the counts.
const ERRORS: [HeaderError; KINDS] = [
    HeaderError::Empty,
    HeaderError::Invalid,
    HeaderError::Implausible,
    HeaderError::Overflow,
    HeaderError::FromFuture,
    HeaderError::TooOld,
];

impl<W: WallClock, B> QueueTime<http::Request<B>> for RequestStart<W> {
    fn waited(&self, request: &http::Request<B>) -> Option<Duration> {
        let mut values = request.headers().get_all(&self.name).iter().peekable();
        values.peek()?;
        let now = self.wall.unix_nanos();
        match parse_request_start_values(values.map(|value| value.as_bytes()), now, &self.config) {
            Ok(raw) => Some(Duration::from_nanos(self.shared.floor.excess(raw, now))),
            Err(error) => {
                let kind = ERRORS.iter().position(|&known| known == error).unwrap_or(0);
                self.shared.errors[kind].fetch_add(1, Ordering::Relaxed);
                None
            }
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
