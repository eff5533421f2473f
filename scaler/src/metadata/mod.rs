//! Strict parsing of a ScaledObject trigger's `metadata` map into a [`ScalerConfig`], and the
//! [`TriggerKey`] that names a trigger.
//!
//! Every value KEDA sends is a string. A key that is present but malformed is always an error,
//! never replaced by its default, and parsing reports every problem it finds, not just the
//! first ([`MetadataError::problems`]).
//!
//! | key | required | value | default |
//! |---|---|---|---|
//! | `prometheusURL` | yes | absolute `http`/`https` URL, no query, no fragment | — |
//! | `arrivalRateQuery` | yes | non-empty PromQL of at most 8192 bytes, kept verbatim | — |
//! | `serviceTimeQuery` | yes | non-empty PromQL of at most 8192 bytes, kept verbatim | — |
//! | `waitThresholdSeconds` | yes | finite ≥ 0 | — |
//! | `targetSL` | yes | finite, in `[0, 1)` | — |
//! | `concurrencyPerReplica` | no | integer ≥ 1 (at most 10 000 with `round-robin`) | 1 |
//! | `balancing` | no | how the proxy spreads requests over replicas, which sets the queueing model ([`Balancing`]): `round-robin`, `least-request`, `random` or `pooled` | `round-robin` |
//! | `minReplicas`, `maxReplicas` | no | integers, `1 ≤ min ≤ max ≤ 2147483647` | 1, 2147483647 |
//! | `scaleDownHoldSeconds` | no | finite, from 0 to 3600 (the HPA's longest stabilization window) | 0 |
//! | `minScaleUpStep` | no | integer ≥ 1, at most `maxScaleUpStep` | 1 |
//! | `maxScaleUpStep`, `maxScaleDownStep` | no | integers ≥ 1 | unlimited |
//! | `slTolerance` | no | finite ≥ 0, small enough that the stricter target `1 − (1 − targetSL)/(1 + slTolerance)` stays below 1 | 0.1 |
//! | `activationArrivalRate` | no | finite ≥ 0 | 0 |
//! | `arrivalRateWindowSeconds` | no | the span `arrivalRateQuery` counts arrivals over, from 0.001 to 86400 s: λ is read with its Poisson confidence (see [`decision`](crate::decision)) | off |
//! | `patienceSeconds` | no | finite, from 1e-9 to below 1.8e19: Erlang A, whose work per decision is bounded (a load beyond it fails the decision, see [`ErlangA`](admit::erlang::ErlangA)); one pooled queue, so `balancing: pooled` is required with it | off |
//! | `metricName` | no | 1 to 48 characters of `[a-z0-9_-]` | `admit-erlang` |
//!
//! Every key may also be spelled `<key>FromEnv` (KEDA's value resolved from the workload's
//! environment), but not both at once. KEDA's own `scalerAddress`, `enableTLS` and `unsafeSsl`
//! are ignored; any other key is an error. Every value but the queries' is at most
//! [`MAX_VALUE_BYTES`] bytes, so a valid map is never larger than [`longest_metadata`]. Integers are plain decimal digits; numbers with
//! surrounding whitespace are refused, not trimmed. Errors quote values and unknown keys as
//! excerpts ([`crate::excerpt`]), and list at most eight unknown keys.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use admit_scaler::metadata::{DEFAULT_METRIC_NAME, ScalerConfig};
//!
//! let metadata: BTreeMap<String, String> = [
//!     ("prometheusURL", "http://prometheus:9090"),
//!     ("arrivalRateQuery", "sum(rate(http_requests_total[1m]))"),
//!     ("serviceTimeQuery", "avg(rate(duration_sum[1m]) / rate(duration_count[1m]))"),
//!     ("waitThresholdSeconds", "0.05"),
//!     ("targetSL", "0.95"),
//! ]
//! .into_iter()
//! .map(|(key, value)| (key.to_owned(), value.to_owned()))
//! .collect();
//!
//! let config = ScalerConfig::from_metadata(&metadata)?;
//! assert_eq!(config.target_sl, 0.95);
//! assert_eq!(config.concurrency_per_replica, 1);
//! assert_eq!(config.metric_name, DEFAULT_METRIC_NAME);
//! # Ok::<(), admit_scaler::metadata::MetadataError>(())
//! ```

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use admit::erlang::{Balancing, Fleet, PlannerConfig};
use http::Uri;

use crate::excerpt::excerpt;

mod error;

pub use self::error::{MetadataError, Problem};

/// The metric name used when `metricName` is not set.
pub const DEFAULT_METRIC_NAME: &str = "admit-erlang";

/// The largest replica count Kubernetes accepts (`int32`).
const REPLICAS_LIMIT: u64 = i32::MAX as u64;

/// The longest `metricName`.
const METRIC_NAME_MAX_LEN: usize = 48;

/// The longest PromQL query (`arrivalRateQuery`, `serviceTimeQuery`), in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;

/// The longest `scaleDownHoldSeconds`: the longest stabilization window the HPA accepts
/// (`behavior.scaleDown.stabilizationWindowSeconds` ≤ 3600). It bounds the planner's history,
/// which keeps a recommendation for each decision of the window on a falling load.
pub const MAX_SCALE_DOWN_HOLD: Duration = Duration::from_secs(3600);

/// The longest `arrivalRateWindowSeconds`: a day.
pub const MAX_ARRIVAL_RATE_WINDOW: Duration = Duration::from_secs(86_400);

/// The longest value of any other key (a URL, a number, KEDA's own keys), in bytes.
pub const MAX_VALUE_BYTES: usize = 1024;

/// Unknown keys listed one by one in an error; more are counted.
const MAX_LISTED_UNKNOWN: usize = 8;

/// A metadata key and its `FromEnv` spelling.
#[derive(Clone, Copy, Debug)]
struct Key {
    name: &'static str,
    env: &'static str,
}

macro_rules! key {
    ($name:literal) => {
        Key {
            name: $name,
            env: concat!($name, "FromEnv"),
        }
    };
}

const PROMETHEUS_URL: Key = key!("prometheusURL");
const ARRIVAL_RATE_QUERY: Key = key!("arrivalRateQuery");
const SERVICE_TIME_QUERY: Key = key!("serviceTimeQuery");
const WAIT_THRESHOLD_SECONDS: Key = key!("waitThresholdSeconds");
const TARGET_SL: Key = key!("targetSL");
const CONCURRENCY_PER_REPLICA: Key = key!("concurrencyPerReplica");
const BALANCING: Key = key!("balancing");
const MIN_REPLICAS: Key = key!("minReplicas");
const MAX_REPLICAS: Key = key!("maxReplicas");
const SCALE_DOWN_HOLD_SECONDS: Key = key!("scaleDownHoldSeconds");
const MIN_SCALE_UP_STEP: Key = key!("minScaleUpStep");
const MAX_SCALE_UP_STEP: Key = key!("maxScaleUpStep");
const MAX_SCALE_DOWN_STEP: Key = key!("maxScaleDownStep");
const SL_TOLERANCE: Key = key!("slTolerance");
const ACTIVATION_ARRIVAL_RATE: Key = key!("activationArrivalRate");
const ARRIVAL_RATE_WINDOW_SECONDS: Key = key!("arrivalRateWindowSeconds");
const PATIENCE_SECONDS: Key = key!("patienceSeconds");
const METRIC_NAME: Key = key!("metricName");

/// Every key the scaler reads.
const KEYS: [Key; 18] = [
    PROMETHEUS_URL,
    ARRIVAL_RATE_QUERY,
    SERVICE_TIME_QUERY,
    WAIT_THRESHOLD_SECONDS,
    TARGET_SL,
    CONCURRENCY_PER_REPLICA,
    BALANCING,
    MIN_REPLICAS,
    MAX_REPLICAS,
    SCALE_DOWN_HOLD_SECONDS,
    MIN_SCALE_UP_STEP,
    MAX_SCALE_UP_STEP,
    MAX_SCALE_DOWN_STEP,
    SL_TOLERANCE,
    ACTIVATION_ARRIVAL_RATE,
    ARRIVAL_RATE_WINDOW_SECONDS,
    PATIENCE_SECONDS,
    METRIC_NAME,
];

/// The keys KEDA adds to every external trigger's metadata.
const KEDA_KEYS: [&str; 3] = ["scalerAddress", "enableTLS", "unsafeSsl"];

const NO_WHITESPACE: &str = "no leading or trailing whitespace";
const TOO_LONG: &str = "at most 1024 bytes";
const NOT_FINITE: &str = "a finite number, not NaN or infinity";
const URL_ABSOLUTE: &str = "an absolute http or https URL, e.g. http://prometheus:9090";
const URL_SCHEME: &str = "an http or https URL";
const URL_NO_QUERY: &str = "a URL without a query string";
const URL_NO_FRAGMENT: &str = "a URL without a fragment (`#`)";
const URL_NO_CREDENTIALS: &str = "a URL without credentials (use --prometheus-bearer-token-file)";
const QUERY: &str = "non-empty PromQL text of at most 8192 bytes";
const SECONDS: &str = "a finite number of seconds ≥ 0";
const HOLD_SECONDS: &str = "a finite number of seconds from 0 to 3600 (the HPA's longest \
                            stabilizationWindowSeconds)";
const PATIENCE: &str = "a finite number of seconds > 0 (at least 1e-9) and below 1.8e19";
const WINDOW: &str = "a finite number of seconds from 0.001 to 86400";
const FRACTION: &str = "a finite number in [0, 1)";
const NON_NEGATIVE: &str = "a finite number ≥ 0";
const POSITIVE_INTEGER: &str = "an integer ≥ 1 in plain decimal digits";
const REPLICAS: &str = "an integer from 1 to 2147483647 in plain decimal digits";
const METRIC: &str = "1 to 48 characters from [a-z0-9_-]";
const BALANCING_NAMES: &str = "one of round-robin, least-request, random, pooled";

/// The scaler's settings for one ScaledObject trigger, parsed from its metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalerConfig {
    /// Prometheus' base URL, possibly with a path prefix (`prometheusURL`).
    pub prometheus_url: Uri,
    /// The PromQL query for the arrival rate λ in requests per second (`arrivalRateQuery`),
    /// shared by the clones of the configuration and the errors that name it.
    pub arrival_rate_query: Arc<str>,
    /// The PromQL query for the mean service time in seconds (`serviceTimeQuery`), shared as
    /// the arrival rate's.
    pub service_time_query: Arc<str>,
    /// The wait bound T of "P(wait ≤ T) ≥ p", in seconds; 0 bounds the probability of waiting
    /// at all (`waitThresholdSeconds`).
    pub wait_threshold_seconds: f64,
    /// The service level p, in `[0, 1)` (`targetSL`).
    pub target_sl: f64,
    /// Servers (concurrent requests) per replica (`concurrencyPerReplica`).
    pub concurrency_per_replica: u64,
    /// How the proxy spreads requests over the replicas (`balancing`): the queue a decision
    /// sizes, [`Fleet`] of this policy, or Erlang A (pooled) with a patience.
    pub balancing: Balancing,
    /// The fewest replicas recommended (`minReplicas`).
    pub min_replicas: u64,
    /// The most replicas recommended (`maxReplicas`).
    pub max_replicas: u64,
    /// How long a higher recommendation holds off scaling down (`scaleDownHoldSeconds`), at
    /// most [`MAX_SCALE_DOWN_HOLD`].
    pub scale_down_hold: Duration,
    /// The fewest replicas one scale-up adds (`minScaleUpStep`).
    pub min_scale_up_step: u64,
    /// The most replicas one scale-up adds; `u64::MAX` is unlimited (`maxScaleUpStep`).
    pub max_scale_up_step: u64,
    /// The most replicas one scale-down removes; `u64::MAX` is unlimited (`maxScaleDownStep`).
    pub max_scale_down_step: u64,
    /// The planner's relative tolerance band (`slTolerance`): the stricter target it makes
    /// for `targetSL` is below 1.
    pub sl_tolerance: f64,
    /// The trigger is active iff λ exceeds this rate (`activationArrivalRate`).
    pub activation_arrival_rate: f64,
    /// The span the arrival-rate query counts arrivals over: when set, λ is read with its
    /// Poisson confidence (`arrivalRateWindowSeconds`), at most [`MAX_ARRIVAL_RATE_WINDOW`].
    pub arrival_rate_window: Option<Duration>,
    /// Mean customer patience: when set, Erlang A with abandonment rate `1 / patience`
    /// (`patienceSeconds`).
    pub patience: Option<Duration>,
    /// The name of the metric reported to KEDA (`metricName`).
    pub metric_name: String,
}

impl ScalerConfig {
    /// Parses a trigger's metadata map.
    ///
    /// # Errors
    ///
    /// A [`MetadataError`] listing every missing, unknown, duplicated, invalid or conflicting
    /// key.
    pub fn from_metadata(metadata: &BTreeMap<String, String>) -> Result<Self, MetadataError> {
        let mut parser = Parser {
            metadata,
            problems: Vec::new(),
            unknown: 0,
            unlisted_unknown: 0,
        };
        parser.unknown_keys();

        let prometheus_url = parser.required(PROMETHEUS_URL, url);
        let arrival_rate_query = parser.required(ARRIVAL_RATE_QUERY, query);
        let service_time_query = parser.required(SERVICE_TIME_QUERY, query);
        let wait_threshold_seconds = parser.required(WAIT_THRESHOLD_SECONDS, |raw| {
            float(raw, SECONDS, |v| v >= 0.0)
        });
        let target_sl = parser.required(TARGET_SL, |raw| {
            float(raw, FRACTION, |v| (0.0..1.0).contains(&v))
        });
        let concurrency_per_replica = parser.optional(CONCURRENCY_PER_REPLICA, 1, positive);
        let balancing = parser.optional(BALANCING, Balancing::RoundRobin, balancing);
        let min_replicas = parser.optional(MIN_REPLICAS, 1, replicas);
        let max_replicas = parser.optional(MAX_REPLICAS, REPLICAS_LIMIT, replicas);
        let scale_down_hold = parser.optional(SCALE_DOWN_HOLD_SECONDS, Duration::ZERO, |raw| {
            seconds(raw, HOLD_SECONDS, Duration::ZERO).and_then(|hold| {
                if hold <= MAX_SCALE_DOWN_HOLD {
                    Ok(hold)
                } else {
                    Err(HOLD_SECONDS)
                }
            })
        });
        let min_scale_up_step = parser.optional(MIN_SCALE_UP_STEP, 1, positive);
        let max_scale_up_step = parser.optional(MAX_SCALE_UP_STEP, u64::MAX, positive);
        let max_scale_down_step = parser.optional(MAX_SCALE_DOWN_STEP, u64::MAX, positive);
        let sl_tolerance = parser.optional(SL_TOLERANCE, 0.1, |raw| {
            float(raw, NON_NEGATIVE, |v| v >= 0.0)
        });
        let activation_arrival_rate = parser.optional(ACTIVATION_ARRIVAL_RATE, 0.0, |raw| {
            float(raw, NON_NEGATIVE, |v| v >= 0.0)
        });
        let arrival_rate_window = parser.optional(ARRIVAL_RATE_WINDOW_SECONDS, None, |raw| {
            seconds(raw, WINDOW, Duration::from_millis(1))
                .and_then(|window| {
                    if window <= MAX_ARRIVAL_RATE_WINDOW {
                        Ok(window)
                    } else {
                        Err(WINDOW)
                    }
                })
                .map(Some)
        });
        let patience = parser.optional(PATIENCE_SECONDS, None, |raw| {
            seconds(raw, PATIENCE, Duration::from_nanos(1)).map(Some)
        });
        let metric_name = parser.optional(METRIC_NAME, DEFAULT_METRIC_NAME.to_owned(), metric);

        parser.at_most(min_replicas, max_replicas);
        parser.at_most(min_scale_up_step, max_scale_up_step);
        parser.reachable(sl_tolerance, target_sl);
        parser.modelled(balancing, concurrency_per_replica, patience);

        // Every `None` below recorded a problem, so the error is never empty.
        let (
            Some(prometheus_url),
            Some(arrival_rate_query),
            Some(service_time_query),
            Some(wait_threshold_seconds),
            Some(target_sl),
            Some((_, concurrency_per_replica)),
            Some((_, balancing)),
            Some((_, min_replicas)),
            Some((_, max_replicas)),
            Some((_, scale_down_hold)),
            Some((_, min_scale_up_step)),
            Some((_, max_scale_up_step)),
            Some((_, max_scale_down_step)),
            Some((_, sl_tolerance)),
            Some((_, activation_arrival_rate)),
            Some((_, arrival_rate_window)),
            Some((_, patience)),
            Some((_, metric_name)),
            true,
        ) = (
            prometheus_url,
            arrival_rate_query,
            service_time_query,
            wait_threshold_seconds,
            target_sl,
            concurrency_per_replica,
            balancing,
            min_replicas,
            max_replicas,
            scale_down_hold,
            min_scale_up_step,
            max_scale_up_step,
            max_scale_down_step,
            sl_tolerance,
            activation_arrival_rate,
            arrival_rate_window,
            patience,
            metric_name,
            parser.problems.is_empty(),
        )
        else {
            return Err(MetadataError {
                problems: parser.problems,
                unlisted_unknown: parser.unlisted_unknown,
            });
        };
        Ok(ScalerConfig {
            prometheus_url,
            arrival_rate_query,
            service_time_query,
            wait_threshold_seconds,
            target_sl,
            concurrency_per_replica,
            balancing,
            min_replicas,
            max_replicas,
            scale_down_hold,
            min_scale_up_step,
            max_scale_up_step,
            max_scale_down_step,
            sl_tolerance,
            activation_arrival_rate,
            arrival_rate_window,
            patience,
            metric_name,
        })
    }

    /// The replica planner's settings: servers per replica, replica bounds, step limits,
    /// scale-down hold and tolerance.
    pub fn planner_config(&self) -> PlannerConfig {
        PlannerConfig {
            per_replica: self.concurrency_per_replica,
            min_replicas: self.min_replicas,
            max_replicas: self.max_replicas,
            min_step_up: self.min_scale_up_step,
            max_step_up: self.max_scale_up_step,
            max_step_down: self.max_scale_down_step,
            scale_down_hold: self.scale_down_hold,
            tolerance: self.sl_tolerance,
        }
    }

    /// A 64-bit fingerprint of every field, stable across runs and processes (FNV-1a over the
    /// encoding [`Hash`] feeds); configs that compare equal have equal fingerprints.
    pub fn fingerprint(&self) -> u64 {
        let mut fnv = Fnv::new();
        self.hash(&mut fnv);
        fnv.finish()
    }
}

impl Hash for ScalerConfig {
    /// Every field, in a fixed encoding (strings length-prefixed, numbers little-endian): configs
    /// that compare equal hash alike (URL scheme and authority in lower case, −0 as +0).
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut hash = Encoder(state);
        hash.str("admit-scaler metadata v2");
        // `Uri` compares scheme and authority ignoring ASCII case.
        let url = &self.prometheus_url;
        hash.str(&url.scheme_str().unwrap_or("").to_ascii_lowercase());
        hash.str(
            &url.authority()
                .map_or("", |authority| authority.as_str())
                .to_ascii_lowercase(),
        );
        hash.str(url.path());
        hash.optional_str(url.query());
        hash.str(&self.arrival_rate_query);
        hash.str(&self.service_time_query);
        hash.f64(self.wait_threshold_seconds);
        hash.f64(self.target_sl);
        hash.u64(self.concurrency_per_replica);
        hash.str(balancing_name(self.balancing));
        hash.u64(self.min_replicas);
        hash.u64(self.max_replicas);
        hash.duration(self.scale_down_hold);
        hash.u64(self.min_scale_up_step);
        hash.u64(self.max_scale_up_step);
        hash.u64(self.max_scale_down_step);
        hash.f64(self.sl_tolerance);
        hash.f64(self.activation_arrival_rate);
        match self.arrival_rate_window {
            None => hash.bytes(&[0]),
            Some(window) => {
                hash.bytes(&[1]);
                hash.duration(window);
            }
        }
        match self.patience {
            None => hash.bytes(&[0]),
            Some(patience) => {
                hash.bytes(&[1]);
                hash.duration(patience);
            }
        }
        hash.str(&self.metric_name);
    }
}

/// The largest metadata map that parses: every key under its longer spelling (`<key>FromEnv`)
/// with a value at its longest (queries of 8192 bytes, a 48-character
/// `metricName`, `balancing: pooled`, every other value, KEDA's keys included, of
/// [`MAX_VALUE_BYTES`] bytes). No valid map has more keys or longer ones, or a longer value
/// under any key but `balancing`, whose longer names exclude a patience and its longer value:
/// what sizes the largest request the scaler accepts.
pub fn longest_metadata() -> BTreeMap<String, String> {
    let number = |head: &str| format!("{head}{}", "0".repeat(MAX_VALUE_BYTES - head.len()));
    let integer = format!("{}1", "0".repeat(MAX_VALUE_BYTES - 1));
    let url = format!(
        "http://prometheus:9090/{}",
        "p".repeat(MAX_VALUE_BYTES - 23)
    );
    let query = "x".repeat(MAX_QUERY_BYTES);
    let value = |key: Key| match key.name {
        "prometheusURL" => url.clone(),
        "arrivalRateQuery" | "serviceTimeQuery" => query.clone(),
        "waitThresholdSeconds"
        | "scaleDownHoldSeconds"
        | "slTolerance"
        | "activationArrivalRate" => number("0."),
        "targetSL" => number("0.9"),
        "patienceSeconds" | "arrivalRateWindowSeconds" => number("1."),
        "metricName" => "m".repeat(METRIC_NAME_MAX_LEN),
        // The one policy a patience allows; a longer name needs no patience, a longer value.
        "balancing" => "pooled".to_owned(),
        _ => integer.clone(),
    };
    KEYS.iter()
        .map(|key| (key.env.to_owned(), value(*key)))
        .chain(KEDA_KEYS.map(|key| (key.to_owned(), "k".repeat(MAX_VALUE_BYTES))))
        .collect()
}

/// Which trigger a decision, its state and its metrics belong to: a ScaledObject's trigger,
/// named by its `metricName`. Clones share the text, as do the metric series labelled with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TriggerKey {
    /// The ScaledObject's namespace.
    pub namespace: Arc<str>,
    /// The ScaledObject's name.
    pub name: Arc<str>,
    /// The trigger's `metricName`.
    pub metric: Arc<str>,
}

impl TriggerKey {
    /// The key of `metric` in ScaledObject `namespace/name`.
    pub fn new(namespace: &str, name: &str, metric: &str) -> Self {
        TriggerKey {
            namespace: namespace.into(),
            name: name.into(),
            metric: metric.into(),
        }
    }
}

/// Where a key's value is.
#[derive(Clone, Copy, Debug)]
enum Lookup<'a> {
    Absent,
    /// The spelling found (plain or `FromEnv`) and its value.
    Given(&'static str, &'a str),
    /// Under both spellings.
    Twice,
}

/// Reads the metadata map and records problems.
struct Parser<'a> {
    metadata: &'a BTreeMap<String, String>,
    problems: Vec<Problem>,
    /// Unknown keys listed in `problems`, and those beyond [`MAX_LISTED_UNKNOWN`].
    unknown: usize,
    unlisted_unknown: usize,
}

impl<'a> Parser<'a> {
    /// Records every key that is neither known nor KEDA's.
    fn unknown_keys(&mut self) {
        let names = || {
            KEYS.iter()
                .flat_map(|key| [key.name, key.env])
                .chain(KEDA_KEYS)
        };
        for (given, value) in self.metadata {
            if let Some(keda) = KEDA_KEYS.iter().find(|name| *name == given) {
                if value.len() > MAX_VALUE_BYTES {
                    self.problems.push(Problem::Invalid {
                        key: keda,
                        value: excerpt(value),
                        expected: TOO_LONG,
                    });
                }
                continue;
            }
            if names().any(|name| name == given) {
                continue;
            }
            if self.unknown == MAX_LISTED_UNKNOWN {
                self.unlisted_unknown += 1;
                continue;
            }
            self.unknown += 1;
            self.problems.push(Problem::Unknown {
                key: excerpt(given),
                value: excerpt(value),
                suggestion: names().find(|name| name.eq_ignore_ascii_case(given)),
            });
        }
    }

    /// Finds `key` under either spelling, recording a duplicate.
    fn lookup(&mut self, key: Key) -> Lookup<'a> {
        match (self.metadata.get(key.name), self.metadata.get(key.env)) {
            (Some(value), None) => Lookup::Given(key.name, value),
            (None, Some(value)) => Lookup::Given(key.env, value),
            (None, None) => Lookup::Absent,
            (Some(_), Some(_)) => {
                self.problems.push(Problem::Duplicate { key: key.name });
                Lookup::Twice
            }
        }
    }

    /// Parses a present value; `None` when it is invalid (recorded).
    fn parse<T>(
        &mut self,
        key: &'static str,
        value: &str,
        parse: impl FnOnce(&str) -> Result<T, &'static str>,
    ) -> Option<T> {
        match parse(value) {
            Ok(parsed) => Some(parsed),
            Err(expected) => {
                self.problems.push(Problem::Invalid {
                    key,
                    value: excerpt(value),
                    expected,
                });
                None
            }
        }
    }

    /// A required key's value; `None` when absent, duplicated or invalid (recorded).
    fn required<T>(
        &mut self,
        key: Key,
        parse: impl FnOnce(&str) -> Result<T, &'static str>,
    ) -> Option<T> {
        match self.lookup(key) {
            Lookup::Given(spelling, value) => self.parse(spelling, value, parse),
            Lookup::Absent => {
                self.problems.push(Problem::Missing { key: key.name });
                None
            }
            Lookup::Twice => None,
        }
    }

    /// An optional key's value (or `default`) and its spelling (the plain key when absent);
    /// `None` when duplicated or invalid (recorded).
    fn optional<T>(
        &mut self,
        key: Key,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, &'static str>,
    ) -> Option<(&'static str, T)> {
        match self.lookup(key) {
            Lookup::Given(spelling, value) => self
                .parse(spelling, value, parse)
                .map(|parsed| (spelling, parsed)),
            Lookup::Absent => Some((key.name, default)),
            Lookup::Twice => None,
        }
    }

    /// Records a conflict when both are valid and `tolerance` makes the planner's stricter
    /// target for `target` reach 1, which no server count meets: every decision would fail.
    fn reachable(&mut self, tolerance: Option<(&'static str, f64)>, target: Option<f64>) {
        let (Some((tolerance_key, tolerance)), Some(target)) = (tolerance, target) else {
            return;
        };
        let planner = PlannerConfig {
            tolerance,
            ..PlannerConfig::default()
        };
        let stricter = planner.stricter_service_level(target);
        if stricter >= 1.0 {
            // Quoted as written: a value's shortest decimal form may not be its spelling.
            let given = |spelling: &str| self.metadata.get(spelling).map(|raw| excerpt(raw));
            let target_key = [TARGET_SL.name, TARGET_SL.env]
                .into_iter()
                .find(|spelling| self.metadata.contains_key(*spelling))
                .unwrap_or(TARGET_SL.name);
            let message = format!(
                "{tolerance_key} \"{}\" makes the stricter target for {target_key} \"{}\", \
                 1 − (1 − targetSL)/(1 + slTolerance), reach 1, which no replica count meets: \
                 every decision would fail",
                given(tolerance_key).unwrap_or_default(),
                given(target_key).unwrap_or_default(),
            );
            self.problems.push(Problem::Conflict {
                keys: (tolerance_key, target_key),
                message,
            });
        }
    }

    /// Records a conflict when the queueing model cannot be built from valid settings: a
    /// patience (Erlang A, one pooled queue) with another balancing, or more servers per
    /// replica than the round-robin model takes.
    fn modelled(
        &mut self,
        balancing: Option<(&'static str, Balancing)>,
        per_replica: Option<(&'static str, u64)>,
        patience: Option<(&'static str, Option<Duration>)>,
    ) {
        let Some((balancing_key, balancing)) = balancing else {
            return;
        };
        if let Some((patience_key, Some(_))) = patience
            && balancing != Balancing::Pooled
        {
            self.problems.push(Problem::Conflict {
                keys: (patience_key, balancing_key),
                message: format!(
                    "{patience_key} models one pooled queue (Erlang A), but {balancing_key} is \
                     {}: set {balancing_key} to pooled, or remove {patience_key}",
                    balancing_name(balancing)
                ),
            });
        }
        if let Some((per_replica_key, per_replica)) = per_replica
            && balancing == Balancing::RoundRobin
            && per_replica > Fleet::MAX_ROUND_ROBIN_PER_REPLICA
        {
            self.problems.push(Problem::Conflict {
                keys: (per_replica_key, balancing_key),
                message: format!(
                    "{per_replica_key} ({per_replica}) is above {}, the most the round-robin \
                     model takes (one term per server in each evaluation)",
                    Fleet::MAX_ROUND_ROBIN_PER_REPLICA
                ),
            });
        }
    }

    /// Records a conflict when both bounds are valid and `low > high`.
    fn at_most(&mut self, low: Option<(&'static str, u64)>, high: Option<(&'static str, u64)>) {
        if let (Some((low_key, low)), Some((high_key, high))) = (low, high)
            && low > high
        {
            self.problems.push(Problem::Conflict {
                keys: (low_key, high_key),
                message: format!("{low_key} ({low}) is greater than {high_key} ({high})"),
            });
        }
    }
}

/// `Err` when `raw` is longer than [`MAX_VALUE_BYTES`] or has leading or trailing whitespace.
fn plain(raw: &str) -> Result<(), &'static str> {
    if raw.len() > MAX_VALUE_BYTES {
        Err(TOO_LONG)
    } else if raw.trim() != raw {
        Err(NO_WHITESPACE)
    } else {
        Ok(())
    }
}

/// A balancing policy by its metadata name.
fn balancing(raw: &str) -> Result<Balancing, &'static str> {
    plain(raw)?;
    [
        Balancing::RoundRobin,
        Balancing::LeastRequest,
        Balancing::Random,
        Balancing::Pooled,
    ]
    .into_iter()
    .find(|policy| balancing_name(*policy) == raw)
    .ok_or(BALANCING_NAMES)
}

/// The metadata name of a balancing policy.
pub(crate) fn balancing_name(balancing: Balancing) -> &'static str {
    match balancing {
        Balancing::Pooled => "pooled",
        Balancing::Random => "random",
        Balancing::LeastRequest => "least-request",
        _ => "round-robin",
    }
}

/// A finite `f64` (Rust syntax) for which `valid` holds; −0 becomes +0.
fn float(
    raw: &str,
    expected: &'static str,
    valid: impl Fn(f64) -> bool,
) -> Result<f64, &'static str> {
    plain(raw)?;
    let value: f64 = raw.parse().map_err(|_| expected)?;
    if !value.is_finite() {
        return Err(NOT_FINITE);
    }
    if !valid(value) {
        return Err(expected);
    }
    Ok(value + 0.0)
}

/// A non-negative number of seconds, as a `Duration` of at least `min`.
fn seconds(raw: &str, expected: &'static str, min: Duration) -> Result<Duration, &'static str> {
    let secs = float(raw, expected, |v| v >= 0.0)?;
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|duration| *duration >= min)
        .ok_or(expected)
}

/// Plain decimal digits (no sign, point or exponent) forming a `u64` in `min..=max`.
fn integer(raw: &str, expected: &'static str, min: u64, max: u64) -> Result<u64, &'static str> {
    plain(raw)?;
    if raw.is_empty() || !raw.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(expected);
    }
    raw.parse::<u64>()
        .ok()
        .filter(|value| (min..=max).contains(value))
        .ok_or(expected)
}

/// An integer ≥ 1.
fn positive(raw: &str) -> Result<u64, &'static str> {
    integer(raw, POSITIVE_INTEGER, 1, u64::MAX)
}

/// A replica count.
fn replicas(raw: &str) -> Result<u64, &'static str> {
    integer(raw, REPLICAS, 1, REPLICAS_LIMIT)
}

/// An absolute `http`/`https` URL without query or fragment.
fn url(raw: &str) -> Result<Uri, &'static str> {
    plain(raw)?;
    // `Uri` drops a fragment silently, and may take an empty `?` for no query.
    if raw.contains('#') {
        return Err(URL_NO_FRAGMENT);
    }
    if raw.contains('?') {
        return Err(URL_NO_QUERY);
    }
    let uri: Uri = raw.parse().map_err(|_| URL_ABSOLUTE)?;
    let scheme = uri.scheme_str().ok_or(URL_ABSOLUTE)?;
    if scheme != "http" && scheme != "https" {
        return Err(URL_SCHEME);
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(URL_ABSOLUTE);
    }
    // Never sent, and it would be echoed in errors and logs: credentials go in flags.
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err(URL_NO_CREDENTIALS);
    }
    Ok(uri)
}

/// PromQL text that is not blank, at most [`MAX_QUERY_BYTES`] bytes, kept verbatim.
fn query(raw: &str) -> Result<Arc<str>, &'static str> {
    if raw.trim().is_empty() || raw.len() > MAX_QUERY_BYTES {
        return Err(QUERY);
    }
    Ok(raw.into())
}

/// A metric name: 1 to 48 characters from `[a-z0-9_-]`.
fn metric(raw: &str) -> Result<String, &'static str> {
    let valid = (1..=METRIC_NAME_MAX_LEN).contains(&raw.len())
        && raw
            .bytes()
            .all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'));
    if valid {
        Ok(raw.to_owned())
    } else {
        Err(METRIC)
    }
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The fixed encoding of [`ScalerConfig`]'s `Hash`, into any hasher.
struct Encoder<'a, H>(&'a mut H);

impl<H: Hasher> Encoder<'_, H> {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }

    /// Length-prefixed, so adjacent strings cannot run into each other.
    fn str(&mut self, value: &str) {
        self.u64(value.len() as u64);
        self.bytes(value.as_bytes());
    }

    fn optional_str(&mut self, value: Option<&str>) {
        match value {
            None => self.bytes(&[0]),
            Some(value) => {
                self.bytes(&[1]);
                self.str(value);
            }
        }
    }

    /// −0 and +0 compare equal, so they hash alike.
    fn f64(&mut self, value: f64) {
        self.u64((value + 0.0).to_bits());
    }

    fn duration(&mut self, value: Duration) {
        self.u64(value.as_secs());
        self.u64(u64::from(value.subsec_nanos()));
    }
}

#[cfg(test)]
mod tests;
