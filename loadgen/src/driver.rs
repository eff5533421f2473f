//! The driver: sends each arrival on time, whatever became of the earlier ones (open loop), and
//! tallies the outcomes per second.

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use crate::arrivals::Arrival;
use crate::http::Transport;
use crate::outcome::Outcome;
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
}

/// What the sending loop and the request tasks tell the collector.
#[derive(Debug)]
enum Event {
    /// A request due in this second was sent.
    Sent(usize),
    /// A sent request due in this second has its outcome.
    Settled {
        second: usize,
        outcome: Outcome,
        latency: Duration,
    },
    /// A request due in this second was dropped for the in-flight cap.
    Dropped(usize),
    /// No more requests are due in this second (nor any before it).
    Closed(usize),
}

impl Driver {
    /// A driver whose requests give up after `deadline`, capped at [`in_flight_cap`] requests
    /// in flight.
    pub fn new(deadline: Duration) -> Driver {
        Driver {
            deadline,
            max_in_flight: in_flight_cap(),
        }
    }

    /// At most `cap` requests in flight: an arrival beyond it is [`Outcome::Dropped`] unsent.
    pub fn max_in_flight(mut self, cap: usize) -> Driver {
        self.max_in_flight = cap.min(Semaphore::MAX_PERMITS);
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
    /// unless [`in_flight_limit`](Self::in_flight_limit) requests are in flight. Every request
    /// counts in the second it was due in. `on_second(second, tally)` is called once per
    /// second of the run, in order, once the second is over and each of its requests has an
    /// outcome (at the latest a deadline after the second's end). The run ends when every
    /// second of `span`, and of the arrivals past it, has been reported: seconds without
    /// arrivals are reported too, empty.
    ///
    /// Latencies run from the start of the request's task to the end of its answer's body.
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
        let deadline = self.deadline;
        let slots = Arc::new(Semaphore::new(self.max_in_flight));
        let start = Instant::now();
        let second_end = move |second: usize| start + Duration::from_secs(second as u64 + 1);

        let send = async move {
            // The first second that is not closed yet, and the end of the seconds due.
            let span_seconds = span.as_secs() + u64::from(span.subsec_nanos() > 0);
            let mut open = 0;
            let mut end = usize::try_from(span_seconds).unwrap_or(usize::MAX);
            for arrival in arrivals {
                let second = arrival.second();
                end = end.max(second.saturating_add(1));
                while open < second {
                    tokio::time::sleep_until(second_end(open)).await;
                    let _ = events.send(Event::Closed(open));
                    open += 1;
                }
                tokio::time::sleep_until(start + arrival.at).await;
                let request = build(arrival);
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    let _ = events.send(Event::Dropped(second));
                    continue;
                };
                let _ = events.send(Event::Sent(second));
                let (transport, events) = (transport.clone(), events.clone());
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let outcome = tokio::time::timeout(deadline, transport.send(request))
                        .await
                        .unwrap_or(Outcome::TimedOut);
                    let latency = sent.elapsed();
                    drop(slot);
                    let _ = events.send(Event::Settled {
                        second,
                        outcome,
                        latency,
                    });
                });
            }
            while open < end {
                tokio::time::sleep_until(second_end(open)).await;
                let _ = events.send(Event::Closed(open));
                open += 1;
            }
            // Dropping `events` here leaves the request tasks' copies: the inbox closes
            // once the last of them has settled.
        };

        let collect = async move {
            let mut seconds: Vec<Tally> = Vec::new();
            let mut pending: Vec<u64> = Vec::new();
            let (mut closed, mut reported) = (0, 0);
            while let Some(event) = inbox.recv().await {
                let second = match event {
                    Event::Sent(second) | Event::Dropped(second) | Event::Closed(second) => second,
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
