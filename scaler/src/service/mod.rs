//! The gRPC service KEDA calls: `externalscaler.ExternalScaler`.
//!
//! Every RPC parses the trigger's metadata first (no I/O). `GetMetricSpec` stops there and
//! answers the constant spec `{metricName, targetSize: 1}`. `GetMetrics`, `IsActive` and each
//! tick of `StreamIsActive` share one decision per trigger (keyed by [`TriggerKey`]), made at
//! most once per decision interval: KEDA's three calls per poll, and the HPA's own, query
//! Prometheus once. A failed decision is a `tonic::Status` whose code says why (see
//! [`ScalerService`]), so that KEDA's `fallback` engages.
//!
//! ```
//! use std::time::Duration;
//! use admit_scaler::service::{ScalerService, ServiceOptions};
//!
//! let service = ScalerService::new(ServiceOptions {
//!     decision_interval: Duration::from_secs(10),
//!     ..ServiceOptions::default()
//! });
//! // Served by tonic: `Server::builder().add_service(service.into_server())`.
//! let _server = service.into_server();
//! ```

mod allow;
mod registry;
#[cfg(test)]
mod tests;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::decision::DecisionError;
use crate::metadata::{DEFAULT_METRIC_NAME, ScalerConfig};
use crate::prometheus::{ClientOptions, PrometheusClient};
use crate::proto::external_scaler_server::{ExternalScaler, ExternalScalerServer};
use crate::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use crate::telemetry;

pub use self::allow::{AllowList, AllowListError};
pub use self::registry::TriggerKey;
use self::registry::{Lifetimes, Registry};

/// How a [`ScalerService`] decides and queries.
#[derive(Clone, Debug)]
pub struct ServiceOptions {
    /// A decision younger than this is reused (and `StreamIsActive` decides this often).
    /// Default 10 s.
    pub decision_interval: Duration,
    /// A trigger unused for longer is forgotten, planner and all. Default 10 min.
    pub state_ttl: Duration,
    /// The Prometheus client's timeout and credentials.
    pub client: ClientOptions,
    /// The Prometheus URLs triggers may use; empty allows all.
    pub allow: AllowList,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            decision_interval: Duration::from_secs(10),
            state_ttl: Duration::from_secs(600),
            client: ClientOptions::default(),
            allow: AllowList::default(),
        }
    }
}

/// The `ExternalScaler` implementation. Clones share their state.
///
/// | failure | code |
/// |---|---|
/// | empty `name` or `namespace`, bad/missing/unknown metadata, unknown `metricName`, PromQL syntax (HTTP 400) | `INVALID_ARGUMENT` |
/// | `prometheusURL` outside `--allow-prometheus` | `PERMISSION_DENIED` |
/// | HTTP 422, empty result, several series, a non-number, NaN/±Inf, λ < 0, service time ≤ 0 | `FAILED_PRECONDITION` |
/// | Prometheus unreachable, a non-JSON answer, other 5xx | `UNAVAILABLE` |
/// | Prometheus' timeout (503) or ours | `DEADLINE_EXCEEDED` |
/// | the queueing model's limits (load above 10¹² erlangs) | `OUT_OF_RANGE` |
#[derive(Clone, Debug)]
pub struct ScalerService {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Set by [`ScalerService::shut_down`]: open `StreamIsActive` streams end.
    shutting_down: watch::Sender<bool>,
    registry: Registry,
    client: PrometheusClient,
    allow: AllowList,
    decision_interval: Duration,
}

/// A trigger whose metadata parsed and passed the allow-list.
struct Trigger {
    key: TriggerKey,
    config: ScalerConfig,
}

impl ScalerService {
    /// A service that has seen no trigger yet.
    pub fn new(options: ServiceOptions) -> Self {
        ScalerService {
            shared: Arc::new(Shared {
                shutting_down: watch::Sender::new(false),
                registry: Registry::new(Lifetimes {
                    decision_interval: options.decision_interval,
                    state_ttl: options.state_ttl,
                }),
                client: PrometheusClient::new(options.client),
                allow: options.allow,
                decision_interval: options.decision_interval,
            }),
        }
    }

    /// The tonic service to add to a server.
    pub fn into_server(self) -> ExternalScalerServer<Self> {
        ExternalScalerServer::new(self)
    }

    /// Forgets triggers unused for the state TTL, refreshes the scaler-wide gauges, and returns
    /// how many triggers remain. The binary calls it periodically; RPCs sweep too.
    pub fn sweep(&self) -> usize {
        let tracked = self.shared.registry.sweep();
        telemetry::scaler(tracked);
        tracked
    }

    /// Ends every open `StreamIsActive` stream with `UNAVAILABLE` (KEDA reconnects, to
    /// another replica if there is one), and any opened later at once: call it when the server
    /// stops, or its graceful shutdown waits for the streams.
    pub fn shut_down(&self) {
        self.shared.shutting_down.send_replace(true);
    }

    /// How many triggers have state.
    pub fn tracked_objects(&self) -> usize {
        self.shared.registry.len()
    }

    /// Parses and checks a trigger without I/O.
    fn trigger(&self, object: &ScaledObjectRef) -> Result<Trigger, Status> {
        // Refusals are counted without the object's labels: they come from the caller, and
        // would let any client create series.
        let refuse = |kind: &'static str, status: Status| {
            telemetry::refused(kind);
            status
        };
        if object.name.is_empty() || object.namespace.is_empty() {
            return Err(refuse(
                "metadata",
                Status::invalid_argument(format!(
                    "scaledObjectRef needs a name and a namespace, got name {:?}, namespace {:?}",
                    object.name, object.namespace
                )),
            ));
        }
        let described = || {
            let metric = object
                .scaler_metadata
                .get("metricName")
                .map_or(DEFAULT_METRIC_NAME, String::as_str);
            describe(&object.namespace, &object.name, metric)
        };
        let config = ScalerConfig::from_metadata(&object.scaler_metadata).map_err(|error| {
            refuse(
                "metadata",
                Status::invalid_argument(format!("{}: {error}", described())),
            )
        })?;
        if !self.shared.allow.permits(&config.prometheus_url) {
            return Err(refuse(
                "permission",
                Status::permission_denied(format!(
                    "{}: prometheusURL {:?} is outside the allowed URLs ({})",
                    described(),
                    config.prometheus_url.to_string(),
                    self.shared.allow
                )),
            ));
        }
        // The parsed name: a `metricNameFromEnv` names the trigger as much as `metricName`.
        let key = TriggerKey {
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            metric: config.metric_name.clone(),
        };
        Ok(Trigger { key, config })
    }

    /// The trigger's decision: memoised, or made now from fresh queries.
    async fn decide(&self, trigger: &Trigger) -> Result<crate::decision::Decision, Status> {
        let shared = &self.shared;
        let answer = shared
            .registry
            .decide(trigger.key.clone(), &trigger.config, || {
                crate::measure::measure(
                    &shared.client,
                    &trigger.config.prometheus_url,
                    &trigger.config,
                    None,
                )
            })
            .await;
        if answer.fresh {
            // A fresh decision may be a new trigger's first.
            telemetry::scaler(shared.registry.len());
            match &answer.outcome {
                Ok(decision) => telemetry::decision(&trigger.key, &trigger.config, decision),
                Err(error) => {
                    telemetry::error(&trigger.key, error.kind());
                    tracing::warn!(
                        target: "admit_scaler",
                        namespace = %trigger.key.namespace,
                        scaled_object = %trigger.key.name,
                        metric = %trigger.key.metric,
                        code = telemetry::code_name(error.code()),
                        "no decision: {error}"
                    );
                }
            }
        }
        answer
            .outcome
            .map_err(|error| decision_status(&trigger.key, &error))
    }
}

/// `namespace/name`, metric `m`: how messages name a trigger.
fn describe(namespace: &str, name: &str, metric: &str) -> String {
    format!("ScaledObject {namespace}/{name} (metric {metric:?})")
}

fn describe_key(key: &TriggerKey) -> String {
    describe(&key.namespace, &key.name, &key.metric)
}

fn decision_status(key: &TriggerKey, error: &DecisionError) -> Status {
    Status::new(error.code(), format!("{}: {error}", describe_key(key)))
}

/// Runs an RPC's body and counts it by method and code.
async fn counted<T>(
    method: &'static str,
    body: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let start = Instant::now();
    let result = body.await;
    let code = result
        .as_ref()
        .map_or_else(Status::code, |_| tonic::Code::Ok);
    telemetry::rpc(method, code, start.elapsed());
    result
}

/// The stream `StreamIsActive` answers with.
pub type ActivityStream = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalScaler for ScalerService {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        counted("IsActive", async {
            let trigger = self.trigger(request.get_ref())?;
            let decision = self.decide(&trigger).await?;
            Ok(Response::new(IsActiveResponse {
                result: decision.active,
            }))
        })
        .await
    }

    type StreamIsActiveStream = ActivityStream;

    /// Sends the activity at once, then each change, deciding every decision interval; ends
    /// with the error of a failed decision (KEDA reconnects).
    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Self::StreamIsActiveStream>, Status> {
        counted("StreamIsActive", async {
            let trigger = self.trigger(request.get_ref())?;
            let (sender, receiver) = mpsc::channel(1);
            tokio::spawn(self.clone().push_activity(trigger, sender));
            let stream: ActivityStream = Box::pin(ReceiverStream::new(receiver));
            Ok(Response::new(stream))
        })
        .await
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        counted("GetMetricSpec", async {
            let trigger = self.trigger(request.get_ref())?;
            Ok(Response::new(GetMetricSpecResponse {
                metric_specs: vec![MetricSpec {
                    metric_name: trigger.config.metric_name,
                    target_size: 1,
                    target_size_float: 1.0,
                }],
            }))
        })
        .await
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        counted("GetMetrics", async {
            let request = request.get_ref();
            let object = request.scaled_object_ref.as_ref().ok_or_else(|| {
                Status::invalid_argument("GetMetricsRequest without a scaledObjectRef")
            })?;
            let trigger = self.trigger(object)?;
            if request.metric_name != trigger.config.metric_name {
                telemetry::refused("metadata");
                return Err(Status::invalid_argument(format!(
                    "{}: GetMetrics asked for metric {:?}, but the trigger's metricName is {:?}",
                    describe_key(&trigger.key),
                    request.metric_name,
                    trigger.config.metric_name
                )));
            }
            let decision = self.decide(&trigger).await?;
            // At most maxReplicas ≤ 2147483647: exact in both fields.
            let replicas = i64::try_from(decision.replicas).unwrap_or(i64::MAX);
            Ok(Response::new(GetMetricsResponse {
                metric_values: vec![MetricValue {
                    metric_name: request.metric_name.clone(),
                    metric_value: replicas,
                    metric_value_float: decision.replicas as f64,
                }],
            }))
        })
        .await
    }
}

impl ScalerService {
    async fn push_activity(
        self,
        trigger: Trigger,
        sender: mpsc::Sender<Result<IsActiveResponse, Status>>,
    ) {
        let mut shutting_down = self.shared.shutting_down.subscribe();
        let stopping = || Status::unavailable("the scaler is shutting down");
        let mut last = None;
        loop {
            // `biased`: a stopping service ends the stream, even with a memoised decision ready.
            let decided = tokio::select! {
                biased;
                () = stopped(&mut shutting_down) => Err(stopping()),
                decided = self.decide(&trigger) => decided,
            };
            let message = match decided {
                Ok(decision) if last == Some(decision.active) => None,
                Ok(decision) => {
                    last = Some(decision.active);
                    Some(Ok(IsActiveResponse {
                        result: decision.active,
                    }))
                }
                Err(status) => Some(Err(status)),
            };
            let failed = matches!(message, Some(Err(_)));
            if let Some(message) = message
                && sender.send(message).await.is_err()
            {
                return;
            }
            if failed {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(self.shared.decision_interval) => {}
                () = sender.closed() => return,
                () = stopped(&mut shutting_down) => {
                    let _ = sender.send(Err(stopping())).await;
                    return;
                }
            }
        }
    }
}

/// Resolves once the service is shutting down (or the flag is gone).
async fn stopped(shutting_down: &mut watch::Receiver<bool>) {
    let _ = shutting_down.wait_for(|&down| down).await;
}
