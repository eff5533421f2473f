//! The request-start header read by a layer's `RequestStart`: several header lines as one list,
//! the stamp the configuration picks, AWS ALB's trace id instead of the named header, and no
//! allocation per request. (The parser's vectors and properties are unit tests in
//! `src/signal/queue/header/parse_tests.rs`; the floor is tested in `src/signal/queue/floor.rs` and
//! through the shedder in `tests/queue_skew.rs`.)

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::time::Duration;

use admit::clock::ManualClock;
use admit::middleware::{Inspect, RequestStart};
use admit::signal::queue::header::{
    HeaderConfig, HeaderError, Pick, X_AMZN_TRACE_ID, X_QUEUE_START, X_REQUEST_START,
};
use counting_alloc::allocations_during;

/// The vectors' wall clock: 1 700 000 000.5 s.
const NOW: u64 = 1_700_000_000_500_000_000;
const MS: i64 = 1_000_000;

/// A request with the header lines `lines`, each `(name, value)`.
fn request(lines: &[(&str, &str)]) -> http::Request<()> {
    let mut request = http::Request::get("/");
    for &(name, value) in lines {
        request = request.header(name, value);
    }
    request.body(()).unwrap()
}

/// A reader of `config` on a wall clock at [`NOW`].
fn reader(config: HeaderConfig) -> (ManualClock, RequestStart<ManualClock>) {
    let wall = ManualClock::new();
    wall.set(Duration::from_nanos(NOW));
    let start = RequestStart::new(config).unwrap().wall_clock(wall.clone());
    (wall, start)
}

fn age(
    start: &RequestStart<ManualClock>,
    request: &http::Request<()>,
) -> Option<Result<i64, HeaderError>> {
    start.inspect(request).stamp_age()
}

#[test]
fn several_header_lines_read_as_one_list() {
    let stamped = request(&[
        (X_REQUEST_START, "t=1700000000.100"),
        (X_REQUEST_START, "t=1700000000.300, t=1700000000.200"),
    ]);
    for (pick, raw) in [
        (Pick::Last, 300 * MS),
        (Pick::First, 400 * MS),
        (Pick::Earliest, 400 * MS),
    ] {
        let (_, start) = reader(HeaderConfig::default().with_pick(pick));
        assert_eq!(age(&start, &stamped), Some(Ok(raw)), "{pick:?}");
    }
    let (_, start) = reader(HeaderConfig::default());
    assert_eq!(age(&start, &request(&[])), None, "no header, no stamp");
    assert_eq!(
        age(&start, &request(&[(X_REQUEST_START, " , ")])),
        Some(Err(HeaderError::Empty))
    );
    assert_eq!(
        age(
            &start,
            &request(&[
                (X_REQUEST_START, "t=1700000000.1"),
                (X_REQUEST_START, "abc")
            ])
        ),
        Some(Err(HeaderError::Invalid)),
        "every line must parse"
    );
}

#[test]
fn the_configured_header_is_the_one_read() {
    let lines = [
        (X_REQUEST_START, "t=1700000000.100"),
        (X_QUEUE_START, "t=1700000000.200"),
    ];
    let (_, start) = reader(HeaderConfig::default().with_name("X-Queue-Start"));
    assert_eq!(age(&start, &request(&lines)), Some(Ok(300 * MS)));
    let (_, start) = reader(HeaderConfig::default());
    assert_eq!(age(&start, &request(&lines)), Some(Ok(400 * MS)));
}

#[test]
fn alb_reads_the_trace_id_instead_of_the_named_header() {
    let (_, alb) = reader(HeaderConfig::default().with_alb(true));
    let trace = "Self=1-6553f0ff-12456789abcdef012345678;Root=1-6553f100-abcdef012345678912345678";
    let lines = [
        (X_REQUEST_START, "t=1700000000.400"),
        (X_AMZN_TRACE_ID, trace),
    ];
    assert_eq!(
        age(&alb, &request(&lines)),
        Some(Ok(1500 * MS)),
        "Self=: 1 s earlier"
    );
    assert_eq!(
        age(&alb, &request(&[(X_REQUEST_START, "t=1700000000.400")])),
        None,
        "no trace id: no stamp"
    );
    assert_eq!(
        age(
            &alb,
            &request(&[(X_AMZN_TRACE_ID, "Root=1-6553f1zz-abcdef")])
        ),
        Some(Err(HeaderError::Invalid))
    );
    let (_, plain) = reader(HeaderConfig::default());
    assert_eq!(age(&plain, &request(&lines)), Some(Ok(100 * MS)));
}

#[test]
fn reading_never_allocates() {
    let (wall, start) = reader(HeaderConfig::default().with_pick(Pick::Earliest));
    let (_, alb) = reader(HeaderConfig::default().with_alb(true));
    let stamped = request(&[
        (
            X_REQUEST_START,
            "servera t=1700000000.100, serverb t=1700000000.200",
        ),
        (X_REQUEST_START, "t=1700000000123456 D=3775428"),
        (X_REQUEST_START, "1700000000123456789"),
    ]);
    let invalid = request(&[(X_REQUEST_START, "t=1.7e9")]);
    let traced = request(&[(X_AMZN_TRACE_ID, "Self=1-6553f0ff-1;Root=1-6553f100-2")]);
    let allocations = allocations_during(|| {
        for i in 0..1_000u64 {
            wall.set(Duration::from_nanos(NOW + i));
            assert_eq!(age(&start, &stamped), Some(Ok(400 * MS + i as i64)));
            assert_eq!(age(&start, &invalid), Some(Err(HeaderError::Invalid)));
            assert_eq!(age(&alb, &traced), Some(Ok(1500 * MS)));
        }
    });
    assert_eq!(allocations, 0);
}
