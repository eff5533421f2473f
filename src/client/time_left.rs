//! The time a request has left, as its headers carry it: `grpc-timeout` on a gRPC call,
//! [`TIMEOUT_HEADER`] on an HTTP request.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::middleware::{TIMEOUT_HEADER, parse_grpc_timeout, parse_ms};

const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The headers' names, parsed once: inserting by a `&str` copies a custom name each time.
static GRPC_TIMEOUT_NAME: HeaderName = HeaderName::from_static(GRPC_TIMEOUT);
static TIMEOUT_NAME: HeaderName = HeaderName::from_static(TIMEOUT_HEADER);

/// The time left `headers` carry: the lower of their `grpc-timeout` and [`TIMEOUT_HEADER`].
pub(super) fn carried(headers: &HeaderMap) -> Option<Duration> {
    let grpc = headers
        .get(GRPC_TIMEOUT)
        .and_then(|value| parse_grpc_timeout(value.as_bytes()));
    let http = headers
        .get(TIMEOUT_HEADER)
        .and_then(|value| parse_ms(value.as_bytes()));
    grpc.into_iter().chain(http).min()
}

/// Writes `left` onto a request's headers: as `grpc-timeout` on a gRPC call (its content type
/// is `application/grpc`, as tonic sets it), as [`TIMEOUT_HEADER`] in whole ms otherwise. Each
/// rounds down, so a request never claims more time than it has.
pub(super) fn write(headers: &mut HeaderMap, left: Duration) {
    if is_grpc(headers) {
        headers.insert(GRPC_TIMEOUT_NAME.clone(), grpc_timeout(left));
    } else {
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        // At most 12 digits, as the reader takes.
        headers.insert(TIMEOUT_NAME.clone(), number(ms.min(999_999_999_999), None));
    }
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/grpc"))
}

/// gRPC's `TimeoutValue TimeoutUnit`: at most 8 digits, in the finest unit they fit.
fn grpc_timeout(left: Duration) -> HeaderValue {
    const MOST: u128 = 99_999_999;
    let nanos = left.as_nanos();
    let (count, unit) = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60_000_000_000, b'M'),
        (3_600_000_000_000, b'H'),
    ]
    .into_iter()
    .map(|(per, unit)| (nanos / per, unit))
    .find(|&(count, _)| count <= MOST)
    .unwrap_or((MOST, b'H'));
    number(count as u64, Some(unit))
}

/// `count` in decimal, then `unit` if any: at most 12 digits, written on the stack and copied
/// once into the value.
fn number(count: u64, unit: Option<u8>) -> HeaderValue {
    let mut text = [0u8; 13];
    let digits = count.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut rest = count;
    for place in (0..digits).rev() {
        text[place] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let mut len = digits;
    if let Some(unit) = unit {
        text[len] = unit;
        len += 1;
    }
    HeaderValue::from_bytes(&text[..len]).expect("digits and a letter")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grpc(left: Duration) -> String {
        grpc_timeout(left).to_str().unwrap().to_owned()
    }

    #[test]
    fn grpc_timeouts_take_the_finest_unit_and_round_down() {
        assert_eq!(grpc(Duration::ZERO), "0n");
        assert_eq!(grpc(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(grpc(Duration::from_nanos(100_000_001)), "100000u");
        assert_eq!(grpc(Duration::from_millis(250)), "250000u");
        assert_eq!(grpc(Duration::from_secs(1000)), "1000000m");
        assert_eq!(grpc(Duration::from_secs(200_000)), "200000S");
        assert_eq!(grpc(Duration::from_secs(100_000_000 * 60)), "1666666H");
        assert_eq!(grpc(Duration::MAX), "99999999H");
        for left in [1, 999, 123_456_789, 98_765_432_100, 7_200_000_000_000] {
            let left = Duration::from_nanos(left);
            let read = parse_grpc_timeout(grpc(left).as_bytes()).unwrap();
            assert!(
                read <= left && read * 1001 / 1000 >= left,
                "{left:?} {read:?}"
            );
        }
    }

    #[test]
    fn grpc_calls_get_grpc_timeout_and_http_requests_the_ms_header() {
        let mut call = HeaderMap::new();
        call.insert(
            header::CONTENT_TYPE,
            "application/grpc+proto".parse().unwrap(),
        );
        write(&mut call, Duration::from_millis(40));
        assert_eq!(call[GRPC_TIMEOUT], "40000000n");
        assert!(!call.contains_key(TIMEOUT_HEADER));
        let mut request = HeaderMap::new();
        write(&mut request, Duration::from_micros(40_999));
        assert_eq!(request[TIMEOUT_HEADER], "40");
        write(&mut request, Duration::MAX);
        assert_eq!(request[TIMEOUT_HEADER], "999999999999");
        assert_eq!(
            carried(&request),
            Some(Duration::from_millis(999_999_999_999))
        );
        request.insert(GRPC_TIMEOUT, "3S".parse().unwrap());
        assert_eq!(carried(&request), Some(Duration::from_secs(3)));
        assert_eq!(carried(&HeaderMap::new()), None);
    }
}
