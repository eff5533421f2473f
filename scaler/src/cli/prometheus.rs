//! How Prometheus is queried: the flags `serve`, `plan` and `replay` share, and the allow-list
//! and client options they build.

use std::fs;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use ::http::Uri;
use admit_scaler::service::AllowList;
use clap::Args;
use clap::builder::TypedValueParser;

use super::{BoxError, duration};

/// How Prometheus is queried.
#[derive(Debug, Args)]
pub(super) struct PrometheusArgs {
    /// Each query's limit: connect, send and read. Also sent as the query's `timeout`.
    #[arg(long, env = "ADMIT_SCALER_QUERY_TIMEOUT", default_value = "5s", value_parser = duration::between("1ms", "5m"), value_name = "DURATION")]
    pub(super) query_timeout: Duration,
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
    pub(super) prometheus_max_in_flight: NonZeroUsize,
}

/// The allow-list, which a bearer token requires: without one, a trigger could send the token
/// to any URL it names.
pub(super) fn allow_list(args: &PrometheusArgs) -> Result<AllowList, String> {
    let allow = AllowList::new(args.allow_prometheus.iter().cloned())
        .map_err(|error| format!("--allow-prometheus: {error}"))?;
    if args.prometheus_bearer_token_file.is_some() && allow.is_empty() {
        return Err(
            "--prometheus-bearer-token-file needs --allow-prometheus: without it, any trigger \
             could send the token to a URL of its choosing"
                .to_owned(),
        );
    }
    Ok(allow)
}

/// The allow-list `serve` uses: required unless `allow_any` (`--allow-any-prometheus`), for
/// any caller reaching the gRPC port can name a trigger's URL.
pub(super) fn serve_allow_list(
    args: &PrometheusArgs,
    allow_any: bool,
) -> Result<AllowList, String> {
    let allow = allow_list(args)?;
    if allow.is_empty() && !allow_any {
        return Err(
            "--allow-prometheus is required: without it, any caller reaching the gRPC port \
             could make the scaler send requests to any URL (a cloud metadata endpoint, say); \
             give the Prometheus URLs triggers may use, or --allow-any-prometheus to allow any"
                .to_owned(),
        );
    }
    Ok(allow)
}

pub(super) fn client_options(
    args: &PrometheusArgs,
) -> Result<admit_scaler::prometheus::ClientOptions, BoxError> {
    let bearer_token = match &args.prometheus_bearer_token_file {
        Some(path) => {
            let token = admit_scaler::prometheus::BearerToken::File(path.clone());
            // Checked once here, so that a wrong path stops the scaler at start; read again
            // before every query, so that a rotated token is sent.
            token
                .check()
                .map_err(|error| format!("--prometheus-bearer-token-file: {error}"))?;
            Some(token)
        }
        None => None,
    };
    let extra_roots = match &args.prometheus_ca_file {
        Some(path) => ca_certificates(path)?,
        None => Vec::new(),
    };
    Ok(admit_scaler::prometheus::ClientOptions {
        timeout: args.query_timeout,
        bearer_token,
        extra_roots,
        max_body_bytes: args.prometheus_max_body,
        max_in_flight: args.prometheus_max_in_flight,
        allow_token_over_http: args.prometheus_token_over_http,
    })
}

/// The certificates of a PEM file, each one accepted as a root by rustls.
fn ca_certificates(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, BoxError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let flag = "--prometheus-ca-file";
    let pem = fs::read(path).map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{flag} {}: no PEM certificate in the file", path.display()).into());
    }
    admit_scaler::prometheus::tls_config(&certificates)
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    Ok(certificates)
}
