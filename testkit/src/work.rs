//! A test server's CPU work per request: how long it takes (drawn from a distribution, longer
//! while the server is cold), and burning it. The cluster harness's replicas and the overload
//! benchmarks' server share it.

use std::cell::RefCell;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// How service times are distributed around their mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Exponential: M/M/c's assumption.
    Exponential,
    /// 90 % short and 10 % ten times longer, with the same mean.
    Bimodal,
}

impl Distribution {
    /// A service time with mean `mean`, from `uniform` in `[0, 1)` (and a second one for the
    /// bimodal choice).
    fn sample(self, mean: Duration, rng: &mut SmallRng) -> Duration {
        let mean = mean.as_secs_f64();
        let seconds = match self {
            // Inverse CDF; `1 − u` is in (0, 1], so the logarithm is finite.
            Distribution::Exponential => -mean * (1.0 - rng.random::<f64>()).ln(),
            Distribution::Bimodal => {
                let short = mean / 1.9;
                if rng.random::<f64>() < 0.1 {
                    10.0 * short
                } else {
                    short
                }
            }
        };
        Duration::from_secs_f64(seconds)
    }
}

/// The CPU work of a server's requests.
#[derive(Clone, Copy, Debug)]
pub struct Work {
    /// The mean service time once warm.
    pub mean: Duration,
    /// Its distribution.
    pub distribution: Distribution,
    /// How much more a request costs at the server's start, falling linearly to 1 over
    /// `cold`.
    pub cold_factor: f64,
    /// How long the server is cold.
    pub cold: Duration,
    /// `burn` iterations per millisecond of CPU on this machine (see [`calibrate`]).
    pub iterations_per_ms: f64,
}

impl Work {
    /// The cost factor `since_start` into the server's life.
    pub fn cold_cost(&self, since_start: Duration) -> f64 {
        if self.cold.is_zero() || since_start >= self.cold {
            return 1.0;
        }
        let left = 1.0 - since_start.as_secs_f64() / self.cold.as_secs_f64();
        1.0 + (self.cold_factor - 1.0) * left
    }

    /// The iterations of [`burn`] for one request `since_start` into the server's life.
    pub fn iterations(&self, since_start: Duration, rng: &mut SmallRng) -> u64 {
        let time = self.distribution.sample(self.mean, rng).as_secs_f64() * 1e3;
        (time * self.cold_cost(since_start) * self.iterations_per_ms) as u64
    }

    /// [`iterations`](Self::iterations) drawn from this thread's random source, seeded from
    /// `seed` and the thread on its first use.
    pub fn iterations_here(&self, since_start: Duration, seed: u64) -> u64 {
        thread_local! {
            static RNG: RefCell<Option<SmallRng>> = const { RefCell::new(None) };
        }
        RNG.with_borrow_mut(|rng| {
            let rng = rng.get_or_insert_with(|| {
                let thread = RandomState::new().hash_one(std::thread::current().id());
                SmallRng::seed_from_u64(seed ^ thread)
            });
            self.iterations(since_start, rng)
        })
    }
}

/// Spends `iterations` rounds of integer arithmetic the optimiser cannot remove.
pub fn burn(iterations: u64) -> u64 {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.rotate_left(5) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

/// Iterations of [`burn`] per millisecond of CPU: the fastest of 50 short rounds (the others
/// were interrupted). Run it where no CPU quota throttles it.
pub fn calibrate() -> f64 {
    const ROUNDS: u64 = 1 << 20;
    (0..50)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(burn(ROUNDS));
            ROUNDS as f64 / (start.elapsed().as_secs_f64() * 1e3)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(distribution: Distribution) -> (f64, f64) {
        let mut rng = SmallRng::seed_from_u64(7);
        let mean = Duration::from_millis(10);
        let samples: Vec<f64> = (0..200_000)
            .map(|_| distribution.sample(mean, &mut rng).as_secs_f64() * 1e3)
            .collect();
        let n = samples.len() as f64;
        let average = samples.iter().sum::<f64>() / n;
        let variance = samples.iter().map(|s| (s - average).powi(2)).sum::<f64>() / n;
        (average, variance.sqrt())
    }

    #[test]
    fn both_distributions_have_the_mean() {
        let (mean, deviation) = mean_of(Distribution::Exponential);
        assert!((mean - 10.0).abs() < 0.1, "{mean}");
        assert!((deviation - 10.0).abs() < 0.2, "{deviation}");
        let (mean, deviation) = mean_of(Distribution::Bimodal);
        assert!((mean - 10.0).abs() < 0.1, "{mean}");
        // 90 % at 5.26 ms and 10 % at 52.6 ms: a deviation of 5.26 ms × √(0.9 × 0.1 × 9²).
        assert!((deviation - 14.21).abs() < 0.3, "{deviation}");
    }

    #[test]
    fn the_cold_cost_falls_to_one() {
        let work = Work {
            mean: Duration::from_millis(10),
            distribution: Distribution::Exponential,
            cold_factor: 3.0,
            cold: Duration::from_secs(10),
            iterations_per_ms: 1000.0,
        };
        assert_eq!(work.cold_cost(Duration::ZERO), 3.0);
        assert_eq!(work.cold_cost(Duration::from_secs(5)), 2.0);
        assert_eq!(work.cold_cost(Duration::from_secs(10)), 1.0);
        assert_eq!(work.cold_cost(Duration::from_secs(60)), 1.0);
    }
}
