//! Sending a request and classifying its answer: the [`Transport`] the driver sends through,
//! and [`HttpClient`], hyper-util's HTTP/1 client.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, RETRY_AFTER};
use http::{Request, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::outcome::{Lost, Outcome, Refusal};

/// The header in which admit names the reason for a refusal.
pub const REFUSAL_HEADER: HeaderName = HeaderName::from_static("admit-refusal");

/// Sends one request and reads its whole answer. The [`Driver`](crate::Driver) applies the
/// deadline around [`send`](Self::send), so a transport need not.
pub trait Transport<B>: Clone + Send + Sync + 'static {
    /// Sends `request`, reads the answer and says what became of it: never
    /// [`Outcome::TimedOut`] or [`Outcome::Dropped`], which the driver decides.
    fn send(&self, request: Request<B>) -> impl Future<Output = Outcome> + Send;
}

/// An HTTP/1 client over plain TCP (hyper-util's pooled legacy client) as a [`Transport`].
pub struct HttpClient<B> {
    client: Client<HttpConnector, B>,
}

impl<B> Clone for HttpClient<B> {
    fn clone(&self) -> Self {
        HttpClient {
            client: self.client.clone(),
        }
    }
}

impl<B> fmt::Debug for HttpClient<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl<B> HttpClient<B>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    /// A client that keeps idle connections for 5 s.
    pub fn new() -> HttpClient<B> {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(5))
            .build_http();
        HttpClient { client }
    }

    /// Sends through a client built by the caller (its pool, timeouts, connector settings).
    pub fn with_client(client: Client<HttpConnector, B>) -> HttpClient<B> {
        HttpClient { client }
    }
}

impl<B> Default for HttpClient<B>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    fn default() -> Self {
        HttpClient::new()
    }
}

impl<B> Transport<B> for HttpClient<B>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    async fn send(&self, request: Request<B>) -> Outcome {
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) => return Outcome::Lost(classify(&error)),
        };
        let (parts, body) = response.into_parts();
        if let Err(error) = body.collect().await {
            return Outcome::Lost(classify(&error));
        }
        classify_status(parts.status, &parts.headers)
    }
}

/// What an answer's status says: 2xx is OK, 503 and 429 are refusals, the rest another
/// status.
pub fn classify_status(status: StatusCode, headers: &HeaderMap) -> Outcome {
    if status.is_success() {
        return Outcome::Ok;
    }
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
        let text = |name: &HeaderName| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        return Outcome::Refused(Refusal {
            status,
            retry_after: text(&RETRY_AFTER),
            reason: text(&REFUSAL_HEADER),
        });
    }
    Outcome::Status(status)
}

/// The kind of a transport error, from the first I/O error or hyper error in its chain of
/// sources.
pub fn classify(error: &(dyn StdError + 'static)) -> Lost {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::ConnectionRefused => Lost::ConnectionRefused,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => Lost::Reset,
                io::ErrorKind::UnexpectedEof => Lost::Closed,
                _ => Lost::Other,
            };
        }
        if let Some(hyper) = error.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            return Lost::Closed;
        }
        cause = error.source();
    }
    Lost::Other
}
