//! Independent, single-threaded reference model of `admit::warmup::WarmUp`: Guava's
//! `SmoothRateLimiter.SmoothWarmingUp` (`warmup.md` §3) in nanoseconds, extended with the
//! behaviours admit documents on top of it (`src/warmup/mod.rs`, `Payment`, the builder's
//! `burst`, `set_rate`).
//!
//! For differential testing only, and deliberately plain: Guava's three fields (`stored`
//! permits as an `f64`, the schedule in whole ns, a refusal flag), its curve constants, and each
//! rule spelled out once in floating point, with no integer lanes, no fixed point and no packing.
//!
//! What it models, in Guava's terms (time in ns since the limiter was built; `whole` truncates
//! to whole ns where Guava truncates to whole µs):
//!
//! - **The curve** (Guava's constants, any cold factor): `stable = 1 s / rate`,
//!   `cold = stable · f`, `threshold = ½ · period / stable`,
//!   `max = threshold + 2 · period / (stable + cold)`,
//!   `slope = (cold − stable) / (max − threshold)`; idle time stores one permit per
//!   `period / max` ns, up to `max`. Spending `k` stored permits from `x` costs the integral of
//!   the spacing over `[x − k, x]`; permits beyond the stored ones cost `stable` each.
//! - **Paying later** (Guava's `reserve`): a request waits until `next_free`, when the earlier
//!   requests are paid for; time after `next_free` is idle and refills the bucket first; the
//!   request's own cost then moves `next_free` on.
//! - **Paying now** (admit's default, Sentinel's pacer): the schedule is when the last request
//!   passed; `n` permits are due once the time since then covers their cost at the level now
//!   (one permit's price and the rest's, each in whole ns), and are spent from the level before
//!   any idle refill. Time after the due time is idle. The first request passes at once.
//! - **A refusal changes nothing**, as in Guava (not even a resync), but it marks the unmet
//!   demand: **demand-aware cooling**, after a refusal the first spacing past the schedule is
//!   not idle.
//! - **The burst**: a request may pass up to `burst` before its turn. A request that finds the
//!   schedule free restarts it a *restart lead* ahead of the clock: what spending the stored
//!   permits would save over the burst credit (zero when warm or with no burst), so that the
//!   credit buys no more than the burst at the spacing in force.
//! - **`set_rate`**: Guava's rescale `stored · new max / old max` (the same share of the
//!   maximum); the schedule is kept. Paying now, a request's price is always worked out at the
//!   rate in force, so the next one is priced at the new rate.
//! - **A cold start** is full, a warm one empty; paying later the schedule starts free at the
//!   build (so a warm bucket refills from then), paying now it has no pass yet (and does not
//!   refill until its first).
//!
//! Two differences from Guava, both documented by admit, are on purpose: demand-aware cooling
//! (Guava credits every gap as idle, google/guava#3552) and the restart lead (Guava has no
//! burst); with no refusal and no burst, paying later is Guava's model exactly (TV-30, TV-31:
//! [`self_check`]).
//!
//! Where the implementation may legitimately round a truncation to whole ns the other way (it
//! evaluates the same quantities in another order and keeps the stored permits as a fraction
//! of `max`), the model says so: see
//! [`Admission::roundings`] and [`GuavaModel::uncertainty`]. It never adjusts its own
//! arithmetic to the implementation's.
//!
//! Include from an integration test with
//! `#[path = "support/guava_model.rs"] mod guava_model;`.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use admit::warmup::Payment;

pub const SEC: u64 = 1_000_000_000;

/// Whole ns of a non-negative span of ns, truncated as Guava truncates its µs.
pub fn whole(nanos: f64) -> u64 {
    nanos as u64
}

/// How far apart, relative to the size of the terms they are worked out from, two evaluations
/// of one quantity in different orders may be. The implementation's and the model's differ by
/// a few ulps (about `1e-15` of the terms: the slope's intercept form, the stored permits kept
/// as a fraction of `max`, the refill as a product rather than a quotient); `1e-12` leaves a
/// wide margin and still flags only a truncation within a small fraction of a ns of a whole
/// ns.
const RELATIVE_PRECISION: f64 = 1e-12;

/// Whether `nanos`, worked out from terms of size up to `scale`, lies so close to a whole ns
/// that the implementation's evaluation of it may truncate to the neighbouring one.
pub fn near_whole(nanos: f64, scale: f64) -> bool {
    let eps = RELATIVE_PRECISION * scale + 1e-9;
    let frac = nanos - nanos.floor();
    frac < eps || 1.0 - frac < eps
}

/// Guava's constants for one rate, warm-up period and cold factor, in permits and ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Curve {
    pub rate: f64,
    /// The warm-up period, in ns.
    pub period: f64,
    pub cold_factor: f64,
    /// The spacing when warm, `1 s / rate`.
    pub stable: f64,
    /// The spacing when cold, `stable · cold_factor`.
    pub cold: f64,
    /// At or below this many stored permits the full rate applies (Guava's `thresholdPermits`).
    pub threshold: f64,
    /// The most permits stored (cold).
    pub max: f64,
    /// The spacing's rise per stored permit above the threshold, in ns.
    pub slope: f64,
    /// Idle ns that store one permit (Guava's `coolDownIntervalMicros`, in ns).
    pub cool_down: f64,
}

impl Curve {
    pub fn new(rate: f64, period: Duration, cold_factor: f64) -> Curve {
        let period = period.as_nanos() as f64;
        let stable = 1e9 / rate;
        let cold = stable * cold_factor;
        let threshold = 0.5 * period / stable;
        let max = threshold + 2.0 * period / (stable + cold);
        Curve {
            rate,
            period,
            cold_factor,
            stable,
            cold,
            threshold,
            max,
            slope: (cold - stable) / (max - threshold),
            cool_down: period / max,
        }
    }

    /// The spacing, in ns, of a request spending the stored permit at level `stored` (Guava's
    /// `permitsToTime` above the threshold).
    pub fn interval(&self, stored: f64) -> f64 {
        if stored > self.threshold {
            self.stable + (stored - self.threshold) * self.slope
        } else {
            self.stable
        }
    }

    /// What `permits` cost, in ns, with `stored` permits stored, and how many stored permits they
    /// spend (Guava's `storedPermitsToWaitTime` plus `stable` for each fresh permit).
    pub fn cost(&self, stored: f64, permits: f64) -> (f64, f64) {
        let spend = permits.min(stored);
        let above = (stored - self.threshold).max(0.0);
        let spent_above = above.min(spend);
        // The trapezoid under the spacing over the part spent above the threshold.
        let sloped =
            spent_above * (self.interval(stored) + self.interval(stored - spent_above)) / 2.0;
        // Everything else, stored below the threshold or fresh, at the full rate.
        let flat = (permits - spent_above) * self.stable;
        (sloped + flat, spend)
    }

    /// `stored` after `idle` ns without unmet demand (Guava's `resync`), up to `max`.
    pub fn refill(&self, stored: f64, idle: u64) -> f64 {
        (stored + idle as f64 / self.cool_down).min(self.max)
    }

    /// How far past the clock a schedule restarting at level `stored` begins, in ns (before
    /// truncation): what spending the stored permits saves on `1 s + burst` worth of spacing at
    /// `stored`. The `k`-th permit of that span costs `slope · min(k, above)` less than the first,
    /// so the saving is the integral of that; never more than the burst, none when warm.
    pub fn restart_lead(&self, stored: f64, burst: u64) -> f64 {
        let above = stored - self.threshold;
        if above <= 0.0 || burst == 0 {
            return 0.0;
        }
        let span = 1e9 + burst as f64;
        let permits = span / self.interval(stored);
        let saved = if permits <= above {
            self.slope * permits * permits / 2.0
        } else {
            self.slope * (above * permits - above * above / 2.0)
        };
        saved.min(burst as f64)
    }

    /// The size of the terms a price of `permits` is worked out from (see [`near_whole`]).
    fn price_scale(&self, permits: f64) -> f64 {
        (permits + 5.0) * self.cold
    }
}

/// An admission the model made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    /// How long the request waits for its turn, in ns (the burst not yet taken off).
    pub wait: u64,
    /// Whether the request found the schedule free and restarted it.
    pub restart: bool,
    /// How many of the truncations that set the schedule after this admission lie within
    /// rounding of a whole ns ([`near_whole`]): the implementation's schedule may differ from
    /// the model's by up to as many ns.
    pub roundings: u64,
}

/// The model: one limiter, driven by explicit times in ns since it was built.
#[derive(Clone, Debug)]
pub struct GuavaModel {
    curve: Curve,
    period: Duration,
    cold_factor: f64,
    payment: Payment,
    burst: u64,
    /// Stored permits, `0..=max`.
    stored: f64,
    /// Paying later: Guava's `nextFreeTicket`, when the permits reserved so far are paid for.
    /// Paying now: when the last request passed (plus its restart lead); `None` before the
    /// first.
    next_free: Option<u64>,
    /// Whether a request was refused since the last admission.
    denied: bool,
}

impl GuavaModel {
    pub fn new(
        rate: f64,
        period: Duration,
        cold_factor: f64,
        payment: Payment,
        burst: Duration,
        start_warm: bool,
    ) -> GuavaModel {
        let curve = Curve::new(rate, period, cold_factor);
        GuavaModel {
            curve,
            period,
            cold_factor,
            payment,
            burst: burst.as_nanos() as u64,
            stored: if start_warm { 0.0 } else { curve.max },
            next_free: match payment {
                Payment::Later => Some(0),
                Payment::Now => None,
            },
            denied: false,
        }
    }

    pub fn curve(&self) -> &Curve {
        &self.curve
    }

    pub fn stored(&self) -> f64 {
        self.stored
    }

    /// Takes the implementation's stored permits, read back exactly from its snapshot while its
    /// schedule is busy, as the model's own.
    pub fn set_stored(&mut self, stored: f64) {
        self.stored = stored;
    }

    /// Whether the schedule has started: always paying later, after the first admission paying
    /// now.
    pub fn started(&self) -> bool {
        self.next_free.is_some()
    }

    /// When a request for `permits` is due, in ns: paying later when the earlier permits are
    /// paid for, whatever the request's size; paying now when the time since the last pass
    /// covers one permit's price at the level now, plus the price of the rest (0 before the
    /// first pass: at once).
    pub fn due(&self, permits: u32) -> u64 {
        let Some(next_free) = self.next_free else {
            return 0;
        };
        match self.payment {
            Payment::Later => next_free,
            Payment::Now => {
                let (one, all) = self.prices(permits);
                next_free + whole(one) + whole(all - one)
            }
        }
    }

    /// One permit's price and `permits`' price at the level now, in ns.
    fn prices(&self, permits: u32) -> (f64, f64) {
        let one = self.curve.cost(self.stored, 1.0).0;
        let all = self.curve.cost(self.stored, f64::from(permits)).0;
        (one, all)
    }

    /// How many ns the times a request for `permits` reads may differ from the
    /// implementation's beyond any drift the caller tracks, by the roundings the model can
    /// see: paying now, the price of the next permit, which the implementation truncated when
    /// the last request passed (in floating point from its own bits), and
    /// that of the further permits; after a refusal, the spacing that does not count as idle.
    pub fn uncertainty(&self, permits: u32) -> u64 {
        if !self.started() {
            return 0;
        }
        let curve = &self.curve;
        let mut roundings = 0;
        if self.payment == Payment::Now {
            let (one, all) = self.prices(permits);
            roundings += u64::from(near_whole(one, curve.price_scale(1.0)));
            roundings += self.split_rounding(permits, one, all);
        }
        if self.denied {
            let interval = curve.interval(self.stored);
            roundings += u64::from(near_whole(interval, curve.price_scale(1.0)));
        }
        roundings
    }

    /// Paying now, whether the price of the permits beyond the first, truncated on its own,
    /// lies within rounding of a whole ns.
    fn split_rounding(&self, permits: u32, one: f64, all: f64) -> u64 {
        let scale = self.curve.price_scale(f64::from(permits));
        u64::from(permits > 1 && near_whole(all - one, 2.0 * scale))
    }

    /// Moves the schedule by `by` ns (the implementation's schedule may lie off the model's by
    /// its roundings).
    pub fn shift(&mut self, by: i64) {
        if let Some(next_free) = &mut self.next_free {
            *next_free = next_free.saturating_add_signed(by);
        }
    }

    /// Aligns the schedule with an implementation seen to make `permits` due at `due` (from an
    /// exact wait or a refusal's retry hint), and returns by how many ns a one-permit request's
    /// due time may still differ: paying now after a multi-permit request, the rounding of the
    /// further permits' price.
    pub fn sync(&mut self, permits: u32, due: u64) -> u64 {
        if !self.started() {
            return 0;
        }
        let by = due as i128 - self.due(permits) as i128;
        self.shift(by as i64);
        match self.payment {
            Payment::Later => 0,
            Payment::Now => {
                let (one, all) = self.prices(permits);
                self.split_rounding(permits, one, all)
            }
        }
    }

    /// Until when the schedule, due at `due`, was busy: after a refusal the first spacing past
    /// it (at the level stored) is not idle either.
    fn busy_until(&self, due: u64) -> u64 {
        if self.denied {
            due + whole(self.curve.interval(self.stored))
        } else {
            due
        }
    }

    /// A request refused: only the mark of unmet demand changes.
    pub fn refuse(&mut self) {
        self.denied = true;
    }

    /// Admits a request for `permits` (at least 1) at `now`, however long it waits.
    pub fn admit(&mut self, now: u64, permits: u32) -> Admission {
        let curve = self.curve;
        let n = f64::from(permits);
        let due = self.due(permits);
        let restart = now >= due;
        let ready = now.max(due);
        let burst = self.burst;
        let mut roundings = 0;
        let mut lead = |left: f64| {
            let lead = curve.restart_lead(left, burst);
            let scale = 4.0 * curve.cold_factor * (1e9 + burst as f64);
            roundings += u64::from(lead > 0.0 && near_whole(lead, scale));
            whole(lead)
        };
        match self.payment {
            Payment::Later => {
                let idle = now.saturating_sub(self.busy_until(due));
                let stored = curve.refill(self.stored, idle);
                let (cost, spend) = curve.cost(stored, n);
                let left = stored - spend;
                let mut next_free = ready + whole(cost);
                if restart {
                    next_free += lead(left);
                }
                roundings += u64::from(near_whole(cost, curve.price_scale(n)));
                self.stored = left;
                self.next_free = Some(next_free);
            }
            Payment::Now => {
                let idle = if self.started() {
                    now.saturating_sub(self.busy_until(due))
                } else {
                    0
                };
                // Priced (in `due`) and spent at the level before the refill.
                let spend = n.min(self.stored);
                let left = curve.refill(self.stored, idle) - spend;
                let passed = if restart { now + lead(left) } else { due };
                self.stored = left;
                self.next_free = Some(passed);
            }
        }
        self.denied = false;
        Admission {
            wait: ready - now,
            restart,
            roundings,
        }
    }

    /// A request for `permits` at `now` willing to wait `max_wait` ns (the burst included):
    /// `Ok` with its wait (the burst not taken off), or `Err` with how much longer it would have
    /// to be willing to wait.
    pub fn request(&mut self, now: u64, permits: u32, max_wait: u64) -> Result<u64, u64> {
        let wait = self.due(permits).saturating_sub(now);
        if wait > max_wait {
            self.refuse();
            return Err(wait - max_wait);
        }
        Ok(self.admit(now, permits).wait)
    }

    /// A new full rate from now on: the stored permits keep their share of `max` (Guava's
    /// `stored · newMax / oldMax`); the schedule is kept. Returns how many ns the
    /// implementation's schedule may move off the model's: paying now it re-prices the permit
    /// due next by taking the old price off (as the implementation truncated it when the last
    /// request passed) and adding the new one.
    ///
    /// Guava resyncs at the old rate first; the model does not, as admit does not: idle time
    /// stores `1 / period` of `max` per ns on either curve, so crediting it before or after
    /// the rescale stores the same share.
    pub fn set_rate(&mut self, rate: f64) -> u64 {
        let old = self.curve;
        let mut roundings = 0;
        if self.payment == Payment::Now && self.started() {
            let price = old.cost(self.stored, 1.0).0;
            roundings += u64::from(near_whole(price, old.price_scale(1.0)));
        }
        self.curve = Curve::new(rate, self.period, self.cold_factor);
        self.stored = self.stored * self.curve.max / old.max;
        roundings
    }

    /// The stored permits a snapshot at `now` reports: with the idle time since the schedule
    /// was last busy credited (paying now, none before the first pass).
    pub fn stored_at(&self, now: u64) -> f64 {
        if !self.started() {
            return self.stored;
        }
        let idle = now.saturating_sub(self.busy_until(self.due(1)));
        self.curve.refill(self.stored, idle)
    }

    /// Whether the schedule is busy at `now` even if it lies `drift` ns earlier than the
    /// model's, so that a snapshot reports the stored permits themselves.
    pub fn busy_at(&self, now: u64, drift: u64) -> bool {
        !self.started() || self.due(1) > now.saturating_add(drift)
    }
}

/// Guava's acquires as its tests make them: reserve one permit, then sleep as long as told.
/// Returns the waits in µs, rounded to the nearest, and the time after the last sleep.
pub fn acquires(model: &mut GuavaModel, now: u64, count: usize) -> (Vec<u64>, u64) {
    let mut now = now;
    let waits = (0..count)
        .map(|_| {
            let wait = model.request(now, 1, u64::MAX).expect("never refused");
            now += wait;
            (wait + 500) / 1000
        })
        .collect();
    (waits, now)
}

/// Guava's own test vectors (`warmup.md` §6, TV-30 and TV-31, from `RateLimiterTest`), paying
/// later with no burst: every wait, in µs. Panics on a mismatch.
pub fn self_check() {
    let guava = |rate, cold_factor| {
        GuavaModel::new(
            rate,
            Duration::from_secs(4),
            cold_factor,
            Payment::Later,
            Duration::ZERO,
            false,
        )
    };
    let ms = |ms: u64| ms * 1_000_000;

    // TV-30 `testWarmUp`: 2 per second, 4 s, factor 3.
    let cold = [
        0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000, 500_000,
    ];
    let mut model = guava(2.0, 3.0);
    let (waits, now) = acquires(&mut model, 0, 8);
    assert_eq!(waits, cold, "TV-30 from cold");
    // Repay the last acquire, then cold again after the whole period.
    let (waits, now) = acquires(&mut model, now + ms(500) + ms(4000), 8);
    assert_eq!(waits, cold, "TV-30 cold again");
    // Half the period is not enough to leave the full rate.
    let (waits, _) = acquires(&mut model, now + ms(500) + ms(2000), 8);
    assert_eq!(
        waits,
        [
            0, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000, 500_000
        ]
    );

    // TV-31 `testWarmUpWithColdFactor`: 5 per second, 4 s, factor 10.
    let cold = [
        0, 1_752_500, 1_257_500, 762_500, 300_227, 200_000, 200_000, 200_000,
    ];
    let mut model = guava(5.0, 10.0);
    let (waits, now) = acquires(&mut model, 0, 8);
    assert_eq!(waits, cold, "TV-31 from cold");
    let (waits, now) = acquires(&mut model, now + ms(200) + ms(4000), 8);
    assert_eq!(waits, cold, "TV-31 cold again");
    let (waits, _) = acquires(&mut model, now + ms(200) + ms(1000), 8);
    assert_eq!(
        waits,
        [
            0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000
        ]
    );

    // `testWarmUpWithColdFactor1`: a factor of 1 is a flat limiter, no warm-up at all.
    let flat = [
        0, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000, 200_000,
    ];
    let mut model = guava(5.0, 1.0);
    let (waits, now) = acquires(&mut model, 0, 8);
    assert_eq!(waits, flat, "factor 1");
    let (waits, _) = acquires(&mut model, now + ms(340), 8);
    assert_eq!(waits, flat, "factor 1 after 340 ms");
}
