//! A cold start, second by second, in both warm-up buckets.
//!
//! A service that handles 100 requests per second when warm is restarted and immediately hit
//! by more traffic than it can take. The warm-up limiter admits a third of the full rate at
//! first and ramps up as the service proves itself; this prints what each bucket admits each
//! second: `WarmUp` (the default, Guava's smooth model) and `SentinelWarmUp` (Sentinel's
//! numbers).
//!
//! Time is simulated with a `ManualClock`, so the 16 seconds run instantly and the output is
//! the same on every machine:
//!
//! ```text
//! cargo run --release --example cold_start
//! ```

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::sentinel::SentinelWarmUp;
use admit::warmup::{Phase, WarmUp};

const OFFERED_PER_SECOND: u32 = 1000;

fn main() -> Result<(), admit::ConfigError> {
    let clock = ManualClock::new();
    let smooth = WarmUp::builder(100.0)
        .warm_up_period(Duration::from_secs(10))
        .cold_factor(3)
        .clock(clock.clone())
        .build()?;
    let sentinel = SentinelWarmUp::builder(100.0)
        .warm_up_period(Duration::from_secs(10))
        .cold_factor(3)
        .clock(clock.clone())
        .build()?;

    println!(
        "Offered load: {OFFERED_PER_SECOND} requests/s. Full rate: 100/s. Cold rate: 100/3 ≈ 33/s."
    );
    println!("Admitted per second, and the limit and phase at the start of the second:\n");
    println!(
        "second  | WarmUp: admitted  limit  phase         | SentinelWarmUp: admitted  limit  phase"
    );
    for second in 0..16 {
        let at_start = (smooth.snapshot(), sentinel.snapshot());
        let (mut admitted_smooth, mut admitted_sentinel) = (0, 0);
        for _ in 0..OFFERED_PER_SECOND {
            admitted_smooth += u32::from(smooth.try_acquire().is_ok());
            admitted_sentinel += u32::from(sentinel.try_acquire().is_ok());
            clock.advance(Duration::from_secs(1) / OFFERED_PER_SECOND);
        }
        println!(
            "{second:>6}  | {admitted_smooth:>16}  {:>5.1}  {:<13} | {admitted_sentinel:>23}  {:>5.1}  {}",
            at_start.0.qps_limit,
            phase(at_start.0.phase, at_start.0.progress()),
            at_start.1.qps_limit,
            phase(at_start.1.phase, at_start.1.progress()),
        );
    }
    println!(
        "\nWarmUp passes a one-second burst of the cold rate at once (its default burst), then \
         rises continuously\nand is warm within the 10 s period; SentinelWarmUp steps once per \
         second and is warm in second 12."
    );

    println!("\nThen the service goes idle for 12 seconds and both limiters cool down again:");
    clock.advance(Duration::from_secs(12));
    let (smooth, sentinel) = (smooth.snapshot(), sentinel.snapshot());
    for (name, limit, stored, max, phase_now, progress) in [
        (
            "WarmUp",
            smooth.qps_limit,
            smooth.stored_tokens,
            smooth.max_tokens,
            smooth.phase,
            smooth.progress(),
        ),
        (
            "SentinelWarmUp",
            sentinel.qps_limit,
            sentinel.stored_tokens,
            sentinel.max_tokens,
            sentinel.phase,
            sentinel.progress(),
        ),
    ] {
        println!(
            "{name:>13}: limit {limit:.2} req/s, {stored:.1} of {max:.1} tokens stored, {}",
            phase(phase_now, progress)
        );
    }
    Ok(())
}

fn phase(phase: Phase, progress: f64) -> String {
    match phase {
        Phase::Cold => "cold".to_string(),
        Phase::Warming => format!("warming {:>3.0} %", progress * 100.0),
        Phase::Warm => "warm".to_string(),
    }
}
