//! Smoothing of raw CPU readings.

use std::time::Duration;

/// How [`SystemCpu`](super::SystemCpu) smooths its raw readings, taken every 250 ms.
///
/// Raw readings are noisy (a request burst, a GC pause); the shedder should react to sustained
/// load. Both averages below look back about 5 seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Smoothing {
    /// An exponential moving average with time constant `horizon`: each reading taken `Δt`
    /// after the previous one moves the average by `1 − e^(−Δt/horizon)` of the difference. It
    /// starts from the first reading and rounds instead of truncating. The default horizon,
    /// [`Smoothing::DEFAULT_HORIZON`], reproduces go-zero's weight of 0.95 per 250 ms. A zero
    /// horizon means no smoothing.
    Exponential {
        /// The time constant `τ`.
        horizon: Duration,
    },
    /// go-zero's average, for parity: `trunc(previous · 0.95 + raw · 0.05)` per reading,
    /// starting from 0.
    ///
    /// Its truncation biases it low: a steady 900 ‰ reads 881 ‰, and full load saturates at
    /// 981 ‰ (see the [guide](crate::guide::parity)).
    GoZero,
    /// No smoothing: the latest raw reading.
    Raw,
}

impl Smoothing {
    /// `−0.25 s / ln 0.95` ≈ 4.874 s: the horizon at which a 250 ms step weighs the previous
    /// average 0.95, as go-zero's does.
    pub const DEFAULT_HORIZON: Duration = Duration::from_nanos(4_873_931_437);
}

impl Default for Smoothing {
    fn default() -> Self {
        Smoothing::Exponential {
            horizon: Smoothing::DEFAULT_HORIZON,
        }
    }
}

/// The running state of a [`Smoothing`]: feed it raw readings, read the smoothed value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Smoother {
    smoothing: Smoothing,
    average: Option<f64>,
}

impl Smoother {
    /// A smoother that has seen no reading yet.
    pub(crate) fn new(smoothing: Smoothing) -> Self {
        Smoother {
            smoothing,
            average: None,
        }
    }

    /// Feeds a raw reading taken `elapsed` after the previous one; returns the new value.
    pub(crate) fn update(&mut self, raw_permille: u32, elapsed: Duration) -> u32 {
        let raw = f64::from(raw_permille);
        let average = match (self.smoothing, self.average) {
            (Smoothing::Raw, _) => raw,
            (Smoothing::GoZero, previous) => {
                // go-zero: `int64(float64(prev)*beta + float64(cur)*(1-beta))`, where Go folds
                // the constant `1 - 0.95` to exactly 0.05 (Rust's `1.0 - 0.95` is not).
                (previous.unwrap_or(0.0) * 0.95 + raw * 0.05).trunc()
            }
            (Smoothing::Exponential { .. }, None) => raw,
            (Smoothing::Exponential { horizon }, Some(_)) if horizon.is_zero() => raw,
            (Smoothing::Exponential { horizon }, Some(previous)) => {
                let weight = 1.0 - (-elapsed.as_secs_f64() / horizon.as_secs_f64()).exp();
                previous + weight * (raw - previous)
            }
        };
        self.average = Some(average);
        average.round() as u32
    }

    /// Which smoothing this is.
    pub(crate) fn smoothing(&self) -> Smoothing {
        self.smoothing
    }
}
