//! Independent, single-threaded reference model of Alibaba Sentinel's
//! `WarmUpController` (Java, 1.8.x) together with the statistics it reads
//! (`StatisticNode` with its second-level and minute-level `LeapArray`s).
//!
//! Written from the algorithm reference (`warmup.md` §1.2–§1.6, §1.8), for
//! differential testing only. It is intentionally plain: no atomics, no
//! optimisation, every Java arithmetic step spelled out with Java's types.
//!
//! Java type mapping used throughout:
//! * `int`    -> `i32` (wrapping arithmetic where Java could overflow),
//! * `long`   -> `i64`,
//! * `double` -> `f64`,
//! * `(int) d` / `(long) d` -> `d as i32` / `d as i64` (both languages
//!   truncate toward zero, saturate at the bounds and map NaN to 0).
//!
//! Include from an integration test with
//! `#[path = "support/sentinel_model.rs"] mod sentinel_model;`.

#![allow(dead_code, unreachable_pub)]

// ---------------------------------------------------------------------------
// Statistics: LeapArray / ArrayMetric / StatisticNode
// ---------------------------------------------------------------------------

/// One `WindowWrap<MetricBucket>`; only the pass counter matters here.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    window_start: i64,
    pass: i64,
}

/// What `LeapArray.currentWindow(t)` handed back.
enum Current {
    /// A slot of the array (freshly created, up to date, or just reset).
    Slot(usize),
    /// Java returns `null` (negative time) or a detached fresh window that is
    /// not stored in the array (time older than the slot's window). Either
    /// way, anything written to it is lost.
    Detached,
}

/// `LeapArray<MetricBucket>` (Sentinel `BucketLeapArray`; the occupiable
/// variant used for the second-level counter behaves identically while
/// nothing is ever borrowed, which is the case here).
struct LeapArray {
    window_length_ms: i64,
    interval_ms: i64,
    slots: Vec<Option<Bucket>>,
}

impl LeapArray {
    fn new(sample_count: i32, interval_ms: i32) -> Self {
        assert!(sample_count > 0, "bucket count is invalid");
        assert!(interval_ms > 0, "total time interval should be positive");
        assert!(
            interval_ms % sample_count == 0,
            "time span needs to be evenly divided"
        );
        LeapArray {
            window_length_ms: (interval_ms / sample_count) as i64,
            interval_ms: interval_ms as i64,
            slots: vec![None; sample_count as usize],
        }
    }

    /// `getIntervalInSecond()` = `intervalInMs / 1000.0`.
    fn interval_in_second(&self) -> f64 {
        self.interval_ms as f64 / 1000.0
    }

    /// `calculateTimeIdx`: `(int)((t / windowLengthInMs) % array.length())`,
    /// with Java's truncating `/` and `%` (negative for some negative `t`).
    fn time_idx_java(&self, t: i64) -> i64 {
        let time_id = t / self.window_length_ms;
        time_id % self.slots.len() as i64
    }

    /// `calculateTimeIdx` for a non-negative time.
    fn time_idx(&self, t: i64) -> usize {
        debug_assert!(t >= 0);
        self.time_idx_java(t) as usize
    }

    /// `calculateWindowStart`: `t - t % windowLengthInMs`.
    fn window_start(&self, t: i64) -> i64 {
        t - t % self.window_length_ms
    }

    /// `isWindowDeprecated(time, w)`: `time - w.windowStart() > intervalInMs`.
    fn is_deprecated(&self, t: i64, b: &Bucket) -> bool {
        t - b.window_start > self.interval_ms
    }

    /// `currentWindow(t)`: create the slot if absent, return it if it holds
    /// the current window, reset it (value to 0, start to the current window)
    /// if it holds an older window.
    fn current_window(&mut self, t: i64) -> Current {
        if t < 0 {
            return Current::Detached;
        }
        let idx = self.time_idx(t);
        let start = self.window_start(t);
        match self.slots[idx] {
            None => {
                self.slots[idx] = Some(Bucket {
                    window_start: start,
                    pass: 0,
                });
                Current::Slot(idx)
            }
            Some(old) if old.window_start == start => Current::Slot(idx),
            Some(old) if start > old.window_start => {
                // resetWindowValue + resetTo(windowStart)
                self.slots[idx] = Some(Bucket {
                    window_start: start,
                    pass: 0,
                });
                Current::Slot(idx)
            }
            Some(_) => {
                // "Should not go through here": Java returns a new, detached
                // WindowWrap. Unreachable with non-decreasing time.
                Current::Detached
            }
        }
    }

    /// `values(t)` summed over `pass()`: every non-null, non-deprecated slot.
    fn values_pass_sum(&self, t: i64) -> i64 {
        if t < 0 {
            return 0;
        }
        let mut sum = 0i64;
        for b in self.slots.iter().flatten() {
            if self.is_deprecated(t, b) {
                continue;
            }
            sum += b.pass;
        }
        sum
    }

    /// `getPreviousWindow(t)`. Note that Java checks deprecation against the
    /// *current* time (`isWindowDeprecated(wrap)` reads the clock, which is
    /// `t` here), and the adjacency check against `t - windowLengthInMs`.
    fn previous_window(&self, t: i64) -> Option<Bucket> {
        if t < 0 {
            return None;
        }
        let idx = self.time_idx_java(t - self.window_length_ms);
        let prev_time = t - self.window_length_ms;
        if idx < 0 {
            // Only at t == 0 exactly (t - 1000 == -1000 -> idx -1; for
            // t in 1..=999 the truncating division gives idx 0). Java's
            // `array.get(-1)` throws IndexOutOfBoundsException here; the model
            // treats it as "no previous window" (previousPassQps = 0), which is
            // what every other time with an absent slot yields.
            return None;
        }
        let wrap = self.slots[idx as usize]?;
        if self.is_deprecated(t, &wrap) {
            return None;
        }
        if wrap.window_start + self.window_length_ms < prev_time {
            return None;
        }
        Some(wrap)
    }

    // ---- ArrayMetric -------------------------------------------------------

    /// `ArrayMetric.pass()`: `currentWindow()` first (may reset a stale
    /// slot), then the sum over valid buckets.
    fn pass(&mut self, t: i64) -> i64 {
        let _ = self.current_window(t);
        self.values_pass_sum(t)
    }

    /// `ArrayMetric.previousWindowPass()`.
    fn previous_window_pass(&mut self, t: i64) -> i64 {
        let _ = self.current_window(t);
        match self.previous_window(t) {
            Some(b) => b.pass,
            None => 0,
        }
    }

    /// `ArrayMetric.addPass(count)`.
    fn add_pass(&mut self, t: i64, count: i64) {
        if let Current::Slot(idx) = self.current_window(t)
            && let Some(b) = self.slots[idx].as_mut()
        {
            b.pass += count;
        }
        // Detached: Java NPEs (t < 0) or writes into a throw-away window.
    }
}

/// The pass-related part of `StatisticNode`.
struct StatNode {
    /// `rollingCounterInSecond = new ArrayMetric(SAMPLE_COUNT = 2, INTERVAL = 1000)`.
    second: LeapArray,
    /// `rollingCounterInMinute = new ArrayMetric(60, 60 * 1000, false)`.
    minute: LeapArray,
}

impl StatNode {
    fn new() -> Self {
        StatNode {
            second: LeapArray::new(2, 1000),
            minute: LeapArray::new(60, 60 * 1000),
        }
    }

    /// `double passQps()` = `rollingCounterInSecond.pass() / getWindowIntervalInSec()`.
    fn pass_qps(&mut self, t: i64) -> f64 {
        let pass = self.second.pass(t);
        pass as f64 / self.second.interval_in_second()
    }

    /// `double previousPassQps()` = `rollingCounterInMinute.previousWindowPass()`
    /// (a `long` widened to `double`).
    fn previous_pass_qps(&mut self, t: i64) -> f64 {
        self.minute.previous_window_pass(t) as f64
    }

    /// `addPassRequest(count)`: second-level first, then minute-level.
    fn add_pass_request(&mut self, t: i64, count: i64) {
        self.second.add_pass(t, count);
        self.minute.add_pass(t, count);
    }
}

// ---------------------------------------------------------------------------
// WarmUpController
// ---------------------------------------------------------------------------

/// Reference model: one `WarmUpController` plus the `StatisticNode` it reads,
/// driven by an explicit millisecond clock.
pub struct SentinelModel {
    // Java fields (types as in Java).
    count: f64,
    cold_factor: i32,
    warning_token: i32,
    max_token: i32,
    slope: f64,
    stored_tokens: i64,    // AtomicLong storedTokens = 0
    last_filled_time: i64, // AtomicLong lastFilledTime = 0

    node: StatNode,
    last_now: Option<i64>,
}

impl SentinelModel {
    /// `new WarmUpController(count, warmUpPeriodInSec, coldFactor)`.
    ///
    /// Panics if `cold_factor <= 1` (Java throws `IllegalArgumentException`).
    pub fn new(count: f64, warm_up_period_sec: i32, cold_factor: i32) -> Self {
        assert!(cold_factor > 1, "Cold factor should be larger than 1");

        // warningToken = (int)(warmUpPeriodInSec * count) / (coldFactor - 1);
        //   int * double -> double; (int) cast; then INTEGER division.
        let p_times_c: f64 = warm_up_period_sec as f64 * count;
        let warning_token: i32 = (p_times_c as i32) / (cold_factor - 1);

        // maxToken = warningToken + (int)(2 * warmUpPeriodInSec * count / (1.0 + coldFactor));
        //   left to right: (2 * P) is int * int (may wrap), then * count (double),
        //   then / (1.0 + f) (double), (int) cast, int addition (may wrap).
        let two_p: i32 = 2i32.wrapping_mul(warm_up_period_sec);
        let m_term: f64 = two_p as f64 * count / (1.0 + cold_factor as f64);
        let max_token: i32 = warning_token.wrapping_add(m_term as i32);

        // slope = (coldFactor - 1.0) / count / (maxToken - warningToken);
        //   (maxToken - warningToken) is int subtraction promoted to double.
        let slope: f64 =
            (cold_factor as f64 - 1.0) / count / (max_token.wrapping_sub(warning_token) as f64);

        SentinelModel {
            count,
            cold_factor,
            warning_token,
            max_token,
            slope,
            stored_tokens: 0,
            last_filled_time: 0,
            node: StatNode::new(),
            last_now: None,
        }
    }

    pub fn warning_token(&self) -> i64 {
        self.warning_token as i64
    }

    pub fn max_token(&self) -> i64 {
        self.max_token as i64
    }

    pub fn slope(&self) -> f64 {
        self.slope
    }

    /// The threshold `canPass` compares `passQps + acquireCount` against when
    /// `storedTokens.get() == stored_tokens`.
    pub fn threshold(&self, stored_tokens: i64) -> f64 {
        // restToken >= warningToken : long vs int -> long comparison
        if stored_tokens >= self.warning_token as i64 {
            let above_token: i64 = stored_tokens - self.warning_token as i64;
            // Math.nextUp(1.0 / (aboveToken * slope + 1.0 / count))
            //   long * double -> double.
            let raw = 1.0 / (above_token as f64 * self.slope + 1.0 / self.count);
            raw.next_up()
        } else {
            self.count
        }
    }

    /// `storedTokens.get()`.
    pub fn stored_tokens(&self) -> i64 {
        self.stored_tokens
    }

    /// `lastFilledTime.get()` (for diagnostics).
    pub fn last_filled_time(&self) -> i64 {
        self.last_filled_time
    }

    /// One `canPass(node, acquireCount)` at `now_ms`, followed, if it passed,
    /// by `StatisticSlot`'s `node.addPassRequest(acquireCount)` at the same
    /// instant. Returns whether the call passed.
    ///
    /// `now_ms` must be non-negative and non-decreasing; `acquire_count` must
    /// fit in a Java `int` (it is an `int` in Java).
    pub fn call(&mut self, now_ms: i64, acquire_count: i64) -> bool {
        assert!(
            now_ms >= 0,
            "the model needs a non-negative clock (Java would NPE)"
        );
        if let Some(prev) = self.last_now {
            assert!(now_ms >= prev, "time went backwards: {now_ms} < {prev}");
        }
        self.last_now = Some(now_ms);
        assert!(
            acquire_count >= i32::MIN as i64 && acquire_count <= i32::MAX as i64,
            "acquireCount is a Java int"
        );

        let passed = self.can_pass(now_ms, acquire_count);
        if passed {
            self.node.add_pass_request(now_ms, acquire_count);
        }
        passed
    }

    /// `WarmUpController.canPass(node, acquireCount, prioritized)`.
    fn can_pass(&mut self, now: i64, acquire_count: i64) -> bool {
        // long passQps = (long) node.passQps();
        let pass_qps: i64 = self.node.pass_qps(now) as i64;
        // long previousQps = (long) node.previousPassQps();
        let previous_qps: i64 = self.node.previous_pass_qps(now) as i64;
        self.sync_token(now, previous_qps);

        let rest_token = self.stored_tokens;
        // passQps + acquireCount: long + int -> long; compared with a double
        // -> the long is converted to double.
        let demand = (pass_qps + acquire_count) as f64;
        if rest_token >= self.warning_token as i64 {
            demand <= self.threshold(rest_token)
        } else {
            demand <= self.count
        }
    }

    /// `syncToken(passQps)` (the argument is the previous second's passes).
    fn sync_token(&mut self, now: i64, pass_qps: i64) {
        let mut current_time = now;
        current_time = current_time - current_time % 1000;
        let old_last_fill_time = self.last_filled_time;
        if current_time <= old_last_fill_time {
            return;
        }

        let _old_value = self.stored_tokens;
        let new_value = self.cool_down_tokens(current_time, pass_qps);

        // compareAndSet(oldValue, newValue) always succeeds single-threaded.
        self.stored_tokens = new_value;
        // addAndGet(0 - passQps)
        self.stored_tokens = self.stored_tokens.wrapping_sub(pass_qps);
        if self.stored_tokens < 0 {
            self.stored_tokens = 0;
        }
        self.last_filled_time = current_time;
    }

    /// `coolDownTokens(currentTime, passQps)`.
    fn cool_down_tokens(&self, current_time: i64, pass_qps: i64) -> i64 {
        let old_value: i64 = self.stored_tokens;
        let mut new_value: i64 = old_value;
        let w = self.warning_token as i64;

        if old_value < w {
            new_value = self.refill(old_value, current_time);
        } else if old_value > w {
            // (int)count / coldFactor : int division; then long < int compare.
            let coldest: i32 = (self.count as i32) / self.cold_factor;
            if pass_qps < coldest as i64 {
                new_value = self.refill(old_value, current_time);
            }
        }
        // Math.min(newValue, maxToken): long vs int -> long.
        new_value.min(self.max_token as i64)
    }

    /// `(long)(oldValue + (currentTime - lastFilledTime.get()) * count / 1000)`:
    /// `*` and `/` bind first and go left to right: `(long diff) * count` is a
    /// double, `/ 1000` is a double division, then `oldValue` (long) is widened
    /// and added in double, and the sum is truncated to long.
    fn refill(&self, old_value: i64, current_time: i64) -> i64 {
        let elapsed: i64 = current_time - self.last_filled_time;
        let added: f64 = elapsed as f64 * self.count / 1000.0;
        (old_value as f64 + added) as i64
    }
}

// ---------------------------------------------------------------------------
// Self-checks against the spec's test vectors
// ---------------------------------------------------------------------------

/// Origin of the fake clock used by the spec's vectors (a whole second).
pub const T0: i64 = 1_700_000_000_000;

/// Drives `model` with one `call(now, 1)` per millisecond for `seconds`
/// seconds starting at `origin`. Returns, per second, the number of passes and
/// the stored tokens observed right after that second's first call.
pub fn saturate(model: &mut SentinelModel, origin: i64, seconds: usize) -> (Vec<i64>, Vec<i64>) {
    let mut passes = Vec::with_capacity(seconds);
    let mut tokens = Vec::with_capacity(seconds);
    for s in 0..seconds as i64 {
        let mut n = 0i64;
        for ms in 0..1000i64 {
            let now = origin + s * 1000 + ms;
            if model.call(now, 1) {
                n += 1;
            }
            if ms == 0 {
                tokens.push(model.stored_tokens());
            }
        }
        passes.push(n);
    }
    (passes, tokens)
}

fn check_constants(c: f64, p: i32, f: i32, w: i64, m: i64) -> SentinelModel {
    let model = SentinelModel::new(c, p, f);
    assert_eq!(model.warning_token(), w, "W for {c}/{p}/{f}");
    assert_eq!(model.max_token(), m, "M for {c}/{p}/{f}");
    model
}

/// Asserts TV-11 and the requested TV-10 rows. Panics on mismatch.
pub fn self_check() {
    // TV-10: 10/10/3
    let m = check_constants(10.0, 10, 3, 50, 100);
    assert_eq!(m.slope(), 0.004, "slope 10/10/3");
    assert_eq!(m.threshold(100), 3.3333333333333335, "thr(M) 10/10/3");
    assert_eq!(m.threshold(50), 10.000000000000002, "thr(W) 10/10/3");
    // below W the threshold is c itself
    assert_eq!(m.threshold(49), 10.0, "thr(W-1) 10/10/3");

    // TV-10: 5/10/3 and 10/10/5
    check_constants(5.0, 10, 3, 25, 50);
    check_constants(10.0, 10, 5, 25, 58);

    // TV-10: 10.5/10/3
    let m = check_constants(10.5, 10, 3, 52, 104);
    assert_eq!(m.threshold(104), 3.5000000000000004, "thr(M) 10.5/10/3");

    // TV-11: saturating load from cold, 10/10/3, clock origin T0.
    let mut model = SentinelModel::new(10.0, 10, 3);
    let (passes, tokens) = saturate(&mut model, T0, 16);
    assert_eq!(
        passes,
        vec![3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10, 10, 10, 10],
        "TV-11 passes"
    );
    assert_eq!(
        tokens,
        vec![
            100, 97, 94, 91, 88, 85, 81, 77, 73, 68, 63, 57, 50, 40, 40, 40
        ],
        "TV-11 tokens"
    );
}

/// Further vectors from the spec: the remaining TV-10 rows, TV-13 (dead
/// configurations) and TV-17 (clock origin 0). Panics on mismatch.
pub fn self_check_extra() {
    // TV-10, remaining rows: (c, P, f, W, M, slope, thr(M), thr(W)).
    // (c, P, f, W, M, slope, thr(M), thr(W))
    type Row = (f64, i32, i32, i64, i64, f64, f64, f64);
    let rows: &[Row] = &[
        (
            100.0,
            10,
            3,
            500,
            1000,
            4e-5,
            33.33333333333334,
            100.00000000000001,
        ),
        (
            20.0,
            10,
            3,
            100,
            200,
            0.001,
            6.666666666666667,
            20.000000000000004,
        ),
        (
            5.0,
            10,
            3,
            25,
            50,
            0.016,
            1.6666666666666667,
            5.000000000000001,
        ),
        (
            10.0,
            5,
            3,
            25,
            50,
            0.008,
            3.3333333333333335,
            10.000000000000002,
        ),
        (
            3.0,
            10,
            3,
            15,
            30,
            0.04444444444444444,
            1.0000000000000002,
            3.0000000000000004,
        ),
        (
            2.0,
            10,
            3,
            10,
            20,
            0.1,
            0.6666666666666667,
            2.0000000000000004,
        ),
        (
            1.0,
            10,
            3,
            5,
            10,
            0.4,
            0.33333333333333337,
            1.0000000000000002,
        ),
        (
            10.0,
            10,
            2,
            100,
            166,
            0.0015151515151515152,
            5.000000000000001,
            10.000000000000002,
        ),
        (
            10.0,
            10,
            5,
            25,
            58,
            0.012121212121212121,
            2.0000000000000004,
            10.000000000000002,
        ),
        (
            10.5,
            10,
            3,
            52,
            104,
            0.003663003663003663,
            3.5000000000000004,
            10.500000000000002,
        ),
    ];
    for &(c, p, f, w, m, slope, thr_m, thr_w) in rows {
        let model = check_constants(c, p, f, w, m);
        assert_eq!(model.slope(), slope, "slope {c}/{p}/{f}");
        assert_eq!(model.threshold(m), thr_m, "thr(M) {c}/{p}/{f}");
        assert_eq!(model.threshold(w), thr_w, "thr(W) {c}/{p}/{f}");
    }
    // 0.1/10/3: W = M = 0, slope +inf, thr NaN.
    let model = check_constants(0.1, 10, 3, 0, 0);
    assert_eq!(model.slope(), f64::INFINITY);
    assert!(model.threshold(0).is_nan());

    // TV-13: dead configurations under saturating load from T0.
    for &(c, stuck) in &[(1.0, 10i64), (2.0, 20)] {
        let mut model = SentinelModel::new(c, 10, 3);
        let (passes, tokens) = saturate(&mut model, T0, 20);
        assert!(
            passes.iter().all(|&n| n == 0),
            "TV-13 {c}/10/3 passes {passes:?}"
        );
        assert!(
            tokens.iter().all(|&t| t == stuck),
            "TV-13 {c}/10/3 tokens {tokens:?}"
        );
    }
    {
        let mut model = SentinelModel::new(3.0, 10, 3);
        let (passes, tokens) = saturate(&mut model, T0, 10);
        assert!(
            passes.iter().all(|&n| n == 1),
            "TV-13 3/10/3 passes {passes:?}"
        );
        let expected: Vec<i64> = (0..10).map(|i| 30 - i).collect();
        assert_eq!(tokens, expected, "TV-13 3/10/3 tokens");
    }
    {
        let mut model = SentinelModel::new(4.0, 10, 3);
        let (passes, _) = saturate(&mut model, T0, 3);
        assert!(
            passes.iter().all(|&n| n == 1),
            "TV-13 4/10/3 passes {passes:?}"
        );
    }
    for &c in &[0.5, 0.1] {
        let mut model = SentinelModel::new(c, 10, 3);
        let (passes, _) = saturate(&mut model, T0, 20);
        assert!(
            passes.iter().all(|&n| n == 0),
            "TV-13 {c}/10/3 passes {passes:?}"
        );
    }
    {
        let model = SentinelModel::new(0.5, 10, 3);
        assert_eq!(
            (model.warning_token(), model.max_token()),
            (2, 4),
            "TV-13 0.5/10/3 W, M"
        );
    }

    // TV-17: clock starting at 0 -> starts warm, 10 passes in every second.
    let mut model = SentinelModel::new(10.0, 10, 3);
    let (passes, _) = saturate(&mut model, 0, 16);
    assert!(passes.iter().all(|&n| n == 10), "TV-17 passes {passes:?}");
}
