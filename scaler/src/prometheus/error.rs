//! The typed failures of one instant query.
//!
//! Every text a failure carries that the scaler did not write (Prometheus' `error`,
//! `errorType` and `resultType`, label sets, values, the start of a body, the URL, the cause a
//! connection failed with) is an [`excerpt`]: at most
//! [`EXCERPT_CHARS`](crate::excerpt::EXCERPT_CHARS) characters, invisible characters (controls,
//! bidirectional and other format characters) escaped.

use std::fmt;
use std::sync::Arc;

use crate::excerpt::excerpt;

/// What went wrong with one query.
///
/// [`as_str`](Self::as_str) is a short label for metrics. The gRPC service decides which code
/// KEDA sees for each.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryErrorKind {
    /// Prometheus rejected the query or its parameters (HTTP 400, `bad_data`), or the
    /// evaluation time is not finite (nothing sent).
    BadQuery {
        /// Prometheus' `error` text.
        message: String,
    },
    /// The query failed while Prometheus evaluated it (HTTP 422, `execution`).
    Execution {
        /// Prometheus' `error` text.
        message: String,
    },
    /// The query returned no series (`"result": []`).
    Empty,
    /// The query returned more than one series.
    MultipleSeries {
        /// How many series came back.
        count: usize,
        /// The label sets of the first three series, each rendered `{a="b", c="d"}`.
        labels: Vec<String>,
    },
    /// The result is neither an instant vector of plain samples nor a scalar: a `matrix`, a
    /// `string`, or a native-histogram sample (`histogram`).
    WrongType {
        /// Prometheus' `resultType`, or `histogram` for a histogram sample.
        result_type: String,
    },
    /// The value is `NaN`, `+Inf` or `-Inf`.
    NotFinite {
        /// The value's text as Prometheus sent it.
        raw: String,
    },
    /// Prometheus gave up (HTTP 503, `timeout` or `canceled`), or the client's own deadline
    /// elapsed: while the query waited for one of the client's slots for queries in flight
    /// ([`max_in_flight`](super::ClientOptions::max_in_flight); nothing sent), or during the
    /// exchange.
    Timeout {
        /// Prometheus' `error` text, or which deadline elapsed and while waiting for what.
        message: String,
    },
    /// No answer could be had: the URL is unusable, the connection or TLS handshake failed, or
    /// the connection broke.
    Unreachable {
        /// The cause, with its chain of sources.
        message: String,
    },
    /// The bearer token could not be sent: its file could not be read, is empty, is larger
    /// than [`MAX_TOKEN_FILE_BYTES`](super::MAX_TOKEN_FILE_BYTES) or not UTF-8; the token is
    /// not a valid header value; or the URL is not `https://` and
    /// [`allow_token_over_http`](super::ClientOptions::allow_token_over_http) is off. No
    /// request was sent.
    Credentials {
        /// What was wrong, with the file's path or the URL.
        message: String,
    },
    /// An answer came that is not a Prometheus query answer: a non-JSON body, an unexpected
    /// status, a malformed envelope, or a body over
    /// [`max_body_bytes`](super::ClientOptions::max_body_bytes) (read no further).
    BadResponse {
        /// The HTTP status of the answer.
        status: u16,
        /// What was wrong, with the start of the body where it helps.
        message: String,
    },
}

impl QueryErrorKind {
    /// A short snake_case label for metrics, e.g. `bad_query`, `empty`, `not_finite`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::BadQuery { .. } => "bad_query",
            Self::Execution { .. } => "execution",
            Self::Empty => "empty",
            Self::MultipleSeries { .. } => "multiple_series",
            Self::WrongType { .. } => "wrong_type",
            Self::NotFinite { .. } => "not_finite",
            Self::Timeout { .. } => "timeout",
            Self::Unreachable { .. } => "unreachable",
            Self::Credentials { .. } => "credentials",
            Self::BadResponse { .. } => "bad_response",
        }
    }
}

impl fmt::Display for QueryErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadQuery { message } => write!(f, "Prometheus rejected the query: {message}"),
            Self::Execution { message } => write!(f, "the query failed in Prometheus: {message}"),
            Self::Empty => f.write_str("the query returned no series"),
            Self::MultipleSeries { count, labels } => {
                write!(f, "the query returned {count} series, expected one: ")?;
                f.write_str(&labels.join(", "))?;
                if *count > labels.len() {
                    f.write_str(", …")?;
                }
                Ok(())
            }
            Self::WrongType { result_type } => write!(
                f,
                "the query returned a {result_type}, expected an instant vector or a scalar"
            ),
            Self::NotFinite { raw } => write!(f, "the query returned {raw}, not a finite number"),
            Self::Timeout { message } => write!(f, "the query timed out: {message}"),
            Self::Unreachable { message } => write!(f, "Prometheus is unreachable: {message}"),
            Self::Credentials { message } => write!(f, "no usable bearer token: {message}"),
            Self::BadResponse { status, message } => {
                write!(
                    f,
                    "unexpected answer from Prometheus (HTTP {status}): {message}"
                )
            }
        }
    }
}

/// A failed query: the PromQL text and what went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryError {
    /// The PromQL text as sent (the configuration's own, shared).
    pub query: Arc<str>,
    /// What went wrong.
    pub kind: QueryErrorKind,
}

impl fmt::Display for QueryError {
    /// `query "<excerpt of the query>": <kind>`: a query may span lines or carry `#` comments,
    /// which the excerpt escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "query \"{}\": {}", excerpt(&self.query), self.kind)
    }
}

impl std::error::Error for QueryError {}
