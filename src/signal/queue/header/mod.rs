//! Reading a request's start time from the header a proxy stamped on it.
//!
//! A proxy in front of the service (nginx, HAProxy, Envoy, Heroku's router…) can stamp each
//! request with the wall-clock time it arrived, in `X-Request-Start` or `X-Queue-Start`. The
//! difference between that stamp and the service's own wall clock when it starts the request is
//! the time the request waited: in the proxy, on the network and in the service's accept and
//! run queues. A layer's `middleware::RequestStart` reader (feature `http`) reads it as this
//! module's [`HeaderConfig`] says; the shedder's [`SkewFloor`](super::floor::SkewFloor) then
//! removes clock skew and network time from it.
//!
//! # Formats
//!
//! A value is a number of seconds, milliseconds, microseconds or nanoseconds since the Unix
//! epoch, optionally after `t=` and optionally with a fraction; the unit is chosen by magnitude,
//! so every format below is recognised without configuration (until the year 2286).
//!
//! | emitter | value |
//! |---|---|
//! | nginx `t=${msec}`, Envoy `t=%START_TIME(%s.%3f)%` | `t=1700000000.123` |
//! | Apache `%t` | `t=1700000000123456 D=3775428` (µs) |
//! | Heroku, Kamal-proxy, HAProxy `t=%Ts%ms` | `1700000000123`, `t=1700000000123` (ms) |
//! | Render | `1700000000123456789` (ns) |
//!
//! Several stamps (a list, or several header lines) are read as one comma-separated list, and
//! [`Pick`] chooses one. AWS ALB stamps none; with [`HeaderConfig::with_alb`] the second in its
//! `X-Amzn-Trace-Id` is read instead.
//!
//! A request without the header is not an error: it has no stamp and no queue time to record.
//! Every stamp must parse, and the picked one must lie within `max_future` ahead and `max_age`
//! behind the service's clock; otherwise the stamp is a [`HeaderError`]. Integer arithmetic
//! only, so nanosecond stamps stay exact; no allocation; never a panic.
//!
//! # Rules
//!
//! - **Units.** The digit count decides (s ≤ 10, ms 13, µs 16, ns 19).
//! - **Clocks.** The stamp is another machine's wall clock, compared with the service's wall
//!   clock (`SystemTime`). Stamps up to `max_future` (1 s) ahead are accepted, so that
//!   [`SkewFloor`](super::floor::SkewFloor) can absorb the skew; the cut-off for implausible
//!   stamps is 2000-01-01 UTC, never local time.
//! - **Trust.** [`Pick::Last`] reads the hop nearest the service; the edge proxy must overwrite
//!   a client's value, or append its own after it. A forged fresh or future stamp counts as a short wait for its own
//!   request; fewer than four per window cannot pull the skew floor below the genuine stamps'
//!   minimum, and many can lengthen other requests' waits by up to `max_future` (see
//!   [`floor`](super::floor)).
//! - **Not numeric.** Envoy's bare `%START_TIME%` and JavaScript's `toISOString()` are ISO-8601
//!   dates: [`HeaderError::Invalid`].
//!
//! See the [guide](crate::guide::signals) for what the wait includes with each proxy, and which
//! proxies overwrite the header.

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::Duration;

#[cfg(feature = "http")]
mod parse;
#[cfg(feature = "http")]
pub(crate) use self::parse::stamp_age;

/// The header most proxies stamp, lowercase: `x-request-start`.
pub const X_REQUEST_START: &str = "x-request-start";
/// The common alternative, lowercase: `x-queue-start`.
pub const X_QUEUE_START: &str = "x-queue-start";
/// The header AWS ALB adds, lowercase: `x-amzn-trace-id` (see [`HeaderConfig::with_alb`]).
pub const X_AMZN_TRACE_ID: &str = "x-amzn-trace-id";

/// Which stamp counts when a header holds several (`a, b`, or several header lines).
///
/// Every stamp must parse in any case; the pick only decides which one is measured: of
/// `t=1700000000.200, t=1700000000.100`, the default reads the second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pick {
    /// The last stamp: the hop nearest the service, the one a client cannot forge if the edge
    /// proxy appends to (or overwrites) the header. The default.
    #[default]
    Last,
    /// The first stamp: the hop farthest from the service (measures every hop's queue, but a
    /// client can forge it unless the edge proxy overwrites the header).
    First,
    /// The earliest stamp, whatever its position.
    Earliest,
}

/// How request-start headers are read: which header, which stamp, and which stamps are
/// plausible. Give it to a layer's `middleware::RequestStart` reader.
///
/// ```
/// use std::time::Duration;
/// use admit::signal::queue::header::{HeaderConfig, Pick, X_QUEUE_START};
///
/// let config = HeaderConfig::new()
///     .with_name("X-Queue-Start")
///     .with_pick(Pick::First)
///     .with_max_age(Duration::from_secs(30));
/// // Names are kept in lowercase, as HTTP/2 and the `http` crate spell them.
/// let same = HeaderConfig::new()
///     .with_name(X_QUEUE_START)
///     .with_pick(Pick::First)
///     .with_max_age(Duration::from_secs(30));
/// assert_eq!(config, same);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeaderConfig {
    name: Cow<'static, str>,
    pick: Pick,
    max_future: Duration,
    max_age: Duration,
    alb: bool,
}

impl HeaderConfig {
    /// The defaults: header [`X_REQUEST_START`], [`Pick::Last`], `max_future` 1 s, `max_age`
    /// 60 s, not ALB.
    pub const fn new() -> Self {
        HeaderConfig {
            name: Cow::Borrowed(X_REQUEST_START),
            pick: Pick::Last,
            max_future: Duration::from_secs(1),
            max_age: Duration::from_secs(60),
            alb: false,
        }
    }

    /// Reads the header `name` (default [`X_REQUEST_START`]), stored in ASCII lowercase as HTTP/2
    /// and the `http` crate spell names. Whether it is a valid header name is checked where it
    /// is used.
    pub fn with_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        let name = name.into();
        self.name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(name.to_ascii_lowercase())
        } else {
            name
        };
        self
    }

    /// Which of several stamps counts (default [`Pick::Last`]).
    pub const fn with_pick(mut self, pick: Pick) -> Self {
        self.pick = pick;
        self
    }

    /// How far ahead of the service's clock a stamp may be (default 1 s, inclusive); further is
    /// [`HeaderError::FromFuture`]. Small negative queue times are clock skew, which
    /// [`SkewFloor`](super::floor::SkewFloor) absorbs. Set it to the clocks' worst skew: a
    /// client forging many stamps can raise other requests' waits by up to this much. Longer
    /// than 2⁶³ ns counts as 2⁶³ − 1 ns.
    pub const fn with_max_future(mut self, max_future: Duration) -> Self {
        self.max_future = max_future;
        self
    }

    /// How far behind the service's clock a stamp may be (default 60 s, inclusive); further is
    /// [`HeaderError::TooOld`]. Longer than 2⁶³ ns counts as 2⁶³ − 1 ns.
    pub const fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// Reads AWS ALB's `X-Amzn-Trace-Id` instead of the named header (default `false`). Its
    /// `Self=` field is read if there is one (the ALB nearest the service), else `Root=`; the
    /// field must start with `1-` and eight hex digits, the Unix time in seconds at which the
    /// ALB received the request. Whole seconds make each wait up to 1 s too long: fit for the
    /// wait histogram and alarms, never for a queue gate's millisecond target.
    pub const fn with_alb(mut self, alb: bool) -> Self {
        self.alb = alb;
        self
    }
}

impl Default for HeaderConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a request-start header was not used.
///
/// A request without the header is not an error (there is nothing to parse). Allocates nothing.
///
/// ```
/// use admit::signal::queue::header::HeaderError;
///
/// let err = HeaderError::Invalid; // `t=1.7e9`: an exponent is no stamp
/// assert_eq!(err.as_str(), "invalid");
/// assert_eq!(err.to_string(), "request-start header is not a numeric timestamp");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderError {
    /// The header holds no stamp: its value is empty, or only spaces, tabs and commas.
    Empty,
    /// A stamp is not a number of the accepted form: digits, an optional `.` and fraction,
    /// optionally after `t=`, followed by nothing or a space or tab. Signs, exponents, units
    /// and dates are invalid, as is an ALB trace id without a `Self=` or `Root=` field of `1-`
    /// and eight hex digits.
    Invalid,
    /// A stamp is earlier than 2000-01-01 UTC in every unit (under 946 684 800), so it is no
    /// Unix time.
    Implausible,
    /// A stamp has more than 19 significant digits, or is later than `u64::MAX` ns (2554).
    Overflow,
    /// The stamp is more than `max_future` ahead of the service's clock.
    FromFuture,
    /// The stamp is more than `max_age` behind the service's clock.
    TooOld,
}

impl HeaderError {
    /// Every error, in the order of their declaration.
    pub const ALL: [HeaderError; 6] = [
        HeaderError::Empty,
        HeaderError::Invalid,
        HeaderError::Implausible,
        HeaderError::Overflow,
        HeaderError::FromFuture,
        HeaderError::TooOld,
    ];

    /// A short name for logs and labels: `empty`, `invalid`, `implausible`, `overflow`,
    /// `from-future` or `too-old`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            HeaderError::Empty => "empty",
            HeaderError::Invalid => "invalid",
            HeaderError::Implausible => "implausible",
            HeaderError::Overflow => "overflow",
            HeaderError::FromFuture => "from-future",
            HeaderError::TooOld => "too-old",
        }
    }
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeaderError::Empty => "request-start header holds no timestamp",
            HeaderError::Invalid => "request-start header is not a numeric timestamp",
            HeaderError::Implausible => "request-start timestamp is before 2000-01-01",
            HeaderError::Overflow => "request-start timestamp is out of range",
            HeaderError::FromFuture => {
                "request-start timestamp is further ahead of the clock than `max_future`"
            }
            HeaderError::TooOld => "request-start timestamp is older than `max_age`",
        })
    }
}

impl Error for HeaderError {}
