//! Long-lived sessions: clients that each hold a server-sent event stream through the proxy,
//! close it after a random lifetime (so sessions spread over the replicas as users come and go),
//! reconnect when a replica asks them to, and count every stream cut without notice.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::time::Instant;

/// What the session clients saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SessionCounts {
    /// Streams opened.
    pub opened: u64,
    /// Streams the client closed at the end of its lifetime.
    pub closed_by_client: u64,
    /// Streams ended by a replica's `reconnect` notice.
    pub told_to_reconnect: u64,
    /// Streams that ended without a notice: cut.
    pub cut: u64,
    /// Attempts to open a stream that failed (no replica, a refusal, a broken connection).
    pub failed_opens: u64,
    /// The longest time from a notice or a cut to the next stream's first event, ms.
    pub longest_reconnect_ms: u64,
    /// The mean of those times, ms.
    pub mean_reconnect_ms: f64,
}

#[derive(Debug, Default)]
struct Counters {
    opened: AtomicU64,
    closed: AtomicU64,
    told: AtomicU64,
    cut: AtomicU64,
    failed: AtomicU64,
    reconnects: AtomicU64,
    reconnect_us: AtomicU64,
    longest_us: AtomicU64,
}

/// `clients` session clients against `url` until `stop` says so.
#[derive(Debug)]
pub(super) struct Sessions {
    counters: Arc<Counters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Sessions {
    /// Starts `clients` clients, each holding one stream of `url` for an exponentially
    /// distributed lifetime of mean `lifetime` and opening the next one when it ends (after
    /// `pause` when the open failed), until `stop` is true.
    pub(super) fn start(
        url: String,
        clients: usize,
        lifetime: Duration,
        pause: Duration,
        seed: u64,
        stop: watch::Receiver<bool>,
    ) -> Self {
        let counters = Arc::new(Counters::default());
        let client: Http = HttpClient::builder(TokioExecutor::new()).build_http();
        let tasks = (0..clients)
            .map(|index| {
                let client = Client {
                    http: client.clone(),
                    url: url.clone(),
                    counters: Arc::clone(&counters),
                    lifetime,
                    pause,
                    rng: SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9)),
                };
                tokio::spawn(client.hold(stop.clone()))
            })
            .collect();
        Sessions { counters, tasks }
    }

    /// Stops the clients and returns what they saw.
    pub(super) async fn finish(self) -> SessionCounts {
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
        let c = &self.counters;
        let reconnects = c.reconnects.load(Ordering::Relaxed);
        SessionCounts {
            opened: c.opened.load(Ordering::Relaxed),
            closed_by_client: c.closed.load(Ordering::Relaxed),
            told_to_reconnect: c.told.load(Ordering::Relaxed),
            cut: c.cut.load(Ordering::Relaxed),
            failed_opens: c.failed.load(Ordering::Relaxed),
            longest_reconnect_ms: c.longest_us.load(Ordering::Relaxed) / 1000,
            mean_reconnect_ms: if reconnects == 0 {
                0.0
            } else {
                c.reconnect_us.load(Ordering::Relaxed) as f64 / reconnects as f64 / 1000.0
            },
        }
    }
}

type Http = HttpClient<HttpConnector, Empty<Bytes>>;

/// How a stream ended.
enum End {
    Closed,
    Told,
    Cut,
    OpenFailed,
}

/// One session client.
struct Client {
    http: Http,
    url: String,
    counters: Arc<Counters>,
    /// The mean lifetime of a stream.
    lifetime: Duration,
    /// The wait after a failed open.
    pause: Duration,
    rng: SmallRng,
}

impl Client {
    /// A stream at a time, for as long as the run lasts.
    async fn hold(mut self, mut stop: watch::Receiver<bool>) {
        // When the last stream ended on the server's side, to time the reconnection.
        let mut ended: Option<Instant> = None;
        loop {
            if *stop.borrow() {
                return;
            }
            // Exponential: −ln(U)·mean, U in (0, 1].
            let u: f64 = 1.0 - self.rng.random::<f64>();
            let lifetime = self.lifetime.mul_f64(-u.ln());
            let end = tokio::select! {
                end = self.stream(lifetime, &mut ended) => end,
                _ = stop.changed() => return,
            };
            let counters = &self.counters;
            match end {
                End::Closed => {
                    counters.closed.fetch_add(1, Ordering::Relaxed);
                }
                End::Told => {
                    counters.told.fetch_add(1, Ordering::Relaxed);
                    ended = Some(Instant::now());
                }
                End::Cut => {
                    counters.cut.fetch_add(1, Ordering::Relaxed);
                    ended = Some(Instant::now());
                }
                End::OpenFailed => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(self.pause).await;
                }
            }
        }
    }

    /// Opens one stream and follows it to its end, or closes it after `lifetime`.
    async fn stream(&self, lifetime: Duration, ended: &mut Option<Instant>) -> End {
        let Ok(request) = http::Request::get(&self.url).body(Empty::new()) else {
            return End::OpenFailed;
        };
        let Ok(response) = self.http.request(request).await else {
            return End::OpenFailed;
        };
        if !response.status().is_success() {
            let _ = response.into_body().collect().await;
            return End::OpenFailed;
        }
        let mut body = response.into_body();
        let mut text = String::new();
        let mut until = None;
        loop {
            let frame = match until {
                Some(until) => match tokio::time::timeout_at(until, body.frame()).await {
                    Ok(frame) => frame,
                    Err(_) => return End::Closed,
                },
                None => body.frame().await,
            };
            let Some(frame) = frame else { break };
            let Ok(frame) = frame else {
                return if until.is_some() {
                    End::Cut
                } else {
                    End::OpenFailed
                };
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            text.push_str(&String::from_utf8_lossy(&data));
            if until.is_none() && text.contains("event: hello") {
                until = Some(Instant::now() + lifetime);
                self.counters.opened.fetch_add(1, Ordering::Relaxed);
                if let Some(at) = ended.take() {
                    let us = at.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
                    let counters = &self.counters;
                    counters.reconnects.fetch_add(1, Ordering::Relaxed);
                    counters.reconnect_us.fetch_add(us, Ordering::Relaxed);
                    counters.longest_us.fetch_max(us, Ordering::Relaxed);
                }
            }
            if text.contains("event: reconnect") {
                return End::Told;
            }
        }
        if until.is_some() {
            End::Cut
        } else {
            End::OpenFailed
        }
    }
}
