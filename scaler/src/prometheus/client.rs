//! The HTTP side: one form-encoded `POST /api/v1/query`, bounded in time and size.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Incoming};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use super::error::{QueryError, QueryErrorKind};
use super::response::{Answer, parse_response};

/// The most of an answer's body that is read: past it, the answer is a `BadResponse`.
pub const MAX_BODY_BYTES: usize = 16 << 20;
const USER_AGENT_VALUE: &str = concat!("admit-scaler/", env!("CARGO_PKG_VERSION"));

/// How a [`PrometheusClient`] queries.
#[derive(Clone)]
pub struct ClientOptions {
    /// Bounds each whole exchange (connect, send, read the body) and is sent to Prometheus as
    /// the query's `timeout`. Default: 5 s.
    pub timeout: Duration,
    /// Sent as `Authorization: Bearer <token>` when set; surrounding whitespace (a token file's
    /// trailing newline) is trimmed.
    pub bearer_token: Option<BearerToken>,
    /// Certificate authorities trusted for `https` besides Mozilla's roots: a cluster's own CA
    /// in front of an in-cluster Prometheus or Thanos.
    pub extra_roots: Vec<CertificateDer<'static>>,
}

/// Where the bearer token a [`PrometheusClient`] sends comes from.
#[derive(Clone)]
pub enum BearerToken {
    /// This token.
    Value(String),
    /// The contents of this file, read before every query, so that a rotated token (a
    /// projected service-account token, or a mounted Secret the kubelet updates) is sent as
    /// soon as it is written. A file that cannot be read, or holds only whitespace, fails the
    /// query with [`QueryErrorKind::Credentials`].
    File(PathBuf),
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(_) => f.write_str("Value(<redacted>)"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl BearerToken {
    /// The token to send now, trimmed.
    async fn read(&self) -> Result<Cow<'_, str>, QueryErrorKind> {
        let path = match self {
            Self::Value(token) => return Ok(Cow::Borrowed(token.trim())),
            Self::File(path) => path,
        };
        let credentials = |problem: String| QueryErrorKind::Credentials {
            message: format!("the bearer token file {}: {problem}", path.display()),
        };
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|error| credentials(error.to_string()))?;
        match text.trim() {
            "" => Err(credentials("it is empty".to_owned())),
            token => Ok(Cow::Owned(token.to_owned())),
        }
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            bearer_token: None,
            extra_roots: Vec::new(),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("timeout", &self.timeout)
            .field("bearer_token", &self.bearer_token)
            .field("extra_roots", &self.extra_roots.len())
            .finish()
    }
}

type Pool<C> = Client<C, Full<Bytes>>;

/// rustls with the ring provider, its safe default protocol versions, and Mozilla's roots plus
/// `extra_roots`.
///
/// # Errors
///
/// rustls' refusal of a protocol set or of a root certificate.
pub fn tls_config(extra_roots: &[CertificateDer<'static>]) -> Result<ClientConfig, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for root in extra_roots {
        roots.add(root.clone())?;
    }
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// The connection pool: https and http, or http alone if TLS could not be set up.
#[derive(Clone, Debug)]
enum Transport {
    Tls(Pool<HttpsConnector<HttpConnector>>),
    Plain(Pool<HttpConnector>, String),
}

/// An instant-query client for Prometheus' HTTP API, over http or https (rustls, Mozilla's
/// roots). Clones share one connection pool.
#[derive(Clone, Debug)]
pub struct PrometheusClient {
    transport: Transport,
    options: ClientOptions,
}

impl PrometheusClient {
    /// A client with its own connection pool; needs a tokio runtime only to query.
    pub fn new(options: ClientOptions) -> Self {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let builder = Client::builder(TokioExecutor::new());
        let transport = match tls_config(&options.extra_roots) {
            Ok(config) => Transport::Tls(
                builder.build(
                    HttpsConnectorBuilder::new()
                        .with_tls_config(config)
                        .https_or_http()
                        .enable_http1()
                        .wrap_connector(http),
                ),
            ),
            Err(error) => {
                Transport::Plain(builder.build(http), format!("TLS setup failed: {error}"))
            }
        };
        Self { transport, options }
    }

    /// One instant query against `base`; `time` = evaluation time in Unix seconds (None: now).
    ///
    /// `base` is Prometheus' URL, path prefix included (`http://prom:9090/prometheus`). The whole
    /// exchange (connect, send, read body) is bounded by the timeout, which is also sent as
    /// `timeout=`.
    pub async fn query(
        &self,
        base: &Uri,
        query: &str,
        time: Option<f64>,
    ) -> Result<Answer, QueryError> {
        let timeout = self.options.timeout;
        let exchange = async {
            let token = match &self.options.bearer_token {
                Some(token) => Some(token.read().await?),
                None => None,
            };
            let request = self.request(base, query, time, token.as_deref())?;
            let (status, body) = self.send(request).await?;
            parse_response(status, &body)
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(QueryErrorKind::Timeout {
                message: format!("no answer within {timeout:?}"),
            }),
        };
        outcome.map_err(|kind| QueryError {
            query: query.to_owned(),
            kind,
        })
    }

    fn request(
        &self,
        base: &Uri,
        query: &str,
        time: Option<f64>,
        token: Option<&str>,
    ) -> Result<Request<Full<Bytes>>, QueryErrorKind> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("query", query);
        form.append_pair("timeout", &duration_text(self.options.timeout));
        if let Some(time) = time {
            if !time.is_finite() {
                return Err(QueryErrorKind::BadQuery {
                    message: format!("evaluation time {time} is not a finite number"),
                });
            }
            form.append_pair("time", &time_text(time));
        }
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(query_uri(base)?)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, USER_AGENT_VALUE);
        if let Some(token) = token {
            let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
                QueryErrorKind::Credentials {
                    message: "the bearer token is not a valid header value".to_owned(),
                }
            })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        request
            .body(Full::new(Bytes::from(form.finish())))
            .map_err(|error| unreachable(&format!("cannot build the request: {error}")))
    }

    /// Sends `request`; the answer's status and its body, read up to [`MAX_BODY_BYTES`].
    async fn send(&self, request: Request<Full<Bytes>>) -> Result<(u16, Bytes), QueryErrorKind> {
        let sent = match &self.transport {
            Transport::Tls(pool) => pool.request(request).await,
            Transport::Plain(_, why) if request.uri().scheme_str() == Some("https") => {
                return Err(unreachable(why));
            }
            Transport::Plain(pool, _) => pool.request(request).await,
        };
        let response = sent.map_err(|error| unreachable(&chain(&error)))?;
        let status = response.status().as_u16();
        read_body(status, response.into_body())
            .await
            .map(|body| (status, body))
    }
}

async fn read_body(status: u16, body: Incoming) -> Result<Bytes, QueryErrorKind> {
    let too_big = || QueryErrorKind::BadResponse {
        status,
        message: format!("the body exceeds {} MiB", MAX_BODY_BYTES >> 20),
    };
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(too_big());
    }
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(too_big()),
        Err(error) => Err(unreachable(&format!(
            "reading the body: {}",
            chain(error.as_ref())
        ))),
    }
}

/// `<base>/api/v1/query`, keeping the base's path prefix and query string.
fn query_uri(base: &Uri) -> Result<Uri, QueryErrorKind> {
    match base.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(unreachable(&format!(
                "unsupported scheme {other:?} in {base}"
            )));
        }
        None => return Err(unreachable(&format!("no http:// or https:// in {base}"))),
    }
    let Some(authority) = base.authority() else {
        return Err(unreachable(&format!("no host in {base}")));
    };
    let prefix = base.path().trim_end_matches('/');
    let path = match base.query() {
        Some(params) => format!("{prefix}/api/v1/query?{params}"),
        None => format!("{prefix}/api/v1/query"),
    };
    Uri::builder()
        .scheme(base.scheme_str().unwrap_or("http"))
        .authority(authority.as_str())
        .path_and_query(path)
        .build()
        .map_err(|error| unreachable(&format!("cannot build the query URL from {base}: {error}")))
}

/// A Prometheus duration in whole milliseconds, rounded up, at least `1ms`.
fn duration_text(timeout: Duration) -> String {
    let millis = timeout.as_nanos().div_ceil(1_000_000).max(1);
    format!("{millis}ms")
}

/// Unix seconds with at most 3 decimals, trailing zeros dropped.
fn time_text(time: f64) -> String {
    let text = format!("{time:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn unreachable(message: &str) -> QueryErrorKind {
    QueryErrorKind::Unreachable {
        message: message.to_owned(),
    }
}

/// An error and its sources, `outer: inner: …`: hyper's own text alone says little.
fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
