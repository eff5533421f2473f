//! A layer's queue time from a request-start header.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use http::header::InvalidHeaderName;

use super::{Inbound, Inspect};
use crate::clock::{Clock, MonotonicClock, SystemWallClock, WallClock};
use crate::signal::queue::floor::SkewFloor;
use crate::signal::queue::header::{HeaderConfig, HeaderError, parse_request_start_values};
use crate::sync::{AtomicU64, Ordering};

/// How many kinds of [`HeaderError`] there are.
const KINDS: usize = 6;

/// Reads how long a request waited from the request-start header a proxy stamped on it
/// (`X-Request-Start` by default; see [`header`](crate::signal::queue::header) for the formats), less the
/// clocks' offset ([`SkewFloor`]). Give it to a layer with
/// [`AdmitLayer::inspect`](crate::middleware::AdmitLayer::inspect).
///
/// Two clocks: the wall clock ([`SystemWallClock`] by default), which the stamps are compared
/// with, and a monotonic [`Clock`] ([`MonotonicClock`] by default) for the floor's half
/// windows, so that a step of the wall clock (NTP, a manual change) moves no window.
///
/// Only trust a header your edge proxy overwrites (or appends to, read with the default
/// [`Pick::Last`](crate::signal::queue::header::Pick::Last)), and set the parser's
/// [`max_future`](HeaderConfig::with_max_future) to the clocks' worst skew. A stamp the
/// client forges (or a skewed proxy's) always lowers its own request's wait. Fewer than four
/// of them per window cannot pull the floor below the genuine stamps' minimum; many can
/// lengthen other requests' waits by up to `max_future` plus the floor's cap (see
/// [`floor`](crate::signal::queue::floor) and the [guide](crate::guide::signals)).
///
/// A request without the header has no known wait; a malformed value is counted by its
/// [`HeaderError`] ([`errors`](Self::errors)) and also gives no wait, never a made-up one.
///
/// Clones share the floor and the error counts.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use admit::clock::ManualClock;
/// use admit::middleware::RequestStart;
/// use admit::signal::queue::header::HeaderConfig;
///
/// let wall = ManualClock::new();
/// wall.set(Duration::from_secs(1_700_000_000));
/// let start = RequestStart::new(HeaderConfig::default())?
///     .wall_clock(wall)
///     .clock(ManualClock::new());
/// let request = http::Request::get("/")
///     .header("x-request-start", "t=1699999999.950")
///     .body(())?;
/// assert_eq!(start.waited(&request), Some(Duration::from_millis(30))); // 50 ms less the 20 ms cap
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RequestStart<W = SystemWallClock, C = MonotonicClock> {
    name: HeaderName,
    config: HeaderConfig,
    shared: Arc<Shared>,
    wall: W,
    clock: C,
}

struct Shared {
    floor: SkewFloor,
    errors: [AtomicU64; KINDS],
}

impl RequestStart {
    /// Reads the header `config` names, with a default [`SkewFloor`] (300 s window, 20 ms cap),
    /// the system's wall clock and a [`MonotonicClock`] whose origin is this call.
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
            clock: MonotonicClock::new(),
        })
    }
}

impl<W, C> RequestStart<W, C> {
    /// The same reader with `floor` (shared by the clones made after this call).
    pub fn floor(mut self, floor: SkewFloor) -> Self {
        self.shared = Arc::new(Shared {
            floor,
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
        });
        self
    }

    /// The same reader on another wall clock, which the stamps are compared with (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn wall_clock<W2: WallClock>(self, wall: W2) -> RequestStart<W2, C> {
        RequestStart {
            name: self.name,
            config: self.config,
            shared: self.shared,
            wall,
            clock: self.clock,
        }
    }

    /// The same reader with the floor's half windows on another monotonic clock (default: a
    /// [`MonotonicClock`] whose origin is the call to [`new`](RequestStart::new)). Inject a
    /// [`ManualClock`](crate::clock::ManualClock) to make tests deterministic.
    pub fn clock<C2: Clock>(self, clock: C2) -> RequestStart<W, C2> {
        RequestStart {
            name: self.name,
            config: self.config,
            shared: self.shared,
            wall: self.wall,
            clock,
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
const ERRORS: [HeaderError; KINDS] = HeaderError::ALL;

impl<W: WallClock, C: Clock> RequestStart<W, C> {
    /// How long `request` waited before reaching the layer: its stamp's age less the clocks'
    /// offset. `None` without the header, or with a malformed value (counted in
    /// [`errors`](Self::errors)).
    pub fn waited<B>(&self, request: &http::Request<B>) -> Option<Duration> {
        let mut values = request.headers().get_all(&self.name).iter().peekable();
        values.peek()?;
        let wall = self.wall.unix_nanos();
        match parse_request_start_values(values.map(|value| value.as_bytes()), wall, &self.config) {
            Ok(raw) => {
                let excess = self.shared.floor.excess(raw, self.clock.now_nanos());
                Some(Duration::from_nanos(excess))
            }
            Err(error) => {
                let kind = ERRORS.iter().position(|&known| known == error).unwrap_or(0);
                self.shared.errors[kind].fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// Reads the request's [wait](RequestStart::waited).
impl<W: WallClock, C: Clock, B> Inspect<http::Request<B>> for RequestStart<W, C> {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Inbound {
        Inbound::new().with_waited(self.waited(request))
    }
}

impl<W, C> fmt::Debug for RequestStart<W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestStart")
            .field("header", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;

    const MS: i64 = 1_000_000;
    const HOUR: Duration = Duration::from_secs(3_600);

    /// A request stamped `raw` ns before `wall`'s reading, in nanoseconds.
    fn stamped(wall: &ManualClock, raw: i64) -> http::Request<()> {
        let stamp = wall.now_nanos().checked_add_signed(-raw).unwrap();
        http::Request::get("/")
            .header("x-request-start", stamp.to_string())
            .body(())
            .unwrap()
    }

    #[test]
    fn the_floor_keeps_its_windows_when_the_wall_clock_steps() {
        let (wall, clock) = (ManualClock::new(), ManualClock::new());
        wall.set(Duration::from_secs(1_700_000_000));
        clock.set(Duration::from_secs(1_000));
        let start = RequestStart::new(HeaderConfig::default())
            .unwrap()
            .wall_clock(wall.clone())
            .clock(clock.clone());
        let waited = |raw| start.waited(&stamped(&wall, raw));
        // Every lane holds the clocks' offset: the service's clock is 2.5 ms behind.
        let floor = &start.shared.floor;
        for lane in 0..4 {
            floor.excess_in_lane(-25 * MS / 10, clock.now_nanos(), lane);
        }
        assert_eq!(waited(75 * MS / 10), Some(Duration::from_millis(10)));

        // The wall clock steps an hour forward, then two back: the same floor measures.
        for (step, label) in [(wall.now() + HOUR, "forward"), (wall.now() - HOUR, "back")] {
            wall.set(step);
            clock.advance(Duration::from_secs(1));
            assert_eq!(
                waited(75 * MS / 10),
                Some(Duration::from_millis(10)),
                "{label}"
            );
            assert_eq!(
                floor.floor(clock.now_nanos()),
                Some(-25 * MS / 10),
                "{label}"
            );
        }

        // With the wall clock still an hour back, a window later: the floor records afresh.
        clock.advance(Duration::from_secs(300));
        assert_eq!(floor.floor(clock.now_nanos()), None);
        assert_eq!(waited(4 * MS), Some(Duration::ZERO));
        assert_eq!(floor.floor(clock.now_nanos()), Some(4 * MS));
    }
}
