//! A cold start, second by second.
//!
//! A service that handles 100 requests per second when warm is restarted and immediately hit
//! by more traffic than it can take. The warm-up limiter admits a third of the full rate at
//! first and ramps up as the service proves itself; this prints what it admits each second.
//!
//! Time is simulated with a `ManualClock`, so the 15 seconds run instantly and the output is
//! the same on every machine:
//!
//! ```text
//! cargo run --release --example cold_start
//! ```

use std::time::Duration;

use admit::clock::ManualClock;
use admit::warmup::{Phase, WarmUp};

fn main() -> Result<(), admit::ConfigError> {
    let clock = ManualClock::new();
    let limiter = WarmUp::builder(100.0)
        .warm_up_period(Duration::from_secs(10))
        .cold_factor(3)
        .clock(clock.clone())
        .build()?;

    println!("Offered load: 1000 requests/s. Full rate: 100/s. Cold rate: 100/3 ≈ 33/s.\n");
    println!("second  admitted  rejected  limit (req/s)  stored tokens  phase");
    for second in 0..16 {
        let at_start = limiter.snapshot();
        let (mut admitted, mut rejected) = (0, 0);
        for _ in 0..1000 {
            match limiter.try_acquire() {
                Ok(()) => admitted += 1,
                Err(_) => rejected += 1,
            }
            clock.advance(Duration::from_millis(1));
        }
        let phase = match at_start.phase {
            Phase::Cold => "cold".to_string(),
            Phase::Warming => format!("warming {:>3.0} %", at_start.progress() * 100.0),
            Phase::Warm => "warm".to_string(),
        };
        println!(
            "{second:>6}  {admitted:>8}  {rejected:>8}  {:>13.2}  {:>13}  {phase}",
            at_start.qps_limit, at_start.stored_tokens
        );
    }

    println!("\nThen the service goes idle for 12 seconds and the bucket refills:");
    clock.advance(Duration::from_secs(12));
    let snapshot = limiter.snapshot();
    println!(
        "after idle: limit {:.2} req/s, {} stored tokens, {:?}",
        snapshot.qps_limit, snapshot.stored_tokens, snapshot.phase
    );
    Ok(())
}
