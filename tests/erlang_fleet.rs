//! `Fleet`: replicas behind a balancer. Its exact cases against Erlang C and each other, its
//! searches, its errors, and every policy against a seeded simulation of the balancer itself.

use std::collections::{BinaryHeap, VecDeque};

use admit::erlang::{Balancing, ErlangError, Fleet, MMc, QueueModel};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const POLICIES: [Balancing; 4] = [
    Balancing::Pooled,
    Balancing::RoundRobin,
    Balancing::Random,
    Balancing::LeastRequest,
];

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * b.abs().max(1e-300)
}

/// One replica is one queue whatever the balancer: M/M/k.
#[test]
fn one_replica_is_erlang_c_under_every_policy() {
    for (servers, rho) in [(1, 0.5), (1, 0.95), (4, 0.8), (16, 0.9), (64, 0.7)] {
        let arrival = rho * servers as f64 * 2.0;
        let erlang = MMc::new(arrival, 2.0)
            .unwrap()
            .with_servers(servers)
            .unwrap();
        for balancing in POLICIES {
            let fleet = Fleet::new(arrival, 2.0, servers, balancing).unwrap();
            let at = |t| fleet.service_level(servers, t).unwrap();
            for t in [0.0, 0.1, 1.0] {
                let expected = erlang.service_level(t).unwrap();
                assert!(
                    close(at(t), expected, 1e-10),
                    "{balancing:?} {servers} {rho} {t}"
                );
            }
            let wait = fleet.prob_wait(servers).unwrap();
            assert!(
                close(wait, erlang.prob_wait(), 1e-10),
                "{balancing:?}: {wait}"
            );
            let mean = fleet.mean_wait(servers).unwrap();
            assert!(
                close(mean, erlang.mean_wait(), 1e-10),
                "{balancing:?}: {mean}"
            );
            assert_eq!(fleet.occupancy(servers).unwrap(), erlang.occupancy());
        }
    }
}

/// Pooled is Erlang C at whole replicas; a partial replica counts as a whole one.
#[test]
fn pooled_is_erlang_c_at_whole_replicas() {
    let queue = MMc::new(96.0, 1.0).unwrap();
    let fleet = Fleet::new(96.0, 1.0, 8, Balancing::Pooled).unwrap();
    for servers in [97u64, 100, 104, 120] {
        let whole = servers.div_ceil(8) * 8;
        assert_eq!(
            fleet.service_level(servers, 0.1),
            queue.service_level(whole, 0.1)
        );
        assert_eq!(fleet.prob_wait(servers), queue.prob_wait(whole));
    }
    let erlang = queue.min_servers_for_service_level(0.05, 0.95).unwrap();
    let whole = fleet.min_servers_for_service_level(0.05, 0.95).unwrap();
    assert_eq!(whole, erlang.div_ceil(8) * 8);
}

/// Every search answers the fewest whole replicas: its answer meets the target, one replica
/// fewer does not (or is unstable); waits never grow with replicas, and the policies rank
/// pooled ≤ least-request ≤ round-robin ≤ random.
#[test]
fn searches_answer_the_fewest_replicas_and_policies_rank() {
    for (arrival, per_replica) in [
        (0.5, 1),
        (6.4, 1),
        (64.0, 1),
        (64.0, 4),
        (900.0, 3),
        (5e4, 1),
    ] {
        for (within, at_least) in [(0.0, 0.5), (0.5, 0.9), (5.0, 0.99), (0.1, 0.999)] {
            let mut answers = Vec::new();
            for balancing in POLICIES {
                let fleet = Fleet::new(arrival, 1.0, per_replica, balancing).unwrap();
                let servers = fleet
                    .min_servers_for_service_level(within, at_least)
                    .unwrap();
                let case = format!("{balancing:?} λ {arrival} k {per_replica} {within} {at_least}");
                assert_eq!(servers % per_replica, 0, "{case}");
                assert!(
                    fleet.service_level(servers, within).unwrap() >= at_least,
                    "{case}"
                );
                if servers > per_replica {
                    let fewer = servers - per_replica;
                    match fleet.service_level(fewer, within) {
                        Ok(level) => assert!(level < at_least, "{case}: {level} at {fewer}"),
                        Err(error) => assert!(matches!(error, ErlangError::Unstable { .. })),
                    }
                }
                let mut previous = 0.0;
                for more in 0..5 {
                    let level = fleet
                        .service_level(servers + more * per_replica, within)
                        .unwrap();
                    assert!(level >= previous, "{case}: {level} after {previous}");
                    previous = level;
                }
                answers.push(servers);
            }
            let [pooled, round_robin, random, least] = answers[..] else {
                unreachable!()
            };
            assert!(
                pooled <= least && least <= round_robin && round_robin <= random,
                "{answers:?}"
            );
        }
    }
}

/// The replica counts `bound-and-order.md` §7 reports for a p99 *sojourn* of ten service
/// times at 64 erlangs: 65 pooled, 87 round-robin, 119 random. A sojourn is the wait plus an
/// exponential service; for one server per replica behind round-robin or random both are
/// exponential once waiting, so `P(S > t) = e^(−rt)` with `r` the rate of the wait, which
/// `mean_wait / prob_wait` gives.
#[test]
fn sojourn_replica_counts_match_the_reference() {
    let sojourn_p99 = |fleet: &Fleet, replicas: u64| {
        let rate = fleet.prob_wait(replicas).unwrap() / fleet.mean_wait(replicas).unwrap();
        100f64.ln() / rate
    };
    for (balancing, expected) in [(Balancing::RoundRobin, 87), (Balancing::Random, 119)] {
        let fleet = Fleet::new(64.0, 1.0, 1, balancing).unwrap();
        let replicas = (65..400).find(|&n| sojourn_p99(&fleet, n) <= 10.0).unwrap();
        assert_eq!(replicas, expected, "{balancing:?}");
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let out_of_range = |value| ErlangError::OutOfRange {
        field: "per_replica",
        value,
    };
    assert_eq!(
        Fleet::new(1.0, 1.0, 0, Balancing::Random),
        Err(out_of_range(0.0))
    );
    let most = Fleet::MAX_ROUND_ROBIN_PER_REPLICA;
    assert!(Fleet::new(1.0, 1.0, most, Balancing::RoundRobin).is_ok());
    assert_eq!(
        Fleet::new(1.0, 1.0, most + 1, Balancing::RoundRobin),
        Err(out_of_range((most + 1) as f64))
    );
    assert!(Fleet::new(1.0, 1.0, most + 1, Balancing::LeastRequest).is_ok());
    assert_eq!(
        Fleet::new(f64::NAN, 1.0, 1, Balancing::Pooled),
        Err(ErlangError::NonFinite {
            field: "arrival_rate"
        })
    );
    assert_eq!(
        Fleet::new(1.0, 0.0, 1, Balancing::Pooled),
        Err(ErlangError::NonPositiveRate {
            field: "service_rate"
        })
    );
    for balancing in POLICIES {
        let fleet = Fleet::new(10.0, 1.0, 2, balancing).unwrap();
        assert_eq!(fleet.service_level(0, 1.0), Err(ErlangError::ZeroServers));
        assert_eq!(fleet.prob_wait(10), Err(ErlangError::Unstable { rho: 1.0 }));
        // 9 servers are 5 replicas, 10 servers: still unstable.
        assert_eq!(fleet.mean_wait(9), Err(ErlangError::Unstable { rho: 1.0 }));
        assert!(matches!(
            fleet.service_level(12, -1.0),
            Err(ErlangError::Negative { .. })
        ));
        assert!(matches!(
            fleet.min_servers_for_service_level(1.0, 1.0),
            Err(ErlangError::TargetOutOfRange { .. })
        ));
        // Idle: one replica.
        let idle = Fleet::new(0.0, 1.0, 2, balancing).unwrap();
        assert_eq!(idle.min_servers_for_service_level(0.0, 0.99), Ok(2));
        assert_eq!(idle.service_level(2, 0.0), Ok(1.0));
    }
}

/// A round-robin search at the largest replica and a thousand replicas stays exact and
/// bounded.
#[test]
fn large_fleets_stay_finite() {
    for (arrival, per_replica) in [(5e4, 1), (5e4, 64), (9e5, 10_000), (1e9, 1)] {
        for balancing in POLICIES {
            let fleet = Fleet::new(arrival, 1.0, per_replica, balancing).unwrap();
            let servers = fleet.min_servers_for_service_level(0.05, 0.95).unwrap();
            let level = fleet.service_level(servers, 0.05).unwrap();
            assert!(
                (0.95..=1.0).contains(&level),
                "{balancing:?} {arrival}: {level}"
            );
        }
    }
}

/// A departure: (time, replica), earliest first.
#[derive(PartialEq)]
struct Departure(f64, usize);

impl Eq for Departure {}

impl PartialOrd for Departure {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Departure {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// Seeded simulation of `replicas` replicas of `per_replica` servers, each with its own FIFO
/// queue, behind `balancing`: Poisson arrivals at `arrival`, exponential service of rate 1.
/// Returns `(P(W > 0), P(W > t))` over all arrivals after the first tenth.
fn simulate(
    balancing: Balancing,
    replicas: usize,
    per_replica: usize,
    arrival: f64,
    t: f64,
    arrivals: usize,
) -> (f64, f64) {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut exponential = |rate: f64| -(1.0 - rng.random::<f64>()).ln() / rate;
    let mut busy = vec![0usize; replicas];
    let mut waiting: Vec<VecDeque<(f64, bool)>> = vec![VecDeque::new(); replicas];
    let mut departures = BinaryHeap::new();
    let (mut now, mut turn) = (0.0, 0);
    let (mut counted, mut waited, mut late) = (0usize, 0usize, 0usize);
    let mut pick = SmallRng::seed_from_u64(11);
    for index in 0..arrivals {
        now += exponential(arrival);
        while departures.peek().is_some_and(|d: &Departure| d.0 <= now) {
            let Departure(at, replica) = departures.pop().unwrap();
            match waiting[replica].pop_front() {
                Some((arrived, count)) => {
                    if count {
                        late += usize::from(at - arrived > t);
                    }
                    departures.push(Departure(at + exponential(1.0), replica));
                }
                None => busy[replica] -= 1,
            }
        }
        let replica = match balancing {
            Balancing::Pooled => unreachable!("simulated as one replica"),
            Balancing::RoundRobin => {
                turn = (turn + 1) % replicas;
                turn
            }
            Balancing::Random => pick.random_range(0..replicas),
            _ => (0..replicas)
                .min_by_key(|&r| busy[r] + waiting[r].len())
                .unwrap(),
        };
        let count = index >= arrivals / 10;
        counted += usize::from(count);
        if busy[replica] < per_replica {
            busy[replica] += 1;
            departures.push(Departure(now + exponential(1.0), replica));
        } else {
            waited += usize::from(count);
            waiting[replica].push_back((now, count));
        }
    }
    (waited as f64 / counted as f64, late as f64 / counted as f64)
}

/// The exact policies agree with the simulation within its noise; least-request's
/// approximation never understates the waits beyond it.
#[test]
fn policies_agree_with_a_simulation_of_the_balancer() {
    for (replicas, per_replica, rho) in [
        (4, 1, 0.7),
        (8, 1, 0.9),
        (4, 2, 0.7),
        (8, 4, 0.8),
        (3, 8, 0.8),
    ] {
        let servers = (replicas * per_replica) as u64;
        let arrival = rho * servers as f64;
        let t = 2.0 / per_replica as f64;
        for balancing in [
            Balancing::RoundRobin,
            Balancing::Random,
            Balancing::LeastRequest,
        ] {
            let fleet = Fleet::new(arrival, 1.0, per_replica as u64, balancing).unwrap();
            let wait = fleet.prob_wait(servers).unwrap();
            let tail = 1.0 - fleet.service_level(servers, t).unwrap();
            let (sim_wait, sim_tail) =
                simulate(balancing, replicas, per_replica, arrival, t, 300_000);
            let case = format!(
                "{balancing:?} {replicas}×{per_replica} at {rho}: P(W>0) {wait:.4} vs {sim_wait:.4}, \
                 P(W>{t}) {tail:.4} vs {sim_tail:.4}"
            );
            if balancing == Balancing::LeastRequest {
                assert!(wait >= sim_wait - 0.02 && tail >= sim_tail - 0.01, "{case}");
                assert!(tail <= 1.7 * sim_tail + 0.01, "{case}");
            } else {
                assert!((wait - sim_wait).abs() <= 0.025, "{case}");
                assert!((tail - sim_tail).abs() <= 0.02, "{case}");
            }
        }
    }
}
