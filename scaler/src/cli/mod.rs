//! The command line: one module per subcommand.

mod check;
mod duration;
mod input;
mod plan;
mod replay;
mod serve;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};
use http::Uri;

/// The largest `--max-concurrent-decisions`.
const MAX_CONCURRENT_DECISIONS: usize = 256;

/// A KEDA external scaler that turns a wait-time service level into replicas with Erlang C.
///
/// It reads the arrival rate and the mean service time of a service from Prometheus, finds the
/// fewest servers for which "P(wait ≤ T) ≥ p" holds, and tells KEDA the replicas to run.
#[derive(Debug, Parser)]
#[command(name = "admit-scaler", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve KEDA's `externalscaler.ExternalScaler` gRPC service.
    Serve(ServeArgs),
    /// Validate the external triggers of ScaledObject manifests, without I/O.
    ///
    /// Exits 0 if every trigger is valid and no two share a namespace, name and metric, 1 if
    /// any is invalid (each problem names its key and raw value) or shares its key, 2 on a
    /// usage or manifest error.
    Check(CheckArgs),
    /// One evaluation against Prometheus: the inputs, the table around the answer, and the
    /// predicted service level.
    Plan(PlanArgs),
    /// What the scaler would have recommended over a past time range, step by step: a table,
    /// and optionally an SVG chart.
    Replay(ReplayArgs),
}

/// `serve`'s flags. Each can also be set by the environment variable in brackets.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Where the gRPC service (ExternalScaler and grpc.health.v1.Health) listens.
    #[arg(long, env = "ADMIT_SCALER_GRPC_LISTEN", default_value = "0.0.0.0:6000")]
    grpc_listen: SocketAddr,
    /// Where the HTTP side listens: GET /metrics (Prometheus text), /healthz, /readyz.
    #[arg(long, env = "ADMIT_SCALER_HTTP_LISTEN", default_value = "0.0.0.0:8080")]
    http_listen: SocketAddr,
    /// PEM certificate chain of the gRPC server: with --tls-key, gRPC is served over TLS
    /// (TLS 1.2 and 1.3, ALPN h2). Its SAN must match the host of the triggers'
    /// `scalerAddress`.
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_CERT",
        requires = "tls_key",
        value_name = "PATH"
    )]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_KEY",
        requires = "tls_cert",
        value_name = "PATH"
    )]
    tls_key: Option<PathBuf>,
    /// PEM CA certificates: clients (KEDA) must present a certificate they signed (mutual TLS).
    #[arg(
        long,
        env = "ADMIT_SCALER_TLS_CLIENT_CA",
        requires = "tls_cert",
        value_name = "PATH"
    )]
    tls_client_ca: Option<PathBuf>,
    /// How often the TLS files are read again: a changed, valid set (cert-manager or a
    /// Secret volume rotating them) is used for new connections without a restart.
    #[arg(long, env = "ADMIT_SCALER_TLS_RELOAD_INTERVAL", default_value = "30s", value_parser = duration::between("1s", "1h"), value_name = "DURATION")]
    tls_reload_interval: Duration,
    /// A trigger's decision is reused for this long, so KEDA's repeated calls (three per poll,
    /// plus the HPA's) query Prometheus once. Also StreamIsActive's evaluation period.
    #[arg(long, env = "ADMIT_SCALER_DECISION_INTERVAL", default_value = "10s", value_parser = duration::between("100ms", "1h"), value_name = "DURATION")]
    decision_interval: Duration,
    /// A trigger not called for this long is forgotten (its planner and its metrics).
    #[arg(long, env = "ADMIT_SCALER_STATE_TTL", default_value = "10m", value_parser = duration::between("1s", "7d"), value_name = "DURATION")]
    state_ttl: Duration,
    /// The most triggers tracked at once (a trigger under each configuration KEDA sends):
    /// a new one beyond it gets RESOURCE_EXHAUSTED until an unused one is forgotten.
    #[arg(long, env = "ADMIT_SCALER_MAX_TRIGGERS", default_value_t = admit_scaler::service::DEFAULT_MAX_TRIGGERS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    max_triggers: usize,
    /// The most decisions (two queries and the model) running at once; more wait their turn.
    #[arg(long, env = "ADMIT_SCALER_MAX_CONCURRENT_DECISIONS", default_value_t = admit_scaler::service::DEFAULT_MAX_CONCURRENT_DECISIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_CONCURRENT_DECISIONS as u64))]
    max_concurrent_decisions: usize,
    /// The longest an RPC may take (a decision waiting for its turn and its queries); past it
    /// the RPC fails with CANCELLED and its decision goes on for the next caller. At least
    /// twice --query-timeout.
    #[arg(long, env = "ADMIT_SCALER_REQUEST_TIMEOUT", default_value = "30s", value_parser = duration::between("1s", "10m"), value_name = "DURATION")]
    request_timeout: Duration,
    #[command(flatten)]
    prometheus: PrometheusArgs,
    /// How long a stop (SIGTERM, SIGINT) waits for RPCs in flight before closing.
    #[arg(long, env = "ADMIT_SCALER_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration::between("0s", "10m"), value_name = "DURATION")]
    shutdown_grace: Duration,
    /// Log filter (tracing's EnvFilter syntax), e.g. `info` or `admit_scaler=debug`.
    #[arg(long, env = "ADMIT_SCALER_LOG", default_value = "info")]
    log: String,
}

/// How Prometheus is queried.
#[derive(Debug, Args)]
struct PrometheusArgs {
    /// Each query's limit: connect, send and read. Also sent as the query's `timeout`.
    #[arg(long, env = "ADMIT_SCALER_QUERY_TIMEOUT", default_value = "5s", value_parser = duration::between("1ms", "5m"), value_name = "DURATION")]
    query_timeout: Duration,
    /// Prometheus may only be queried under these base URLs (scheme, host, port and path
    /// prefix); a trigger's other URL gets PERMISSION_DENIED. Repeat the flag, or separate with
    /// commas in the variable. Unset: any URL, which a bearer token does not allow.
    #[arg(
        long,
        env = "ADMIT_SCALER_ALLOW_PROMETHEUS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    allow_prometheus: Vec<Uri>,
    /// A file whose content (trimmed) is sent as `Authorization: Bearer <token>` to Prometheus,
    /// read again before every query so that a rotated token is sent. Needs
    /// --allow-prometheus, and is sent only to https:// URLs unless --prometheus-token-over-http.
    #[arg(
        long,
        env = "ADMIT_SCALER_PROMETHEUS_BEARER_TOKEN_FILE",
        value_name = "PATH"
    )]
    prometheus_bearer_token_file: Option<PathBuf>,
    /// PEM certificate authorities trusted for an https Prometheus, besides Mozilla's roots
    /// (a cluster's own CA).
    #[arg(long, env = "ADMIT_SCALER_PROMETHEUS_CA_FILE", value_name = "PATH")]
    prometheus_ca_file: Option<PathBuf>,
    /// Send the bearer token to an http:// (plain text) Prometheus too: anyone on the path
    /// can read it. Off: such a query fails unsent.
    #[arg(long, env = "ADMIT_SCALER_PROMETHEUS_TOKEN_OVER_HTTP")]
    prometheus_token_over_http: bool,
    /// The largest answer read from Prometheus, in bytes: a bigger one fails the query and is
    /// read no further.
    #[arg(long, env = "ADMIT_SCALER_PROMETHEUS_MAX_BODY", default_value_t = admit_scaler::prometheus::DEFAULT_MAX_BODY_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=(64 << 20)), value_name = "BYTES")]
    prometheus_max_body: usize,
    /// The most queries in flight to Prometheus at once (two per decision); more wait for a
    /// slot within --query-timeout.
    #[arg(long, env = "ADMIT_SCALER_PROMETHEUS_MAX_IN_FLIGHT", default_value_t = admit_scaler::prometheus::DEFAULT_MAX_IN_FLIGHT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024).try_map(NonZeroUsize::try_from))]
    prometheus_max_in_flight: NonZeroUsize,
}

/// Where a trigger's metadata comes from.
#[derive(Debug, Args)]
struct TriggerArgs {
    /// A file of Kubernetes manifests (`-` for stdin): every external trigger of its
    /// ScaledObjects and ScaledJobs. Repeat the flag to read several files.
    #[arg(
        short = 'f',
        long,
        value_name = "PATH",
        required_unless_present = "metadata",
        conflicts_with = "metadata"
    )]
    file: Vec<PathBuf>,
    /// The trigger's metadata, one `KEY=VALUE` per flag, as KEDA sends it.
    #[arg(long, value_name = "KEY=VALUE", value_parser = input::key_value)]
    metadata: Vec<(String, String)>,
    /// The value of an environment variable of the scale target, for `<key>FromEnv` keys
    /// (KEDA resolves them from the target's containers; an unset or empty one drops the key).
    #[arg(long, value_name = "NAME=VALUE", value_parser = input::key_value)]
    env: Vec<(String, String)>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    trigger: TriggerArgs,
}

/// Chooses one trigger of a manifest.
#[derive(Debug, Args)]
struct OneTriggerArgs {
    #[command(flatten)]
    trigger: TriggerArgs,
    /// Which external trigger of the file, as `NAME` (the ScaledObject) or `NAME/INDEX` (its
    /// index in `spec.triggers`); needed when the file has more than one.
    #[arg(long, value_name = "NAME[/INDEX]")]
    select: Option<String>,
    /// Query this Prometheus instead of the trigger's `prometheusURL` (e.g. a port-forward).
    #[arg(long, value_name = "URL")]
    prometheus_url: Option<Uri>,
    #[command(flatten)]
    prometheus: PrometheusArgs,
}

#[derive(Debug, Args)]
struct PlanArgs {
    #[command(flatten)]
    one: OneTriggerArgs,
    /// Evaluate at this time (Unix seconds or RFC 3339, e.g. 2026-11-23T10:00:00Z) instead of
    /// now.
    #[arg(long, value_name = "TIME")]
    time: Option<String>,
    /// Rows of the table on each side of the answer.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=100))]
    rows: u64,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    #[command(flatten)]
    one: OneTriggerArgs,
    /// The first evaluation (Unix seconds or RFC 3339).
    #[arg(long, value_name = "TIME")]
    start: String,
    /// The last evaluation is at or before this time.
    #[arg(long, value_name = "TIME")]
    end: String,
    /// Time between evaluations.
    #[arg(long, default_value = "1m", value_parser = duration::between("1s", "7d"), value_name = "DURATION")]
    step: Duration,
    /// Also write an SVG chart of the recommendations to this file.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
}

/// Runs the command line.
pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Check(args) => check::main(args),
        Command::Plan(args) => plan::main(args),
        Command::Replay(args) => replay::main(args),
    }
}
