//! Erlang A's minimum-servers search: the same answers as the plain upward walk it replaced,
//! in `O(log a)` evaluations, and a bounded amount of work whatever the patience and the load.
//! Work is counted (series terms, Erlang B steps, evaluations), never timed.

use proptest::prelude::*;

use super::abandon::Work;
use super::{ErlangA, ErlangError, ImpatientTarget, MMc, PlannerConfig, QueueModel, Target};

/// The search's built-in cap, `a + 60√a + 100`.
fn cap(queue: &ErlangA) -> u64 {
    let a = queue.offered_load();
    (a + 60.0 * a.sqrt() + 100.0).ceil() as u64
}

/// The walk the search replaced: the first count from `⌈fraction · a⌉` (at least 1) that
/// `meets`, one server at a time, through the public queries.
fn walk(
    queue: &ErlangA,
    fraction: f64,
    meets: impl Fn(u64) -> Result<bool, ErlangError>,
) -> Result<u64, ErlangError> {
    let first = ((fraction * queue.offered_load()).ceil() as u64).max(1);
    for servers in first..=cap(queue) {
        if meets(servers)? {
            return Ok(servers);
        }
    }
    Err(ErlangError::Unreachable {
        max_servers: cap(queue),
    })
}

fn served_within(within: f64, at_least: f64) -> ImpatientTarget {
    ImpatientTarget::ServedWithin { within, at_least }
}

fn counted(queue: &ErlangA, target: ImpatientTarget) -> (Result<u64, ErlangError>, Work) {
    queue.min_servers_counting(target)
}

/// Up to a hundred erlangs, patience from a thousandth to a thousand service times.
fn small_queue() -> impl Strategy<Value = ErlangA> {
    (
        prop_oneof![0.01f64..1.0, 1.0f64..100.0],
        prop_oneof![Just(1.0), 0.01f64..100.0],
        -3.0f64..3.0,
    )
        .prop_map(|(load, mu, patience)| {
            ErlangA::new(load * mu, mu, mu / 10f64.powf(patience)).unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn erlang_a_search_finds_what_the_walk_finds(
        queue in small_queue(),
        within in prop_oneof![Just(0.0), 0.0f64..2.0],
        at_least in prop_oneof![0.0f64..0.5, 0.5f64..0.999],
    ) {
        let (found, work) = counted(&queue, served_within(within, at_least));
        let walked = walk(&queue, at_least, |n| Ok(queue.service_level(n, within)? >= at_least));
        prop_assert_eq!(found, walked);
        // Gallop and bisection: about 2·log₂ of the range at most.
        let log = 64 - cap(&queue).leading_zeros() as u64;
        prop_assert!(work.evaluations <= 2 * log + 2, "{work:?}, log {log}");
    }

    #[test]
    fn erlang_a_search_finds_what_the_walk_finds_for_abandonment(
        queue in small_queue(),
        at_most in 0.001f64..0.5,
    ) {
        let (found, _) = counted(&queue, ImpatientTarget::AbandonAtMost { at_most });
        let walked = walk(&queue, 1.0 - at_most, |n| Ok(queue.prob_abandon(n)? <= at_most));
        prop_assert_eq!(found, walked);
    }
}

/// An empty system needs one server, and a target of 0 is met by one, however deep the
/// overload there.
#[test]
fn erlang_a_trivial_targets_need_one_server() {
    let empty = ErlangA::new(0.0, 1.0, 0.5).unwrap();
    assert_eq!(empty.min_servers(served_within(0.0, 0.99)), Ok(1));
    let target = ImpatientTarget::AbandonAtMost { at_most: 0.01 };
    assert_eq!(empty.min_servers(target), Ok(1));
    let deep = ErlangA::new(1e6, 1.0, 1e-6).unwrap();
    let (found, work) = counted(&deep, served_within(0.1, 0.0));
    assert_eq!((found, work), (Ok(1), Work::default()));
}

/// `servers` is the fewest that serve `at_least` within `within`.
fn assert_fewest(queue: &ErlangA, servers: u64, within: f64, at_least: f64) {
    let level = queue.service_level(servers, within).unwrap();
    let below = queue.service_level(servers - 1, within).unwrap();
    assert!(
        below < at_least && at_least <= level,
        "{servers}: {below} < {at_least} <= {level}"
    );
}

/// The queue: λ = 10⁵/s, s = 0.1 s, patience 100 s, 80 %. The walk started at
/// `⌈0.8a⌉ = 8000` servers, where the series has 2·10⁶ growing terms, and was refused there.
#[test]
fn erlang_a_staffs_a_deep_first_candidate_in_a_few_evaluations() {
    let queue = ErlangA::new(1e5, 10.0, 0.01).unwrap();
    for (within, expected, evaluations) in [(0.05, 9999, 4), (0.0, 10107, 14)] {
        let (found, work) = counted(&queue, served_within(within, 0.8));
        assert_eq!(found, Ok(expected), "T = {within}");
        assert_fewest(&queue, expected, within, 0.8);
        assert_eq!(work.evaluations, evaluations, "T = {within}: {work:?}");
        assert!(work.series_terms < 340_000, "{work:?}");
        assert!(work.erlang_b_steps < 3_100, "{work:?}");
    }
}

/// An answer a thousand servers below the load (λ = 10⁶/s, s = 0.1 s, patience 10 s,
/// 95 % within 0.1 s), about 10⁵ growing terms deep: found in twenty evaluations.
#[test]
fn erlang_a_finds_an_answer_deep_in_overload_within_its_budget() {
    let queue = ErlangA::new(1e6, 10.0, 0.1).unwrap();
    let (found, work) = counted(&queue, served_within(0.1, 0.95));
    assert_eq!(found, Ok(99_060));
    assert_fewest(&queue, 99_060, 0.1, 0.95);
    assert_eq!(work.evaluations, 20, "{work:?}");
    assert!(work.series_terms < ErlangA::SEARCH_TERMS / 2, "{work:?}");
}

/// λ = 10⁷/s, s = 0.1 s, patience 2 s, 95 % within 50 ms: the answer lies about λ·T = 5·10⁵
/// growing terms deep, more than the search affords. It refuses rather than over-staff.
#[test]
fn erlang_a_refuses_an_answer_deeper_than_it_affords() {
    let queue = ErlangA::new(1e7, 10.0, 0.5).unwrap();
    let (found, work) = counted(&queue, served_within(0.05, 0.95));
    assert_eq!(
        found,
        Err(ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 0.5
        })
    );
    assert!(work.series_terms < ErlangA::SEARCH_TERMS / 4, "{work:?}");
    assert!(work.evaluations <= 16, "{work:?}");
}

/// Patience 10¹⁵ and 10¹⁷ s (the issue's): near the load a series would need `9√(λ/θ)`, about
/// 10⁹ terms, so the search skips those counts. Where the answer is above them it is Erlang C's
/// (nobody abandons); where it may lie among them the search refuses, within its budget.
#[test]
fn erlang_a_work_is_bounded_whatever_the_patience() {
    for theta in [1e-15, 1e-17] {
        for (load, expected) in [(30.0, Some(35)), (1e3, Some(1006)), (1e5, None)] {
            let queue = ErlangA::new(load * 10.0, 10.0, theta).unwrap();
            let (found, work) = counted(&queue, served_within(0.05, 0.95));
            let row = format!("θ {theta}, a {load}: {found:?}, {work:?}");
            assert!(work.series_terms <= ErlangA::SEARCH_TERMS, "{row}");
            assert!(work.erlang_b_steps <= ErlangA::SEARCH_STEPS, "{row}");
            match expected {
                Some(servers) => {
                    assert_eq!(found, Ok(servers), "{row}");
                    let erlang_c = MMc::new(load * 10.0, 10.0).unwrap();
                    let target = Target::ServiceLevel {
                        within: 0.05,
                        at_least: 0.95,
                    };
                    assert_eq!(erlang_c.min_servers(target), Ok(servers), "{row}");
                }
                None => {
                    let refused = ErlangError::OutOfRange {
                        field: "abandon_rate",
                        value: theta,
                    };
                    assert_eq!(found, Err(refused), "{row}");
                    assert!(work.series_terms < ErlangA::SEARCH_TERMS / 16, "{row}");
                }
            }
        }
    }
    // A query at the load itself stops at its own allowance.
    let queue = ErlangA::new(1e6, 10.0, 1e-15).unwrap();
    assert_eq!(
        queue.prob_wait(100_000),
        Err(ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1e-15
        })
    );
}

/// Customers a thousand times less patient than a service at 10⁸ erlangs: the series is short,
/// but each Erlang B warm start takes `10√a` = 10⁵ steps, and the search stops at its allowance.
#[test]
fn erlang_a_bounds_its_erlang_b_steps() {
    let queue = ErlangA::new(1e9, 10.0, 1e4).unwrap();
    let (found, work) = counted(&queue, served_within(0.05, 0.95));
    assert_eq!(
        found,
        Err(ErlangError::OutOfRange {
            field: "offered_load",
            value: 1e8
        })
    );
    assert!(work.erlang_b_steps <= ErlangA::SEARCH_STEPS, "{work:?}");
    // At 10⁷ erlangs it fits.
    let queue = ErlangA::new(1e8, 10.0, 1e4).unwrap();
    let (found, work) = counted(&queue, served_within(0.05, 0.95));
    assert_eq!(found, Ok(9_500_001), "{work:?}");
    assert_fewest(&queue, 9_500_001, 0.05, 0.95);
    assert!(work.erlang_b_steps < ErlangA::SEARCH_STEPS, "{work:?}");
}

/// The two searches a replica decision makes (the target, and the one stricter by the default
/// tolerance, as [`ReplicaPlanner::plan`](super::ReplicaPlanner::plan) and admit-scaler make
/// them) for an Erlang A queue with mean service time `s` and mean `patience`, as
/// `(up, down, their work together)`.
fn decision_searches(
    lambda: f64,
    s: f64,
    patience: f64,
    t: f64,
    p: f64,
) -> (Result<u64, ErlangError>, Result<u64, ErlangError>, Work) {
    let queue = ErlangA::new(lambda, 1.0 / s, 1.0 / patience).unwrap();
    let stricter = PlannerConfig::default().stricter_service_level(p);
    assert_eq!(stricter, 1.0 - (1.0 - p) / 1.1);
    let (up, first) = counted(&queue, served_within(t, p));
    let (down, second) = counted(&queue, served_within(t, stricter));
    let work = Work {
        series_terms: first.series_terms + second.series_terms,
        erlang_b_steps: first.erlang_b_steps + second.erlang_b_steps,
        evaluations: first.evaluations + second.evaluations,
    };
    (up, down, work)
}

/// The scaler's issue queue, decided (λ = 10⁵/s, s = 0.1 s, patience 100 s, 80 %): the two
/// searches, the servers admit-scaler's `decision` tests expect, in a few dozen evaluations,
/// well within the budget.
#[test]
fn a_decision_on_a_deep_first_candidate_is_a_few_dozen_evaluations() {
    for (t, up, down) in [(0.05, 9999, 9999), (0.0, 10107, 10112)] {
        let (found_up, found_down, work) = decision_searches(1e5, 0.1, 100.0, t, 0.8);
        assert_eq!((found_up, found_down), (Ok(up), Ok(down)), "T = {t}");
        assert!(work.evaluations <= 28, "{work:?}");
        assert!(work.series_terms < 700_000, "{work:?}");
        assert!(work.erlang_b_steps < 7_000, "{work:?}");
    }
}

/// Patience 10¹⁵ and 10¹⁷ s, decided: Erlang C's servers where the series near the load is not
/// needed, in a dozen evaluations; OUT_OF_RANGE within the budget where it would be.
#[test]
fn a_decision_at_a_huge_patience_is_within_the_work_budget() {
    for seconds in [1e15, 1e17] {
        for (lambda, p) in [(300.0, 0.95), (300.0, 0.99), (1e4, 0.95)] {
            let (up, down, work) = decision_searches(lambda, 0.1, seconds, 0.05, p);
            let row = format!("{seconds}, λ {lambda}, p {p}: {up:?}, {down:?}, {work:?}");
            let erlang_c = MMc::new(lambda, 10.0).unwrap();
            let stricter = PlannerConfig::default().stricter_service_level(p);
            assert_eq!(up, erlang_c.min_servers_for_service_level(0.05, p), "{row}");
            assert_eq!(
                down,
                erlang_c.min_servers_for_service_level(0.05, stricter),
                "{row}"
            );
            assert!(work.evaluations <= 12, "{row}");
            assert!(work.series_terms < 600_000, "{row}");
        }
        let (up, _, work) = decision_searches(1e6, 0.1, seconds, 0.05, 0.95);
        let too_patient = ErlangError::OutOfRange {
            field: "abandon_rate",
            value: 1.0 / seconds,
        };
        assert_eq!(up, Err(too_patient));
        assert!(work.series_terms <= 2 * ErlangA::SEARCH_TERMS, "{work:?}");
        assert!(work.erlang_b_steps <= 2 * ErlangA::SEARCH_STEPS, "{work:?}");
    }
}
