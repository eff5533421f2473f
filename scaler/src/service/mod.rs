//! The gRPC service KEDA calls: `externalscaler.ExternalScaler`.
//!
//! Every RPC parses the trigger's metadata first (no I/O). `GetMetricSpec` stops there and
//! answers the constant spec `{metricName, targetSize: 1}`. `GetMetrics`, `IsActive` and each
//! tick of `StreamIsActive` share one decision per trigger (keyed by [`TriggerKey`]), made at
//! most once per decision interval: KEDA's three calls per poll, and the HPA's own, query
//! Prometheus once. A failed decision is a `tonic::Status` whose code says why ([`code`], and
//! [`ScalerService`] for every refusal), so that KEDA's `fallback` engages.
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
mod failure;
mod names;
mod registry;
#[cfg(test)]
mod tests;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::decision::DecisionError;
use crate::excerpt::excerpt;
use crate::metadata::{DEFAULT_METRIC_NAME, ScalerConfig, TriggerKey};
use crate::prometheus::{ClientOptions, PrometheusClient, QueryError};
use crate::proto::external_scaler_server::{ExternalScaler, ExternalScalerServer};
use crate::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use crate::telemetry;

pub use self::allow::{AllowList, AllowListError};
pub use self::failure::code;
use self::registry::{Limits, Outcome, Refused, Registry};

/// The largest request message the service decodes, in bytes: a `GetMetricsRequest` for the
/// largest valid trigger (the longest namespace and name, and
/// [`longest_metadata`](crate::metadata::longest_metadata)), 33 721 bytes. Anything larger is
/// not a valid trigger.
pub fn max_request_bytes() -> usize {
    static BYTES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
        use prost::Message;
        largest_request().encoded_len()
    });
    *BYTES
}

/// The largest valid request: see [`max_request_bytes`].
fn largest_request() -> GetMetricsRequest {
    let scaler_metadata = crate::metadata::longest_metadata();
    let metric_name = ScalerConfig::from_metadata(&scaler_metadata)
        .map(|config| config.metric_name)
        .unwrap_or_default();
    let label = "o".repeat(names::LABEL_MAX);
    let mut name = [label.as_str(); 4].join(".");
    name.truncate(names::SUBDOMAIN_MAX);
    GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name,
            namespace: "n".repeat(names::LABEL_MAX),
            scaler_metadata,
        }),
        metric_name,
    }
}

/// [`ServiceOptions::max_triggers`]' default.
pub const DEFAULT_MAX_TRIGGERS: usize = 2000;

/// [`ServiceOptions::max_concurrent_decisions`]' default.
pub const DEFAULT_MAX_CONCURRENT_DECISIONS: usize = 8;

/// How a [`ScalerService`] decides and queries.
#[derive(Clone, Debug)]
pub struct ServiceOptions {
    /// A decision younger than this is reused (and `StreamIsActive` decides this often).
    /// Default 10 s.
    pub decision_interval: Duration,
    /// A trigger unused for longer is forgotten, planner and all. Default 10 min.
    pub state_ttl: Duration,
    /// The most triggers (a ScaledObject's trigger under one configuration) tracked at once:
    /// a new one beyond it gets `RESOURCE_EXHAUSTED` until an old one is forgotten. Default
    /// [`DEFAULT_MAX_TRIGGERS`].
    pub max_triggers: usize,
    /// The most decisions (queries and model) running at once across all triggers; more wait
    /// for a turn. Default [`DEFAULT_MAX_CONCURRENT_DECISIONS`].
    pub max_concurrent_decisions: usize,
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
            max_triggers: DEFAULT_MAX_TRIGGERS,
            max_concurrent_decisions: DEFAULT_MAX_CONCURRENT_DECISIONS,
            client: ClientOptions::default(),
            allow: AllowList::default(),
        }
    }
}

/// The `ExternalScaler` implementation. Clones share their state.
///
/// A failed decision's code is [`code`]'s; the table below adds the service's own refusals.
///
/// | failure | code |
/// |---|---|
/// | a `name` or `namespace` that is not a Kubernetes name, bad/missing/unknown metadata, unknown `metricName`, PromQL syntax (HTTP 400) | `INVALID_ARGUMENT` |
/// | `prometheusURL` outside `--allow-prometheus` | `PERMISSION_DENIED` |
/// | HTTP 422, empty result, several series, a non-number, NaN/±Inf, λ < 0, service time ≤ 0 | `FAILED_PRECONDITION` |
/// | Prometheus unreachable, a non-JSON answer, other 5xx | `UNAVAILABLE` |
/// | Prometheus' timeout (503) or ours | `DEADLINE_EXCEEDED` |
/// | the queueing model's limits (a load above 10¹⁰ erlangs, Erlang A work past its budget); a request over [`max_request_bytes`] | `OUT_OF_RANGE` |
/// | a new trigger while [`max_triggers`](ServiceOptions::max_triggers) are tracked, or a `StreamIsActive` stream while as many are open | `RESOURCE_EXHAUSTED` |
/// | a decision that panicked (a bug) | `INTERNAL` |
#[derive(Clone, Debug)]
pub struct ScalerService {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Set by [`ScalerService::shut_down`]: open `StreamIsActive` streams end.
    shutting_down: watch::Sender<bool>,
    registry: Registry,
    /// `StreamIsActive` streams open now, and the most that may be (one per trigger tracked).
    open_streams: AtomicUsize,
    max_streams: usize,
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
                registry: Registry::new(
                    Limits {
                        decision_interval: options.decision_interval,
                        state_ttl: options.state_ttl,
                        max_triggers: options.max_triggers,
                        max_concurrent_decisions: options.max_concurrent_decisions,
                    },
                    publish,
                ),
                open_streams: AtomicUsize::new(0),
                max_streams: options.max_triggers,
                client: PrometheusClient::new(options.client),
                allow: options.allow,
                decision_interval: options.decision_interval,
            }),
        }
    }

    /// The tonic service to add to a server: requests larger than [`max_request_bytes`] are
    /// refused with `OUT_OF_RANGE` before they are decoded.
    pub fn into_server(self) -> ExternalScalerServer<Self> {
        ExternalScalerServer::new(self).max_decoding_message_size(max_request_bytes())
    }

    /// Forgets triggers unused for the state TTL, refreshes the scaler-wide gauges, and returns
    /// how many triggers remain. The binary calls it periodically; a new trigger also makes
    /// room by forgetting the expired ones.
    pub fn sweep(&self) -> usize {
        let tracked = self.shared.registry.sweep();
        telemetry::scaler(tracked, self.open_streams());
        tracked
    }

    /// How many `StreamIsActive` streams are open: each ends when its client goes away (or,
    /// for a client that vanished without closing, when keepalive finds its connection dead).
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::Relaxed)
    }

    /// Ends every open `StreamIsActive` stream, and every RPC waiting for a decision, with
    /// `UNAVAILABLE` (KEDA retries, against another replica if there is one), and any made
    /// later at once: call it when the server stops, or its graceful shutdown waits for them.
    /// Decisions in flight go on, unseen.
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
        if let Err(problem) = names::namespace(&object.namespace)
            .map_err(|expected| ("namespace", &object.namespace, expected))
            .and_then(|()| {
                names::object_name(&object.name)
                    .map_err(|expected| ("name", &object.name, expected))
            })
        {
            let (field, value, expected) = problem;
            return Err(refuse(
                "metadata",
                Status::invalid_argument(format!(
                    "scaledObjectRef: {field} \"{}\" is not {expected}",
                    excerpt(value)
                )),
            ));
        }
        let described = || {
            let metric = object
                .scaler_metadata
                .get("metricName")
                .map_or(DEFAULT_METRIC_NAME, String::as_str);
            describe(&object.namespace, &object.name, &excerpt(metric))
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
                    "{}: prometheusURL \"{}\" is outside the allowed URLs ({})",
                    described(),
                    excerpt(&config.prometheus_url.to_string()),
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

    /// The trigger's decision: memoised, running, or made now from fresh queries.
    async fn decide(&self, trigger: &Trigger) -> Result<crate::decision::Decision, Status> {
        let shared = &self.shared;
        let (client, config) = (shared.client.clone(), trigger.config.clone());
        let mut shutting_down = shared.shutting_down.subscribe();
        let answer = tokio::select! {
            biased;
            () = stopped(&mut shutting_down) => return Err(stopping()),
            answer = shared
                .registry
                .decide(trigger.key.clone(), &trigger.config, move || async move {
                    crate::measure::measure(&client, &config.prometheus_url, &config, None).await
                }) => answer,
        };
        // The answer may be a new trigger's first.
        telemetry::scaler(shared.registry.len(), self.open_streams());
        match answer {
            Ok(outcome) => outcome.map_err(|error| decision_status(&trigger.key, &error)),
            Err(Refused::Full { max_triggers }) => {
                telemetry::refused("exhausted");
                Err(Status::resource_exhausted(format!(
                    "{}: the scaler tracks {max_triggers} triggers, its limit \
                     (--max-triggers); a trigger unused for --state-ttl is forgotten",
                    describe_key(&trigger.key)
                )))
            }
            Err(Refused::Lost) => Err(Status::internal(format!(
                "{}: the decision failed (a bug: see the scaler's log)",
                describe_key(&trigger.key)
            ))),
        }
    }
}

/// Publishes a decision once, whoever asked for it: the trigger's metrics, and a log line for a
/// failure.
fn publish(key: &TriggerKey, config: &ScalerConfig, outcome: &Outcome) {
    match outcome {
        Ok(decision) => telemetry::decision(key, config, decision),
        Err(error) => {
            telemetry::error(key, error.kind());
            tracing::warn!(
                target: "admit_scaler",
                namespace = %key.namespace,
                scaled_object = %key.name,
                metric = %key.metric,
                code = telemetry::code_name(code(error)),
                "no decision: {error}"
            );
        }
    }
}

/// `namespace/name`, metric `m`: how messages name a trigger.
fn describe(namespace: &str, name: &str, metric: &str) -> String {
    format!("ScaledObject {namespace}/{name} (metric {metric:?})")
}

fn describe_key(key: &TriggerKey) -> String {
    describe(&key.namespace, &key.name, &key.metric)
}

fn decision_status(key: &TriggerKey, error: &DecisionError<QueryError>) -> Status {
    Status::new(code(error), format!("{}: {error}", describe_key(key)))
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
            let shared = Arc::clone(&self.shared);
            let Some(open) = OpenStream::new(shared) else {
                telemetry::refused("exhausted");
                return Err(Status::resource_exhausted(format!(
                    "{}: {} StreamIsActive streams are open, one per trigger the scaler may \
                     track (--max-triggers)",
                    describe_key(&trigger.key),
                    self.shared.max_streams
                )));
            };
            let (sender, receiver) = mpsc::channel(1);
            tokio::spawn(self.clone().push_activity(trigger, sender, open));
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
                    "{}: GetMetrics asked for metric \"{}\", but the trigger's metricName is {:?}",
                    describe_key(&trigger.key),
                    excerpt(&request.metric_name),
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
        _open: OpenStream,
    ) {
        let mut shutting_down = self.shared.shutting_down.subscribe();
        let mut last = None;
        loop {
            // A stopping service ends the stream (`decide` answers UNAVAILABLE).
            let decided = self.decide(&trigger).await;
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

/// Counts a `StreamIsActive` stream as open while it lives.
struct OpenStream(Arc<Shared>);

impl OpenStream {
    /// A stream counted as open, unless `max_streams` are.
    fn new(shared: Arc<Shared>) -> Option<Self> {
        let max = shared.max_streams;
        shared
            .open_streams
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < max).then_some(open + 1)
            })
            .ok()?;
        Some(OpenStream(shared))
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What an RPC gets while the scaler stops.
fn stopping() -> Status {
    Status::unavailable("the scaler is shutting down")
}

/// Resolves once the service is shutting down (or the flag is gone).
async fn stopped(shutting_down: &mut watch::Receiver<bool>) {
    let _ = shutting_down.wait_for(|&down| down).await;
}
