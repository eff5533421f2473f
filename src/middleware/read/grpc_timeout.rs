//! The time a gRPC call has left, from its `grpc-timeout` header.

use std::time::Duration;

use super::Inspect;
use crate::signal::Arrival;

/// Reads the time a gRPC call has left from its `grpc-timeout` header
/// ([`Arrival::with_time_left`]): a [`Bound`](crate::bound::Bound) refuses a call whose
/// deadline its service no longer fits in, rather than let it wait. A missing or malformed
/// header (the gRPC form is at most 8 digits and a unit: `H`, `M`, `S`, `m`, `u` or `n`)
/// leaves the time unknown.
///
/// ```
/// use admit::middleware::{GrpcTimeout, Inspect};
///
/// let call = http::Request::post("/pkg.Svc/Get").header("grpc-timeout", "250m").body(())?;
/// assert_eq!(GrpcTimeout.inspect(&call).time_left_nanos(), Some(250_000_000));
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrpcTimeout;

impl<B> Inspect<http::Request<B>> for GrpcTimeout {
    #[inline]
    fn inspect(&self, request: &http::Request<B>) -> Arrival {
        match request
            .headers()
            .get("grpc-timeout")
            .and_then(|value| parse(value.as_bytes()))
        {
            Some(left) => Arrival::new().with_time_left(left),
            None => Arrival::new(),
        }
    }
}

/// `TimeoutValue TimeoutUnit`: 1 to 8 ASCII digits, then one unit letter.
pub(crate) fn parse(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    // At most 99 999 999: no overflow below.
    let count = super::decimal(digits, 8)?;
    Some(match unit {
        b'H' => Duration::from_secs(count * 3600),
        b'M' => Duration::from_secs(count * 60),
        b'S' => Duration::from_secs(count),
        b'm' => Duration::from_millis(count),
        b'u' => Duration::from_micros(count),
        b'n' => Duration::from_nanos(count),
        _ => return None,
    })
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_unit_and_every_malformed_value() {
        assert_eq!(parse(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse(b"1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse(b"99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in [
            &b""[..],
            b"m",
            b"123456789m",
            b"12x",
            b"-1m",
            b"1.5S",
            b" 1S",
            b"1s",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
