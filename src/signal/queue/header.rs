//! Reading a request's start time from the header a proxy stamped on it.
//!
//! A proxy in front of the service (nginx, HAProxy, Envoy, Heroku's router…) can stamp each
//! request with the wall-clock time it arrived, in `X-Request-Start` or `X-Queue-Start`. The
//! difference between that stamp and the service's own wall clock when it starts the request is
//! the time the request waited: in the proxy, on the network and in the service's accept and
//! run queues. [`parse_request_start`] computes it; [`SkewFloor`](super::floor::SkewFloor) then
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
//! [`Pick`] chooses one. AWS ALB stamps none; [`parse_amzn_trace_id`] reads the second in its
//! `X-Amzn-Trace-Id` instead.
//!
//! A request without the header is not an error: the caller has no value to parse and no
//! queue time to record (`None`).
//!
//! # Rules
//!
//! - **Units.** The digit count decides (s ≤ 10, ms 13, µs 16, ns 19).
//! - **Clocks.** The stamp is another machine's wall clock: pass the service's wall clock
//!   (`SystemTime`) as `now_unix_ns`, and the monotonic clock everywhere else. Stamps up to
//!   `max_future` (1 s) ahead are accepted, so that [`SkewFloor`](super::floor::SkewFloor) can
//!   absorb the skew; the cut-off for implausible stamps is 2000-01-01 UTC, never local time.
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
//!
//! # Example
//!
//! ```
//! use admit::signal::queue::header::{HeaderConfig, HeaderError, parse_request_start};
//!
//! // The service's wall clock, in ns since the Unix epoch: in production,
//! // `SystemTime::now().duration_since(UNIX_EPOCH)`.
//! let now = 1_700_000_000_500_000_000;
//! let config = HeaderConfig::default();
//! assert_eq!(parse_request_start(b"t=1700000000.123", now, &config), Ok(377_000_000));
//! assert_eq!(parse_request_start(b"1700000000123", now, &config), Ok(377_000_000));
//! assert_eq!(parse_request_start(b"t=1700000002", now, &config), Err(HeaderError::FromFuture));
//! ```

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// The header most proxies stamp, lowercase: `x-request-start`.
pub const X_REQUEST_START: &str = "x-request-start";
/// The common alternative, lowercase: `x-queue-start`.
pub const X_QUEUE_START: &str = "x-queue-start";
/// The header AWS ALB adds, lowercase: `x-amzn-trace-id` (see [`parse_amzn_trace_id`]).
pub const X_AMZN_TRACE_ID: &str = "x-amzn-trace-id";

/// 2000-01-01T00:00:00Z in seconds since the Unix epoch: earlier stamps are implausible.
const CUTOFF_SECS: u64 = 946_684_800;
const NANOS_PER_SEC: u64 = 1_000_000_000;
/// The most significant digits a stamp may have: 19 digits of nanoseconds last until 2286.
const MAX_DIGITS: u32 = 19;

/// Which stamp counts when a header holds several (`a, b`, or several header lines).
///
/// Every stamp must parse in any case; the pick only decides which one is measured.
///
/// ```
/// use admit::signal::queue::header::{HeaderConfig, Pick, parse_request_start};
///
/// let now = 1_700_000_000_500_000_000;
/// let value = b"t=1700000000.200, t=1700000000.100";
/// let config = HeaderConfig::default();
/// assert_eq!(parse_request_start(value, now, &config), Ok(400_000_000));
/// let config = HeaderConfig::default().with_pick(Pick::First);
/// assert_eq!(parse_request_start(value, now, &config), Ok(300_000_000));
/// ```
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
/// plausible.
///
/// ```
/// use std::time::Duration;
/// use admit::signal::queue::header::{HeaderConfig, Pick};
///
/// let config = HeaderConfig::new()
///     .with_name("X-Queue-Start")
///     .with_pick(Pick::First)
///     .with_max_age(Duration::from_secs(30));
/// assert_eq!(config.name(), "x-queue-start");
/// assert_eq!(config.max_future(), Duration::from_secs(1));
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

    /// Reads AWS ALB's `X-Amzn-Trace-Id` with [`parse_amzn_trace_id`] instead of the named
    /// header (default `false`); the parsers themselves ignore this flag, it tells their caller
    /// which one to use. ALB stamps have a resolution of one second: fit for alarms, never for
    /// a queue-delay gate.
    pub const fn with_alb(mut self, alb: bool) -> Self {
        self.alb = alb;
        self
    }

    /// The header's name, in ASCII lowercase.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which of several stamps counts.
    pub const fn pick(&self) -> Pick {
        self.pick
    }

    /// How far ahead of the service's clock a stamp may be.
    pub const fn max_future(&self) -> Duration {
        self.max_future
    }

    /// How far behind the service's clock a stamp may be.
    pub const fn max_age(&self) -> Duration {
        self.max_age
    }

    /// Whether the stamp is read from AWS ALB's `X-Amzn-Trace-Id`.
    pub const fn alb(&self) -> bool {
        self.alb
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
/// use admit::signal::queue::header::{HeaderConfig, HeaderError, parse_request_start};
///
/// let err = parse_request_start(b"t=1.7e9", 0, &HeaderConfig::default()).unwrap_err();
/// assert_eq!(err, HeaderError::Invalid);
/// assert_eq!(err.as_str(), "invalid");
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

/// The queue time a request-start header value reports: `now_unix_ns − start` in ns,
/// negative when the service's clock is behind the proxy's.
///
/// `value` is the header's value as bytes (`HeaderValue::as_bytes`); `now_unix_ns` the
/// service's wall clock in ns since the Unix epoch. The value is split on `,` and each stamp
/// trimmed of spaces and tabs; empty list elements are skipped (RFC 9110 §5.6.1). Every stamp
/// must parse (the first that does not decides the error), then [`HeaderConfig::pick`] chooses
/// one, which must lie within `max_future` ahead and `max_age` behind `now_unix_ns`.
///
/// Integer arithmetic only, so nanosecond stamps stay exact; no allocation; never panics.
///
/// # Errors
///
/// [`HeaderError`]: `Empty` without a stamp, `Invalid`, `Implausible` or `Overflow` for a stamp
/// that does not parse, `FromFuture` or `TooOld` for a picked stamp out of bounds.
///
/// # Example
///
/// ```
/// use admit::signal::queue::header::{HeaderConfig, HeaderError, parse_request_start};
///
/// let now = 1_700_000_000_500_000_000;
/// let config = HeaderConfig::default();
/// // Apache's microseconds, with its `D=` after a space.
/// assert_eq!(parse_request_start(b"t=1700000000123456 D=3775428", now, &config), Ok(376_544_000));
/// // The service's clock 400 ms behind the proxy's.
/// assert_eq!(parse_request_start(b"t=1700000000.9", now, &config), Ok(-400_000_000));
/// assert_eq!(parse_request_start(b"946684799", now, &config), Err(HeaderError::Implausible));
/// ```
pub fn parse_request_start(
    value: &[u8],
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    parse_request_start_values([value], now_unix_ns, config)
}

/// [`parse_request_start`] over several header lines, read as one comma-separated list (as
/// `a, b` if the lines are `a` and `b`), without joining them.
///
/// # Errors
///
/// As [`parse_request_start`].
///
/// # Example
///
/// ```
/// use admit::signal::queue::header::{HeaderConfig, parse_request_start_values};
///
/// let now = 1_700_000_000_500_000_000;
/// let lines: [&[u8]; 2] = [b"t=1700000000.100", b"t=1700000000.200"];
/// assert_eq!(
///     parse_request_start_values(lines, now, &HeaderConfig::default()),
///     Ok(300_000_000),
/// );
/// ```
pub fn parse_request_start_values<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    let mut picked: Option<u64> = None;
    for value in values {
        for element in value.split(|&b| b == b',') {
            let element = trim(element);
            if element.is_empty() {
                continue;
            }
            let start = parse_stamp(element)?;
            picked = Some(match (config.pick, picked) {
                (Pick::First, Some(first)) => first,
                (Pick::Earliest, Some(earliest)) => earliest.min(start),
                _ => start,
            });
        }
    }
    let start = picked.ok_or(HeaderError::Empty)?;
    queue_time(now_unix_ns, start, config)
}

/// The queue time AWS ALB's `X-Amzn-Trace-Id` value reports, at one-second resolution:
/// `now_unix_ns − start` in ns, like [`parse_request_start`].
///
/// The value is `;`-separated fields such as `Self=1-6553f0ff-…;Root=1-6553f100-…`. The `Self=`
/// field is read if there is one (the ALB nearest the service), else `Root=`; its value must
/// start with `1-` and exactly eight hex digits, the Unix time in seconds at which the ALB
/// received the request. Seconds make the result up to 1 s too long, so use it for alarms and
/// dashboards only, never to gate requests on queue delay.
///
/// # Errors
///
/// [`HeaderError`]: `Empty` for an empty value, `Invalid` without a well-formed `Self=` or
/// `Root=` field, `Implausible` before 2000, `FromFuture` or `TooOld` out of bounds.
///
/// # Example
///
/// ```
/// use admit::signal::queue::header::{HeaderConfig, parse_amzn_trace_id};
///
/// let now = 1_700_000_000_500_000_000;
/// let config = HeaderConfig::default().with_alb(true);
/// let value = b"Root=1-6553f100-abcdef012345678912345678";
/// assert_eq!(parse_amzn_trace_id(value, now, &config), Ok(500_000_000));
/// ```
pub fn parse_amzn_trace_id(
    value: &[u8],
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    if trim(value).is_empty() {
        return Err(HeaderError::Empty);
    }
    let (mut own, mut root) = (None, None);
    for field in value.split(|&b| b == b';') {
        let field = trim(field);
        if let Some(id) = field.strip_prefix(b"Self=") {
            own = own.or(Some(id));
        } else if let Some(id) = field.strip_prefix(b"Root=") {
            root = root.or(Some(id));
        }
    }
    let id = own.or(root).ok_or(HeaderError::Invalid)?;
    let hex = id.strip_prefix(b"1-").ok_or(HeaderError::Invalid)?;
    if hex.len() < 8 || hex.get(8).is_some_and(|&b| b != b'-') {
        return Err(HeaderError::Invalid);
    }
    let mut secs = 0u64;
    for &b in &hex[..8] {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return Err(HeaderError::Invalid),
        };
        secs = secs * 16 + u64::from(digit);
    }
    if secs < CUTOFF_SECS {
        return Err(HeaderError::Implausible);
    }
    // Eight hex digits are below 2³², so this stays far below `u64::MAX`.
    queue_time(now_unix_ns, secs * NANOS_PER_SEC, config)
}

/// `now − start` as `i64`, within the configured bounds (both inclusive).
fn queue_time(now: u64, start: u64, config: &HeaderConfig) -> Result<i64, HeaderError> {
    if now >= start {
        let behind = now - start;
        if behind > bound_nanos(config.max_age) {
            return Err(HeaderError::TooOld);
        }
        // The bound is at most `i64::MAX`.
        Ok(behind as i64)
    } else {
        let ahead = start - now;
        if ahead > bound_nanos(config.max_future) {
            return Err(HeaderError::FromFuture);
        }
        Ok(-(ahead as i64))
    }
}

/// A bound in ns, at most `i64::MAX` so that the queue time fits an `i64`.
fn bound_nanos(bound: Duration) -> u64 {
    const MAX: u64 = i64::MAX as u64;
    u64::try_from(bound.as_nanos()).map_or(MAX, |nanos| nanos.min(MAX))
}

/// The stamp in one trimmed, non-empty list element, in ns since the Unix epoch.
fn parse_stamp(element: &[u8]) -> Result<u64, HeaderError> {
    let stamp = match element.windows(2).position(|pair| pair == b"t=") {
        Some(at) => &element[at + 2..],
        None => element,
    };

    // The integer part: at least one digit; its significant digits kept while they fit.
    let mut int = 0u64;
    let mut significant = 0u32;
    let int_len = stamp.iter().take_while(|b| b.is_ascii_digit()).count();
    if int_len == 0 {
        return Err(HeaderError::Invalid);
    }
    for &b in &stamp[..int_len] {
        if significant > 0 || b != b'0' {
            significant += 1;
            if significant <= MAX_DIGITS {
                // At most 19 digits: below 10¹⁹ < u64::MAX.
                int = int * 10 + u64::from(b - b'0');
            }
        }
    }

    // An optional fraction of any length, then nothing or a space or tab.
    let mut rest = &stamp[int_len..];
    let mut frac: &[u8] = &[];
    if let Some(after_dot) = rest.strip_prefix(b".") {
        let frac_len = after_dot.iter().take_while(|b| b.is_ascii_digit()).count();
        frac = &after_dot[..frac_len];
        rest = &after_dot[frac_len..];
    }
    if rest.first().is_some_and(|&b| b != b' ' && b != b'\t') {
        return Err(HeaderError::Invalid);
    }
    if significant > MAX_DIGITS {
        return Err(HeaderError::Overflow);
    }

    // The unit by magnitude, and the fraction's digits it keeps.
    let (unit_nanos, frac_digits) = if int >= CUTOFF_SECS * NANOS_PER_SEC {
        (1, 0)
    } else if int >= CUTOFF_SECS * 1_000_000 {
        (1_000, 3)
    } else if int >= CUTOFF_SECS * 1_000 {
        (1_000_000, 6)
    } else if int >= CUTOFF_SECS {
        (NANOS_PER_SEC, 9)
    } else {
        return Err(HeaderError::Implausible);
    };
    let mut frac_nanos = 0u64;
    for i in 0..frac_digits {
        let digit = frac.get(i).map_or(0, |&b| u64::from(b - b'0'));
        frac_nanos = frac_nanos * 10 + digit;
    }
    int.checked_mul(unit_nanos)
        .and_then(|nanos| nanos.checked_add(frac_nanos))
        .ok_or(HeaderError::Overflow)
}

/// `bytes` without leading and trailing spaces and tabs.
fn trim(bytes: &[u8]) -> &[u8] {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !blank(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_only_spaces_and_tabs() {
        assert_eq!(trim(b" \t a b\t "), b"a b");
        assert_eq!(trim(b" \t "), b"");
        assert_eq!(trim(b""), b"");
        assert_eq!(trim(b"\na\r"), b"\na\r");
    }

    #[test]
    fn stamps_take_the_unit_of_their_magnitude() {
        assert_eq!(parse_stamp(b"946684800"), Ok(946_684_800 * NANOS_PER_SEC));
        assert_eq!(
            parse_stamp(b"946684800000"),
            Ok(946_684_800 * NANOS_PER_SEC)
        );
        // Just under the millisecond range: seconds, far beyond `u64::MAX` ns.
        assert_eq!(parse_stamp(b"946684799999"), Err(HeaderError::Overflow));
        assert_eq!(
            parse_stamp(b"946684800000000000"),
            Ok(946_684_800_000_000_000)
        );
        assert_eq!(
            parse_stamp(b"18446744073709551615"),
            Err(HeaderError::Overflow)
        );
        assert_eq!(
            parse_stamp(b"9999999999999999999"),
            Ok(9_999_999_999_999_999_999)
        );
    }

    #[test]
    fn bounds_saturate_at_i64_max() {
        assert_eq!(bound_nanos(Duration::MAX), i64::MAX as u64);
        assert_eq!(bound_nanos(Duration::from_nanos(7)), 7);
        let config = HeaderConfig::new()
            .with_max_age(Duration::MAX)
            .with_max_future(Duration::MAX);
        assert_eq!(queue_time(u64::MAX, 0, &config), Err(HeaderError::TooOld));
        assert_eq!(
            queue_time(0, u64::MAX, &config),
            Err(HeaderError::FromFuture)
        );
        assert_eq!(queue_time(i64::MAX as u64, 0, &config), Ok(i64::MAX));
        assert_eq!(queue_time(0, i64::MAX as u64, &config), Ok(-i64::MAX));
    }
}
