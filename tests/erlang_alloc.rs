//! The capacity math allocates nothing: searches, evaluations, Erlang-A and the planner's
//! steady state. Allocations are counted per thread (the harness's own threads may allocate
//! meanwhile); one test in this file all the same.

use admit_testkit::counting_alloc;

#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

use std::time::Duration;

use admit::erlang::{
    Balancing, ErlangA, Fleet, ImpatientTarget, MMc, PlannerConfig, QueueModel, ReplicaPlanner,
    Target,
};
use counting_alloc::allocations_during;

#[test]
fn capacity_math_never_allocates() {
    let target = Target::ServiceLevel {
        within: 0.01,
        at_least: 0.8,
    };
    let big = MMc::new(1e6, 1.0).unwrap();
    let api = MMc::new(5000.0, 50.0).unwrap();
    let impatient = ErlangA::new(50.0, 1.0, 0.2).unwrap();
    let fleets = [
        Balancing::RoundRobin,
        Balancing::Random,
        Balancing::LeastRequest,
    ]
    .map(|balancing| Fleet::new(5000.0, 1.0, 300, balancing).unwrap());
    let mut planner = ReplicaPlanner::new(PlannerConfig::default(), 1).unwrap();
    // The planner's hold window grows once; its steady state reuses the space.
    planner.observe(Duration::ZERO, 10, 10);

    let allocations = allocations_during(|| {
        let servers = big.min_servers(target).unwrap();
        let staffed = big.with_servers(servers).unwrap();
        std::hint::black_box((
            staffed.service_level(0.01).unwrap(),
            staffed.wait_percentile(0.99).unwrap(),
            staffed.mean_wait(),
        ));
        std::hint::black_box(
            api.min_servers(Target::MeanWait { at_most: 0.001 })
                .unwrap(),
        );
        std::hint::black_box(big.erlang_b(servers - 3000).unwrap());
        let n = impatient
            .min_servers(ImpatientTarget::ServedWithin {
                within: 0.5,
                at_least: 0.9,
            })
            .unwrap();
        std::hint::black_box((
            impatient.prob_abandon(n).unwrap(),
            impatient.prob_virtual_wait_exceeds(n, 0.3).unwrap(),
            impatient.prob_wait_within(n, 0.3).unwrap(),
        ));
        for fleet in &fleets {
            let servers = fleet.min_servers_for_service_level(0.01, 0.95).unwrap();
            std::hint::black_box((
                fleet.service_level(servers, 0.01).unwrap(),
                fleet.mean_wait(servers).unwrap(),
            ));
        }
        for second in 1..100 {
            std::hint::black_box(planner.observe(Duration::from_secs(second), 10, 10));
        }
    });
    assert_eq!(allocations, 0, "{allocations} heap allocations");
}
