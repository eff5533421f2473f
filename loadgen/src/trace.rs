//! Rate traces: the offered rate (requests per second) as a piecewise function of the time
//! elapsed since the start of a run.

use std::fmt;
use std::time::Duration;

/// One piece of a [`Trace`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Segment {
    /// `rate` requests per second for `duration`.
    Constant {
        /// Requests per second.
        rate: f64,
        /// How long the segment lasts.
        duration: Duration,
    },
    /// A rate that moves linearly from `from` to `to` requests per second over `duration`.
    Ramp {
        /// Requests per second at the segment's start.
        from: f64,
        /// Requests per second at the segment's end.
        to: f64,
        /// How long the segment lasts.
        duration: Duration,
    },
}

impl Segment {
    /// How long the segment lasts.
    pub fn duration(&self) -> Duration {
        match *self {
            Segment::Constant { duration, .. } | Segment::Ramp { duration, .. } => duration,
        }
    }

    /// The rates at the segment's start and end.
    fn ends(&self) -> (f64, f64) {
        match *self {
            Segment::Constant { rate, .. } => (rate, rate),
            Segment::Ramp { from, to, .. } => (from, to),
        }
    }

    /// The rate's slope, in requests per second per second.
    fn slope(&self) -> f64 {
        let (from, to) = self.ends();
        if from == to {
            0.0
        } else {
            (to - from) / self.duration().as_secs_f64()
        }
    }

    /// The rate `t` seconds into the segment.
    fn rate_at(&self, t: f64) -> f64 {
        let (from, to) = self.ends();
        if from == to {
            from
        } else {
            (from + self.slope() * t).clamp(from.min(to), from.max(to))
        }
    }

    /// The expected number of arrivals in the first `t` seconds of the segment: the integral
    /// of the rate, `from·t + slope·t²/2`.
    pub(crate) fn mass(&self, t: f64) -> f64 {
        let (from, _) = self.ends();
        (from * t + 0.5 * self.slope() * t * t).max(0.0)
    }

    /// The time into the segment, in seconds, at which [`mass`](Self::mass) reaches `m`: the
    /// root of `slope·t²/2 + from·t − m = 0`, written as `2m / (from + √(from² + 2·slope·m))`,
    /// which neither cancels nor divides by a zero slope.
    pub(crate) fn time_of_mass(&self, m: f64) -> f64 {
        let (from, _) = self.ends();
        let root = (from * from + 2.0 * self.slope() * m).max(0.0).sqrt();
        let denominator = from + root;
        if denominator > 0.0 {
            (2.0 * m / denominator).min(self.duration().as_secs_f64())
        } else {
            0.0
        }
    }
}

/// Why a [`Trace`] was refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TraceError {
    /// The trace has no segment.
    Empty,
    /// Segment `segment` (from 0) has a rate that is negative, infinite or NaN.
    Rate {
        /// The segment's index.
        segment: usize,
        /// The offending rate.
        rate: f64,
    },
    /// Segment `segment` (from 0) lasts no time.
    ZeroDuration {
        /// The segment's index.
        segment: usize,
    },
    /// The segments add up to more than [`Duration::MAX`].
    TooLong,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TraceError::Empty => f.write_str("a trace needs at least one segment"),
            TraceError::Rate { segment, rate } => write!(
                f,
                "segment {segment}: the rate {rate} is not a finite, non-negative number of \
                 requests per second"
            ),
            TraceError::ZeroDuration { segment } => {
                write!(f, "segment {segment}: the duration must be positive")
            }
            TraceError::TooLong => f.write_str("the segments add up to more than Duration::MAX"),
        }
    }
}

impl std::error::Error for TraceError {}

/// The offered rate over a run: segments one after another from time zero, validated.
///
/// ```
/// use std::time::Duration;
/// use admit_loadgen::Trace;
///
/// let s = Duration::from_secs;
/// // 100/s for 10 s, a ramp to 300/s over 5 s, 300/s for 10 s.
/// let trace = Trace::builder()
///     .constant(100.0, s(10))
///     .ramp(100.0, 300.0, s(5))
///     .constant(300.0, s(10))
///     .build()?;
/// assert_eq!(trace.duration(), s(25));
/// assert_eq!(trace.rate_at(Duration::from_millis(12_500)), 200.0);
/// assert_eq!(trace.expected_arrivals(Duration::ZERO, s(10)), 1000.0);
/// # Ok::<(), admit_loadgen::TraceError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    segments: Vec<Segment>,
    /// When each segment starts.
    starts: Vec<Duration>,
    duration: Duration,
}

impl Trace {
    /// A builder that appends segments.
    pub fn builder() -> TraceBuilder {
        TraceBuilder::default()
    }

    /// `rate` for `duration`.
    ///
    /// # Errors
    ///
    /// See [`TraceBuilder::build`].
    pub fn constant(rate: f64, duration: Duration) -> Result<Trace, TraceError> {
        Trace::builder().constant(rate, duration).build()
    }

    /// A step: `base` for `before`, `factor × base` for `during`, `base` again for `after`.
    ///
    /// # Errors
    ///
    /// See [`TraceBuilder::build`]; a negative or non-finite `factor` is a [`TraceError::Rate`]
    /// of segment 1.
    pub fn step(
        base: f64,
        factor: f64,
        before: Duration,
        during: Duration,
        after: Duration,
    ) -> Result<Trace, TraceError> {
        Trace::builder()
            .step(base, factor, before, during, after)
            .build()
    }

    /// A spike: `base` for `before`, a short burst at `factor × base` for `burst`, `base`
    /// again for `after`. The shape is a [`step`](Self::step)'s; the name says that the high
    /// segment is brief (seconds, against minutes of base load).
    ///
    /// # Errors
    ///
    /// As [`step`](Self::step).
    pub fn spike(
        base: f64,
        factor: f64,
        before: Duration,
        burst: Duration,
        after: Duration,
    ) -> Result<Trace, TraceError> {
        Trace::step(base, factor, before, burst, after)
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// When segment `index` starts, or `None` past the last one.
    pub fn segment_start(&self, index: usize) -> Option<Duration> {
        self.starts.get(index).copied()
    }

    /// The trace's total length.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The rate at `elapsed` since the start, in requests per second: a segment's own rate
    /// from its start (inclusive) to its end (exclusive); zero from the end of the trace on.
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        match self.locate(elapsed) {
            Some((index, into)) => self.segments[index].rate_at(into),
            None => 0.0,
        }
    }

    /// The expected number of arrivals between `from` and `to` (the integral of the rate);
    /// zero if `to <= from`.
    pub fn expected_arrivals(&self, from: Duration, to: Duration) -> f64 {
        if to <= from {
            return 0.0;
        }
        self.mass_until(to) - self.mass_until(from)
    }

    /// The expected number of arrivals from the start to `t`.
    fn mass_until(&self, t: Duration) -> f64 {
        let mut mass = 0.0;
        for (segment, &start) in self.segments.iter().zip(&self.starts) {
            if t <= start {
                break;
            }
            let into = (t - start).min(segment.duration());
            mass += segment.mass(into.as_secs_f64());
        }
        mass
    }

    /// The segment that `elapsed` falls in, and the seconds into it.
    fn locate(&self, elapsed: Duration) -> Option<(usize, f64)> {
        if elapsed >= self.duration {
            return None;
        }
        // The last segment that starts at or before `elapsed`.
        let index = self.starts.partition_point(|&start| start <= elapsed) - 1;
        Some((index, (elapsed - self.starts[index]).as_secs_f64()))
    }
}

/// Appends segments to a [`Trace`]; [`build`](Self::build) validates them.
#[derive(Clone, Debug, Default)]
pub struct TraceBuilder {
    segments: Vec<Segment>,
}

impl TraceBuilder {
    /// Appends `rate` requests per second for `duration`.
    pub fn constant(mut self, rate: f64, duration: Duration) -> Self {
        self.segments.push(Segment::Constant { rate, duration });
        self
    }

    /// Appends a rate that moves linearly from `from` to `to` over `duration`.
    pub fn ramp(mut self, from: f64, to: f64, duration: Duration) -> Self {
        self.segments.push(Segment::Ramp { from, to, duration });
        self
    }

    /// Appends a step: `base` for `before`, `factor × base` for `during`, `base` for `after`.
    pub fn step(
        self,
        base: f64,
        factor: f64,
        before: Duration,
        during: Duration,
        after: Duration,
    ) -> Self {
        self.constant(base, before)
            .constant(factor * base, during)
            .constant(base, after)
    }

    /// Appends any segment.
    pub fn segment(mut self, segment: Segment) -> Self {
        self.segments.push(segment);
        self
    }

    /// The trace.
    ///
    /// # Errors
    ///
    /// [`TraceError::Empty`] without segments; [`TraceError::Rate`] for the first segment with
    /// a rate that is negative, infinite or NaN; [`TraceError::ZeroDuration`] for the first
    /// that lasts no time; [`TraceError::TooLong`] if the durations overflow [`Duration`].
    pub fn build(self) -> Result<Trace, TraceError> {
        if self.segments.is_empty() {
            return Err(TraceError::Empty);
        }
        let mut starts = Vec::with_capacity(self.segments.len());
        let mut end = Duration::ZERO;
        for (index, segment) in self.segments.iter().enumerate() {
            let (from, to) = segment.ends();
            for rate in [from, to] {
                if !(rate.is_finite() && rate >= 0.0) {
                    return Err(TraceError::Rate {
                        segment: index,
                        rate,
                    });
                }
            }
            if segment.duration().is_zero() {
                return Err(TraceError::ZeroDuration { segment: index });
            }
            starts.push(end);
            end = end
                .checked_add(segment.duration())
                .ok_or(TraceError::TooLong)?;
        }
        Ok(Trace {
            segments: self.segments,
            starts,
            duration: end,
        })
    }
}
