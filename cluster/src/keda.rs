//! KEDA's side of an external trigger (`scaler.md` §2): the calls it makes to a scaler, and
//! how it turns the numbers into the quantities the HPA reads.
//!
//! Each poll sends `GetMetricSpec`, `GetMetrics` (for the spec's metric name) and `IsActive`,
//! as KEDA's operator and metrics server do. The target is `targetSizeFloat` if positive,
//! else `targetSize`; the value `metricValueFloat` if positive, else `metricValue`; both are
//! rounded to milli-units as Kubernetes quantities are (`%.3f`), and NaN, infinities and
//! negatives become 0.

use std::collections::BTreeMap;

use admit_scaler::proto::external_scaler_client::ExternalScalerClient;
use admit_scaler::proto::{GetMetricsRequest, MetricSpec, MetricValue, ScaledObjectRef};
use tonic::transport::Channel;

/// A number as a Kubernetes quantity in milli-units: `%.3f` rounding; NaN, infinities and
/// negatives are 0.
///
/// ```
/// assert_eq!(admit_cluster::keda::milli(2.0006), 2001);
/// assert_eq!(admit_cluster::keda::milli(f64::NAN), 0);
/// ```
pub fn milli(value: f64) -> i64 {
    if !value.is_finite() || value <= 0.0 {
        return 0;
    }
    let scaled = (value * 1000.0).round();
    if scaled >= i64::MAX as f64 {
        i64::MAX
    } else {
        scaled as i64
    }
}

/// A spec's target: `targetSizeFloat` when positive, else `targetSize`.
pub fn target(spec: &MetricSpec) -> f64 {
    if spec.target_size_float > 0.0 {
        spec.target_size_float
    } else {
        spec.target_size as f64
    }
}

/// A metric's value: `metricValueFloat` when positive, else `metricValue`.
pub fn value(metric: &MetricValue) -> f64 {
    if metric.metric_value_float > 0.0 {
        metric.metric_value_float
    } else {
        metric.metric_value as f64
    }
}

/// What one poll of a trigger found, in the HPA's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The metric's total, milli-units (`AverageValue` usage).
    pub usage_milli: i64,
    /// The target per replica, milli-units.
    pub target_milli: i64,
    /// `IsActive`'s answer.
    pub active: bool,
}

/// One ScaledObject's external trigger, as KEDA calls it.
#[derive(Clone, Debug)]
pub struct ExternalTrigger {
    client: ExternalScalerClient<Channel>,
    object: ScaledObjectRef,
}

impl ExternalTrigger {
    /// The trigger of ScaledObject `namespace/name` with `metadata`, reached over `channel`.
    pub fn new(
        channel: Channel,
        namespace: &str,
        name: &str,
        metadata: BTreeMap<String, String>,
    ) -> Self {
        ExternalTrigger {
            client: ExternalScalerClient::new(channel),
            object: ScaledObjectRef {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                scaler_metadata: metadata,
            },
        }
    }

    /// One poll: `GetMetricSpec`, `GetMetrics` for its first metric, `IsActive`.
    ///
    /// # Errors
    ///
    /// The first call's failure (KEDA keeps the replicas as they are, or falls back).
    pub async fn poll(&mut self) -> Result<Reading, tonic::Status> {
        let specs = self
            .client
            .get_metric_spec(self.object.clone())
            .await?
            .into_inner()
            .metric_specs;
        let spec = specs
            .first()
            .ok_or_else(|| tonic::Status::internal("GetMetricSpec answered no metric"))?;
        let values = self
            .client
            .get_metrics(GetMetricsRequest {
                scaled_object_ref: Some(self.object.clone()),
                metric_name: spec.metric_name.clone(),
            })
            .await?
            .into_inner()
            .metric_values;
        // An empty answer is "no metric": the HPA reads 0.
        let usage = values.first().map_or(0.0, value);
        let active = self
            .client
            .is_active(self.object.clone())
            .await?
            .into_inner()
            .result;
        Ok(Reading {
            usage_milli: milli(usage),
            target_milli: milli(target(spec)),
            active,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_round_to_milli_units() {
        for (value, expected) in [
            (2.0006, 2001),
            (1.0, 1000),
            (0.0004, 0),
            (0.0005, 1),
            (100_086.0, 100_086_000),
            (-3.0, 0),
            (f64::INFINITY, 0),
            (f64::NEG_INFINITY, 0),
            (f64::NAN, 0),
            (1e300, i64::MAX),
        ] {
            assert_eq!(milli(value), expected, "{value}");
        }
    }

    #[test]
    fn floats_win_when_positive() {
        let spec = |size, float| MetricSpec {
            metric_name: String::new(),
            target_size: size,
            target_size_float: float,
        };
        assert_eq!(target(&spec(1, 0.5)), 0.5);
        assert_eq!(target(&spec(3, 0.0)), 3.0);
        assert_eq!(target(&spec(3, -1.0)), 3.0);
        let metric = |value, float| MetricValue {
            metric_name: String::new(),
            metric_value: value,
            metric_value_float: float,
        };
        assert_eq!(value(&metric(7, 7.25)), 7.25);
        assert_eq!(value(&metric(7, 0.0)), 7.0);
    }
}
