//! The HTTP side: one form-encoded `POST /api/v1/query`, bounded in time, size and number in
//! flight.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::uri::Scheme;
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::error::{QueryError, QueryErrorKind};
use super::response::{Answer, parse_response};
use crate::excerpt::{excerpt, excerpt_bytes};

/// [`ClientOptions::max_body_bytes`]' default: 256 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 << 10;
/// [`ClientOptions::max_in_flight`]' default: 16.
pub const DEFAULT_MAX_IN_FLIGHT: NonZeroUsize = NonZeroUsize::new(16).unwrap();
/// The largest bearer token file read: past it, the query fails with
/// [`QueryErrorKind::Credentials`].
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 << 10;
const USER_AGENT_VALUE: &str = concat!("admit-scaler/", env!("CARGO_PKG_VERSION"));

/// How a [`PrometheusClient`] queries.
#[derive(Clone)]
pub struct ClientOptions {
    /// Bounds each query from its start: the wait for a slot
    /// ([`max_in_flight`](Self::max_in_flight)), then the exchange (connect, send, read the
    /// body). Sent to Prometheus as the query's `timeout`. Past it, the query fails with
    /// [`QueryErrorKind::Timeout`]. Default: 5 s.
    pub timeout: Duration,
    /// Sent as `Authorization: Bearer <token>` when set; surrounding whitespace (a token file's
    /// trailing newline) is trimmed. Sent only over `https` unless
    /// [`allow_token_over_http`](Self::allow_token_over_http).
    pub bearer_token: Option<BearerToken>,
    /// Certificate authorities trusted for `https` besides Mozilla's roots: a cluster's own CA
    /// in front of an in-cluster Prometheus or Thanos.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The largest answer body read, in bytes. A body that declares a larger `Content-Length`
    /// is not read; one that grows past the cap is read no further. Either fails the query
    /// with [`QueryErrorKind::BadResponse`], naming the cap. Default:
    /// [`DEFAULT_MAX_BODY_BYTES`] (256 KiB): a one-sample answer takes well under 1 KiB, and
    /// an answer of many series still reads in full, as
    /// [`MultipleSeries`](QueryErrorKind::MultipleSeries), up to about 1 400 series with
    /// a pod's usual labels (about 185 bytes each).
    pub max_body_bytes: usize,
    /// The most queries this client (and its clones) has in flight at once. A query waits for
    /// a free slot within its [`timeout`](Self::timeout), and holds it until its answer is read;
    /// one that gets no slot in time fails with [`QueryErrorKind::Timeout`], unsent. So at
    /// most `max_in_flight` × [`max_body_bytes`](Self::max_body_bytes) of answers are held at
    /// once. Default: [`DEFAULT_MAX_IN_FLIGHT`] (16).
    pub max_in_flight: NonZeroUsize,
    /// Whether the bearer token may go over plain `http`. Off (the default), a query with a
    /// bearer token to a URL that is not `https://` fails with
    /// [`QueryErrorKind::Credentials`], unsent.
    pub allow_token_over_http: bool,
}

/// Where the bearer token a [`PrometheusClient`] sends comes from.
#[derive(Clone)]
pub enum BearerToken {
    /// This token.
    Value(String),
    /// The contents of this file, read before every query, so that a rotated token (a
    /// projected service-account token, or a mounted Secret the kubelet updates) is sent as
    /// soon as it is written. A file that cannot be read, holds only whitespace, is not UTF-8
    /// or is larger than [`MAX_TOKEN_FILE_BYTES`] (read no further) fails the query with
    /// [`QueryErrorKind::Credentials`].
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
        match self {
            Self::Value(token) => Ok(Cow::Borrowed(token.trim())),
            Self::File(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_token_file(&path))
                    .await
                    .map_err(|error| QueryErrorKind::Credentials {
                        message: format!("reading the bearer token file: {error}"),
                    })?
                    .map(Cow::Owned)
            }
        }
    }

    /// Whether the token can be had now: what a query would send, or why it would fail, as
    /// [`QueryErrorKind::Credentials`]. For a check at start.
    ///
    /// # Errors
    ///
    /// The file cannot be read, holds only whitespace, is not UTF-8 or is larger than
    /// [`MAX_TOKEN_FILE_BYTES`].
    pub fn check(&self) -> Result<(), QueryErrorKind> {
        match self {
            Self::Value(_) => Ok(()),
            Self::File(path) => read_token_file(path).map(drop),
        }
    }
}

/// The trimmed token in `path`, read up to [`MAX_TOKEN_FILE_BYTES`].
fn read_token_file(path: &std::path::Path) -> Result<String, QueryErrorKind> {
    use std::io::Read;
    let credentials = |problem: String| QueryErrorKind::Credentials {
        message: format!("the bearer token file {}: {problem}", path.display()),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(|error| credentials(error.to_string()))?
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| credentials(error.to_string()))?;
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(credentials(format!(
            "it is larger than {MAX_TOKEN_FILE_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| credentials("it is not UTF-8".into()))?;
    match text.trim() {
        "" => Err(credentials("it is empty".to_owned())),
        token => Ok(token.to_owned()),
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            bearer_token: None,
            extra_roots: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            allow_token_over_http: false,
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("timeout", &self.timeout)
            .field("bearer_token", &self.bearer_token)
            .field("extra_roots", &self.extra_roots.len())
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_in_flight", &self.max_in_flight)
            .field("allow_token_over_http", &self.allow_token_over_http)
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
/// roots). Clones share one connection pool and one set of
/// [`max_in_flight`](ClientOptions::max_in_flight) slots.
#[derive(Clone, Debug)]
pub struct PrometheusClient {
    transport: Transport,
    options: ClientOptions,
    slots: Arc<Semaphore>,
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
        // Semaphore::new refuses more than MAX_PERMITS (usize::MAX >> 3): far past any use.
        let slots = options.max_in_flight.get().min(Semaphore::MAX_PERMITS);
        Self {
            transport,
            slots: Arc::new(Semaphore::new(slots)),
            options,
        }
    }

    /// One instant query against `base`; `time` = evaluation time in Unix seconds (None: now).
    ///
    /// `base` is Prometheus' URL, path prefix included (`http://prom:9090/prometheus`). The
    /// timeout bounds the wait for a slot and the whole exchange (connect, send, read body)
    /// together, and is also sent as `timeout=`. A failure names `query` by sharing it.
    pub async fn query(
        &self,
        base: &Uri,
        query: &Arc<str>,
        time: Option<f64>,
    ) -> Result<Answer, QueryError> {
        self.slot_and_exchange(base, query, time)
            .await
            .map_err(|kind| QueryError {
                query: Arc::clone(query),
                kind,
            })
    }

    async fn slot_and_exchange(
        &self,
        base: &Uri,
        query: &str,
        time: Option<f64>,
    ) -> Result<Answer, QueryErrorKind> {
        let timeout = self.options.timeout;
        self.check_token_scheme(base)?;
        let start = Instant::now();
        // Held until the answer is read: bounds the bodies held at once, not only the sockets.
        let _slot = match tokio::time::timeout(timeout, self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            // The semaphore is never closed.
            Ok(Err(closed)) => return Err(unreachable(&closed.to_string())),
            Err(_) => {
                return Err(QueryErrorKind::Timeout {
                    message: format!(
                        "waited {timeout:?} for a query slot: {} queries were in flight \
                         (--prometheus-max-in-flight)",
                        self.options.max_in_flight
                    ),
                });
            }
        };
        let left = timeout.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, self.exchange(base, query, time)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(QueryErrorKind::Timeout {
                message: format!("no answer within {timeout:?}"),
            }),
        }
    }

    /// A bearer token goes over `https` only, unless allowed.
    fn check_token_scheme(&self, base: &Uri) -> Result<(), QueryErrorKind> {
        if self.options.bearer_token.is_none()
            || self.options.allow_token_over_http
            || base.scheme() == Some(&Scheme::HTTPS)
        {
            return Ok(());
        }
        Err(QueryErrorKind::Credentials {
            message: format!(
                "the bearer token would go unencrypted to {}: use an https:// URL, or allow \
                 it with --prometheus-token-over-http",
                excerpt(&base.to_string())
            ),
        })
    }

    /// Token, request, answer, and its reading.
    async fn exchange(
        &self,
        base: &Uri,
        query: &str,
        time: Option<f64>,
    ) -> Result<Answer, QueryErrorKind> {
        let token = match &self.options.bearer_token {
            Some(token) => Some(token.read().await?),
            None => None,
        };
        let request = self.request(base, query, time, token.as_deref())?;
        let (status, body) = self.send(request).await?;
        parse_response(status, &body)
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

    /// Sends `request`; the answer's status and its body, read up to
    /// [`max_body_bytes`](ClientOptions::max_body_bytes).
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
        read_body(status, response.into_body(), self.options.max_body_bytes)
            .await
            .map(|body| (status, body))
    }
}

/// The whole body, or a `BadResponse` as soon as it is known to exceed `cap` bytes: from its
/// `Content-Length` before reading, or from the frame that would take it past the cap. Not
/// `http_body_util::Limited`, which drops what it read: the error quotes the body's start.
async fn read_body(status: u16, mut body: Incoming, cap: usize) -> Result<Bytes, QueryErrorKind> {
    let too_big = |start: &[u8]| {
        let mut message =
            format!("the body exceeds the cap of {cap} bytes (--prometheus-max-body)");
        if !start.is_empty() {
            message.push_str(", starting ");
            message.push_str(&excerpt_bytes(start));
        }
        QueryErrorKind::BadResponse { status, message }
    };
    let declared = body.size_hint().lower();
    if declared > cap as u64 {
        return Err(too_big(b""));
    }
    // `declared` ≤ `cap`: a server's word reserves no more than the cap.
    let mut bytes = BytesMut::with_capacity(declared as usize);
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|error| unreachable(&format!("reading the body: {}", chain(&error))))?;
        if let Ok(data) = frame.into_data() {
            if data.len() > cap - bytes.len() {
                return Err(too_big(&bytes));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes.freeze())
}

/// `<base>/api/v1/query`, keeping the base's path prefix and query string.
fn query_uri(base: &Uri) -> Result<Uri, QueryErrorKind> {
    match base.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(unreachable(&format!(
                "unsupported scheme \"{}\" in {}",
                excerpt(other),
                excerpt(&base.to_string())
            )));
        }
        None => {
            return Err(unreachable(&format!(
                "no http:// or https:// in {}",
                excerpt(&base.to_string())
            )));
        }
    }
    let Some(authority) = base.authority() else {
        return Err(unreachable(&format!(
            "no host in {}",
            excerpt(&base.to_string())
        )));
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
        .map_err(|error| {
            unreachable(&format!(
                "cannot build the query URL from {}: {error}",
                excerpt(&base.to_string())
            ))
        })
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

/// An error and its sources, `outer: inner: …` (hyper's own text alone says little), as an
/// excerpt: the sources may quote a host name or a server's certificate.
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
    excerpt(&text)
}

#[cfg(test)]
mod tests;
