//! An adaptive load shedder: go-zero's algorithm, lock-free.
//!
//! A [`Shedder`] refuses a request only when two things are true at once:
//!
//! 1. **The service is hot**: the CPU load is at or above `cpu_threshold` (900 ‰ by default),
//!    or another [overload signal](crate::signal) added with [`ShedderBuilder::signal`] says
//!    so, or one of them did less than `cool_off` (1 s) ago and the shedder has dropped
//!    requests since.
//! 2. **More requests are in flight than the service has proven it can carry**: both the current
//!    and the smoothed number of requests in flight exceed
//!    `max_flight = max(1, max_pass × min_rt × buckets per second / 1000)`, scaled down by the
//!    overload factor `(1000 − cpu) / (1000 − cpu_threshold)` (clamped to 0.1..=1; with more
//!    signals, the smallest [headroom](crate::signal::Pressure::headroom); not scaled while a
//!    reading sets a [floor](crate::signal::Pressure::with_limit_floor), as the queue gate's
//!    do: see below). Here `max_pass` is the most requests that passed in one bucket, and
//!    `min_rt` the lowest per-bucket mean latency in ms, over the rolling `window` (5 s in 50
//!    buckets by default): Little's law applied to the best the service has recently done.
//!
//! While no signal is hot nothing is shed, whatever the concurrency; a burst of requests with
//! a hot CPU passes until the smoothed concurrency catches up.
//!
//! # Using it
//!
//! Call [`allow`](Shedder::allow) when a request arrives; it returns a [`Permit`] or
//! [`Overloaded`]. When the request ends, call [`Permit::pass`] if it succeeded or
//! [`Permit::fail`] if it did not (a timeout, an error the service caused). Dropping a permit
//! without either counts as a failure: a cancelled request did no useful work. Only passes feed
//! the throughput and latency the limit is computed from.
//!
//! In a tower stack (axum, tonic, hyper), [`ShedLayer`] does all of this per request; its
//! [classifier](crate::middleware::classify) decides pass or fail from the response.
//!
//! # Processor sharing
//!
//! A pass can report how long its work waited for a core, measured with
//! [`CpuWait::measure`](crate::signal::cpu::CpuWait::measure):
//! [`Permit::pass_after`], or a [`CpuWait`](crate::signal::cpu::CpuWait) response extension
//! read by the go-zero classifiers. Its latency is then recorded less that wait (at least
//! 1 ms), so `min_rt` leaves out processor sharing. Opt-in: a pass without one records its
//! whole latency. See the [guide](crate::guide::signals) for when it applies.
//!
//! # Queue-time signals
//!
//! A shedder may also watch how long requests wait
//! ([`queue_gate`](ShedderBuilder::queue_gate)) and how late the runtime runs its timers
//! ([`runtime_probe`](ShedderBuilder::runtime_probe)); see [`signal::queue`](crate::signal::queue).
//!
//! - While the gate is hot (at least 90 % of the waits of its last interval, by default,
//!   exceeded its target) the shedder is hot, and a request that waited more than twice the
//!   target is refused whatever the concurrency
//!   ([`Cause::QueueDelay`](crate::signal::Cause::QueueDelay)); other refusals follow go-zero's
//!   rule ([`Cause::Queue`](crate::signal::Cause::Queue)) and arm the cool-off.
//! - The gate's readings carry its target as the limit's
//!   [floor](crate::signal::Pressure::with_limit_floor): go-zero's limit on requests in flight
//!   is not scaled down by the CPU's overload factor, and it is at least the throughput times
//!   the gate's target (by Little's law, the concurrency at which requests wait that long); the
//!   [guide](crate::guide::signals) says why.
//! - The probe decides only while the gate has no verdict (no gate, or no wait recorded in its
//!   last interval): measured waits outrank its estimate. While it lags, a share of requests is
//!   refused at random, set by its controller, or all of them while it misses its heartbeat
//!   ([`Cause::RuntimeLag`](crate::signal::Cause::RuntimeLag)).
//!
//! # Request criticality
//!
//! A request may carry a [`Criticality`](crate::criticality::Criticality) (through the layer,
//! read by [`CriticalityHeader`](crate::middleware::CriticalityHeader) or
//! [`CriticalityFrom`](crate::middleware::CriticalityFrom); by hand,
//! [`Arrival::with_class`](crate::signal::Arrival::with_class) given to
//! [`allow_with`](Shedder::allow_with)); a request without one is
//! [`Critical`](crate::criticality::Criticality::Critical).
//!
//! While the shedder is hot (a signal is hot, or it is cooling off), a request's class stands
//! in one of three places relative to one *marginal* class:
//!
//! - **below** it: refused outright, whatever the concurrency;
//! - **the marginal class**: decided as without classes: refused if a signal's reading refuses
//!   it (a request that waited too long while the queue gate is hot, the runtime probe's draws)
//!   or by the concurrency test above, so it gets the capacity the classes above it leave;
//! - **above** it: served, whatever the concurrency and the signals' readings.
//!
//! The classes *in use* are those decided while hot in the current step or the one before (a
//! step is a bucket of the window, 100 ms by default). The marginal class is the least important
//! class in use at or above a level, the *cut*, or the most important class in use if none is
//! ([`ShedSnapshot::cut`] says which class it is). With one class in use every request is of the
//! marginal class, and the decisions are those without classes: a service that sets no class
//! is such a service.
//!
//! The cut moves at most once a step, at the first decision of the step made while hot, by what
//! happened during the step that ended:
//!
//! - **up**, making the next class in use marginal, after two steps in a row in which requests
//!   of the marginal class were refused and none was admitted, while the classes above it did
//!   not fit even alone: they were admitted at least as many requests as the shedder has seen
//!   complete in one bucket of its window (go-zero's `maxPass`), or more than half of theirs
//!   had waited longer than a step before reaching the shedder (work done inline queues before
//!   the shedder sees it, so there the admissions cannot outrun the completions, and the queue
//!   shows as waits);
//! - **down**, making the next class in use below it marginal, after three steps in a row in
//!   which the marginal class was refused at most once per 64 requests admitted (not at all
//!   with fewer than 64);
//! - **back to the least important class** after a whole step without a decision made while
//!   hot.
//!
//! # Parity with go-zero
//!
//! With no signal besides the CPU (no queue gate, no probe, one request class), the decision
//! reproduces go-zero's `adaptiveShedder` (`core/load`, 2024), but for a few deliberate
//! differences: the [parity chapter](crate::guide::parity#go-zeros-adaptive-shedder) of the
//! guide lists what is reproduced, and each difference with its reason.
//!
//! # Cost
//!
//! While nothing is hot, [`allow`](Shedder::allow) is a clock read, the CPU signal (an atomic
//! load, inlined for admit's own; a dynamic call for a
//! [`CpuSignal`](crate::signal::cpu::CpuSignal) of your own), the queue gate and runtime probe
//! if added (inlined), one dynamic call per added signal, a flag load and one atomic add; a
//! request of a class other than `critical` also counts itself by class on a stripe the calling
//! thread owns (a plain load and store). While hot it also records the time of the overload (a
//! compare-and-swap whenever the clock has moved on), reads the cached limit (a sequence-locked
//! read of three words), and, for the first hot decision of each bucket, scans the window (a
//! sequence-locked read of four words per bucket). A refusal counts itself on such a stripe;
//! with more than one request class in use, a hot decision also counts itself for the cut on
//! such a stripe, and the first one of each bucket moves the cut. Completing a permit is a
//! clock read, one atomic add, the smoothed concurrency's load and store, and plain loads and
//! stores adding its service time and latency to the caller's stripe. The first event of each
//! bucket also records the lifetime totals (summing the stripes) as the bucket's start. Nothing
//! allocates, [`allow_owned`] included.
//!
//! # Memory ordering
//!
//! - **In flight.** Admissions and completions are counted with `AcqRel` read-modify-writes on
//!   three totals (admitted, passed, failed); the number in flight is their difference. A
//!   reader loads the completions before the admissions, each with `Acquire`: a completion it
//!   sees was released after its own admission, so the admission is visible too and the
//!   difference is never negative. `loom_in_flight_never_reads_negative` model-checks this.
//! - **The window.** Completions write only lifetime totals; a bucket's values are the
//!   difference between the totals recorded at its start and at the next bucket's (each record
//!   under the crate's sequence lock, written once). A pass's count and latency are one word
//!   of its thread's stripe, so no reading splits them
//!   (`a_bucket_never_shows_a_pass_without_its_latency` races readers against completions).
//! - **The limit cache** is three words under the crate's sequence lock (the bucket it was
//!   computed for, go-zero's `maxFlight` and the `maxPass` it came from): a reader uses the
//!   values only for that bucket, and a torn read is discarded (the lock is loom-checked).
//! - **The cut.** One thread moves it at each step (a compare-and-swap of the step); the
//!   others read its words with relaxed loads and may decide by the cut of the step before for
//!   that long. Decisions by class are `Relaxed` statistics on the callers' stripes, read as
//!   differences at each step, so a step may miss a decision racing its end (it counts in the
//!   next one).
//! - **Overload and cool-off.** The time of the last hot reading only moves forward (a
//!   compare-and-swap), and the first refusal sets the drop mark with an `AcqRel` swap (its
//!   clearing is a swap too, so exactly one thread sees each transition: the `tracing`
//!   events); a decision racing them may see the cool-off start or end one decision earlier or
//!   later, as go-zero's unlocked reads of the same fields do. The smoothed concurrency is a
//!   load and a store (a difference from go-zero: see [parity](crate::guide::parity)), and
//!   lifetime drop counts and service times are `Relaxed` statistics.
//!
//! [`allow_owned`]: Shedder::allow_owned

mod builder;
mod cut;
pub mod error;
mod ledger;
mod permit;
mod shedder;
mod snapshot;
mod window;

pub use self::builder::ShedderBuilder;
pub use self::error::{Drops, Overloaded};
pub use self::permit::{OwnedPermit, Permit};
pub use self::shedder::Shedder;
pub use self::snapshot::{ClassCounts, ShedSnapshot};

/// [`AdmitLayer`](crate::middleware::AdmitLayer) applying a [`Shedder`]: requests arriving while
/// the service is overloaded are refused before they reach it.
///
/// `ShedLayer::new(shedder)` takes a [`Shedder`], an `Arc` of one or a `&'static` one;
/// [`http`](crate::middleware::AdmitLayer::http) and [`grpc`](crate::middleware::AdmitLayer::grpc)
/// choose go-zero's classifier and answer refusals themselves, and return a
/// [`HttpLayer<Shedder, Q>`](crate::middleware::HttpLayer) or a
/// [`GrpcLayer<Shedder, Q>`](crate::middleware::GrpcLayer) (`Q`: the
/// [reader](crate::middleware::AdmitLayer::inspect)), the names to store the layer under. See
/// [`AdmitLayer`](crate::middleware::AdmitLayer) for the behaviour.
///
/// # Where it goes in the stack
///
/// Put it inside any other layer that refuses requests, such as a
/// [`WarmUpLayer`](crate::warmup::WarmUpLayer) or an authentication check, so that it sees
/// only the requests that reach the service. A refusal from a layer inside it arrives as an
/// error or an error response with a near-zero latency; counted as a pass, it would convince
/// the shedder that the service is faster than it is. The go-zero classifiers recognise admit's
/// own refusals ([`Refused`](crate::respond::Refused)) and count them as failures, but not
/// other layers' answers, and the default classifier passes everything. With tower's
/// `ServiceBuilder` and tonic's `Server::layer` the first layer added is the outermost; with
/// axum's `Router::layer` the last call is.
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub type ShedLayer<
    C = crate::clock::MonotonicClock,
    K = crate::middleware::classify::ErrorsPass,
    R = crate::respond::BoxErrorResponder,
    Q = crate::middleware::ReadNothing,
    H = crate::middleware::AtResponse,
> = crate::middleware::AdmitLayer<Shedder<C>, K, R, Q, H>;
