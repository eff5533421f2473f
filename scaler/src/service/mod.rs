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
mod slots;
mod streams;
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
use self::registry::{Cap, Limits, Outcome, Refused, Registry};
use self::streams::{OpenStream, Streams};

/// The largest request message the service decodes, in bytes: a `GetMetricsRequest` for the
/// largest valid trigger (the longest namespace and name, and
/// [`longest_metadata`](crate::metadata::longest_metadata)), 34 812 bytes. Anything larger is
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

/// [`ServiceOptions::max_triggers_per_namespace`]' default: half the scaler's.
pub const DEFAULT_MAX_TRIGGERS_PER_NAMESPACE: usize = 1000;

/// [`ServiceOptions::max_triggers_per_object`]' default: 16 triggers, each under two
/// configurations while an edit reaches KEDA's operator and metrics server.
pub const DEFAULT_MAX_TRIGGERS_PER_OBJECT: usize = 32;

/// [`ServiceOptions::max_concurrent_decisions`]' default.
pub const DEFAULT_MAX_CONCURRENT_DECISIONS: usize = 8;

/// [`ServiceOptions::max_concurrent_decisions_per_namespace`]' default: half the scaler's.
pub const DEFAULT_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE: usize = 4;

/// [`ServiceOptions::max_decision_wait`]' default.
pub const DEFAULT_MAX_DECISION_WAIT: Duration = Duration::from_secs(10);

/// How a [`ScalerService`] decides and queries.
#[derive(Clone, Debug)]
pub struct ServiceOptions {
    /// A decision younger than this is reused (and `StreamIsActive` decides this often).
    /// Default 10 s.
    pub decision_interval: Duration,
    /// A trigger unused for longer is forgotten, planner and all. Default 10 min.
    pub state_ttl: Duration,
    /// The most triggers (a ScaledObject's trigger under one configuration) tracked at once:
    /// a new one beyond it gets `RESOURCE_EXHAUSTED` until an old one is forgotten. Also the
    /// most `StreamIsActive` streams open at once. Default [`DEFAULT_MAX_TRIGGERS`].
    pub max_triggers: usize,
    /// The most triggers tracked at once in one namespace, and `StreamIsActive` streams open
    /// for it: a new one beyond gets `RESOURCE_EXHAUSTED`. Default
    /// [`DEFAULT_MAX_TRIGGERS_PER_NAMESPACE`].
    pub max_triggers_per_namespace: usize,
    /// The most triggers tracked at once for one ScaledObject (each trigger under each
    /// configuration KEDA sends): a new one beyond gets `RESOURCE_EXHAUSTED`. Default
    /// [`DEFAULT_MAX_TRIGGERS_PER_OBJECT`].
    pub max_triggers_per_object: usize,
    /// The most decisions (queries and model) running at once across all triggers; more wait
    /// for a slot, which goes to the waiting namespaces in turn. Default
    /// [`DEFAULT_MAX_CONCURRENT_DECISIONS`].
    pub max_concurrent_decisions: usize,
    /// The most decisions running at once for one namespace's triggers (at most
    /// `max_concurrent_decisions`): another namespace finds a slot free however slow this
    /// one's queries are. Default [`DEFAULT_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE`].
    pub max_concurrent_decisions_per_namespace: usize,
    /// The longest a decision waits for a slot: past it, its callers get `RESOURCE_EXHAUSTED`
    /// and it is not made. Keep it shorter than the RPC's own limit less the query timeout.
    /// Default [`DEFAULT_MAX_DECISION_WAIT`].
    pub max_decision_wait: Duration,
    /// The Prometheus client's timeout and credentials.
    pub client: ClientOptions,
    /// The Prometheus URLs triggers may use; empty allows all (the binary requires a list, or
    /// `--allow-any-prometheus`).
    pub allow: AllowList,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            decision_interval: Duration::from_secs(10),
            state_ttl: Duration::from_secs(600),
            max_triggers: DEFAULT_MAX_TRIGGERS,
            max_triggers_per_namespace: DEFAULT_MAX_TRIGGERS_PER_NAMESPACE,
            max_triggers_per_object: DEFAULT_MAX_TRIGGERS_PER_OBJECT,
            max_concurrent_decisions: DEFAULT_MAX_CONCURRENT_DECISIONS,
            max_concurrent_decisions_per_namespace: DEFAULT_MAX_CONCURRENT_DECISIONS_PER_NAMESPACE,
            max_decision_wait: DEFAULT_MAX_DECISION_WAIT,
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
/// | `prometheusURL` outside the [allow-list](ServiceOptions::allow) (the message does not list it; the log does) | `PERMISSION_DENIED` |
/// | HTTP 422, empty result, several series, a non-number, NaN/±Inf, λ < 0, service time ≤ 0 | `FAILED_PRECONDITION` |
/// | Prometheus unreachable, a non-JSON answer, other 5xx; the service shutting down | `UNAVAILABLE` |
/// | Prometheus' timeout (503) or ours (reused longer after each timeout in a row, at most 8 decision intervals) | `DEADLINE_EXCEEDED` |
/// | the queueing model's limits short of the cap (a load above 10¹⁰ erlangs, Erlang A work past its budget); a request over [`max_request_bytes`] | `OUT_OF_RANGE` |
/// | a new trigger beyond [`max_triggers`](ServiceOptions::max_triggers), [`max_triggers_per_namespace`](ServiceOptions::max_triggers_per_namespace) or [`max_triggers_per_object`](ServiceOptions::max_triggers_per_object); a `StreamIsActive` stream beyond `max_triggers` or `max_triggers_per_namespace`; no decision slot within [`max_decision_wait`](ServiceOptions::max_decision_wait) | `RESOURCE_EXHAUSTED` |
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
    /// `StreamIsActive` streams open now, in all and per namespace.
    streams: Arc<Streams>,
    client: PrometheusClient,
    allow: AllowList,
    decision_interval: Duration,
}

/// A trigger whose metadata parsed and passed the allow-list.
struct Trigger {
    key: TriggerKey,
    config: Arc<ScalerConfig>,
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
                        max_triggers_per_namespace: options.max_triggers_per_namespace,
                        max_triggers_per_object: options.max_triggers_per_object,
                        max_concurrent_decisions: options.max_concurrent_decisions,
                        max_concurrent_decisions_per_namespace: options
                            .max_concurrent_decisions_per_namespace,
                        max_decision_wait: options.max_decision_wait,
                    },
                    publish,
                ),
                streams: Streams::new(options.max_triggers, options.max_triggers_per_namespace),
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
        self.shared.streams.open()
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
            // The caller learns no allowed URL; the operator finds them in the log.
            let url = excerpt(&config.prometheus_url.to_string());
            tracing::debug!(
                target: "admit_scaler",
                allowed = %self.shared.allow,
                "{}: prometheusURL \"{url}\" is outside the allowed URLs",
                described()
            );
            return Err(refuse(
                "permission",
                Status::permission_denied(format!(
                    "{}: prometheusURL \"{url}\" is outside the Prometheus URLs the scaler \
                     may query (--allow-prometheus, listed in its log)",
                    described(),
                )),
            ));
        }
        // The parsed name: a `metricNameFromEnv` names the trigger as much as `metricName`.
        let key = TriggerKey::new(&object.namespace, &object.name, &config.metric_name);
        Ok(Trigger {
            key,
            config: Arc::new(config),
        })
    }

    /// The trigger's decision: memoised, running, or made now from fresh queries.
    async fn decide(&self, trigger: &Trigger) -> Result<crate::decision::Decision, Status> {
        let shared = &self.shared;
        let (client, config) = (shared.client.clone(), Arc::clone(&trigger.config));
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
        let described = describe_key(&trigger.key);
        match answer {
            Ok(outcome) => outcome.map_err(|error| decision_status(&trigger.key, &error)),
            Err(Refused::Full(cap)) => {
                telemetry::refused("exhausted");
                let (limit, scope, flag) = match cap {
                    Cap::Scaler(limit) => (limit, "in all", "--max-triggers"),
                    Cap::Namespace(limit) => {
                        (limit, "in this namespace", "--max-triggers-per-namespace")
                    }
                    Cap::Object(limit) => (
                        limit,
                        "for this ScaledObject (each trigger under each configuration)",
                        "--max-triggers-per-object",
                    ),
                };
                Err(Status::resource_exhausted(format!(
                    "{described}: the scaler tracks {limit} triggers {scope}, its limit \
                     ({flag}); a trigger unused for --state-ttl is forgotten"
                )))
            }
            Err(Refused::Busy) => {
                telemetry::refused("busy");
                let limits = shared.registry.limits();
                Err(Status::resource_exhausted(format!(
                    "{described}: no decision slot came free within {:?} \
                     (--max-decision-wait): {} decisions run at once, at most {} for one \
                     namespace (--max-concurrent-decisions, \
                     --max-concurrent-decisions-per-namespace); no decision was made",
                    limits.max_decision_wait,
                    limits.max_concurrent_decisions,
                    limits.max_concurrent_decisions_per_namespace,
                )))
            }
            Err(Refused::Lost) => Err(Status::internal(format!(
                "{described}: the decision failed (a bug: see the scaler's log)"
            ))),
        }
    }
}

/// Publishes a decision once, whoever asked for it: the trigger's metrics, and a log line for a
/// failure, with how long it is reused.
fn publish(key: &TriggerKey, config: &ScalerConfig, outcome: &Outcome, reused: Duration) {
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
                reused = ?reused,
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
            let open = match self.shared.streams.open_one(&trigger.key.namespace) {
                Ok(open) => open,
                Err(full) => {
                    telemetry::refused("exhausted");
                    let (limit, scope, flag) = match full {
                        streams::Full::Scaler(limit) => (limit, "", "--max-triggers"),
                        streams::Full::Namespace(limit) => {
                            (limit, " for this namespace", "--max-triggers-per-namespace")
                        }
                    };
                    return Err(Status::resource_exhausted(format!(
                        "{}: {limit} StreamIsActive streams are open{scope}, one per trigger \
                         the scaler may track ({flag})",
                        describe_key(&trigger.key),
                    )));
                }
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
                    metric_name: trigger.config.metric_name.clone(),
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

/// What an RPC gets while the scaler stops.
fn stopping() -> Status {
    Status::unavailable("the scaler is shutting down")
}

/// Resolves once the service is shutting down (or the flag is gone).
async fn stopped(shutting_down: &mut watch::Receiver<bool>) {
    let _ = shutting_down.wait_for(|&down| down).await;
}
