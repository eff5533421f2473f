//! The help text and units of every series, given to the recorder each time a set of metrics
//! is built (a recorder keeps the last).

use metrics::{Unit, describe_counter, describe_gauge};

use super::names;

/// Describes the offered requests, which every kind of admit layer publishes.
fn offered() {
    describe_counter!(
        names::OFFERED_REQUESTS,
        "Requests counted by the first admit layer that saw them, refusals included: summed, \
         the offered load"
    );
}

/// Describes the shedder's series.
pub(super) fn shedder() {
    offered();
    describe_counter!(
        names::SHED_REQUESTS,
        "Requests that reached the shedder, by outcome (passed, failed, dropped)"
    );
    describe_gauge!(
        names::SHED_SERVICE_SECONDS,
        Unit::Seconds,
        "Service time of the completed requests, summed (monotonic: use rate())"
    );
    describe_gauge!(
        names::SHED_IN_FLIGHT,
        "Requests admitted and not yet completed"
    );
    describe_gauge!(names::SHED_CPU, "CPU load as a share of the CPU limit");
    describe_gauge!(
        names::SHED_CPU_THRESHOLD,
        "CPU load at which the shedder is hot"
    );
    describe_gauge!(names::SHED_SHEDDING, "1 while the shedder is hot, else 0");
    describe_gauge!(
        names::SHED_MAX_FLIGHT,
        "Concurrency the service has proven it carries"
    );
    describe_gauge!(names::SHED_HEADROOM, "Share of max_flight admitted now");
    describe_counter!(
        names::SHED_CLASS_REQUESTS,
        "Requests the shedder decided, by class and outcome (admitted, refused)"
    );
    describe_gauge!(
        names::SHED_CUT,
        "1 for the marginal class while the shedder is hot, else 0"
    );
    describe_gauge!(
        names::QUEUE_CLOCK_OFFSET,
        Unit::Seconds,
        "How far the service's clock is ahead of the stamping proxy's, network time included"
    );
    describe_counter!(
        names::QUEUE_HEADER_ERRORS,
        "Request-start stamps that could not be read, by error"
    );
}

/// Describes the warm-up buckets' series.
pub(super) fn warm_up() {
    offered();
    describe_counter!(
        names::WARMUP_REQUESTS,
        "Warm-up bucket decisions, by outcome (admitted, refused)"
    );
    describe_gauge!(names::WARMUP_LIMIT, "Rate in force, in permits per second");
    describe_gauge!(
        names::WARMUP_FULL_RATE,
        "Rate once warm, in permits per second"
    );
    describe_gauge!(
        names::WARMUP_STORED,
        "Permits stored (a full bucket is cold)"
    );
    describe_gauge!(
        names::WARMUP_PROGRESS,
        "Warm-up progress from 0 (cold) to 1 (warm)"
    );
}

/// Describes the bounds' series.
#[cfg(feature = "tower")]
pub(super) fn bound() {
    offered();
    describe_gauge!(names::BOUND_LIMIT, "Requests the bound lets be in service");
    describe_gauge!(names::BOUND_IN_SERVICE, "Requests in service");
    describe_gauge!(names::BOUND_WAITING, "Requests waiting for a place");
    describe_counter!(
        names::BOUND_REQUESTS,
        "Requests that could not enter at once, by class and outcome (waited, entered, \
         cancelled, full, pushed_out, timed_out, deadline)"
    );
}

/// Describes the drain's series.
#[cfg(feature = "tokio")]
pub(super) fn drain() {
    offered();
    describe_gauge!(
        names::DRAIN_IN_FLIGHT,
        "Requests in flight (admitted, response body not ended)"
    );
    describe_gauge!(names::DRAIN_CONNECTIONS, "Open connections (tracked ones)");
    describe_gauge!(names::DRAIN_SESSIONS, "Open long-lived sessions");
    describe_gauge!(
        names::DRAINING,
        "1 once the drain is announced (the replica is leaving), else 0"
    );
}

/// Describes the client throttles' series.
pub(super) fn client() {
    describe_counter!(
        names::CLIENT_ATTEMPTS,
        "Requests the client's throttle was asked to send, by class, throttled ones included"
    );
    describe_counter!(
        names::CLIENT_THROTTLED,
        "Requests the client's throttle refused locally, by class"
    );
    describe_gauge!(
        names::CLIENT_THROTTLE_PROBABILITY,
        "Probability the client's throttle refuses the next request"
    );
}

/// Describes the retry budgets' series.
pub(super) fn client_retries() {
    describe_counter!(
        names::CLIENT_RETRIES,
        "Retries asked of the client's retry budget, by class and outcome (spent, denied)"
    );
    describe_counter!(
        names::CLIENT_RETRY_REQUESTS,
        "Requests deposited in the client's retry budget, by class"
    );
}

/// Describes the plans' series.
pub(super) fn plan() {
    describe_gauge!(names::PLAN_SERVERS, "Servers the target needs");
    describe_gauge!(names::PLAN_REPLICAS, "Replicas recommended");
    describe_gauge!(
        names::PLAN_SERVICE_LEVEL,
        "Predicted share of requests waiting at most the target wait"
    );
    describe_gauge!(
        names::PLAN_MEAN_WAIT,
        Unit::Seconds,
        "Predicted mean wait in the queue"
    );
    describe_gauge!(
        names::PLAN_OCCUPANCY,
        "Predicted share of time a server is busy"
    );
}
