//! The parser: a request-start header's stamps, or an ALB trace id, to the request's queue
//! time.

use std::time::Duration;

use super::{HeaderConfig, HeaderError, Pick, X_AMZN_TRACE_ID};

/// 2000-01-01T00:00:00Z in seconds since the Unix epoch: earlier stamps are implausible.
const CUTOFF_SECS: u64 = 946_684_800;
const NANOS_PER_SEC: u64 = 1_000_000_000;
/// The most significant digits a stamp may have: 19 digits of nanoseconds last until 2286.
const MAX_DIGITS: u32 = 19;

impl HeaderConfig {
    /// The header read, in ASCII lowercase: [`X_AMZN_TRACE_ID`] with ALB, else the name given.
    pub(crate) fn header(&self) -> &str {
        if self.alb {
            X_AMZN_TRACE_ID
        } else {
            &self.name
        }
    }
}

/// The queue time the request-start header lines `values` report: `now_unix_ns − start` in
/// ns, negative when the service's clock is behind the proxy's. `now_unix_ns` is the service's
/// wall clock in ns since the Unix epoch.
///
/// The lines are read as one comma-separated list (as `a, b` if the lines are `a` and `b`),
/// without joining them; each element is trimmed of spaces and tabs, and empty ones are
/// skipped (RFC 9110 §5.6.1). Every element must parse (the first that does not decides the
/// error), as a stamp or, with [`HeaderConfig::with_alb`], an ALB trace id; then
/// [`Pick`] chooses one, which must lie within `max_future` ahead and `max_age` behind
/// `now_unix_ns`.
///
/// # Errors
///
/// [`HeaderError`]: `Empty` without an element, `Invalid`, `Implausible` or `Overflow` for one
/// that does not parse, `FromFuture` or `TooOld` for a picked stamp out of bounds.
pub(crate) fn stamp_age<'a>(
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
            let start = if config.alb {
                parse_trace_id(element)?
            } else {
                parse_stamp(element)?
            };
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

/// The start in one trimmed, non-empty element of AWS ALB's `X-Amzn-Trace-Id`, in ns since the
/// Unix epoch, at one-second resolution: `;`-separated fields such as
/// `Self=1-6553f0ff-…;Root=1-6553f100-…`, of which `Self=` is read if there is one, else
/// `Root=`, whose value must start with `1-` and exactly eight hex digits.
fn parse_trace_id(element: &[u8]) -> Result<u64, HeaderError> {
    let (mut own, mut root) = (None, None);
    for field in element.split(|&b| b == b';') {
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
    Ok(secs * NANOS_PER_SEC)
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
#[path = "parse_tests.rs"]
mod tests;
