//! The request-start header parser: every parser vector of the queue reference (§10.1), the
//! AWS ALB trace ids, the configuration's defaults, and properties over arbitrary input.
//! (`tests/queue_header.rs` reads the header through `RequestStart` and counts its allocations.)

use proptest::prelude::*;

use super::*;
use crate::signal::queue::header::{X_QUEUE_START, X_REQUEST_START};

/// One header line's queue time.
fn parse_request_start(
    value: &[u8],
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    stamp_age([value], now_unix_ns, config)
}

/// Several header lines' queue time.
fn parse_request_start_values<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    stamp_age(values, now_unix_ns, config)
}

/// One ALB trace id's queue time, with `config`'s bounds.
fn parse_amzn_trace_id(
    value: &[u8],
    now_unix_ns: u64,
    config: &HeaderConfig,
) -> Result<i64, HeaderError> {
    stamp_age([value], now_unix_ns, &config.clone().with_alb(true))
}

/// The vectors' wall clock: 1 700 000 000.5 s.
const NOW: u64 = 1_700_000_000_500_000_000;
const MS: i64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
/// 2000-01-01 UTC.
const C: u64 = 946_684_800;

fn parse(value: &str) -> Result<i64, HeaderError> {
    parse_request_start(value.as_bytes(), NOW, &HeaderConfig::default())
}

fn parse_picking(value: &str, pick: Pick) -> Result<i64, HeaderError> {
    parse_request_start(
        value.as_bytes(),
        NOW,
        &HeaderConfig::default().with_pick(pick),
    )
}

#[test]
fn reference_values_give_their_queue_time() {
    // (value, start_ns); raw = NOW − start_ns. The unit shows in how start_ns is made.
    let vectors: &[(&str, u64, i64)] = &[
        ("t=1700000000.123", 1_700_000_000_123_000_000, 377_000_000),
        ("1700000000.123", 1_700_000_000_123_000_000, 377_000_000),
        ("1700000000123", 1_700_000_000_123_000_000, 377_000_000),
        ("t=1700000000123", 1_700_000_000_123_000_000, 377_000_000),
        ("0001700000000123", 1_700_000_000_123_000_000, 377_000_000),
        ("t=1700000000123456", 1_700_000_000_123_456_000, 376_544_000),
        (
            "t=1700000000123456 D=3775428",
            1_700_000_000_123_456_000,
            376_544_000,
        ),
        (
            "1700000000123456789",
            1_700_000_000_123_456_789,
            376_543_211,
        ),
        ("t=1700000000", 1_700_000_000_000_000_000, 500_000_000),
        (" t=1700000000.1 ", 1_700_000_000_100_000_000, 400_000_000),
        (
            "t=1700000000.123456789123",
            1_700_000_000_123_456_789,
            376_543_211,
        ),
        ("t=1700000000123.5", 1_700_000_000_123_500_000, 376_500_000),
        (
            "servera t=1700000000.100, serverb t=1700000000.200",
            1_700_000_000_200_000_000,
            300_000_000,
        ),
        ("t=1700000000.9", 1_700_000_000_900_000_000, -400_000_000),
        ("t=1700000001.4", 1_700_000_001_400_000_000, -900_000_000),
        (
            "t=1699999940.500",
            1_699_999_940_500_000_000,
            60_000_000_000,
        ),
    ];
    for &(value, start_ns, raw) in vectors {
        assert_eq!(
            NOW as i128 - start_ns as i128,
            raw as i128,
            "{value:?}: table"
        );
        assert_eq!(parse(value), Ok(raw), "{value:?}");
    }
}

#[test]
fn the_unit_follows_the_magnitude() {
    // The same instant in s, ms, µs and ns; a wall clock equal to it gives 0.
    let now = 1_700_000_000_123_456_789;
    let config = HeaderConfig::default();
    for value in [
        "1700000000.123456789",
        "1700000000123.456789",
        "1700000000123456.789",
        "1700000000123456789",
        "1700000000123456789.999", // ns keep no fraction
    ] {
        assert_eq!(
            parse_request_start(value.as_bytes(), now, &config),
            Ok(0),
            "{value:?}"
        );
    }
}

#[test]
fn the_pick_chooses_among_several_stamps() {
    let value = "t=1700000000.200, t=1700000000.100";
    assert_eq!(parse_picking(value, Pick::Last), Ok(400_000_000));
    assert_eq!(parse_picking(value, Pick::First), Ok(300_000_000));
    assert_eq!(parse_picking(value, Pick::Earliest), Ok(400_000_000));
    let value = "t=1700000000.100, t=1700000000.300, t=1700000000.200";
    assert_eq!(parse_picking(value, Pick::Last), Ok(300_000_000));
    assert_eq!(parse_picking(value, Pick::First), Ok(400_000_000));
    assert_eq!(parse_picking(value, Pick::Earliest), Ok(400_000_000));
    assert_eq!(Pick::default(), Pick::Last);
}

#[test]
fn every_stamp_must_parse_but_only_the_picked_one_is_bounded() {
    for pick in [Pick::Last, Pick::First, Pick::Earliest] {
        assert_eq!(
            parse_picking("t=1700000000.100, abc", pick),
            Err(HeaderError::Invalid)
        );
        assert_eq!(
            parse_picking("123, t=1700000000.100", pick),
            Err(HeaderError::Implausible),
        );
        assert_eq!(
            parse_picking("abc, 123", pick),
            Err(HeaderError::Invalid),
            "the first failure"
        );
    }
    // A stale client stamp before the proxy's: only the picked one is checked against the clock.
    let value = "t=946684800, t=1700000000.100";
    assert_eq!(parse_picking(value, Pick::Last), Ok(400_000_000));
    assert_eq!(parse_picking(value, Pick::First), Err(HeaderError::TooOld));
    assert_eq!(
        parse_picking(value, Pick::Earliest),
        Err(HeaderError::TooOld)
    );
}

#[test]
fn empty_list_elements_are_skipped() {
    assert_eq!(parse(",, t=1700000000.100 ,\t,"), Ok(400_000_000));
    assert_eq!(
        parse_request_start_values(
            [&b""[..], b" t=1700000000.100", b" "],
            NOW,
            &HeaderConfig::default()
        ),
        Ok(400_000_000)
    );
}

#[test]
fn reference_errors() {
    let vectors: &[(&str, HeaderError)] = &[
        ("", HeaderError::Empty),
        (" \t", HeaderError::Empty),
        (" , ,", HeaderError::Empty),
        ("t=", HeaderError::Invalid),
        ("abc", HeaderError::Invalid),
        ("t=-1700000000", HeaderError::Invalid),
        ("t=+1700000000", HeaderError::Invalid),
        ("t=1.7e9", HeaderError::Invalid),
        ("t=1700000000.123.4", HeaderError::Invalid),
        ("t=1700000000ms", HeaderError::Invalid),
        ("2023-11-14T22:13:20.123Z", HeaderError::Invalid),
        ("123", HeaderError::Implausible),
        ("946684799", HeaderError::Implausible),
        ("946684800", HeaderError::TooOld),
        ("t=1699999940.499", HeaderError::TooOld),
        ("t=1700000002", HeaderError::FromFuture),
        ("99999999999999999999", HeaderError::Overflow),
        ("t=99999999999", HeaderError::Overflow),
    ];
    for &(value, error) in vectors {
        assert_eq!(parse(value), Err(error), "{value:?}");
    }
}

#[test]
fn the_bounds_are_inclusive_and_configurable() {
    let config = HeaderConfig::default();
    let start = NOW / SEC; // whole seconds: NOW is 0.5 s past it
    let at = |now: u64| parse_request_start(start.to_string().as_bytes(), now, &config);
    assert_eq!(at(start * SEC + 60 * SEC), Ok(60 * SEC as i64));
    assert_eq!(at(start * SEC + 60 * SEC + 1), Err(HeaderError::TooOld));
    assert_eq!(at(start * SEC - SEC), Ok(-(SEC as i64)));
    assert_eq!(at(start * SEC - SEC - 1), Err(HeaderError::FromFuture));

    let strict = HeaderConfig::default()
        .with_max_age(Duration::from_millis(100))
        .with_max_future(Duration::ZERO);
    let value = b"t=1700000000.400";
    assert_eq!(parse_request_start(value, NOW, &strict), Ok(100 * MS));
    assert_eq!(
        parse_request_start(value, NOW + 1, &strict),
        Err(HeaderError::TooOld)
    );
    assert_eq!(
        parse_request_start(value, NOW - 100 * MS as u64, &strict),
        Ok(0)
    );
    assert_eq!(
        parse_request_start(value, NOW - 100 * MS as u64 - 1, &strict),
        Err(HeaderError::FromFuture)
    );
}

#[test]
fn several_header_lines_read_as_one_list() {
    let lines: [&[u8]; 2] = [b"t=1700000000.100", b"t=1700000000.300, t=1700000000.200"];
    for (pick, raw) in [
        (Pick::Last, 300 * MS),
        (Pick::First, 400 * MS),
        (Pick::Earliest, 400 * MS),
    ] {
        let config = HeaderConfig::default().with_pick(pick);
        assert_eq!(parse_request_start_values(lines, NOW, &config), Ok(raw));
    }
    let none: [&[u8]; 0] = [];
    assert_eq!(
        parse_request_start_values(none, NOW, &HeaderConfig::default()),
        Err(HeaderError::Empty)
    );
}

#[test]
fn alb_trace_ids_give_whole_seconds() {
    let config = HeaderConfig::default().with_alb(true);
    let alb = |value: &str| parse_amzn_trace_id(value.as_bytes(), NOW, &config);
    assert_eq!(
        alb("Root=1-6553f100-abcdef012345678912345678"),
        Ok(500 * MS)
    );
    assert_eq!(
        alb("Self=1-6553f0ff-12456789abcdef012345678;Root=1-6553f100-abcdef012345678912345678"),
        Ok(1500 * MS)
    );
    assert_eq!(
        alb("Root=1-6553f100-abcdef012345678912345678;Self=1-6553f0ff-12456789abcdef012345678"),
        Ok(1500 * MS),
        "Self= wherever it is"
    );
    assert_eq!(
        alb("Root=1-6553F100-abcdef012345678912345678; Sampled=1"),
        Ok(500 * MS)
    );
    assert_eq!(alb("Root=1-6553f100"), Ok(500 * MS));
    assert_eq!(
        alb("Root=1-6553f1zz-abcdef012345678912345678"),
        Err(HeaderError::Invalid)
    );
    for invalid in [
        "Sampled=1",
        "Root=2-6553f100-abcdef",
        "Root=1-6553f10-abcdef",
        "Root=1-6553f1000-abcdef",
        "Root=1-6553f100x",
        "Self=1-zz53f0ff-1;Root=1-6553f100-1",
        "root=1-6553f100-abcdef",
        "1700000000",
    ] {
        assert_eq!(alb(invalid), Err(HeaderError::Invalid), "{invalid:?}");
    }
    assert_eq!(alb(""), Err(HeaderError::Empty));
    assert_eq!(alb(" "), Err(HeaderError::Empty));
    assert_eq!(alb("Root=1-00000001-abcdef"), Err(HeaderError::Implausible));
    assert_eq!(alb("Root=1-6553f0c4-abcdef"), Err(HeaderError::TooOld)); // 60 s before
    assert_eq!(alb("Root=1-6553f0c5-abcdef"), Ok(59_500 * MS));
    assert_eq!(alb("Root=1-6553f102-abcdef"), Err(HeaderError::FromFuture));
    assert_eq!(alb("Root=1-6553f101-abcdef"), Ok(-500 * MS));
}

#[test]
fn the_config_defaults_and_lowercases_its_name() {
    let config = HeaderConfig::default();
    assert_eq!(config, HeaderConfig::new());
    assert_eq!(config.name, X_REQUEST_START);
    assert_eq!(config.header(), X_REQUEST_START);
    assert_eq!(config.pick, Pick::Last);
    assert_eq!(config.max_future, Duration::from_secs(1));
    assert_eq!(config.max_age, Duration::from_secs(60));
    assert!(!config.alb);
    assert_eq!(
        config.clone().with_name("X-Queue-Start").header(),
        X_QUEUE_START
    );
    assert_eq!(
        config
            .clone()
            .with_name(String::from("X-Request-Start"))
            .name,
        X_REQUEST_START
    );
    let alb = config.with_name("X-Queue-Start").with_alb(true);
    assert!(alb.alb);
    assert_eq!(
        alb.header(),
        X_AMZN_TRACE_ID,
        "ALB's header, whatever the name"
    );
}

#[test]
fn errors_say_what_went_wrong() {
    let all = [
        (HeaderError::Empty, "empty"),
        (HeaderError::Invalid, "invalid"),
        (HeaderError::Implausible, "implausible"),
        (HeaderError::Overflow, "overflow"),
        (HeaderError::FromFuture, "from-future"),
        (HeaderError::TooOld, "too-old"),
    ];
    for (error, name) in all {
        assert_eq!(error.as_str(), name);
        assert!(error.to_string().starts_with("request-start "), "{error}");
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(error);
        assert!(boxed.source().is_none());
    }
}

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

// --- Properties ---

/// Bytes that are often almost a stamp.
fn stampish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        "[ \t,.t=0-9D;a-fSelfRoot-]{0,48}".prop_map(String::into_bytes),
        "(t=)?[0-9]{0,22}(\\.[0-9]{0,14})?( D=[0-9]+)?(, ?(t=)?[0-9]{9,20})?"
            .prop_map(String::into_bytes),
    ]
}

fn config() -> impl Strategy<Value = HeaderConfig> {
    (
        prop_oneof![Just(Pick::Last), Just(Pick::First), Just(Pick::Earliest)],
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(pick, future, age)| {
            HeaderConfig::default()
                .with_pick(pick)
                .with_max_future(Duration::from_nanos(future))
                .with_max_age(Duration::from_nanos(age))
        })
}

/// A parse that must be a queue time within `config`'s bounds (saturated at `i64::MAX` ns), or
/// one of the errors.
fn within_bounds(
    parsed: Result<i64, HeaderError>,
    config: &HeaderConfig,
) -> Result<(), TestCaseError> {
    let bound = |d: Duration| d.as_nanos().min(i64::MAX as u128) as i64;
    match parsed {
        Ok(raw) => {
            prop_assert!(
                raw >= -bound(config.max_future),
                "{raw} ahead of {config:?}"
            );
            prop_assert!(raw <= bound(config.max_age), "{raw} older than {config:?}");
        }
        Err(error) => prop_assert!(HeaderError::ALL.contains(&error), "{error:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn any_header_lines_parse_within_bounds_or_fail_typed(
        lines in proptest::collection::vec(prop_oneof![any::<Vec<u8>>(), stampish()], 0..6),
        now in prop_oneof![any::<u64>(), NOW - 120 * SEC..NOW + 120 * SEC],
        config in prop_oneof![config(), Just(HeaderConfig::default())],
    ) {
        for line in &lines {
            within_bounds(parse_request_start(line, now, &config), &config)?;
        }
        let parsed = parse_request_start_values(lines.iter().map(Vec::as_slice), now, &config);
        within_bounds(parsed, &config)?;
        // Empty exactly when no line holds more than spaces, tabs and commas.
        let blank = lines.iter().flatten().all(|b| matches!(b, b' ' | b'\t' | b','));
        prop_assert_eq!(parsed == Err(HeaderError::Empty), blank);
    }

    #[test]
    fn parsing_is_total(
        value in stampish(),
        more in stampish(),
        now in any::<u64>(),
        config in config(),
    ) {
        // Never panics; any result is an Ok or one of the errors.
        let one = parse_request_start(&value, now, &config);
        let two = parse_request_start_values([&value[..], &more[..]], now, &config);
        let _ = parse_amzn_trace_id(&value, now, &config);
        if let Ok(raw) = one {
            prop_assert!(raw >= -(config.max_future.as_nanos().min(i64::MAX as u128) as i64));
            prop_assert!(raw as i128 <= config.max_age.as_nanos() as i128);
        }
        // Two lines are one list: the same as joining them with a comma.
        let mut joined = value.clone();
        joined.push(b',');
        joined.extend_from_slice(&more);
        prop_assert_eq!(two, parse_request_start(&joined, now, &config));
    }

    #[test]
    fn formatted_stamps_give_now_minus_start_exactly(
        start in C * SEC..u64::MAX / 4,
        unit in 0usize..4,
        frac_digits in 0usize..13,
        prefix in prop_oneof![Just(""), Just("t="), Just("x t="), Just("000")],
        suffix in prop_oneof![Just(""), Just(" D=3775428"), Just("\tz")],
        offset in -(SEC as i64)..=60 * SEC as i64,
    ) {
        // Format `start` in the unit with `frac_digits` digits of fraction (beyond the unit's
        // nanosecond precision the extra digits are arbitrary and ignored).
        let (unit_nanos, unit_digits) = [(SEC, 9), (1_000_000, 6), (1_000, 3), (1, 0)][unit];
        let int = start / unit_nanos;
        let kept = frac_digits.min(unit_digits);
        let scale = 10u64.pow((unit_digits - kept) as u32);
        let frac = (start % unit_nanos) / scale;
        let mut value = format!("{prefix}{int}");
        if frac_digits > 0 {
            value.push('.');
            if kept > 0 {
                value.push_str(&format!("{frac:0kept$}"));
            }
            value.push_str(&"7".repeat(frac_digits - kept));
        }
        value.push_str(suffix);
        let exact = int * unit_nanos + frac * scale;
        let now = exact.checked_add_signed(offset).unwrap();
        prop_assert_eq!(
            parse_request_start(value.as_bytes(), now, &HeaderConfig::default()),
            Ok(offset),
            "{}", value
        );
    }

    #[test]
    fn the_pick_is_the_last_first_or_earliest(
        starts in proptest::collection::vec(0..60 * SEC, 1..6),
    ) {
        let now = NOW;
        let stamps: Vec<String> = starts.iter().map(|age| format!("{}", now - age)).collect();
        let value = stamps.join(", ");
        for (pick, age) in [
            (Pick::Last, *starts.last().unwrap()),
            (Pick::First, starts[0]),
            (Pick::Earliest, *starts.iter().max().unwrap()),
        ] {
            let config = HeaderConfig::default().with_pick(pick);
            prop_assert_eq!(parse_request_start(value.as_bytes(), now, &config), Ok(age as i64));
        }
    }
}
