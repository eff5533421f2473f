//! Both limiters called directly from a pool of worker threads: no tower, no async.
//!
//! A producer thread offers jobs at a steady rate into a bounded queue; a pool of worker
//! threads takes them one at a time and, for each job:
//!
//! 1. asks the process-wide [`WarmUp`] bucket for a permit ([`WarmUp::try_acquire`]);
//! 2. asks the process-wide [`Shedder`] ([`Shedder::allow`]);
//! 3. does a fixed amount of CPU work (about 250 µs, calibrated at start) and reports the job
//!    done with [`Permit::pass`](admit::shed::Permit::pass).
//!
//! Everything is real: the monotonic clock, and the shedder's default CPU signal (`SystemCpu`,
//! which measures the process's cgroup, or the process, every 250 ms). The program prints one
//! line per second and a summary.
//!
//! The rates are sized from the number of CPUs: while cold, the bucket admits about 40 % of
//! what the CPUs can do; once warm, its full rate is 25 % *more* than they can do, as when a
//! rate was sized for a bigger machine or a neighbour is taking CPU. Then only the shedder
//! stands between the queue and a saturated CPU. But the shedder reacts to a CPU signal
//! averaged over about 5 seconds, and a default run lasts 6: expect it to refuse nothing, which
//! the program says rather than faking it. Run longer to give it time:
//!
//! ```text
//! cargo run --release --example direct                  # 6 s
//! cargo run --release --example direct -- --seconds 25  # long enough for the CPU average
//! ```
//!
//! Whether and when the shedder engages depends on the machine: its CPU signal measures the
//! whole container (or cgroup), so other processes count too.

use std::error::Error;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use admit::clock::Clock;
use admit::shed::Shedder;
use admit::signal::Cause;
use admit::signal::cpu::{CpuSource, SystemCpu};
use admit::warmup::{Phase, WarmUp};

/// CPU time per admitted job.
const WORK: Duration = Duration::from_micros(250);
/// The default run length.
const DEFAULT_SECONDS: u64 = 6;
/// The warm-up period. Short, so that a 6 s run goes from cold to warm.
const WARM_UP_PERIOD: Duration = Duration::from_secs(3);
const COLD_FACTOR: u32 = 3;
/// Jobs waiting for a worker. A full queue turns jobs away before either limiter sees them.
const QUEUE: usize = 1024;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// What happened to the jobs so far.
#[derive(Default)]
struct Counters {
    offered: AtomicU64,
    queue_full: AtomicU64,
    admitted: AtomicU64,
    warm_up_refused: AtomicU64,
    shed_cpu: AtomicU64,
    shed_cool_off: AtomicU64,
    /// The shortest and longest retry hints handed out, in ns.
    warm_up_hint: HintRange,
    shed_hint: HintRange,
}

struct HintRange {
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for HintRange {
    fn default() -> Self {
        HintRange {
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }
}

impl HintRange {
    fn record(&self, hint: Duration) {
        let nanos = u64::try_from(hint.as_nanos()).unwrap_or(u64::MAX);
        self.min.fetch_min(nanos, Ordering::Relaxed);
        self.max.fetch_max(nanos, Ordering::Relaxed);
    }

    fn describe(&self) -> String {
        let (min, max) = (
            self.min.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        );
        let ms = |nanos: u64| nanos as f64 / 1e6;
        match min.cmp(&max) {
            std::cmp::Ordering::Greater => "none".to_string(),
            std::cmp::Ordering::Equal => format!("{:.1} ms", ms(min)),
            std::cmp::Ordering::Less => format!("{:.1} ms to {:.1} ms", ms(min), ms(max)),
        }
    }
}

/// The counters at one moment, to print per-second differences.
#[derive(Clone, Copy, Default)]
struct Totals {
    offered: u64,
    queue_full: u64,
    admitted: u64,
    warm_up_refused: u64,
    shed: u64,
}

impl Counters {
    fn totals(&self) -> Totals {
        Totals {
            offered: self.offered.load(Ordering::Relaxed),
            queue_full: self.queue_full.load(Ordering::Relaxed),
            admitted: self.admitted.load(Ordering::Relaxed),
            warm_up_refused: self.warm_up_refused.load(Ordering::Relaxed),
            shed: self.shed_cpu.load(Ordering::Relaxed)
                + self.shed_cool_off.load(Ordering::Relaxed),
        }
    }
}

/// The work an admitted job does: a fixed number of xorshift steps, so that every job costs
/// the same CPU time however the threads are scheduled (spinning until a deadline would not).
fn work(steps: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..black_box(steps) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// How many steps of [`work`] take [`WORK`] on this machine (the fastest of a few tries, so
/// that a preempted try does not count).
fn calibrate() -> u64 {
    const PROBE: u64 = 200_000;
    let fastest = (0..5)
        .map(|_| {
            let start = Instant::now();
            work(PROBE);
            start.elapsed()
        })
        .min()
        .unwrap_or(WORK)
        .max(Duration::from_nanos(1));
    (PROBE as f64 * WORK.as_secs_f64() / fastest.as_secs_f64()).max(1.0) as u64
}

/// One worker: takes jobs until the producer hangs up and the queue is empty.
fn worker(
    jobs: &Mutex<Receiver<u64>>,
    limiter: &WarmUp,
    shedder: &Shedder,
    counters: &Counters,
    steps: u64,
) {
    loop {
        // The lock is held only while waiting for the next job, never during one.
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(_job) = job else { return };

        // The warm-up bucket first: it is the cheaper check, and while cold it refuses most
        // jobs, which then never count as in flight for the shedder.
        if let Err(rejected) = limiter.try_acquire() {
            counters.warm_up_refused.fetch_add(1, Ordering::Relaxed);
            counters.warm_up_hint.record(rejected.retry_after());
            continue;
        }
        let permit = match shedder.allow() {
            Ok(permit) => permit,
            Err(overloaded) => {
                let counter = match overloaded.reason() {
                    Cause::Cpu => &counters.shed_cpu,
                    // `Cause` may gain variants; count any other as a cool-off.
                    _ => &counters.shed_cool_off,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                counters.shed_hint.record(overloaded.retry_after());
                continue;
            }
        };
        work(steps);
        // Only passes teach the shedder what the service can carry; a job that failed would
        // call `permit.fail()` (and a panic unwinding past the permit counts as a failure).
        permit.pass();
        counters.admitted.fetch_add(1, Ordering::Relaxed);
    }
}

/// Offers `rate` jobs per second until `stop`, pacing itself by elapsed time. A job that finds
/// the queue full is turned away. Owns the sender: returning drops it, which tells the workers
/// that no more jobs will come.
fn producer(jobs: SyncSender<u64>, rate: u64, stop: &AtomicBool, counters: &Counters) {
    let start = Instant::now();
    let mut sent = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while sent < due {
            counters.offered.fetch_add(1, Ordering::Relaxed);
            match jobs.try_send(sent) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    counters.queue_full.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
            sent += 1;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// `--seconds N`, or the default.
fn seconds_arg() -> Result<u64, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(DEFAULT_SECONDS),
        [flag, value] if flag == "--seconds" => match value.parse() {
            Ok(seconds) if seconds > 0 => Ok(seconds),
            _ => Err(format!(
                "--seconds: `{value}` is not a positive whole number"
            )),
        },
        _ => Err("usage: direct [--seconds N]".to_string()),
    }
}

fn sleep_until(clock: &impl Clock, at_nanos: u64) {
    thread::sleep(Duration::from_nanos(
        at_nanos.saturating_sub(clock.now_nanos()),
    ));
}

fn main() -> Result<(), Box<dyn Error>> {
    let seconds = seconds_arg()?;
    let cpus = thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let steps = calibrate();
    // What the CPUs can do, if the work had them all to itself.
    let capacity = cpus * (NANOS_PER_SEC / WORK.as_nanos() as u64);
    let full_rate = capacity * 5 / 4;
    let offered = full_rate * 3 / 2;
    // Twice as many threads as CPUs, as a pool sized for blocking work would have: enough
    // that the CPU, not the pool, is the bottleneck once the bucket is warm.
    let workers = 2 * cpus;

    let limiter = Arc::new(
        WarmUp::builder(full_rate as f64)
            .warm_up_period(WARM_UP_PERIOD)
            .cold_factor(COLD_FACTOR)
            .build()?,
    );
    // Keep a handle on the CPU signal to print what it measures.
    let cpu = SystemCpu::new();
    let shedder = Arc::new(Shedder::builder().cpu(cpu.clone()).build()?);
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));

    // The CPU sampler's first measurement takes one 250 ms tick; wait for it, so that the
    // source printed below is known and the first lines already show a load.
    let waiting_since = Instant::now();
    while cpu.source() == CpuSource::Starting && waiting_since.elapsed() < Duration::from_secs(1) {
        thread::sleep(Duration::from_millis(10));
    }

    println!(
        "{cpus} CPUs, {workers} worker threads, {} µs of CPU per admitted job ({steps} steps): \
         the CPUs can do about {capacity} jobs/s.",
        WORK.as_micros()
    );
    println!(
        "Offered {offered} jobs/s. Warm-up bucket: {full_rate}/s when warm, {}/s cold, {} s \
         warm-up period. Shedder: go-zero's defaults, CPU measured by {:?}.\n",
        full_rate / u64::from(COLD_FACTOR),
        WARM_UP_PERIOD.as_secs(),
        cpu.source()
    );

    let (sender, receiver) = mpsc::sync_channel(QUEUE);
    let receiver = Arc::new(Mutex::new(receiver));
    let mut threads = Vec::new();
    for index in 0..workers {
        let (receiver, limiter, shedder, counters) = (
            receiver.clone(),
            limiter.clone(),
            shedder.clone(),
            counters.clone(),
        );
        threads.push(
            thread::Builder::new()
                .name(format!("worker-{index}"))
                .spawn(move || worker(&receiver, &limiter, &shedder, &counters, steps))?,
        );
    }

    // Start on one of the bucket's whole seconds (it updates its limit once per second, on its
    // clock's whole seconds), so that each line covers exactly one of them.
    let clock = limiter.clock();
    let first_second = (clock.now_nanos() / NANOS_PER_SEC + 1) * NANOS_PER_SEC;
    sleep_until(clock, first_second);
    let producer_thread = {
        let (stop, counters) = (stop.clone(), counters.clone());
        thread::Builder::new()
            .name("producer".into())
            .spawn(move || producer(sender, offered, &stop, &counters))?
    };

    println!(
        "Per second: jobs offered, done, refused by the warm-up bucket, refused by the shedder, \
         turned away by the full queue;\nthe bucket's limit and phase at the start of the \
         second; the shedder's CPU signal (smoothed and raw), jobs in flight (now and smoothed) \
         and, while the CPU is hot, the in-flight count above which it sheds.\n"
    );
    println!(
        "        ------------------ jobs -----------------  ---- warm-up bucket ----  \
         ------------------ shedder ------------------"
    );
    println!(
        "second  offered   done  warm-up   shed  queue  limit/s  phase           CPU ‰   raw  \
         in flight   avg  sheds above"
    );
    let mut before = Totals::default();
    for second in 1..=seconds {
        let warm = limiter.snapshot();
        sleep_until(clock, first_second + second * NANOS_PER_SEC);
        let now = counters.totals();
        let shed = shedder.snapshot();
        let phase = match warm.phase {
            Phase::Cold => "cold".to_string(),
            Phase::Warming => format!("warming {:>3.0} %", warm.progress() * 100.0),
            Phase::Warm => "warm".to_string(),
        };
        let permille = |load: Option<u32>| load.map_or_else(|| "?".to_string(), |l| l.to_string());
        // The shedder refuses only while the CPU is hot *and* both the current and the
        // smoothed in-flight counts are above `max_flight` scaled by the overload factor.
        let sheds_above = if shed.hot {
            format!("{:.1}", shed.max_flight * shed.overload_factor)
        } else {
            "(cool CPU)".to_string()
        };
        println!(
            "{second:>6}  {:>7}  {:>5}  {:>7}  {:>5}  {:>5}  {:>7.0}  {phase:<14}  {:>5}  {:>4}  \
             {:>9}  {:>4.1}  {sheds_above:>11}",
            now.offered - before.offered,
            now.admitted - before.admitted,
            now.warm_up_refused - before.warm_up_refused,
            now.shed - before.shed,
            now.queue_full - before.queue_full,
            warm.qps_limit,
            permille(shed.cpu_permille),
            permille(cpu.raw_permille()),
            shed.flying,
            shed.avg_flying,
        );
        before = now;
    }

    stop.store(true, Ordering::Relaxed);
    producer_thread
        .join()
        .map_err(|_| "the producer thread panicked")?;
    // The producer has hung up: the workers finish what is queued, then return.
    for thread in threads {
        thread.join().map_err(|_| "a worker thread panicked")?;
    }

    let totals = counters.totals();
    let shed = shedder.snapshot();
    println!("\n{:>8} jobs offered", totals.offered);
    println!("{:>8} done", totals.admitted);
    println!(
        "{:>8} refused by the warm-up bucket (retry hints {})",
        totals.warm_up_refused,
        counters.warm_up_hint.describe()
    );
    println!(
        "{:>8} refused by the shedder: {} with the CPU hot, {} cooling off (retry hints {})",
        totals.shed,
        counters.shed_cpu.load(Ordering::Relaxed),
        counters.shed_cool_off.load(Ordering::Relaxed),
        counters.shed_hint.describe()
    );
    println!("{:>8} turned away by the full queue", totals.queue_full);
    println!(
        "\nThe shedder's view of its 5 s window: {:.0} arrivals/s, mean service time {}, at \
         best {} passes per 100 ms bucket and {} ms per job, so it trusts up to {:.1} jobs in \
         flight (before the overload factor).",
        shed.arrival_rate,
        shed.mean_service_time_ms
            .map_or_else(|| "none".to_string(), |ms| format!("{ms:.1} ms")),
        shed.max_pass,
        shed.min_rt_ms,
        shed.max_flight,
    );
    if totals.shed == 0 {
        println!(
            "\nThe shedder refused nothing. It sheds only while its CPU signal is at or above {} ‰ \
             (it read {} at the end) and more jobs are in flight than the service has shown it \
             can carry. The signal is a ~5 s average of the real CPU load, so from a cool start \
             it takes several seconds of saturation to get there, and on a machine with spare \
             CPU it never does. Try `--seconds 25`.",
            shed.cpu_threshold,
            shed.cpu_permille
                .map_or_else(|| "nothing".to_string(), |cpu| format!("{cpu} ‰")),
        );
    }
    Ok(())
}
