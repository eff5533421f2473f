//! The driver: sends each arrival on time, whatever became of the earlier ones (open loop), and
//! tallies the outcomes per second.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;

use crate::arrivals::Arrival;
use crate::http::Transport;
use crate::outcome::Outcome;
use crate::retry::{BudgetState, Retry};
use crate::tally::{Report, Tally};

/// Sends arrivals as requests through a [`Transport`], each with a deadline and within a cap
/// on requests in flight, and tallies what became of them.
///
/// ```no_run
/// use std::time::Duration;
/// use admit_loadgen::{Driver, HttpClient, Trace};
/// use http_body_util::Empty;
/// use bytes::Bytes;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let trace = Trace::step(100.0, 3.0, Duration::from_secs(10), Duration::from_secs(20),
///     Duration::from_secs(10))?;
/// let client = HttpClient::new();
/// let report = Driver::new(Duration::from_millis(500))
///     .run(
///         &client,
///         trace.duration(),
///         trace.arrivals(42),
///         |arrival| {
///             http::Request::get("http://127.0.0.1:8080/work")
///                 .header("x-session", arrival.index % 100)
///                 .body(Empty::<Bytes>::new())
///                 .expect("a valid request")
///         },
///         |second, tally| println!("{second:>3} {} ok of {}", tally.ok, tally.offered),
///     )
///     .await;
/// println!("p99 {:?}", report.total.p99());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Driver {
    deadline: Duration,
    max_in_flight: usize,
    retry: Option<Retry>,
}

/// What the sending loop and the request tasks tell the collector.
#[derive(Debug)]
enum Event {
    /// A request due in this second was sent (its first attempt).
    Sent(usize),
    /// A sent request due in this second has its final outcome.
    Settled {
        second: usize,
        outcome: Outcome,
        latency: Duration,
    },
    /// A request due in this second was dropped for the in-flight cap.
    Dropped(usize),
    /// A request due in this second will be tried again.
    Retried(usize),
    /// A request due in this second was not tried again for want of budget.
    Denied(usize),
    /// No more requests are due in this second (nor any before it).
    Closed(usize),
}

/// A request whose attempt ended with an outcome the client retries.
#[derive(Debug)]
struct Failed {
    /// The attempt that failed.
    arrival: Arrival,
    /// The second the request was due in.
    second: usize,
    /// When its first attempt was sent.
    first_sent: Instant,
    /// Its place under the in-flight cap, kept until its final outcome.
    slot: OwnedSemaphorePermit,
    /// What became of the attempt, and the time since the first was sent.
    outcome: Outcome,
    latency: Duration,
}

/// What a request task tells the sending loop when it ends.
#[derive(Debug)]
enum Ended {
    /// Settled: the collector has its outcome.
    Settled,
    /// To be tried again, if the budget has room.
    Failed(Failed),
}

/// A retry waiting for its time, ordered by it (then by request, for ties).
#[derive(Debug)]
struct Waiting {
    at: Instant,
    failed: Failed,
}

impl Waiting {
    fn key(&self) -> (Instant, u64) {
        (self.at, self.failed.arrival.index)
    }
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl Driver {
    /// A driver whose requests give up after `deadline`, capped at [`in_flight_cap`] requests
    /// in flight, without retries.
    pub fn new(deadline: Duration) -> Driver {
        Driver {
            deadline,
            max_in_flight: in_flight_cap(),
            retry: None,
        }
    }

    /// At most `cap` requests in flight: an arrival beyond it is [`Outcome::Dropped`] unsent.
    pub fn max_in_flight(mut self, cap: usize) -> Driver {
        self.max_in_flight = cap.min(Semaphore::MAX_PERMITS);
        self
    }

    /// Tries refused, timed-out and lost requests again as `retry` says. Each attempt has the
    /// whole deadline; a request keeps its place under the in-flight cap until its final
    /// outcome, which is its last attempt's.
    pub fn retry(mut self, retry: Retry) -> Driver {
        self.retry = Some(retry);
        self
    }

    /// The per-request deadline.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The cap on requests in flight.
    pub fn in_flight_limit(&self) -> usize {
        self.max_in_flight
    }

    /// Runs `arrivals` (in time order, from now) over `span`, and returns the tallies.
    ///
    /// At each arrival's time, `build(arrival)` makes its request, which is sent through
    /// `transport` in a task of its own (so this needs a tokio runtime with its timer),
    /// unless [`in_flight_limit`](Self::in_flight_limit) requests are in flight. With
    /// [`retry`](Self::retry), `build` is called again for each retry, with the same index,
    /// the retry's time and its attempt number. Every request counts once, with its final
    /// outcome, in the second it was due in. `on_second(second, tally)` is called once per
    /// second of the run, in order, once the second is over and each of its requests has a
    /// final outcome. The run ends when every second of `span`, and of the arrivals past it,
    /// has been reported: seconds without arrivals are reported too, empty.
    ///
    /// Latencies run from the start of the request's first attempt to the end of its answer's
    /// body.
    pub async fn run<T, B, A, F, S>(
        &self,
        transport: &T,
        span: Duration,
        arrivals: A,
        mut build: F,
        mut on_second: S,
    ) -> Report
    where
        T: Transport<B>,
        B: Send + 'static,
        A: IntoIterator<Item = Arrival>,
        F: FnMut(Arrival) -> Request<B>,
        S: FnMut(usize, &Tally),
    {
        let (events, mut inbox) = mpsc::unbounded_channel();
        let (deadline, retry) = (self.deadline, self.retry);
        let slots = Arc::new(Semaphore::new(self.max_in_flight));
        let start = Instant::now();
        let second_end = move |second: usize| start + Duration::from_secs(second as u64 + 1);

        let send = async move {
            let (ended, mut endings) = mpsc::unbounded_channel();
            let mut budget = retry.and_then(|retry| retry.budget_state());
            let spawn = |request: Request<B>,
                         arrival: Arrival,
                         second: usize,
                         first_sent: Instant,
                         slot: OwnedSemaphorePermit| {
                let (transport, events, ended) = (transport.clone(), events.clone(), ended.clone());
                tokio::spawn(async move {
                    let outcome = tokio::time::timeout(deadline, transport.send(request))
                        .await
                        .unwrap_or(Outcome::TimedOut);
                    let latency = first_sent.elapsed();
                    if retry.is_some_and(|retry: Retry| retry.wants(arrival.attempt, &outcome)) {
                        let failed = Failed {
                            arrival,
                            second,
                            first_sent,
                            slot,
                            outcome,
                            latency,
                        };
                        let _ = ended.send(Ended::Failed(failed));
                        return;
                    }
                    drop(slot);
                    let _ = events.send(Event::Settled {
                        second,
                        outcome,
                        latency,
                    });
                    let _ = ended.send(Ended::Settled);
                });
            };
            // The first second that is not closed yet, and the end of the seconds due.
            let span_seconds = span.as_secs() + u64::from(span.subsec_nanos() > 0);
            let mut open = 0;
            let mut end = usize::try_from(span_seconds).unwrap_or(usize::MAX);
            let mut arrivals = arrivals.into_iter().peekable();
            let mut waiting = BinaryHeap::new();
            // Request tasks running, each of which ends with one message on `ended`.
            let mut running = 0usize;
            loop {
                // Seconds close in order, each once its end has passed and no arrival of it
                // is left to send.
                let closable = match arrivals.peek() {
                    Some(arrival) => {
                        end = end.max(arrival.second().saturating_add(1));
                        arrival.second()
                    }
                    None => end,
                };
                let close = (open < closable).then(|| second_end(open));
                let arrival = arrivals.peek().map(|arrival| start + arrival.at);
                let again = waiting
                    .peek()
                    .map(|Reverse(waiting): &Reverse<Waiting>| waiting.at);
                let wake = [close, arrival, again].into_iter().flatten().min();
                if wake.is_none() && running == 0 {
                    break;
                }
                tokio::select! {
                    biased;
                    Some(ending) = endings.recv(), if running > 0 => {
                        running -= 1;
                        // Only a driver with a retry ends a task with `Failed`.
                        if let (Ended::Failed(failed), Some(retry)) = (ending, &retry) {
                            again_or_settle(failed, retry, &mut budget, &mut waiting, &events, start);
                        }
                    }
                    () = tokio::time::sleep_until(wake.unwrap_or(start)), if wake.is_some() => {
                        if close == wake {
                            let _ = events.send(Event::Closed(open));
                            open += 1;
                        } else if arrival == wake {
                            let arrival = arrivals.next().expect("peeked");
                            let second = arrival.second();
                            let request = build(arrival);
                            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                                let _ = events.send(Event::Dropped(second));
                                continue;
                            };
                            let _ = events.send(Event::Sent(second));
                            if let Some(budget) = &mut budget {
                                budget.deposit(arrival.at);
                            }
                            spawn(request, arrival, second, Instant::now(), slot);
                            running += 1;
                        } else if let Some(Reverse(Waiting { failed, .. })) = waiting.pop() {
                            let arrival = Arrival {
                                at: start.elapsed(),
                                attempt: failed.arrival.attempt + 1,
                                ..failed.arrival
                            };
                            let request = build(arrival);
                            spawn(request, arrival, failed.second, failed.first_sent, failed.slot);
                            running += 1;
                        }
                    }
                }
            }
            // Dropping `events` here leaves no other copy: every request task has ended.
        };

        let collect = async move {
            let mut seconds: Vec<Tally> = Vec::new();
            let mut pending: Vec<u64> = Vec::new();
            let (mut closed, mut reported) = (0, 0);
            while let Some(event) = inbox.recv().await {
                let second = match event {
                    Event::Sent(second)
                    | Event::Dropped(second)
                    | Event::Retried(second)
                    | Event::Denied(second)
                    | Event::Closed(second) => second,
                    Event::Settled { second, .. } => second,
                };
                if seconds.len() <= second {
                    seconds.resize_with(second + 1, Tally::new);
                    pending.resize(second + 1, 0);
                }
                match event {
                    Event::Sent(_) => pending[second] += 1,
                    Event::Settled {
                        outcome, latency, ..
                    } => {
                        pending[second] -= 1;
                        seconds[second].record(&outcome, latency);
                    }
                    Event::Dropped(_) => seconds[second].record(&Outcome::Dropped, Duration::ZERO),
                    Event::Retried(_) => seconds[second].retries += 1,
                    Event::Denied(_) => seconds[second].retries_denied += 1,
                    Event::Closed(_) => closed = second + 1,
                }
                while reported < closed && pending[reported] == 0 {
                    on_second(reported, &seconds[reported]);
                    reported += 1;
                }
            }
            // Only a request task that panicked leaves a second pending.
            for (second, tally) in seconds.iter().enumerate().skip(reported) {
                on_second(second, tally);
            }
            seconds
        };

        let ((), seconds) = tokio::join!(send, collect);
        let mut total = Tally::new();
        for tally in &seconds {
            total.merge(tally);
        }
        Report { seconds, total }
    }
}

/// Queues `failed` for another attempt after its backoff if the budget has room, or settles
/// it with its last outcome.
fn again_or_settle(
    failed: Failed,
    retry: &Retry,
    budget: &mut Option<BudgetState>,
    waiting: &mut BinaryHeap<Reverse<Waiting>>,
    events: &mpsc::UnboundedSender<Event>,
    start: Instant,
) {
    let now = Instant::now();
    if budget
        .as_mut()
        .is_none_or(|budget| budget.withdraw(now - start))
    {
        let _ = events.send(Event::Retried(failed.second));
        let wait = retry.wait(failed.arrival.index, failed.arrival.attempt + 1);
        waiting.push(Reverse(Waiting {
            at: now + wait,
            failed,
        }));
        return;
    }
    let _ = events.send(Event::Denied(failed.second));
    let _ = events.send(Event::Settled {
        second: failed.second,
        outcome: failed.outcome,
        latency: failed.latency,
    });
}

/// The demo's cap on requests in flight: each holds a socket, so half the soft limit on open
/// files, at least 100; 1000 where the limit is unknown or unlimited.
pub fn in_flight_cap() -> usize {
    open_file_limit().map_or(1000, |limit| (limit / 2).max(100))
}

#[cfg(unix)]
fn open_file_limit() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    usize::try_from(limit.current?).ok()
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<usize> {
    None
}
